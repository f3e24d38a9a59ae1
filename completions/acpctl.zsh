#compdef acpctl

_acpctl_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _ACPCTL_COMPLETE=complete_zsh acpctl)
}

compdef _acpctl_completion acpctl

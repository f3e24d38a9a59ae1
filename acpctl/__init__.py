"""acpctl: wire ACP coding agents into editors, run them supervised, keep their history."""

__version__ = "0.1.0"

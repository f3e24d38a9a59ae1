"""Agents in a sandbox (docs/sandbox.md): what a sandboxed agent may write is its roots (the
project it was started for), its own state directories and a private /tmp; the rest of the
file system is read-only, and the secret stores of the home directory are hidden.

The engine is bubblewrap (`bwrap`, Debian's `bubblewrap`): the engine Flatpak and Claude
Code's own sandbox use on Linux, a small setuid-free program that takes the whole policy
as arguments. acpctl builds those arguments here and writes no namespace code of its own.
Where bwrap is missing or cannot start (no user namespaces), a sandboxed agent does not
start: SandboxUnavailable says why and what fixes it. The policy is fixed when the agent
starts (bind mounts are), so a session outside its roots is refused, never run unconfined.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from acpctl import paths
from acpctl.errors import AcpctlError

ENGINE = "bwrap"
INSTALL_FIX = (
    "install bubblewrap (Debian, Ubuntu: apt install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap)"
)
USERNS_FIX = (
    "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 "
    "(Debian), or kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04 and later), "
    "and user.max_user_namespaces above 0"
)
CHECK_TIMEOUT_S = 10.0
# What is hidden from every sandboxed agent, under the home directory: where credentials
# for other services live. The agent's own credentials are its state directories, which
# stay visible and writable.
HIDDEN_IN_HOME = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
)
# Sockets that would let an agent act outside the sandbox: a container engine's.
HIDDEN_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock")


class SandboxUnavailable(AcpctlError):
    """Sandboxing was asked for and the engine cannot give it: the agent does not start."""


class SandboxSettings:
    """What config.toml says of one agent's sandbox (`[sandbox]`, then `[agents.NAME]`).
    (Plain classes here: config.toml's reader, at every start, imports this module.)"""

    def __init__(
        self,
        roots: tuple[str, ...] = (),
        writable: tuple[str, ...] = (),
        hidden: tuple[str, ...] = (),
        network: bool = True,
    ) -> None:
        self.roots = roots  # more directories it may write, beside its start's
        self.writable = writable  # more state directories (the catalog names its own)
        self.hidden = hidden  # more paths it may not read
        self.network = network

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SandboxSettings) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"SandboxSettings({vars(self)})"


class Policy:
    """One sandboxed process's policy, fixed at its start: absolute, resolved paths."""

    def __init__(
        self,
        roots: tuple[Path, ...],
        writable: tuple[Path, ...],
        hidden: tuple[Path, ...],
        network: bool,
    ) -> None:
        self.roots = roots
        self.writable = writable
        self.hidden = hidden
        self.network = network

    def key(self) -> tuple[object, ...]:
        """What tells two policies apart (the host runs a process per policy)."""
        return (self.roots, self.writable, self.hidden, self.network)

    def describe(self) -> str:
        """The policy in one line (the run log, `doctor`, `agents show`)."""
        said = [f"writes {', '.join(map(str, self.roots))}"]
        if self.writable:
            said.append(f"its state {', '.join(map(str, self.writable))}")
        said.append("a private /tmp")
        network = "network on" if self.network else "network off"
        return f"{'; '.join(said)}; the rest read-only; {len(self.hidden)} paths hidden; {network}"

    def hides(self, path: Path) -> bool:
        """Whether `path` (resolved) is, or lies in, what the policy hides."""
        return any(_within(path, hidden) for hidden in self.hidden)

    def outside(self, directories: Iterable[str]) -> list[str]:
        """Those of `directories` that lie in none of the roots."""
        return [d for d in directories if not any(_within(_real(d), r) for r in self.roots)]

    def refusal(self, what: str, directories: list[str]) -> str:
        """The error for a session whose directories lie outside the roots."""
        return (
            f"{what} {', '.join(directories)} lies outside the sandbox's roots "
            f"({', '.join(map(str, self.roots))}); the agent's sandbox is fixed when it "
            "starts: run acpctl from that project, or add the directory to sandbox_roots "
            "in config.toml"
        )


def policy(settings: SandboxSettings, start_dir: str, state_dirs: Iterable[str]) -> Policy:
    """The policy of an agent started for `start_dir` (its first root), with the catalog's
    `state_dirs` for it and config.toml's `settings`."""
    roots = _unique(_real(d) for d in (start_dir, *settings.roots))
    writable = _unique(
        _real(d) for d in (*state_dirs, *settings.writable) if Path(d).expanduser().exists()
    )
    home = Path.home()
    own = (paths.config_dir(), paths.data_dir(), paths.state_dir())
    hidden = [home / name for name in HIDDEN_IN_HOME]
    runtime = os.environ.get("XDG_RUNTIME_DIR")  # session bus, ssh and gpg agents' sockets
    hidden += [*own, *(Path(p) for p in HIDDEN_SOCKETS), *([Path(runtime)] if runtime else [])]
    hidden += [Path(p).expanduser() for p in settings.hidden]
    shown = [*roots, *writable]
    kept = [
        h
        for h in _unique(_real(str(p)) for p in hidden)
        if h.exists() and not any(_within(s, h) for s in shown)  # hiding it would hide them
    ]
    return Policy(roots, writable, tuple(kept), settings.network)


def for_agent(
    settings: SandboxSettings | None, state_dirs: Iterable[str], start_dir: str
) -> Policy | None:
    """The policy of an agent that config.toml sandboxes with `settings` (None: it does
    not), started for `start_dir`; SandboxUnavailable when no sandbox can start here."""
    if settings is None:
        return None
    require_engine()
    return policy(settings, start_dir, state_dirs)


def command(
    policy: Policy, argv: list[str], cwd: str | None = None, own: Iterable[Path] = ()
) -> list[str]:
    """`argv` run by bubblewrap under `policy`, in `cwd` (default: the first root), with
    `own` writable: acpctl's directories for this one process (a pi session's file), which
    lie in what is hidden. Order matters: later mounts cover earlier ones, so what is hidden
    comes after the roots (~/.ssh stays hidden when the project is the home directory)."""
    args = [
        ENGINE,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",  # no controlling terminal: it cannot type into the user's (TIOCSTI)
    ]  # fmt: skip
    if not policy.network:
        args.append("--unshare-net")
    for path in _installed_in_tmp(argv):
        args += ["--ro-bind", str(path), str(path)]
    for path in (*policy.roots, *policy.writable):
        args += ["--bind", str(path), str(path)]
    for path in policy.hidden:
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        else:
            args += ["--ro-bind", os.devnull, str(path)]
    for path in own:
        args += ["--bind", str(path), str(path)]
    args += ["--chdir", cwd or str(policy.roots[0]), "--", *argv]
    return args


def _installed_in_tmp(argv: list[str]) -> list[Path]:
    """The directories right under /tmp that hold the agent's program or a file its command
    line names (a checkout or a venv there): the private /tmp would hide them, so they stay,
    read-only."""
    found = []
    for index, arg in enumerate(argv):
        path = shutil.which(arg) if index == 0 and os.sep not in arg else arg
        if path is None or not os.path.isabs(path):
            continue
        parts = Path(os.path.normpath(path)).parts
        if len(parts) > 2 and parts[:2] == ("/", "tmp") and os.path.exists(path):
            found.append(Path("/tmp", parts[2]))
    return list(_unique(found))


def require_engine() -> None:
    """Raise SandboxUnavailable unless bubblewrap is here and can start a sandbox."""
    problem = engine_problem()
    if problem is not None:
        raise SandboxUnavailable(problem)


_checked: list[str | None] = []  # engine_problem's answer, once asked


def engine_problem() -> str | None:
    """Why no sandbox can start here (with the fix), or None: bwrap is found and runs
    `true` in the namespaces a policy uses. Asked once a process."""
    if not _checked:
        _checked.append(_engine_problem())
    return _checked[0]


def _engine_problem() -> str | None:
    import shutil  # here: config.toml's reader imports this module at every start
    import subprocess

    if not sys.platform.startswith("linux"):
        return (
            f"agents cannot be sandboxed on {sys.platform}: acpctl's engine, bubblewrap, "
            "is Linux's; turn the agent's sandbox off (acpctl agents sandbox NAME off)"
        )
    found = shutil.which(ENGINE)
    if found is None:
        return f"the sandbox's engine, bubblewrap ({ENGINE}), is not installed: {INSTALL_FIX}"
    probe = command(Policy((Path("/"),), (), (), True), ["true"])
    try:
        done = subprocess.run(
            [found, *probe[1:]], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({found}) cannot run: {exc}"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no word"
        fix = USERNS_FIX if "namespace" in said.lower() or "permission" in said.lower() else ""
        return f"bubblewrap cannot start a sandbox here ({said})" + (f": {fix}" if fix else "")
    return None


def _real(directory: str) -> Path:
    return Path(directory).expanduser().resolve()


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _unique(found: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(found))

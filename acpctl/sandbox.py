"""Agents in a sandbox (docs/sandbox.md): what a sandboxed agent may write is its roots (the
project it was started for), its own state directories and a private /tmp; the rest of the
file system is read-only, and the secret stores of the home directory are hidden.

The engine is bubblewrap (`bwrap`, Debian's `bubblewrap`): the engine Flatpak and Claude
Code's own sandbox use on Linux, a small setuid-free program that takes the whole policy
as arguments. acpctl builds those arguments here and writes no namespace code of its own.
Where bwrap is missing or cannot start (no user namespaces), a sandboxed agent does not
start: SandboxUnavailable says why and what fixes it. The policy is fixed when the agent
starts (bind mounts are), so a session outside its roots is refused, never run unconfined.

Nothing the agent asks for reaches a process acpctl starts outside the sandbox: the engine is
run by the absolute path found once, in an environment built here (an allow-list, with no
loader variable), and what the agent asks for (a terminal's env) is set by the engine inside
the sandbox only (`--setenv`, applied after the engine itself has loaded).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from acpctl import paths
from acpctl.errors import AcpctlError
from acpctl.processes import WholeEnvironment

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
# The environment a sandboxed agent gets, by allow-list (docs/sandbox.md): what any program
# needs to run (its shell, locale, home and toolchains), what a network needs (proxies and
# certificates), then what its catalog entry, its config entry and sandbox_env add. A name
# ending in * is a prefix. Everything else (cloud keys, tokens) is withheld.
BASE_ENVIRONMENT = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM",
    "COLORTERM", "NO_COLOR", "TZ", "EDITOR", "VISUAL", "PAGER",
    "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
    "XDG_CONFIG_DIRS", "XDG_DATA_DIRS",
    "NVM_DIR", "NVM_BIN", "NVM_INC", "NODE_PATH", "NODE_OPTIONS", "PNPM_HOME", "VOLTA_HOME",
    "BUN_INSTALL", "DENO_DIR", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "PYENV_ROOT", "PYTHONPATH", "GOPATH", "GOROOT", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
)  # fmt: skip
NETWORK_ENVIRONMENT = (
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
)  # fmt: skip
# What the dynamic loader (and glibc at start) reads: never in the engine's own environment,
# so nothing can load code into a process that runs outside the sandbox. glibc's own list of
# variables it drops for setuid programs, and every LD_ and MALLOC_ variable.
LOADER_PREFIXES = ("LD_", "MALLOC_")
LOADER_VARIABLES = frozenset(
    {
        "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
        "LOCPATH", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR",
    }
)  # fmt: skip


class SandboxUnavailable(AcpctlError):
    """Sandboxing was asked for and the engine cannot give it: the agent does not start."""


class RootRefused(SandboxUnavailable):
    """A root that would hand the agent what the sandbox is there to keep (the home
    directory, `/`, a directory of secret stores), named by nobody in config.toml."""


class SandboxSettings:
    """What config.toml says of one agent's sandbox (`[sandbox]`, then `[agents.NAME]`).
    (Plain classes here: config.toml's reader, at every start, imports this module.)"""

    def __init__(
        self,
        roots: tuple[str, ...] = (),
        writable: tuple[str, ...] = (),
        hidden: tuple[str, ...] = (),
        network: bool = True,
        env: tuple[str, ...] = (),
    ) -> None:
        self.roots = roots  # more directories it may write, beside its start's
        self.writable = writable  # more state directories (the catalog names its own)
        self.hidden = hidden  # more paths it may not read
        self.network = network
        self.env = env  # more variables it gets (sandbox_env), beside the allow-list

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
        env: tuple[str, ...] = (),
    ) -> None:
        self.roots = roots  # none: a remote client's, with no roots in config.toml
        self.writable = writable
        self.hidden = hidden
        self.network = network
        self.env = env  # the names (and prefixes, ending in *) it gets beside the base set

    def key(self) -> tuple[object, ...]:
        """What tells two policies apart (the host runs a process per policy)."""
        return (self.roots, self.writable, self.hidden, self.network, self.env)

    def describe(self) -> str:
        """The policy in one line (the run log, `doctor`, `agents show`)."""
        said = [f"writes {', '.join(map(str, self.roots)) or 'nothing of its own'}"]
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

    def allows(self, name: str) -> bool:
        """Whether the variable `name` reaches the agent (beside what its config sets)."""
        return any(
            name.startswith(allowed[:-1]) if allowed.endswith("*") else name == allowed
            for allowed in (*BASE_ENVIRONMENT, *NETWORK_ENVIRONMENT, *self.env)
        )

    def environment(self, configured: Mapping[str, str]) -> dict[str, str]:
        """The agent's environment: acpctl's own, through the allow-list, then what its
        config entry sets (`configured`), which is always the agent's."""
        return {
            **{name: value for name, value in os.environ.items() if self.allows(name)},
            **configured,
        }

    def withheld(self, configured: Mapping[str, str] = {}) -> list[str]:
        """The names of acpctl's variables the agent does not get (sorted)."""
        return sorted(n for n in os.environ if not self.allows(n) and n not in configured)

    def refusal(self, what: str, directories: list[str]) -> str:
        """The error for a session whose directories lie outside the roots."""
        if not self.roots:
            return (
                f"{what} {', '.join(directories)} has no sandbox root: a remote client's "
                "(WebSocket, HTTP, the page) sessions of a sandboxed agent get their roots "
                "from config.toml only; name the projects they may open in sandbox_roots "
                "(under [agents.NAME], or roots under [sandbox] for every agent)"
            )
        return (
            f"{what} {', '.join(directories)} lies outside the sandbox's roots "
            f"({', '.join(map(str, self.roots))}); the agent's sandbox is fixed when it "
            "starts: run acpctl from that project, or add the directory to sandbox_roots "
            "in config.toml"
        )


def policy(
    settings: SandboxSettings,
    start_dir: str | None,
    state_dirs: Iterable[str],
    env_names: Iterable[str] = (),
    home: str | None = None,
) -> Policy:
    """The policy of an agent started for `start_dir` (its first root; None: for remote
    clients, whose roots are config.toml's alone), with the catalog's `state_dirs` and
    `env_names` for it and config.toml's `settings`. The state directories are the
    agent's `home`'s when its config sets one (HOME in its env), else the user's.
    RootRefused when `start_dir` is a root nobody should get by accident (the home
    directory, `/`)."""
    configured = [_real(d) for d in settings.roots]
    started = [] if start_dir is None else [_real(start_dir)]
    for start in started:
        why = _too_wide(start, settings.hidden)
        if why is not None and start not in configured:
            raise RootRefused(
                f"{start} cannot be a sandboxed agent's root: {why}",
                hint="start the agent in a project directory, or name this one in "
                f'config.toml: sandbox_roots = ["{start}"] under [agents.NAME] (or roots '
                "under [sandbox])",
            )
    roots = _unique([*started, *configured])
    own_state = [_in_home(state, home) for state in state_dirs]
    for directory in own_state:  # a directory it makes at its first start must be writable
        if not directory.suffix and not directory.exists():  # ~/.pi, not ~/.claude.json
            paths.ensure_private_dir(directory)
    wanted = [*own_state, *(Path(d).expanduser() for d in settings.writable)]
    writable = _unique(_real(str(d)) for d in wanted if d.exists())
    own = (paths.config_dir(), paths.data_dir(), paths.state_dir())
    for directory in own:  # hidden from the first run on: a bind needs it to exist
        paths.ensure_private_dir(directory)
    homes = _unique([Path.home(), *([Path(home)] if home else [])])  # the user's, its own
    hidden = [directory / name for directory in homes for name in HIDDEN_IN_HOME]
    runtime = os.environ.get("XDG_RUNTIME_DIR")  # session bus, ssh and gpg agents' sockets
    hidden += [*own, *(Path(p) for p in HIDDEN_SOCKETS), *([Path(runtime)] if runtime else [])]
    hidden += [Path(p).expanduser() for p in settings.hidden]
    shown = [*roots, *writable]
    kept = [
        h
        for h in _unique(_real(str(p)) for p in hidden)
        if h.exists() and not any(_within(s, h) for s in shown)  # hiding it would hide them
    ]
    names = tuple(dict.fromkeys((*env_names, *settings.env)))
    return Policy(roots, writable, tuple(kept), settings.network, names)


def home_in_tmp() -> str | None:
    """The warning for a home directory under /tmp (None where it is not): the sandbox's
    /tmp is its own, so what the agent writes in its home there vanishes, said to be
    written."""
    home = _real(str(Path.home()))
    if _within(home, Path("/tmp")):
        return (
            f"the home directory {home} is under /tmp, which a sandboxed agent sees as a "
            "private, empty /tmp: what it writes in its home there vanishes when it stops "
            "(set HOME elsewhere, or run the agent without a sandbox)"
        )
    return None


def _too_wide(root: Path, hidden: Iterable[str]) -> str | None:
    """Why `root` would defeat the sandbox, or None: it is `/`, the home directory or a
    directory above it, or it holds a secret store the sandbox hides."""
    home = _real(str(Path.home()))
    if root == Path("/"):
        return "it is the whole file system"
    if _within(home, root):
        return "it is your home directory" if root == home else f"it holds your home ({home})"
    for secret in (*(home / name for name in HIDDEN_IN_HOME), *map(_real, hidden)):
        if _within(secret, root):
            return f"it holds {secret}, which the sandbox hides"
    return None


def for_agent(
    settings: SandboxSettings | None,
    state_dirs: Iterable[str],
    start_dir: str | None,
    env_names: Iterable[str] = (),
    home: str | None = None,
) -> Policy | None:
    """The policy of an agent that config.toml sandboxes with `settings` (None: it does
    not), started for `start_dir` (None: for remote clients); SandboxUnavailable when no
    sandbox can start here."""
    if settings is None:
        return None
    require_engine()
    return policy(settings, start_dir, state_dirs, env_names, home)


def _in_home(state: str, home: str | None) -> Path:
    """A catalog state path (~/.pi) in the agent's own home, when its config sets one."""
    if home and (state == "~" or state.startswith("~/")):
        return Path(home) / state[2:]
    return Path(state).expanduser()


class Launch(NamedTuple):
    """A sandboxed program's start: the engine's command line, and the whole environment
    the engine runs in (processes.spawn adds nothing of acpctl's own to it)."""

    argv: list[str]
    env: WholeEnvironment


def launch(
    policy: Policy,
    argv: list[str],
    configured: Mapping[str, str],
    cwd: str | None = None,
    own: Iterable[Path] = (),
    requested: Mapping[str, str] = {},
    agents_argv: bool = False,
) -> Launch:
    """`argv` run by bubblewrap under `policy`, in `cwd` (default: the first root), with
    `own` writable (acpctl's directories for this one process: a pi session's file, which
    lies in what is hidden). `configured`: what the agent's config entry sets;
    `requested`: what the agent itself asked for (a terminal's env), set inside only.
    The loader's variables of the agent's environment are set inside only, too.
    `agents_argv`: the command line is the agent's own choice (a terminal's), so nothing
    it names under the real /tmp is kept (only config's programs are: _installed_in_tmp)."""
    inside = policy.environment(configured)
    outside = {k: v for k, v in inside.items() if not _loader(k)}
    setenv = [(k, v) for k, v in inside.items() if _loader(k)] + list(requested.items())
    kept = [] if agents_argv else _installed_in_tmp(argv)
    return Launch(_arguments(policy, argv, cwd, own, setenv, kept), WholeEnvironment(outside))


def command(policy: Policy, argv: list[str], cwd: str | None = None) -> list[str]:
    """`argv` run by bubblewrap under `policy`, for a caller that builds no environment
    (the engine's own check): see launch()."""
    return _arguments(policy, argv, cwd, (), [], _installed_in_tmp(argv))


def _arguments(
    policy: Policy,
    argv: list[str],
    cwd: str | None,
    own: Iterable[Path],
    setenv: list[tuple[str, str]],
    kept_in_tmp: list[Path],
) -> list[str]:
    """Order matters: later mounts cover earlier ones, so what is hidden comes after the
    roots (~/.ssh stays hidden when the project is the home directory)."""
    args = [
        engine(),
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
    for path in kept_in_tmp:
        args += ["--ro-bind", str(path), str(path)]
    for path in (*policy.roots, *policy.writable):
        args += ["--bind", str(path), str(path)]
    for path in policy.hidden:
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        else:
            args += ["--ro-bind", os.devnull, str(path)]
    installed = paths.agents_dir()  # in acpctl's hidden data: the agents it installed run
    if installed.is_dir():
        args += ["--ro-bind", str(installed), str(installed)]
    for path in own:
        args += ["--bind", str(path), str(path)]
    for name, value in setenv:
        args += ["--setenv", name, value]
    start = cwd or (str(policy.roots[0]) if policy.roots else "/")
    args += ["--chdir", start, "--", *argv]
    return args


def _loader(name: str) -> bool:
    return name in LOADER_VARIABLES or name.startswith(LOADER_PREFIXES)


_engine: list[str] = []  # the engine's absolute path, once found


def engine() -> str:
    """bubblewrap's absolute path, found on acpctl's own PATH once a process (never on an
    environment an agent had a say in); "bwrap" where it is not found (the start fails)."""
    if not _engine:
        _engine.append(shutil.which(ENGINE) or ENGINE)
    return _engine[0]


def _installed_in_tmp(argv: list[str]) -> list[Path]:
    """The directories right under /tmp that hold the agent's program or a file its command
    line names (a checkout or a venv there): the private /tmp would hide them, so they stay,
    read-only."""
    found = []
    for index, arg in enumerate(argv):
        path = shutil.which(arg) if index == 0 and os.sep not in arg else arg
        if path is None or not os.path.isabs(path) or not os.path.exists(path):
            continue
        # The path as named and where it leads: a link on PATH to a program under /tmp
        # needs that program's directory.
        for seen in (os.path.normpath(path), os.path.realpath(path)):
            parts = Path(seen).parts
            if len(parts) > 2 and parts[:2] == ("/", "tmp"):
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
    import subprocess  # here: config.toml's reader imports this module at every start

    if not sys.platform.startswith("linux"):
        return (
            f"agents cannot be sandboxed on {sys.platform}: acpctl's engine, bubblewrap, "
            "is Linux's; turn the agent's sandbox off (acpctl agents sandbox NAME off)"
        )
    found = engine()
    if not os.path.isabs(found):
        return f"the sandbox's engine, bubblewrap ({ENGINE}), is not installed: {INSTALL_FIX}"
    probe = command(Policy((Path("/"),), (), (), True), ["true"])
    try:
        done = subprocess.run(
            probe, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, env={}
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

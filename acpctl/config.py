"""config.toml: the user's agents and defaults, edited with tomlkit so comments survive.

Layout:

    default_agent = "claude"
    package_runners = false        # allow npx/uvx fallbacks for catalog agents
    silence_warning_s = 30         # a prompt this long without a word is logged (0: never)
    request_timeout_s = 300        # a request other than a prompt fails after this (0: never)
    host = false                   # run --acp through the session host (acpctl host)
    outage_limit_s = 300           # the link to the session host gives up after this down

    [agents.claude]
    command = "claude-agent-acp"
    args = []
    env = { ANTHROPIC_API_KEY = "..." }
    kind = "acp"                    # or "pi-rpc"
    host = true                     # this agent through the host (overrides the default)
    sandbox = true                  # in a sandbox (docs/sandbox.md; overrides the default)
    sandbox_roots = ["~/shared"]    # more it may write, beside the project it starts for
                                    # (a remote client's sessions: these alone)
    sandbox_writable = []           # more state directories (the catalog names its own)
    sandbox_hidden = []             # more paths it may not read
    sandbox_network = false         # no network (default: on)
    sandbox_env = ["AWS_PROFILE"]   # more variables it gets (FOO_*: a prefix)

    [agents.codex]                  # a catalog agent's settings alone: no command
    sandbox = true

    [sandbox]                       # for every agent
    default = false
    roots = []
    writable = []
    hidden = []
    network = true
    env = []

    [agents.devbox]                 # a remote agent, by URL (docs/remote.md)
    url = "wss://devbox:8765/acp/claude"
    token_file = "~/.config/acpctl/devbox.token"
    ca_file = "~/devbox-ca.pem"     # else the system's CAs
    outage_limit_s = 300            # waiting prompts fail after the link is down this long

    [serve]                         # the session host (acpctl host start)
    on_waiting = ["ntfy", "publish", "my-topic"]   # run when a question waits (no shell)
    on_waiting_after_s = 30         # ... this long unanswered; a JSON summary on its stdin
    on_waiting_timeout_s = 10       # and it is ended if it runs longer
    page_url = "https://desk.example.ts.net"      # where devices reach the host's page
    push_agent_text = true          # Web Push says what is asked (false: only that something
                                    # waits; the page's worker fetches the rest)
    push_contact = "mailto:me@example.com"   # the VAPID contact push services may write to
    push_allow_addresses = []       # private networks a push endpoint may be in (tests)
    listen = "127.0.0.1:8765"       # the TCP listener `host start --listen` last said: every
    tls_cert = "~/desk.pem"         # start of the host has it (and these options)
    tls_key = "~/desk.key"
    behind_tls_proxy = false
    allow_hosts = []
    allow_origins = []

    [agents.gpu]                    # a remote agent over ssh
    ssh = "me@gpu"
    remote_agent = "claude"         # the agent's name there (else its default)
    remote_acpctl = "acpctl"        # the command that runs acpctl there
    ssh_args = []                   # more ssh options, before the host
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from acpctl import paths
from acpctl.config_values import fail as _fail
from acpctl.config_values import flag as _flag
from acpctl.config_values import seconds as _seconds
from acpctl.errors import UsageError
from acpctl.files import read_regular
from acpctl.sandbox import SandboxSettings
from acpctl.serve_config import Listener, ServeSettings, serve_settings

if TYPE_CHECKING:
    from tomlkit.toml_document import TOMLDocument

AGENT_KINDS = ("acp", "pi-rpc")
REMOTE_SCHEMES = ("ws", "wss", "http", "https")
OUTAGE_LIMIT_S = 300.0
# How long a running prompt may go without a word from the agent before the log says so
# (silence_warning_s; 0 turns the watchdog off).
SILENCE_WARNING_S = 30.0
# How long acpctl waits for the agent's answer to a request other than session/prompt and
# authenticate (a turn and a sign-in take as long as they take) before the editor gets an
# error (request_timeout_s; 0: wait for ever).
REQUEST_TIMEOUT_S = 300.0
CONFIG_LIMIT = 4 * 1024 * 1024


class Remote(NamedTuple):
    """Where a remote agent is: a URL that speaks ACP's remote transport, or an ssh
    destination with acpctl on it."""

    url: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    ssh: str | None = None  # [USER@]HOST, or a Host of the user's ssh config
    remote_agent: str | None = None
    remote_acpctl: str = "acpctl"
    ssh_args: tuple[str, ...] = ()
    outage_limit_s: float = OUTAGE_LIMIT_S

    @property
    def address(self) -> str:
        """Where it is, said in a few words (for logs and errors: a URL without the
        credentials or query it may carry)."""
        if self.url is not None:
            return shown_url(self.url)
        agent = f" (agent {self.remote_agent})" if self.remote_agent else ""
        return f"ssh {self.ssh}{agent}"


def shown_url(url: str) -> str:
    """`url` as logs and errors may show it: without the user, password or query it may
    carry (where a token could be)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: said as it is, less the rest
        port = None
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class AgentSpec(NamedTuple):
    """How to launch one agent, from config.toml or the catalog; a remote one has no
    command here (remote says where it is)."""

    name: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    kind: str = "acp"
    remote: Remote | None = None


class Config:
    def __init__(
        self,
        path: Path,
        text: str,
        default_agent: str | None,
        package_runners: bool,
        agents: dict[str, AgentSpec],
        silence_warning_s: float = SILENCE_WARNING_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        host: bool = False,
        agents_host: dict[str, bool] | None = None,
        outage_limit_s: float = OUTAGE_LIMIT_S,
        sandbox: dict[str, SandboxSettings | None] | None = None,
        sandbox_default: SandboxSettings | None = None,
        serve: ServeSettings | None = None,
        plain: dict[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.text = text
        self.default_agent = default_agent
        self.package_runners = package_runners
        self.agents = agents
        self.silence_warning_s = silence_warning_s
        self.request_timeout_s = request_timeout_s
        self.host = host
        self.agents_host = agents_host or {}  # [agents.NAME] host = ..., where it is set
        self.outage_limit_s = outage_limit_s  # of the link to this machine's session host
        # [agents.NAME]'s sandbox, where its table says (None: off), and [sandbox]'s
        # settings for the others (None: default = false).
        self.sandbox = sandbox or {}
        self.sandbox_default = sandbox_default
        self.serve = serve or ServeSettings()
        self.plain = plain or {}  # the file as read, for the tables read elsewhere ([links])
        self._document: TOMLDocument | None = None

    def through_host(self, agent: str) -> bool:
        """Whether `run --acp` serves `agent` through the session host."""
        return self.agents_host.get(agent, self.host)

    def sandbox_for(self, agent: str) -> SandboxSettings | None:
        """The sandbox `agent` runs in, or None: not sandboxed (a remote agent is its
        host's business)."""
        spec = self.agents.get(agent)
        if spec is not None and spec.remote is not None:
            return None
        return self.sandbox.get(agent, self.sandbox_default)

    @property
    def document(self) -> TOMLDocument:
        """The file as a tomlkit document, parsed only when it is about to be edited."""
        if self._document is None:
            import tomlkit

            self._document = tomlkit.parse(self.text)
        return self._document


def url_problem(url: str) -> str | None:
    """What makes `url` no remote agent's address (a scheme acpctl does not speak, no
    host), or None."""
    from urllib.parse import urlsplit

    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in REMOTE_SCHEMES:
        return f"must start with {'://, '.join(REMOTE_SCHEMES)}://, not {url!r}"
    if not urlsplit(url).hostname:
        return f"names no host: {url!r} (wss://HOST:PORT/acp)"
    return None


def is_loopback(host: str) -> bool:
    """Whether a host name or address (no port, no brackets) is this machine's loopback:
    localhost, 127.0.0.0/8, ::1."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # another name
        return False


def is_loopback_name(host: str) -> bool:
    """Whether a Host header (a name, and a port or none) names this machine's loopback:
    localhost, 127.0.0.0/8 or [::1]."""
    name = host
    if host.startswith("["):
        name, _, _ = host[1:].partition("]")
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
        if not port.isdigit():
            return False
    return is_loopback(name)


def clear_text_problem(url: str) -> str | None:
    """ws:// and http:// carry the token in clear text: what is wrong with that here (the
    host is not this machine), or None."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme.lower() in ("wss", "https") or is_loopback(host):
        return None
    return (
        f"{shown_url(url)} is not encrypted and {host} is not this machine: use wss:// or "
        "https:// (the token would cross the network in clear text)"
    )


def _agent_from_table(path: Path, name: str, table: object) -> AgentSpec:
    if not isinstance(table, dict):
        raise _fail(path, f"[agents.{name}] must be a table")
    if "url" in table or "ssh" in table:
        return AgentSpec(name, "", (), {}, "acp", remote_from_table(path, name, table))
    command = table.get("command")
    if not isinstance(command, str) or not command:
        raise _fail(path, f'[agents.{name}] needs command = "..." (a non-empty string)')
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _fail(path, f"[agents.{name}] args must be a list of strings")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise _fail(path, f"[agents.{name}] env must be a table of strings")
    kind = table.get("kind", "acp")
    if kind not in AGENT_KINDS:
        raise _fail(path, f"[agents.{name}] kind must be one of {', '.join(AGENT_KINDS)}")
    return AgentSpec(
        name=name,
        command=command,
        args=tuple(str(a) for a in args),
        env={str(k): str(v) for k, v in env.items()},
        kind=str(kind),
    )


def remote_from_table(
    path: Path | None, name: str, table: dict[str, Any], section: str = "agents"
) -> Remote:
    """A remote agent's table (or a linked host's: `section` links) read and checked.
    `path` None: the table is `agents add`'s options, and a problem names the option
    (nothing is written yet, so no file to fix)."""

    def fail(key: str, problem: str) -> UsageError:
        if path is None:
            return UsageError(f"--{key.replace('_', '-')} {problem}")
        return _fail(path, f"[{section}.{name}] {key} {problem}")

    if "command" in table or ("url" in table and "ssh" in table):
        raise fail("url", "goes alone: a remote agent takes one of command, url and ssh")
    strings = {}
    for key in ("url", "token_file", "ca_file", "ssh", "remote_agent", "remote_acpctl"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise fail(key, "must be a non-empty string")
        strings[key] = value
    url = strings["url"]
    if url is not None and (problem := url_problem(url)):
        raise fail("url", problem)
    ssh = strings["ssh"]
    if ssh is not None and ssh.startswith("-"):
        raise fail("ssh", "is a destination ([USER@]HOST), not an option")
    if ssh is not None and any(c.isspace() for c in ssh):  # "me@gpu -p 2222"
        raise fail("ssh", "is one destination ([USER@]HOST): ssh's options go in ssh_args")
    ssh_args = table.get("ssh_args", [])
    if not isinstance(ssh_args, list) or not all(isinstance(a, str) for a in ssh_args):
        raise fail("ssh_args", "must be a list of strings")
    limit = table.get("outage_limit_s", OUTAGE_LIMIT_S)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
        raise fail("outage_limit_s", "must be a number of seconds (0: never give up)")
    return Remote(
        url=url,
        token_file=strings["token_file"],
        ca_file=strings["ca_file"],
        ssh=ssh,
        remote_agent=strings["remote_agent"],
        remote_acpctl=strings["remote_acpctl"] or "acpctl",
        ssh_args=tuple(ssh_args),
        outage_limit_s=float(limit),
    )


def load(path: Path | None = None) -> Config:
    """Read config.toml; a missing file is an empty config, a broken one a UsageError."""
    path = path or paths.config_file()
    if not path.exists():
        text = ""
    else:
        data = read_regular(path, CONFIG_LIMIT)
        if data is None:
            raise _fail(path, f"is not a readable regular file of at most {CONFIG_LIMIT >> 20} MiB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(path, f"cannot read: {exc}") from exc
    plain = _parse(path, text)
    default_agent = plain.get("default_agent")
    if default_agent is not None and not isinstance(default_agent, str):
        raise _fail(path, "default_agent must be a string")
    package_runners = _flag(path, plain, "package_runners")
    silence = _seconds(path, plain, "silence_warning_s", SILENCE_WARNING_S, "never warn")
    request_timeout = _seconds(path, plain, "request_timeout_s", REQUEST_TIMEOUT_S, "never")
    outage_limit = _seconds(path, plain, "outage_limit_s", OUTAGE_LIMIT_S, "never give up")
    agents_table = plain.get("agents", {})
    if not isinstance(agents_table, dict):
        raise _fail(path, "[agents] must be a table")
    agents = {
        name: _agent_from_table(path, name, t)
        for name, t in agents_table.items()
        if not _settings_only(t)
    }
    sandbox_table = plain.get("sandbox", {})
    if not isinstance(sandbox_table, dict):
        raise _fail(path, "[sandbox] must be a table")
    base = _sandbox_settings(path, sandbox_table, "[sandbox] ", "", SandboxSettings())
    sandbox: dict[str, SandboxSettings | None] = {}
    for name, table in agents_table.items():
        if not isinstance(table, dict) or "sandbox" not in table:
            continue
        where = f"[agents.{name}] "
        on = _flag(path, table, "sandbox", where)
        if on and name in agents and agents[name].remote is not None:
            raise _fail(
                path,
                f"{where}sandbox: a remote agent is sandboxed by the session host of the "
                "machine it runs on, not here (set sandbox there)",
            )
        sandbox[name] = _sandbox_settings(path, table, where, "sandbox_", base) if on else None
    host = _flag(path, plain, "host")
    agents_host = {
        name: _flag(path, table, "host", f"[agents.{name}] ")
        for name, table in agents_table.items()
        if "host" in table
    }
    return Config(
        path,
        text,
        default_agent,
        package_runners,
        agents,
        silence,
        request_timeout,
        host,
        agents_host,
        outage_limit,
        sandbox,
        base if _flag(path, sandbox_table, "default", "[sandbox] ") else None,
        serve_settings(path, plain.get("serve", {})),
        plain,
    )


def remember_listener(config: Config, listener: Listener) -> None:
    """[serve]'s listener keys written anew (the other keys of [serve] kept)."""
    import tomlkit

    serve = config.document.get("serve")
    if serve is None:
        serve = config.document["serve"] = tomlkit.table()
    for key in ("tls_cert", "tls_key", "behind_tls_proxy", "allow_hosts", "allow_origins"):
        serve.pop(key, None)
    serve["listen"] = listener.listen
    for key, value in listener._asdict().items():
        if key != "listen" and value not in (None, False, ()):
            serve[key] = list(value) if isinstance(value, tuple) else value
    config.serve = config.serve._replace(listener=listener)


SETTINGS_KEYS = frozenset(
    {
        "host",
        "sandbox",
        "sandbox_roots",
        "sandbox_writable",
        "sandbox_hidden",
        "sandbox_network",
        "sandbox_env",
    }
)


def _settings_only(table: object) -> bool:
    """A table of a catalog agent's settings (host, sandbox), with no command of its own."""
    return isinstance(table, dict) and bool(table) and set(table) <= SETTINGS_KEYS


def _sandbox_settings(
    path: Path, table: dict[str, Any], where: str, prefix: str, base: SandboxSettings
) -> SandboxSettings:
    """[sandbox]'s keys (prefix "") or an agent's sandbox_ keys, on top of `base`."""
    lists = {}
    for key in ("roots", "writable", "hidden"):
        value = table.get(prefix + key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise _fail(path, f"{where}{prefix}{key} must be a list of directories")
        lists[key] = (*getattr(base, key), *value)
    env = table.get(prefix + "env", [])
    if not isinstance(env, list) or not all(
        isinstance(v, str) and _ENV_NAME.fullmatch(v) for v in env
    ):
        raise _fail(
            path, f"{where}{prefix}env must be a list of variable names (FOO, or FOO_* a prefix)"
        )
    network = table.get(prefix + "network", base.network)
    if not isinstance(network, bool):
        raise _fail(path, f"{where}{prefix}network must be true or false")
    return SandboxSettings(
        lists["roots"], lists["writable"], lists["hidden"], network, (*base.env, *env)
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


def _parse(path: Path, text: str) -> dict[str, Any]:
    """Plain values of the file. tomllib (3.11+) is fast to import; tomlkit, needed only
    to edit, is the fallback on 3.10."""
    if not text.strip():  # no config yet: nothing to import a parser for
        return {}
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            return tomllib.loads(text)
        except RecursionError as exc:
            raise _fail(path, "nested too deeply to read") from exc
        except tomllib.TOMLDecodeError as exc:
            where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
            position = f"line {where[1]}, column {where[2]}: " if where else ""
            raise _fail(path, f"{position}{str(exc).split(' (at ')[0]}") from exc
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text).unwrap()
    except RecursionError as exc:
        raise _fail(path, "nested too deeply to read") from exc
    except ParseError as exc:
        raise _fail(path, f"line {exc.line}, column {exc.col}: {exc}") from exc


def save(config: Config) -> None:
    """Write the document back atomically (same directory, fsync, rename)."""
    import tomlkit

    from acpctl.files import atomic_write

    paths.ensure_private_dir(config.path.parent)
    atomic_write(config.path, tomlkit.dumps(config.document).encode("utf-8"))


def set_agent(config: Config, spec: AgentSpec, sandbox: bool = False) -> None:
    """[agents.NAME] written anew for `spec` (in a sandbox, with `sandbox`)."""
    import tomlkit

    agents = config.document.get("agents")
    if agents is None:
        agents = tomlkit.table(is_super_table=True)
        config.document["agents"] = agents
    table = tomlkit.table()
    if spec.remote is not None:
        for key, value in spec.remote._asdict().items():
            if value and value != Remote._field_defaults[key]:
                table[key] = list(value) if isinstance(value, tuple) else value
        agents[spec.name] = table
        config.agents[spec.name] = spec
        return
    table["command"] = spec.command
    table["args"] = list(spec.args)
    if spec.env:
        env = tomlkit.inline_table()
        env.update(spec.env)
        table["env"] = env
    table["kind"] = spec.kind
    agents[spec.name] = table
    config.agents[spec.name] = spec
    if sandbox:
        set_sandbox(config, spec.name, True)


def remove_agent(config: Config, name: str) -> None:
    agents = config.document.get("agents")
    if agents is not None and name in agents:
        del agents[name]
    config.agents.pop(name, None)
    if config.default_agent == name:
        del config.document["default_agent"]
        config.default_agent = None


def set_through_host(config: Config, on: bool, agent: str | None = None) -> None:
    """host = ON at the top (every agent), or in [agents.AGENT]."""
    if agent is None:
        config.document["host"] = on
        config.host = on
    else:
        config.document["agents"][agent]["host"] = on
        config.agents_host[agent] = on


def set_sandbox(config: Config, agent: str, on: bool) -> None:
    """sandbox = ON in [agents.AGENT] (a table of its settings alone for a catalog agent)."""
    import tomlkit

    agents = config.document.get("agents")
    if agents is None:
        agents = config.document["agents"] = tomlkit.table(is_super_table=True)
    if agent not in agents:
        agents[agent] = tomlkit.table()
    agents[agent]["sandbox"] = on
    config.sandbox[agent] = (config.sandbox_default or SandboxSettings()) if on else None


def set_default_agent(config: Config, name: str) -> None:
    config.document["default_agent"] = name
    config.default_agent = name

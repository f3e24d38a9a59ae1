"""The agents acpctl installs for the user: install, upgrade and uninstall as the CLI and
`acpctl install CLIENT` run them, with what they say along the way."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from acpctl.agents import installed, installer, runtimes
from acpctl.agents.catalog import CatalogEntry
from acpctl.agents.discovery import which
from acpctl.agents.limits import DEFAULT_LIMITS, Limits
from acpctl.errors import AcpctlError

Echo = Callable[[str], None]
Confirm = Callable[[str], bool]


def install(
    entry: CatalogEntry,
    version: str | None,
    via: str | None,
    echo: Echo,
    confirm: Confirm,
    in_use: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
) -> installed.Installed:
    chosen = installer.plan(entry, None if version == "latest" else version, via)
    if version == "latest":
        chosen = installer.plan(entry, _latest(chosen), via)
    current = installed.read(entry.id)
    if current is not None and current.directory.name == chosen.version:
        echo(f"{entry.name} {current.version} is already installed: {current.command[0]}")
        return current
    _check_tools(chosen)
    warned = _engines_before(chosen, echo)
    question = f"install {chosen.describe()}?"
    if warned and chosen.entry.older_node != "runs":
        question = f"install {chosen.entry.name} {chosen.version} anyway?"
    if not confirm(question):
        raise AcpctlError(f"{entry.name} was not installed")
    return _install(chosen, echo, in_use, limits, warned)


def _engines_before(chosen: installer.Plan, echo: Echo) -> bool:
    """Before a download, the npm registry's word: a release it does not have is one line
    (AcpctlError) with what to install instead; whether the release's engines.node rules
    out this node, said with what is known of the agent on an older node."""
    if chosen.distribution.kind != "npx" or chosen.distribution.package is None:
        return False
    package = installer.package_name(chosen.distribution.package)
    release = runtimes.npm_release(package, chosen.version)
    if release is None:  # npm cannot say: the installed package is checked after
        return False
    name = chosen.entry.name
    if not release.found and release.latest is not None:
        raise AcpctlError(
            f"npm has no {package} {chosen.version}, the release the registry names "
            f"(its newest is {release.latest})",
            hint=f"acpctl agents install {name} --version {release.latest} "
            "(or --version latest); `acpctl agents update` may bring a newer registry",
        )
    if not release.found:
        raise AcpctlError(
            f"npm has no package {package}, which the registry names for {name}",
            hint=f"{name} cannot be installed from npm; `acpctl agents update` may bring a "
            "fixed registry",
        )
    if release.engines_node is None:
        return False
    problem = runtimes.engines_against_node(package, chosen.version, release.engines_node)
    if problem is not None:
        _say_engines(problem, chosen.entry, echo)
    return problem is not None


def _latest(chosen: installer.Plan) -> str:
    """npm's newest version of the plan's package (`--version latest`)."""
    if chosen.distribution.kind != "npx" or chosen.distribution.package is None:
        raise AcpctlError(f"--version latest is for npm packages; {chosen.describe()} is not one")
    package = installer.package_name(chosen.distribution.package)
    latest = runtimes.npm_latest(package)
    if latest is None:
        raise AcpctlError(f"npm could not say which version of {package} is the newest")
    return latest


def _say_engines(problem: runtimes.EnginesProblem, entry: CatalogEntry, echo: Echo) -> None:
    echo(f"warning: {problem.explain()}: {problem.verdict(entry.older_node)}")
    if entry.older_node != "runs":
        echo(f"fix: {problem.fix(entry.name)}")


def upgrade(entry: CatalogEntry, echo: Echo, confirm: Confirm, in_use: Iterable[str] = ()) -> None:
    current = installed.read(entry.id)
    if current is None:
        raise AcpctlError(
            f"acpctl did not install {entry.name}",
            hint=f"acpctl agents install {entry.name} (an agent on PATH upgrades with the "
            "installer that put it there)",
        )
    if not entry.version or not runtimes.newer(entry.version, current.version):
        echo(f"{entry.name} {current.version} is the registry's latest")
        return
    kind = current.distribution if current.distribution in entry.distributions else None
    chosen = installer.plan(entry, None, kind)
    _check_tools(chosen)
    warned = _engines_before(chosen, echo)
    if not confirm(f"upgrade {entry.name} {current.version} to {chosen.describe()}?"):
        raise AcpctlError(f"{entry.name} was not upgraded")
    echo(f"upgrading {entry.name} {current.version} -> {chosen.version}")
    _install(chosen, echo, in_use, warned=warned)


def uninstall(entry: CatalogEntry, echo: Echo) -> None:
    if installed.read(entry.id) is None and not installed.agent_dir(entry.id).exists():
        raise AcpctlError(f"acpctl did not install {entry.name}; nothing to remove")
    directory = installer.uninstall(entry.id)
    echo(f"uninstalled {entry.name} (removed {directory})")


def _install(
    chosen: installer.Plan,
    echo: Echo,
    in_use: Iterable[str],
    limits: Limits = DEFAULT_LIMITS,
    warned: bool = False,  # its engines were said before the download
) -> installed.Installed:
    echo(f"installing {chosen.describe()}")
    result = installer.install(chosen, echo, sys.stderr.isatty(), limits)
    kept = [str(p) for p in in_use]
    for directory in installer.prune(chosen.entry.id, kept):
        echo(f"removed the previous version: {directory}")
    echo(f"installed {chosen.entry.name} {result.version}: {' '.join(result.command)}")
    problem = None if warned else runtimes.engines_problem(result.command[0])
    if problem is not None:  # npm could not say before: the installed package says now
        _say_engines(problem, chosen.entry, echo)
    return result


def _check_tools(chosen: installer.Plan) -> None:
    """The runtime an install needs, before anything is downloaded."""
    kind = chosen.distribution.kind
    if kind == "npx" and which("npm") is None:
        raise AcpctlError(
            f"{chosen.entry.name} is an npm package and npm is not installed",
            hint="install Node.js (it brings npm and npx): https://nodejs.org/",
        )
    if kind == "uvx" and which("uv") is None and not _has_venv():
        raise AcpctlError(
            f"{chosen.entry.name} is a PyPI package and neither uv nor Python's venv is here",
            hint="install uv (https://docs.astral.sh/uv/) or your system's python3-venv",
        )


def _has_venv() -> bool:
    import importlib.util

    return (
        importlib.util.find_spec("venv") is not None
        and importlib.util.find_spec("ensurepip") is not None
    )

"""Developer sessions: `nox -s fast` (the fast tier), `nox -s tests`, `nox -s lint` (ruff,
formatting, import layers), `nox -s typecheck`, `nox -s docs`, `nox -s bench`."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def fast(session: nox.Session) -> None:
    """The tests without subprocess agents: seconds, for everyday work."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not e2e and not npm", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-e", ".[dev]")
    targets = ["acpctl", "tests", "bench", "noxfile.py"]
    session.run("ruff", "check", *targets)
    session.run("ruff", "format", "--check", *targets)
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[test,dev]")
    session.run("mypy", "--strict")


@nox.session
def docs(session: nox.Session) -> None:
    """The docs are plain Markdown; "building" them is checking them: every command and
    ACPCTL_* variable documented, completions fresh, every example runs."""
    session.install("-e", ".[test]")
    session.run("pytest", "tests/test_docs.py", "tests/test_readme.py")


@nox.session
def bench(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    for script in ("startup", "relay", "history", "sessions", "memory", "settings", "pi"):
        session.run("python", f"bench/{script}.py", *session.posargs)

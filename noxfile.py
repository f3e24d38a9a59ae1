"""Developer sessions: `nox -s tests`, `nox -s lint`, `nox -s typecheck`, `nox -s bench`."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "acpctl", "tests", "bench", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[test]", "mypy")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """The docs are plain Markdown; "building" them is checking them: every command and
    ACPCTL_* variable documented, completions fresh, every example runs."""
    session.install("-e", ".[test]")
    session.run("pytest", "tests/test_docs.py", "tests/test_readme.py")


@nox.session
def bench(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    for script in ("startup", "relay", "history", "sessions"):
        session.run("python", f"bench/{script}.py", *session.posargs)

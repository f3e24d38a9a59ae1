"""The real npm agents for tests: installed on first use into tests/npm/node_modules from
tests/npm/package.json (exact versions), skipped with a visible reason only without node."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

if TYPE_CHECKING:
    from tests.model_stub import ModelStub

NPM_DIR = Path(__file__).resolve().parent / "npm"


def npm_bin(name: str) -> Path:
    """The path of an installed npm agent's executable (installing the set if needed)."""
    install()
    path = NPM_DIR / "node_modules" / ".bin" / name
    assert path.exists(), path
    return path


def npm_package(package: str) -> Path:
    """The directory of an installed npm package (installing the set if needed): for two
    releases of one agent whose executables share a name, and for the ACP schema."""
    install()
    path = NPM_DIR / "node_modules" / package
    assert (path / "package.json").exists(), path
    return path


def package_command(package: str) -> list[str]:
    """The command of the executable a package declares (its only one), run by node: npm
    makes executable only the one of two same-named executables it links into .bin."""
    directory = npm_package(package)
    declared = json.loads((directory / "package.json").read_text())["bin"]
    (relative,) = declared.values() if isinstance(declared, dict) else (declared,)
    node = shutil.which("node")
    assert node is not None
    return [node, str(directory / relative)]


@contextmanager
def claude_on_the_stand_in(home: Path, package: str, reply: str) -> Iterator[ModelStub]:
    """claude-agent-acp (npm `package`) added as the agent `claude`, on a model stand-in
    that answers `reply`, with a home of its own under `home`."""
    from tests.conftest import cli
    from tests.model_stub import ModelStub

    command = package_command(package)
    with ModelStub(default_reply=reply) as stub:
        claude_home = home / "claude-home"
        claude_home.mkdir()
        env = {
            "ANTHROPIC_BASE_URL": stub.url,
            "ANTHROPIC_API_KEY": "sk-test",
            "IS_SANDBOX": "1",
            "HOME": str(claude_home),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
        assert cli("agents", "add", "claude", *args, "--", *command).returncode == 0
        yield stub


def install() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the npm agent tests need them")
    wanted = json.loads((NPM_DIR / "package.json").read_text())["dependencies"]
    with FileLock(str(NPM_DIR / ".install.lock")):
        if not _installed(wanted):
            result = subprocess.run(
                [
                    "npm",
                    "install",
                    "--no-package-lock",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                ],
                cwd=NPM_DIR,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if result.returncode != 0:
                pytest.fail(f"npm install failed:\n{result.stderr[-3000:]}")


def _installed(wanted: dict[str, str]) -> bool:
    for package, version in wanted.items():
        manifest = NPM_DIR / "node_modules" / package / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True

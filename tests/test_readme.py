"""The README's two commands: CI runs the test command verbatim; the main job works."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_ci_runs_the_readme_test_command() -> None:
    main_job, test_command = readme_commands()[:2]
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()
    assert "pytest" in test_command and "acpctl run" in main_job


@pytest.mark.e2e
def test_main_job_command_answers_like_an_agent(home: Path, tmp_path: Path) -> None:
    main_job = readme_commands()[0]
    # The venv set-up is the fresh-machine part; here the package is already installed, so
    # run the rest of the pipeline with this interpreter's acpctl.
    pipeline = main_job.split(" && ", 2)[2].replace(
        ".venv/bin/acpctl", f"{sys.executable} -m acpctl"
    )
    result = subprocess.run(
        ["bash", "-c", pipeline],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert "demo" in result.stdout and "[completed]" in result.stdout
    assert "You said: and once more" in result.stdout
    sessions = [
        p
        for p in (home / "data" / "sessions").iterdir()
        if p.is_dir() and not p.name.startswith(".")
    ]
    assert len(sessions) == 1  # --continue went on in the same session
    meta = json.loads((sessions[0] / "session.json").read_text())
    assert meta["turns"] == 2

"""Issue 53, 4: sizes that stay put. A module a newcomer reads in one sitting: under
acpctl/runner/, acpctl/host/ and acpctl/remote/ (the relay, the host and the link, read
most) at most 450 lines, anywhere else at most 600. A module past it is split by job."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "acpctl"
CLOSE_READ = ("runner", "host", "remote")
CLOSE_READ_LINES = 450
ANY_LINES = 600


def test_no_module_passes_its_size() -> None:
    over = []
    for module in sorted(PACKAGE.rglob("*.py")):
        parts = module.relative_to(PACKAGE).parts
        most = CLOSE_READ_LINES if parts[0] in CLOSE_READ else ANY_LINES
        lines = len(module.read_text().splitlines())
        if lines > most:
            over.append(f"{module.relative_to(PACKAGE.parent)}: {lines} lines (at most {most})")
    assert over == []

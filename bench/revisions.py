"""One bench script, this tree against another revision's, interleaved round by round.

    git worktree add /tmp/base REV
    python bench/revisions.py /tmp/base bench/host.py --reps 1 --agents demo [--rounds 5]

Each round runs the base tree's copy of the script (with the base's acpctl first on the
path, which its `python -m acpctl` children inherit) and this tree's, the order flipped
every other round. With --this-script, both run this tree's copy (a script newer than the
base that uses only what both acpctls have: bench/attach.py). Every cell of a table that
reads "MIN / MEDIAN [/ P95] ms" gives one figure a run (its median), named by its row and
its column; the report is the median of each over the rounds, and the ratio of this
tree's to the base's.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TIME = re.compile(r"^(?P<min>[\d.]+) / (?P<median>[\d.]+)(?: / [\d.]+)? (?P<unit>m?s)$")


def figures(tree: Path, script: Path, args: list[str]) -> dict[str, float]:
    """The script's figures, run with `tree`'s acpctl, by table and row."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    shown = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, float] = {}
    columns: list[str] = []
    for line in shown.splitlines():
        if not line.startswith("| ") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        times = [TIME.match(cell) for cell in cells]
        if not any(times):  # a table's header
            columns = cells
            continue
        label = " / ".join(
            c for c, t in zip(cells, times, strict=True) if t is None and not _derived(c)
        )
        for column, cell in zip(columns, times, strict=False):
            if cell is not None:
                scale = 1.0 if cell["unit"] == "ms" else 1000.0
                found[f"{label} ({column})"] = float(cell["median"]) * scale
    return found


def _derived(cell: str) -> bool:
    """A ratio or a difference (0.79x, +0.45 ms): figured from the others, not a label."""
    return cell.endswith("x") or cell.startswith(("+", "-"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("base", type=Path)
    parser.add_argument("script")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--this-script", action="store_true")
    known, rest = parser.parse_known_args()
    runs: dict[str, dict[str, list[float]]] = {"base": {}, "this": {}}
    trees = {"base": known.base.resolve(), "this": HERE}
    for round_ in range(known.rounds):
        for which in ("base", "this") if round_ % 2 == 0 else ("this", "base"):
            script = (HERE if known.this_script else trees[which]) / known.script
            for key, value in figures(trees[which], script, rest).items():
                runs[which].setdefault(key, []).append(value)
    print(
        f"| {known.script} {' '.join(rest)} (median of {known.rounds} rounds) | base | this "
        "| ratio |\n|---|---|---|---|"
    )
    for key, values in runs["this"].items():
        base = runs["base"].get(key)
        if not base:
            continue
        old, new = statistics.median(base), statistics.median(values)
        print(f"| {key} | {old:.2f} ms | {new:.2f} ms | {new / old:.2f} |")


if __name__ == "__main__":
    main()

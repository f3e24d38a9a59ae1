"""Start-up cost of the commands people and editors run most, against `python -c pass`.

python bench/startup.py [--runs 20]

Every command runs in each round, the order flipped every other round; min and median.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import private_home

COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "acpctl --version": [sys.executable, "-m", "acpctl", "--version"],
    "acpctl --help": [sys.executable, "-m", "acpctl", "--help"],
    "acpctl agents list --json --no-probe": [
        sys.executable,
        "-m",
        "acpctl",
        "agents",
        "list",
        "--json",
        "--no-probe",
    ],
    # Versions from package.json or the probe cache (the first run fills the cache).
    "acpctl agents list --json": [sys.executable, "-m", "acpctl", "agents", "list", "--json"],
}


def once_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def main(runs: int) -> None:
    results: dict[str, list[float]] = {label: [] for label in COMMANDS}
    labels = list(COMMANDS)
    for run in range(runs):  # interleaved, the order flipped every other run
        for label in labels if run % 2 == 0 else reversed(labels):
            results[label].append(once_ms(COMMANDS[label]))
    baseline = statistics.median(results["python -c pass (baseline)"])
    print(
        f"| command (min / median of {runs}, interleaved) | time | ratio of medians to "
        "python -c pass |\n|---|---|---|"
    )
    for label, values in results.items():
        median = statistics.median(values)
        print(f"| {label} | {min(values):.1f} / {median:.1f} ms | {median / baseline:.1f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with private_home():
        main(args.runs)

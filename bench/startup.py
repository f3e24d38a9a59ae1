"""Start-up cost of the commands people and editors run most, against `python -c pass`.

python bench/startup.py [--runs 20]
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
}


def median_ms(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main(runs: int) -> None:
    results = {label: median_ms(argv, runs) for label, argv in COMMANDS.items()}
    baseline = results["python -c pass (baseline)"]
    print(f"| command (median of {runs}) | time | ratio to python -c pass |\n|---|---|---|")
    for label, value in results.items():
        print(f"| {label} | {value:.1f} ms | {value / baseline:.1f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with private_home():
        main(args.runs)

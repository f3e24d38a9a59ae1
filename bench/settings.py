"""`acpctl install zed` on large settings files, against reading the same file with the
stdlib's JSON parser in a fresh Python (the floor: start-up plus one parse).

Each size's install and baseline run interleaved (A B A B ...), several repetitions; the
table shows min and median of each and the ratio of the medians. The files look like a big
real settings file: one object member a line, each with a trailing comment.

    python bench/settings.py [--runs 5] [--sizes 1.4,2.8,5.8,10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import private_home

LINE_BYTES = 115  # of one member line below, roughly


def settings_text(megabytes: float) -> str:
    count = int(megabytes * 1e6 / LINE_BYTES)
    body = "".join(f'  "key{i}": {{"value": "{"x" * 80}"}}, // c{i}\n' for i in range(count))
    return "{\n" + body + '  "agent_servers": {"x": 1}\n}\n'


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(runs: int, sizes: list[float]) -> None:
    rows = []
    with private_home(), tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            text = settings_text(size)
            path = Path(scratch) / f"settings-{size}.json"
            stripped = Path(scratch) / f"plain-{size}.json"
            stripped.write_text(
                json.dumps(
                    {f"key{i}": {"value": "x" * 80} for i in range(int(size * 1e6 / LINE_BYTES))}
                )
            )
            install, baseline = [], []
            for _ in range(runs):
                path.write_text(text)  # a fresh file: every run makes the same edit
                install.append(
                    timed(
                        [sys.executable, "-m", "acpctl", "install", "zed", "--settings", str(path)]
                    )
                )
                baseline.append(
                    timed(
                        [sys.executable, "-c", f"import json; json.load(open({str(stripped)!r}))"]
                    )
                )
            rows.append((len(text), install, baseline))
    print("| file | install min / median | json.load min / median | ratio (medians) |")
    print("|---|---|---|---|")
    for size, install, baseline in rows:
        ratio = statistics.median(install) / statistics.median(baseline)
        print(
            f"| {size / 1e6:.1f} MB | {min(install):.2f} / {statistics.median(install):.2f} s "
            f"| {min(baseline):.2f} / {statistics.median(baseline):.2f} s | {ratio:.1f}x |"
        )
    print(
        f"\n{runs} runs each, interleaved; {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1.4,2.8,5.8,10")
    arguments = parser.parse_args()
    main(arguments.runs, [float(s) for s in arguments.sizes.split(",")])

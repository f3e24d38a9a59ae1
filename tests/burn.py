"""CPU-bound processes beside the test suite, to prove it green on a loaded machine
(issue 53): each spins until it is ended, or for `--for` seconds.

    python3 tests/burn.py 2 --for 1200 &   # two burners, for at most 20 minutes
    .venv/bin/python -m pytest -q -n 2     # the suite, three times in a row
    kill %1
"""

from __future__ import annotations

import argparse
import multiprocessing
import signal
import sys
import time


def spin(until: float) -> None:
    count = 0
    while time.monotonic() < until:
        count += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("burners", type=int, nargs="?", default=2)
    parser.add_argument("--for", dest="seconds", type=float, default=3600.0)
    arguments = parser.parse_args()
    until = time.monotonic() + arguments.seconds
    burners = [
        multiprocessing.Process(target=spin, args=(until,), daemon=True)
        for _ in range(arguments.burners)
    ]
    for burner in burners:
        burner.start()
    # `kill %1` (SIGTERM) ends the burners too: by default it ended this process alone,
    # and its burners spun on, orphaned, until --for ran out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for burner in burners:
            burner.join()
    except KeyboardInterrupt:
        pass
    finally:
        for burner in burners:
            burner.terminate()


if __name__ == "__main__":
    main()

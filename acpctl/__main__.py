"""Entry point. `acpctl --version` answers before typer is imported, so it starts fast."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from acpctl import __version__

        print(f"acpctl {__version__} (Python {sys.version.split()[0]})")
        return
    from acpctl.cli import run_app

    run_app()


if __name__ == "__main__":
    main()

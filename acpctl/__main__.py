"""Entry point. `acpctl --version` and `acpctl run --acp` (what editors launch) answer
before typer is imported, so they start fast."""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args == ["--version"]:
        from acpctl import __version__

        print(f"acpctl {__version__} (Python {sys.version.split()[0]})")
        return
    if args[:1] == ["run"] and "--acp" in args:
        from acpctl.runner.main import fast_main

        code = fast_main(args[1:])
        if code is not None:
            sys.exit(code)
    from acpctl.cli import run_app

    run_app()


if __name__ == "__main__":
    main()

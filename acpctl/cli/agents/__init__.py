"""`acpctl agents`: the catalog (list, show, update), installs (install, upgrade,
uninstall), configured agents (add, remove), the default agent, which go through the host,
which run in a sandbox."""

from acpctl.cli.agents.app import app

# Each module adds its commands to the group as it is imported, in the order `--help`
# lists them.
# isort: off
from acpctl.cli.agents import listing  # noqa: F401
from acpctl.cli.agents import installs  # noqa: F401
from acpctl.cli.agents import configured  # noqa: F401

# isort: on

__all__ = ["app"]

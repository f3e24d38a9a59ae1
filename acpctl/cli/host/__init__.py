"""`acpctl host`: the session host's controls in one group, a module a verb (start, stop,
status, pair, devices, revoke, rotate-token, show-token, systemd, and the link group)."""

from acpctl.cli.host.app import app

# Each module adds its verb to the group as it is imported, in the order `--help` lists
# them.
# isort: off
from acpctl.cli.host import start  # noqa: F401
from acpctl.cli.host import stop  # noqa: F401
from acpctl.cli.host import status  # noqa: F401
from acpctl.cli.host import pair  # noqa: F401
from acpctl.cli.host import devices  # noqa: F401
from acpctl.cli.host import revoke  # noqa: F401
from acpctl.cli.host import rotate_token  # noqa: F401
from acpctl.cli.host import show_token  # noqa: F401
from acpctl.cli.host import systemd  # noqa: F401
from acpctl.cli.host import link  # noqa: F401

# isort: on

__all__ = ["app"]

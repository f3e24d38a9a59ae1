"""The doctor's checks, one module per family, in the order `acpctl doctor` runs them:
the install and config.toml, the agents, the editors' settings, the sandbox, the history
store, live processes, the session host and how devices reach its page, the logs. Each
check returns findings: ok, warning or problem, with a one-line fix."""

from acpctl.doctor.checks.agents import check_agents
from acpctl.doctor.checks.editors import check_editors
from acpctl.doctor.checks.host import check_host
from acpctl.doctor.checks.logs import check_incidents, check_logs
from acpctl.doctor.checks.processes import check_processes
from acpctl.doctor.checks.reach import check_reach
from acpctl.doctor.checks.sandbox import check_sandbox
from acpctl.doctor.checks.setup import check_config, check_install, check_runtimes
from acpctl.doctor.checks.storage import check_storage

__all__ = [
    "check_agents",
    "check_config",
    "check_editors",
    "check_host",
    "check_incidents",
    "check_install",
    "check_logs",
    "check_processes",
    "check_reach",
    "check_runtimes",
    "check_sandbox",
    "check_storage",
]

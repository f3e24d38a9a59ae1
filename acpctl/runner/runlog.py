"""The run's log: stderr plus a size-capped, rotated file.

Every log line goes to stderr, so an editor's own log still shows it, and to
<state>/logs/<agent>-<time>-<pid>.log, which `acpctl doctor` and `acpctl logs` read.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time
from pathlib import Path

from acpctl import paths

LOG_MAX_BYTES = 2 * 1024 * 1024
LOG_BACKUPS = 3
LOGGER_NAME = "acpctl.run"


class _PrivateRotatingHandler(logging.handlers.RotatingFileHandler):
    """Log files may hold conversation fragments from agent stderr: create them 0600."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(
            self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, paths.PRIVATE_FILE_MODE
        )
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors="replace")


def run_logs() -> list[Path]:
    """Every run's log, oldest first."""
    return sorted(paths.logs_dir().glob("*.log"), key=lambda p: p.stat().st_mtime)


def agent_of(log: Path) -> str:
    """The agent a run log belongs to, from its name: <agent>-<time>-<pid>.log."""
    return log.name.rsplit("-", 2)[0]


def open_log(agent: str, logger_name: str = LOGGER_NAME) -> tuple[logging.Logger, Path]:
    """A fresh log for `agent` (the session host opens one per agent it runs, each under
    a logger name of its own)."""
    directory = paths.ensure_private_dir(paths.logs_dir())
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    path = directory / f"{agent}-{stamp}-{os.getpid()}.log"
    logger = logging.getLogger(logger_name)
    logger.handlers.clear()
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    file_handler = _PrivateRotatingHandler(
        path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    stderr_handler = logging.StreamHandler(sys.stderr)
    stderr_handler.setFormatter(logging.Formatter("acpctl: %(message)s"))
    logger.addHandler(file_handler)
    logger.addHandler(stderr_handler)
    return logger, path

"""What went wrong in a run, as the protocol saw it: the agent's failed requests (method,
error code and message), prompts it left silent, and how those turns ended. One JSON line
each in `<run log>.incidents.jsonl`, beside the run log, for `acpctl doctor` and
`acpctl logs`: stderr says what an agent printed, this says what it answered. And, once a
run, that the agent worked (a turn ended as the agent meant it to): what went wrong
before then is mended, and doctor says no more of it."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from acpctl import paths
from acpctl.agents import transcripts

SUFFIX = ".incidents.jsonl"
MESSAGE_KEPT = 300  # an error message is a diagnosis, not a transcript


def path_for(log_path: Path) -> Path:
    return log_path.with_name(log_path.name.removesuffix(".log") + SUFFIX)


class Incidents:
    """A run's incidents file; without a run log (a server in a test), none is kept."""

    def __init__(
        self, log_path: Path | None, log: logging.Logger, agent_env: Mapping[str, str] = {}
    ) -> None:
        self.path = path_for(log_path) if log_path else None
        self.log = log
        self.agent_env = agent_env  # where the agent keeps its own records
        self._worked = False

    def silence(self, session: str, agent_session: str, seconds: float) -> str | None:
        """Record a silent stretch of a turn, with what the agent's own records say about
        it (a model API it keeps retrying, say); that, for the log line."""
        said = transcripts.last_api_error(self.agent_env, agent_session)
        extra = {"agent_said": said} if said else {}
        self.add("silence", session=session, seconds=round(seconds), **extra)
        return said

    def worked(self) -> None:
        """A turn ended as the agent meant it to: said once a run."""
        if not self._worked:
            self._worked = True
            self.add("worked")

    def failed(self, method: str, error: Any) -> None:
        if not isinstance(error, dict):
            return
        self.add("error", method=method, code=error.get("code"), message=_short(error))

    def add(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"time": time.time(), "kind": kind, **fields}) + "\n"
        try:  # one write of a whole line with O_APPEND: a reader never sees half of one
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, paths.PRIVATE_FILE_MODE)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk loses a diagnosis, never the run
            self.log.debug("cannot record an incident: %s", exc)


def _short(error: dict[str, Any]) -> str:
    message = str(error.get("message", ""))
    data = error.get("data")
    if isinstance(data, str) and data not in message:
        message = f"{message}: {data}"
    elif isinstance(data, dict) and isinstance(data.get("message"), str):
        message = f"{message}: {data['message']}"
    return message[:MESSAGE_KEPT]


def read(path: Path) -> list[dict[str, Any]]:
    """A run's incidents; a torn or foreign line is skipped."""
    records = []
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("kind"), str):
                    records.append(record)
    except OSError:
        return []
    return records


def since_it_worked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's records, oldest first, less those before the last time it worked (and
    that record itself): a failure mended since is no failure any more."""
    last = max((i for i, r in enumerate(records) if r["kind"] == "worked"), default=-1)
    return records[last + 1 :]


def describe(record: dict[str, Any]) -> str:
    """One incident in a line, for `acpctl logs` and doctor's evidence."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("time") or 0))
    kind = record["kind"]
    if kind == "error":
        return (
            f"{when} {record.get('method')} failed ({record.get('code')}): {record.get('message')}"
        )
    if kind == "silence":
        said = f"; its own log: {record['agent_said']}" if record.get("agent_said") else ""
        return f"{when} session {record.get('session')}: silent for {record.get('seconds')} s{said}"
    return (
        f"{when} session {record.get('session')}: the silent turn ended {record.get('stopReason')}"
    )

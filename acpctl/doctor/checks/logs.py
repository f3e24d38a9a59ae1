"""The doctor's checks: run logs and Zed's log: failed requests, silences and known failures."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from acpctl import paths
from acpctl import protocol as acp
from acpctl.agents import signatures
from acpctl.doctor.findings import Finding, ok
from acpctl.editors import clients
from acpctl.runner import incidents, runlog

LOG_FILES_SCANNED = 20


def zed_logs() -> list[Path]:
    home = clients.home()
    candidates = [
        home / "Library" / "Logs" / "Zed" / "Zed.log",
        Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        / "zed"
        / "logs"
        / "Zed.log",
    ]
    return [p for p in candidates if p.is_file()]


def _worked_since() -> dict[str, float]:
    """Each agent's newest run log in which it worked (its modification time)."""
    newest: dict[str, float] = {}
    for log in runlog.run_logs():
        if any(r["kind"] == "worked" for r in incidents.read(incidents.path_for(log))):
            newest[runlog.agent_of(log)] = log.stat().st_mtime
    return newest


def _log_lines(path: Path, zed: bool) -> Iterable[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if zed and "agent stderr:" not in line and "agent_servers" not in line:
                    continue
                yield number, line.rstrip("\n")
    except OSError:
        return


def check_incidents() -> list[Finding]:
    """What the protocol showed in recent runs: each agent's failed requests and the
    prompts it left silent, diagnosed from the errors and what its own log said."""
    logs = runlog.run_logs()
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for log in logs[-LOG_FILES_SCANNED:]:
        records = incidents.read(incidents.path_for(log))
        by_agent.setdefault(runlog.agent_of(log), []).extend(records)
    findings = []
    for agent, all_records in by_agent.items():
        records = incidents.since_it_worked(all_records)
        failed = [r for r in records if r["kind"] == "error"]
        silent = [r for r in records if r["kind"] == "silent_turn_end"]
        if not failed and not silent:
            continue
        found = signatures.diagnose(signatures.run_evidence(records, []))
        fix = found[0].fix if found else f"see `acpctl logs --agent {agent}`"
        diagnosis = f"; {found[0].diagnosis}" if found else ""
        if failed:
            last = failed[-1]
            prompts = sum(r.get("method") == acp.SESSION_PROMPT for r in failed)
            what = f"{prompts} prompt(s)" if prompts == len(failed) else f"{len(failed)} request(s)"
            message = f"{what} to {agent} failed in recent runs; the last: {last.get('method')}"
            evidence = [incidents.describe(r) for r in failed[-3:]]
        else:
            ended = ", ".join(sorted({str(r.get("stopReason")) for r in silent}))
            longest = max(
                (r.get("seconds", 0) for r in records if r["kind"] == "silence"), default=0
            )
            message = (
                f"{len(silent)} prompt(s) to {agent} went silent for {longest}+ s in recent "
                f"runs (ended: {ended})"
            )
            evidence = [incidents.describe(r) for r in records if r["kind"] != "error"][-3:]
        findings.append(Finding(f"agent {agent}", "warning", message + diagnosis, fix, evidence))
    return findings


def check_logs() -> list[Finding]:
    logs = sorted(paths.logs_dir().glob("*.log*"), key=lambda p: p.stat().st_mtime, reverse=True)[
        :LOG_FILES_SCANNED
    ]
    # A run's failure is mended once a later run of the same agent worked.
    mended = _worked_since()
    logs = [p for p in logs if p.stat().st_mtime >= mended.get(runlog.agent_of(p), 0.0)]
    hits: dict[str, list[str]] = {}
    for path, zed in [*((p, False) for p in logs), *((p, True) for p in zed_logs())]:
        for number, line in _log_lines(path, zed):
            matched = signatures.match(line)
            if matched:
                hits.setdefault(matched.id, []).append(f"{path}:{number}: {line[:200]}")
    if not hits:
        scanned = len(logs) + len(zed_logs())
        return [ok("logs", f"no known failure in {scanned} log file(s)")]
    findings = []
    by_id = {s.id: s for s in signatures.SIGNATURES}
    for signature_id, lines in hits.items():
        signature = by_id[signature_id]
        findings.append(
            Finding(
                "logs",
                "warning",
                f"{signature.diagnosis} ({len(lines)} line(s))",
                signature.fix,
                lines[-3:],
            )
        )
    return findings

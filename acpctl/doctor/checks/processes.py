"""The doctor's checks: live runs and the agents orphaned by runs that are gone (ended with
--fix)."""

from __future__ import annotations

from typing import Any

from acpctl import processes
from acpctl.doctor.findings import Finding, ok
from acpctl.runner.runs import live_runs, orphans


def check_processes(fix: bool, confirm: Any) -> list[Finding]:

    runs = live_runs()
    findings = [
        ok(
            "processes",
            f"{len(runs)} live acpctl run(s)"
            + (": " + ", ".join(f"{r['pid']} ({r['agent']})" for r in runs) if runs else ""),
        )
    ]
    lost = orphans()
    if not lost:
        return findings
    evidence = []
    for process in lost:
        with_name = process.name() if process.is_running() else "?"
        evidence.append(f"pid {process.pid}: {with_name}")
    if fix and confirm(f"end {len(lost)} orphaned agent process(es)?"):
        for process in lost:
            processes.end_tree(process.pid)
        findings.append(
            Finding(
                "processes",
                "ok",
                f"ended {len(lost)} orphaned agent process(es)",
                evidence=evidence,
            )
        )
    else:
        findings.append(
            Finding(
                "processes",
                "problem",
                f"{len(lost)} agent process(es) outlived the acpctl run that started them",
                "acpctl doctor --fix",
                evidence,
            )
        )
    return findings

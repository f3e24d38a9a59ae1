"""The doctor's checks: the history store: permissions, free space, the index, every session's
files."""

from __future__ import annotations

import os
import shutil

from acpctl import paths
from acpctl.doctor.findings import Finding, ok
from acpctl.store import verify
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionStore

LOW_DISK_BYTES = 1 << 30


def check_storage() -> list[Finding]:
    root = paths.sessions_dir()
    if not root.exists():
        return [ok("storage", f"{root} does not exist yet (created with the first session)")]
    findings = []
    mode = root.stat().st_mode & 0o777
    if mode != paths.PRIVATE_DIR_MODE:
        findings.append(
            Finding(
                "storage",
                "problem",
                f"{root} has mode {mode:o}: others can read your conversations",
                f"chmod 700 {root}",
            )
        )
    exposed = [
        f"{entry.name}/{problem}"
        for entry in sorted(root.iterdir())
        if entry.is_dir() and not entry.is_symlink()
        for problem, _, _ in verify.mode_problems(entry)
    ]
    if exposed:
        findings.append(
            Finding(
                "storage",
                "problem",
                f"{len(exposed)} file(s) or directories in {root} are not private",
                "acpctl sessions verify --repair",
                exposed[:5],
            )
        )
    if not os.access(root, os.W_OK):
        findings.append(
            Finding(
                "storage",
                "problem",
                f"{root} is not writable",
                f"fix its owner or mode (chown/chmod) {root}",
            )
        )
    free = shutil.disk_usage(root).free
    if free < LOW_DISK_BYTES:
        findings.append(
            Finding(
                "storage",
                "warning",
                f"only {free >> 20} MiB free for history",
                "free disk space, or `acpctl sessions prune --older-than 30d`",
            )
        )
    # The index is a cache that every listing brings up to date (missing, stale or
    # unreadable: rebuilt), so how far behind it is needs nobody: said, not warned of.
    behind = len(SessionIndex(SessionStore(root)).drift())
    caught_up = f"; the index takes in {behind} change(s) at the next listing" if behind else ""
    if not findings:
        findings.append(
            ok("storage", f"{root}: private, writable, {free >> 30} GiB free{caught_up}")
        )
    return findings

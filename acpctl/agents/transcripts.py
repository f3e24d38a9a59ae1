"""What an agent wrote in its own records about a session, for when it tells the editor
nothing: Claude Code (behind claude-agent-acp) retries a failing model API for minutes
without a word on ACP or stderr, but logs every failed attempt in its session transcript,
`<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<cwd>/<session id>.jsonl`, as a `system` record
with subtype `api_error` (seen with claude-agent-acp 0.23.1 and 0.101.0; tests/corpus)."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from pathlib import Path

TAIL_BYTES = 64 * 1024  # the last attempts are at the end; a transcript may be megabytes


def last_api_error(env: Mapping[str, str], session_id: str) -> str | None:
    """The agent's last recorded model API failure in this session, in a line, e.g.
    "401 invalid x-api-key (attempt 6 of 10, next in 19 s)"; None when it recorded none."""
    if not session_id or "/" in session_id or session_id.startswith("."):
        return None  # an id from the wire never becomes a path unchecked
    # Escaped: an id like "*" must name its own file, not every session's.
    for transcript in _claude_projects(env).glob(f"*/{glob.escape(session_id)}.jsonl"):
        error = _last_error(transcript)
        if error is not None:
            return error
    return None


def _claude_projects(env: Mapping[str, str]) -> Path:
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured) / "projects"
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".claude" / "projects"


def _last_error(transcript: Path) -> str | None:
    try:
        with transcript.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - TAIL_BYTES, 0))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for raw in reversed(lines):
        if b'"api_error"' not in raw:
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # the first line of the tail, or one being written
        if isinstance(record, dict) and record.get("subtype") == "api_error":
            return _describe(record)
    return None


def _describe(record: dict[str, object]) -> str:
    error = record.get("error")
    text = ""
    if isinstance(error, dict):
        text = str(error.get("formatted") or error.get("message") or "")
    text = " ".join(text.split()) or "the model API failed"
    attempt, most = record.get("retryAttempt"), record.get("maxRetries")
    wait = record.get("retryInMs")
    if isinstance(attempt, int) and isinstance(most, int):
        retry = f"attempt {attempt} of {most}"
        if isinstance(wait, (int, float)):
            retry += f", next in {wait / 1000:.0f} s"
        text += f" ({retry})"
    return text[:300]

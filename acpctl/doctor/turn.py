"""`acpctl doctor --prompt`: one tiny prompt through acpctl, timed, and when it fails, the
failure matched against the signatures with everything acpctl saw (the prompt's error, the
agent's own log, its stderr)."""

from __future__ import annotations

import asyncio
import os
import sys

from acpctl.agents import signatures, transcripts
from acpctl.agents.discovery import ResolvedAgent
from acpctl.doctor import probe
from acpctl.doctor.findings import Finding


def check_turn(agent: ResolvedAgent, timeout: float) -> list[Finding]:
    check = f"agent {agent.name}"
    argv = [sys.executable, "-m", "acpctl", "run", "--acp", "--agent", agent.name, "--no-history"]
    turn = asyncio.run(probe.probe_turn(argv, dict(os.environ), timeout))
    if turn.ended is not None and turn.error is None:
        first = (
            f"first chunk after {turn.first_chunk:.2f}s"
            if turn.first_chunk is not None
            else "no text"
        )
        status = "ok" if turn.stop_reason == "end_turn" else "warning"
        message = f"a prompt through acpctl: {first}, end of turn ({turn.stop_reason}) after "
        return [Finding(check, status, message + f"{turn.ended:.2f}s")]
    own_log = transcripts.last_api_error({**os.environ, **agent.env}, turn.session_id or "")
    evidence = [e for e in (turn.error, own_log) if e] + turn.stderr_tail[::-1]
    found = signatures.diagnose(evidence)
    what = turn.error or turn.gave_up or "the turn did not end"
    if turn.first_chunk is not None:
        what += f" (its first chunk came after {turn.first_chunk:.2f}s)"
    shown = [f"its own log says: {own_log}"] if own_log else []
    if found is not None:
        signature, line = found
        shown.append(f"{signature.id}: {signature.diagnosis}")
        if line not in (turn.error, own_log):
            shown.append(line[:200])
        fix = signature.fix
    else:
        shown += turn.stderr_tail[-5:]
        fix = f"`acpctl logs --agent {agent.name}` shows what it printed"
    return [Finding(check, "problem", f"a prompt through acpctl: {what}", fix, shown)]

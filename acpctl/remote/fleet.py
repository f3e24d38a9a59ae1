"""The linked hosts (host_links.py), asked at once, each within its own deadline: a host
that is slow or gone never delays the others' answers, and is said as unreachable since
when it first failed to answer (remembered in the state directory's links-state.json).

Over ssh, the question is the first line on the host's unix socket, through `acpctl serve
--bridge` there (host/control.py's methods that reach LOCAL). Over a URL, it is asked on a
WebSocket connection to the host, with its token, as the page asks it."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from acpctl import jsonrpc, paths
from acpctl.files import atomic_write, read_json_state
from acpctl.host_links import HostLink
from acpctl.remote.transport import LinkDown, LinkRefused, NoSuchHost

STATE_FILE = "links-state.json"


@dataclass(frozen=True)
class Answer:
    link: HostLink
    result: Any | None  # the host's result; None when it did not answer
    problem: str = ""  # why not
    unreachable_since: float | None = None  # time.time() of the first failure in a row


async def ask_all(links: list[HostLink], method: str, params: dict[str, Any]) -> list[Answer]:
    """`method` asked of every link at once, each within its own deadline; each answer, in
    the links' order."""
    asked = await asyncio.gather(*(_ask_within(link, method, params) for link in links))
    return _remembered(list(asked))


async def _ask_within(link: HostLink, method: str, params: dict[str, Any]) -> Answer:
    try:
        return Answer(link, await asyncio.wait_for(ask(link, method, params), link.deadline_s))
    except asyncio.TimeoutError:
        return Answer(link, None, f"no answer within {link.deadline_s:g} s")
    except (LinkDown, LinkRefused, NoSuchHost, OSError, ValueError) as exc:
        return Answer(link, None, str(exc) or type(exc).__name__)


async def ask(link: HostLink, method: str, params: dict[str, Any]) -> Any:
    """The result of `method` at the linked host, of its own (`own`: never what it sees
    through its own links, which are not transitive); raises what says why there is none."""
    params = {**params, "own": True}
    if link.ssh is not None:
        answer = await _ask_over_ssh(link, method, params)
    else:
        answer = await _ask_over_url(link, method, params)
    if "error" in answer:
        error = answer["error"]
        raise LinkRefused(str(error.get("message") if isinstance(error, dict) else error))
    return answer.get("result")


async def _ask_over_ssh(link: HostLink, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from acpctl.processes import signal_child
    from acpctl.remote.lines import ssh_argv

    process = await asyncio.create_subprocess_exec(
        *ssh_argv(link.remote, "--no-start"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # a terminal's Ctrl-C is the list's, not ssh's
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    try:
        process.stdin.write(jsonrpc.encode(jsonrpc.request(0, method, params)))
        line = await process.stdout.readline()
        if not line:
            said = (await process.stderr.read()).decode("utf-8", "replace").strip()
            raise LinkDown(f"ssh to {link.ssh}: {said.splitlines()[-1] if said else 'no answer'}")
        answer = json.loads(line)
    finally:
        import signal

        signal_child(process, signal.SIGTERM)
        await process.wait()
    if not isinstance(answer, dict):
        raise ValueError(f"{link.address} answered what is no JSON-RPC answer")
    return answer


async def _ask_over_url(link: HostLink, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from acpctl.remote.relay import make_dial, open_http

    remote = link.remote
    http = await open_http(remote)
    try:
        transport = await make_dial(remote, http)(None)
        try:
            await transport.send(json.dumps(jsonrpc.request("fleet", method, params)))
            while (text := await transport.receive()) is not None:
                message = json.loads(text)
                answered = isinstance(message, dict) and message.get("id") == "fleet"
                if answered and "method" not in message:
                    return message  # type: ignore[no-any-return]
            raise LinkDown(f"{link.address} closed the connection before answering")
        finally:
            await transport.close(leaving=True)
    finally:
        await http.close()


def _remembered(answers: list[Answer]) -> list[Answer]:
    """Each unanswered link's first failure in a row, kept across lists; a link that
    answers is forgotten there."""
    path = paths.state_dir() / STATE_FILE
    state = read_json_state(path)
    since: dict[str, float] = {}
    if isinstance(state, dict):
        since = {k: v for k, v in state.items() if isinstance(v, (int, float))}
    now = time.time()
    told = []
    for answer in answers:
        name = answer.link.name
        if answer.result is not None:
            since.pop(name, None)
            told.append(answer)
            continue
        since.setdefault(name, now)
        told.append(Answer(answer.link, None, answer.problem, since[name]))
    if since or path.exists():
        paths.ensure_private_dir(path.parent)
        atomic_write(path, json.dumps(since).encode(), sync=False)
    return told


def unreachable_said(answer: Answer) -> str:
    """`build: unreachable since 14:02 (why)`, or `build: stopped (acpctl host stop
    there) at 14:02`."""
    stamp = time.strftime("%H:%M", time.localtime(answer.unreachable_since or time.time()))
    if answer.problem == "stopped":
        return f"{answer.link.name}: stopped at {stamp} (its host said it stops)"
    return f"{answer.link.name}: unreachable since {stamp} ({answer.problem})"

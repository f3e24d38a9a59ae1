"""Child processes: how acpctl starts one, tells whether one lives, and ends a whole tree.

Every agent, probe and terminal command acpctl starts gets a session (process group) of its
own, so the whole tree can be signalled even after its members are reparented. Agents and
probes also carry ACPCTL_RUN_PID, so `acpctl doctor` can tell the orphans of a run that is
gone. psutil is imported where it is used: most commands never need it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from acpctl import paths

if TYPE_CHECKING:
    import asyncio

    import psutil

RUN_PID_VARIABLE = "ACPCTL_RUN_PID"
# The state directory of the acpctl that started it: `doctor` looks after its own orphans,
# not those of another acpctl home (another user setting, a test running beside it).
RUN_STATE_VARIABLE = "ACPCTL_RUN_STATE"
TERMINATE_GRACE_S = 2.0


class WholeEnvironment(dict[str, str]):
    """A child's whole environment, not additions to acpctl's own: a sandboxed agent's,
    built by allow-list (sandbox.launch), which nothing of acpctl's may widen."""


def environment(env: dict[str, str]) -> dict[str, str]:
    """What a child started with `env` gets: acpctl's own environment with `env` over it,
    or `env` alone when it is whole; and acpctl's marks."""
    inherited = {} if isinstance(env, WholeEnvironment) else os.environ
    return {
        **inherited,
        **env,
        RUN_PID_VARIABLE: str(os.getpid()),
        RUN_STATE_VARIABLE: paths.state_dir_name(),
    }


def spawn(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start an agent with pipes on all three streams, in a session of its own, marked as
    this process's (raises OSError)."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(env),
        cwd=cwd,
        start_new_session=True,
        bufsize=0,
    )


def signal_child(process: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> None:
    """Signal an asyncio child by its pid. asyncio's terminate() and kill() poll the child
    first, which reaps one that has just exited under the event loop's child watcher: it
    then logs "Unknown child process pid N, will report returncode 255" where the user sees
    it, and the exit status is lost. An exited child stays a zombie until the watcher reaps
    it, so its pid is no other process's meanwhile."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads, at once (a hung probe, a killed terminal)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def end_tree(pid: int, grace: float = TERMINATE_GRACE_S, reap_root: bool = True) -> None:
    """SIGTERM a process, its descendants and its session; SIGKILL what is left after
    `grace`. With reap_root=False the root process is signalled but not waited for: an
    asyncio child, which the event loop must reap itself."""
    import psutil

    tree = [p for p in process_tree(pid) if is_alive(p)]
    signal_tree(pid, tree, signal.SIGTERM)
    waited = [p for p in tree if reap_root or p.pid != pid]
    _, alive = psutil.wait_procs(waited, timeout=grace)
    if alive or not reap_root:
        signal_tree(pid, [p for p in tree if is_alive(p)], signal.SIGKILL)
        psutil.wait_procs([p for p in alive if p.pid != pid], timeout=grace)


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants (empty when it is gone)."""
    import psutil

    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.Error:
        return []


def is_alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an exited child its parent has not reaped)."""
    import psutil

    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return is_alive(psutil.Process(pid))
    except psutil.Error:
        return False


def signal_tree(group: int, processes: list[psutil.Process], sig: signal.Signals) -> None:
    """Signal the process group `group` and each of `processes` (members that left it)."""
    import psutil

    if sys.platform != "win32":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.send_signal(sig)


def is_stopped(pid: int | None) -> bool:
    """Whether the agent's process is stopped (SIGSTOP, a debugger): in a sandbox, the first
    process of the tree that is not the engine."""
    if pid is None:
        return False
    import psutil

    try:
        process = psutil.Process(pid)
        while process.name() == "bwrap" and process.children():
            process = process.children()[0]
        return bool(process.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP))
    except psutil.Error:
        return False


def tree_rss(pid: int | None) -> int | None:
    """The resident memory of the agent's process tree, in bytes."""
    if pid is None:
        return None
    import psutil

    try:
        root = psutil.Process(pid)
        total: int = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
        return total
    except psutil.Error:
        return None

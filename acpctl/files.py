"""Replacing a file in one step, so a crash leaves the old file or the new one, never half;
and reading a state file whatever it has become."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from acpctl.paths import PRIVATE_FILE_MODE


def atomic_write(
    path: Path,
    data: bytes,
    mode: int = PRIVATE_FILE_MODE,
    sync: bool = True,
) -> None:
    """Write a temp file beside `path`, fsync it (unless sync=False), give it `mode`, rename
    it over `path`, then fsync the directory so the rename itself is durable."""
    import tempfile  # with random and hashlib: for writers only

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


# State files are acpctl's own (the registry copy, install manifests); anything larger than
# this is not one of them.
STATE_FILE_LIMIT = 32 * 1024 * 1024


def read_regular(path: Path | str, limit: int = STATE_FILE_LIMIT) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes; None for anything else: missing,
    unreadable, a FIFO or device (which could block or never end), or too large. The file
    is opened without blocking and checked before a byte is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def read_json_state(path: Path | str, limit: int = STATE_FILE_LIMIT) -> Any:
    """A JSON state file's value; None when it is not a regular file within `limit`, not
    JSON, or nested too deeply to read: such a file is passed over, never fatal."""
    data = read_regular(path, limit)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None

"""Replacing a file in one step, so a crash leaves the old file or the new one, never half."""

from __future__ import annotations

import os
from pathlib import Path

from acpctl.paths import PRIVATE_FILE_MODE


def atomic_write(
    path: Path,
    data: bytes,
    mode: int = PRIVATE_FILE_MODE,
    sync: bool = True,
) -> None:
    """Write a temp file beside `path`, fsync it (unless sync=False), give it `mode`, rename
    it over `path`, then fsync the directory so the rename itself is durable."""
    # Imported here: tempfile (with random and hashlib) costs `run --acp` 5 ms before it
    # can answer initialize, and this module is imported on the way.
    import tempfile

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

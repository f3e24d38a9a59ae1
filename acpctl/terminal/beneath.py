"""Opening a file the agent named, after the check that it lies in the session's roots,
without a race: the path is walked from `/` one directory at a time, each opened from the
last one's handle and none through a symbolic link (O_NOFOLLOW). A path that was checked
and then changed (a directory swapped for a link to the outside, renameat2's exchange) fails
with ELOOP or ENOTDIR instead of being followed out of the roots. Python 3.11 has no
openat2(RESOLVE_BENEATH), and this works on every kernel.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A FIFO opened to read would block until a writer comes; opened without waiting, and then
# refused as not a regular file.
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class NotRegular(OSError):
    """The path is not a regular file (a FIFO, a device, a directory): never read or
    written."""


def read_bytes(path: Path) -> bytes:
    """The bytes of the regular file at the resolved `path`, opened through no link."""
    fd = _open(path, os.O_RDONLY, make_parents=False)
    with os.fdopen(fd, "rb") as file:
        _regular(file.fileno(), path)
        return file.read()


def write_bytes(path: Path, data: bytes) -> None:
    """`data` as the whole of the regular file at the resolved `path` (made, with the
    directories it needs, when missing), opened through no link."""
    fd = _open(path, os.O_WRONLY | os.O_CREAT, make_parents=True)
    with os.fdopen(fd, "wb") as file:
        _regular(file.fileno(), path)
        os.ftruncate(file.fileno(), 0)  # only once it is known to be a regular file
        file.write(data)


def _regular(fd: int, path: Path) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise NotRegular(f"{path} is not a regular file")


def _open(path: Path, flags: int, make_parents: bool) -> int:
    if not path.is_absolute() or path.name in ("", ".", "..") or ".." in path.parts:
        raise NotRegular(f"{path} is not a file's resolved path")
    directory = os.open("/", _DIRECTORY)
    try:
        for part in path.parts[1:-1]:
            try:
                inner = os.open(part, _DIRECTORY, dir_fd=directory)
            except NotADirectoryError:  # what O_NOFOLLOW says of a link to a directory
                met = os.stat(part, dir_fd=directory, follow_symlinks=False)
                if stat.S_ISLNK(met.st_mode):
                    raise OSError(errno.ELOOP, "a symbolic link on the way", str(path)) from None
                raise
            except FileNotFoundError:
                if not make_parents:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=directory)
                inner = os.open(part, _DIRECTORY, dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(path.name, flags | _FILE, 0o666, dir_fd=directory)
    finally:
        os.close(directory)

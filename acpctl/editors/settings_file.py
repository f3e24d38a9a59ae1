"""One safe edit of a settings file: lock, parse, edit, verify, back up, write atomically.

The same steps for every client, so none of them can forget one:
- refuse a file that does not parse, or whose container is not an object (exit 2);
- change only the bytes of the members acpctl owns (jsonc.Document);
- verify: the file parsed independently before and after must differ by exactly the change;
- back up to `<file>.acpctl-<UTC time>.bak` (never Zed's own settings_backup.json), keep 5;
- write a temp file in the same directory, fsync, rename; keep the mode; write through a
  symlink to its target so the link stays a link;
- hold a lock on the file from read to rename, so concurrent installs serialise; the lock
  file lives in acpctl's state directory, never beside the user's file.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acpctl import paths
from acpctl.editors.jsonc import Document, JsoncError
from acpctl.errors import AcpctlError, UsageError
from acpctl.files import atomic_write

BOM = "\ufeff"
KEEP_BACKUPS = 5
_UNREADABLE = object()


@dataclass(frozen=True)
class Change:
    """Set (value is not None) or remove (value is None) container[key]."""

    container: tuple[str, ...]
    key: str
    value: Any = None


@dataclass
class EditResult:
    path: Path
    before: Any  # the file's value before the edit (independently parsed)
    changed: bool
    diff: str
    backup: Path | None = None
    created: bool = False


def _refuse(path: Path, error: JsoncError, expected: str = "") -> UsageError:
    detail = f"{path}:{error.line}:{error.column}: {error.reason}"
    return UsageError(
        f"{detail}{'; expected ' + expected if expected else ''}",
        hint="the file was not changed; fix it (or pass --settings) and retry",
    )


# The independent parser: comments and trailing commas stripped by two regular
# expressions of its own (runs of code and whole strings matched in C, so it is linear and
# fast), then the stdlib's JSON parser. It shares nothing with the editor's tokenizer.
# Strings are matched "unrolled" (no nested quantifier), so that an unterminated one costs
# one scan, not an exponential backtrack.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_COMMENTS = re.compile(r'((?:[^"/]+|' + _STRING + r"|/(?![/*]))+)|//[^\n]*|/\*.*?\*/", re.S)
# A comma right after `{` or `[` is no trailing comma: it stays, for json to refuse.
_TRAILING_COMMAS = re.compile(r'((?:[^",{\[]+|' + _STRING + r")+)|([{\[]\s*,?)|,(\s*[}\]])", re.S)


def independent_parse(text: str) -> Any:
    """Parse JSONC with a parser other than the one that made the edit (None: the text holds
    no value). Raises ValueError for what it cannot parse."""
    code = _COMMENTS.sub(lambda match: match.group(1) or " ", text)
    if not code.strip():
        return None
    plain = _TRAILING_COMMAS.sub(
        lambda match: match.group(1) or match.group(2) or match.group(3), code
    )
    return json.loads(plain, parse_constant=_not_json)


def _not_json(name: str) -> Any:
    # Python's json reads NaN and Infinity; JSON (and the editors) do not.
    raise ValueError(f"{name} is not JSON")


def parsed(path: Path, text: str) -> Any:
    """The file's value by the independent parser; UsageError when it cannot read it (the
    two parsers disagree: nothing is written)."""
    try:
        return independent_parse(text)
    except (ValueError, RecursionError) as exc:
        try:
            Document(text).check()  # where is it broken, in the editor's terms?
        except JsoncError as error:
            raise _refuse(path, error) from exc
        raise UsageError(
            f"{path}: cannot be verified: {str(exc).splitlines()[0][:200]}",
            hint="the file was not changed; simplify the part named, or edit it by hand",
        ) from exc


def lookup(value: Any, keys: Sequence[str]) -> Any:
    """The value at `keys` in parsed JSON, None when any key is missing."""
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _apply(value: dict[str, Any], change: Change) -> dict[str, Any]:
    """`value` with the change made: new dicts along the change's path, the rest shared
    (a deep copy of a large file's value would cost more than parsing it)."""
    top = dict(value)
    node = top
    for key in change.container:
        child = node.get(key)
        node[key] = dict(child) if isinstance(child, dict) else {}
        node = node[key]
    if change.value is None:
        node.pop(change.key, None)
    else:
        node[change.key] = change.value
    return top


def check_regular(path: Path) -> bool:
    """Whether `path` exists; anything but a regular file (or a symlink to one) is refused
    before it is opened: a FIFO would block the read, a device would be replaced."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path} is a directory, not a settings file")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path} is not a regular file", hint="nothing was changed")
    return True


def read_document(path: Path) -> tuple[str, Document]:
    """(text without BOM, document); a file that does not parse raises UsageError."""
    raw = path.read_bytes() if check_regular(path) else b""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not UTF-8 (byte {exc.start})", hint="the file was not changed"
        ) from exc
    if text.startswith(BOM):
        text = text[1:]
    try:
        return text, Document(text)
    except JsoncError as exc:
        raise _refuse(path, exc) from exc


def container_node_check(path: Path, document: Document, container: Sequence[str]) -> None:
    try:
        node = document.find(container)
    except JsoncError as exc:
        raise _refuse(path, exc, "an object") from exc
    if node is not None and node.kind != "object":
        error = JsoncError(f"{'.'.join(container)} must be an object", document.text, node.start)
        raise _refuse(path, error, "an object")


def lock_path(target: Path) -> Path:
    """The lock of a settings file: in acpctl's state directory, named after the file's
    real path, so that every acpctl editing that file takes the same one."""
    import hashlib

    digest = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
    locks = paths.ensure_private_dir(paths.locks_dir())
    return locks / f"{target.name}-{digest}.lock"


def edit(path: Path, changes: Sequence[Change], dry_run: bool = False) -> EditResult:
    """Apply `changes` to the file at `path` (created when missing)."""
    from filelock import FileLock

    target = Path(os.path.realpath(path))  # a dotfile manager's symlink is written through
    if check_regular(target) and not os.stat(target).st_mode & stat.S_IWUSR:
        raise UsageError(
            f"{path} is read-only",
            hint="it may be managed by another tool (home-manager, a dotfile "
            "repo); change it there, or make it writable",
        )
    # Refuse a file acpctl cannot use before leaving anything beside it (not even the lock);
    # it is read again under the lock.
    first_text, document = read_document(target)
    before = parsed(path, first_text)
    for container in {change.container for change in changes}:
        container_node_check(path, document, container)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_path(target)), timeout=30):
        existed = target.exists()
        original_bytes = target.read_bytes() if existed else b""
        text = original_bytes.decode("utf-8", "replace").removeprefix(BOM)
        if text != first_text:  # changed meanwhile: parse what is there now
            text, document = read_document(target)
            before = parsed(path, text)
        has_bom = original_bytes.startswith(BOM.encode())
        # What the file must hold afterwards, change by change: also tells which changes
        # are already there (a second identical install writes nothing).
        expected: Any = before if before is not None else {}
        new_text = text
        for change in changes:
            if new_text != document.text:  # each change edits the text the last one made
                document = Document(new_text)
            container_node_check(path, document, change.container)
            full = (*change.container, change.key)
            if change.value is not None and lookup(expected, full) == change.value:
                continue
            expected = _apply(expected, change)
            new_text = (
                document.remove(full) if change.value is None else document.set(full, change.value)
            )
        if new_text == text:
            return EditResult(path, before, changed=False, diff="")
        try:
            after = independent_parse(new_text)
        except (ValueError, RecursionError):
            after = _UNREADABLE
        if after != expected:
            raise AcpctlError(
                f"refusing to write {path}: the edited file would not equal the "
                "old one plus the intended change (please report this)"
            )
        if dry_run:  # only a dry run shows the diff: it costs as much as a parse
            diff = "".join(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    new_text.splitlines(keepends=True),
                    fromfile=str(path),
                    tofile=f"{path} (acpctl)",
                )
            )
            return EditResult(path, before, changed=True, diff=diff, created=not existed)
        backup = _backup(target, original_bytes) if existed else None
        payload = (BOM if has_bom else "") + new_text
        mode = stat.S_IMODE(target.stat().st_mode) if existed else 0o644
        atomic_write(target, payload.encode("utf-8"), mode)
        return EditResult(path, before, changed=True, diff="", backup=backup, created=not existed)


def _backup(target: Path, original: bytes) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time() % 1:.6f}"[1:] + "Z"
    backup = target.with_name(f"{target.name}.acpctl-{stamp}.bak")
    fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(target.stat().st_mode))
    with os.fdopen(fd, "wb") as handle:
        handle.write(original)
    # Names matched exactly: the file's own name may hold glob characters ("set[1].json"),
    # and another file's backups must never count as this one's.
    own = re.compile(re.escape(target.name) + r"\.acpctl-\d{8}T\d{6}\.\d{6}Z\.bak")
    backups = sorted(p for p in target.parent.iterdir() if own.fullmatch(p.name))
    for old in backups[:-KEEP_BACKUPS]:
        old.unlink(missing_ok=True)
    return backup

"""`acpctl agents install/upgrade/uninstall`: get an agent the way its registry entry says.

Every version goes into its own directory, `<data>/agents/<id>/<version>/`: an npm package
installed there with `npm install --prefix`, a PyPI package in a virtualenv there (uv when
present, else venv and pip), or this platform's archive downloaded, checked against its
sha256 and extracted there (no member may land outside it). Only then does the manifest
(installed.py) switch to it; a failure removes the directory, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import urllib.error
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from acpctl import paths
from acpctl.agents import installed
from acpctl.agents.catalog import CatalogEntry, Distribution
from acpctl.agents.discovery import which
from acpctl.agents.limits import DEFAULT_LIMITS, Limits
from acpctl.errors import AcpctlError, UsageError

INSTALL_TIMEOUT_S = 900.0
TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar")
_VERSION_SAFE = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")  # fullmatch: no trailing newline

Echo = Callable[[str], None]
MAX_ARCHIVE_BYTES = 4 << 30  # a download larger than this is not an agent's release


class Plan(NamedTuple):
    """What an install would do: which distribution, which version, from where."""

    entry: CatalogEntry
    distribution: Distribution
    version: str
    source: str  # the package spec or the archive URL, as shown to the user

    def describe(self) -> str:
        how = {"npx": "npm package", "uvx": "PyPI package", "binary": "archive"}
        where = installed.agent_dir(self.entry.id) / self.version
        return (
            f"{self.entry.name} {self.version} ({how[self.distribution.kind]} {self.source}) "
            f"into {where}"
        )


def package_name(spec: str) -> str:
    """`@scope/name@1.2.3` -> `@scope/name`; `name==1.0` or `name@1.0` -> `name`."""
    if spec.startswith("@"):
        scope, _, rest = spec.partition("/")
        return f"{scope}/{rest.split('@', 1)[0]}"
    return re.split(r"[@=<>!~\[; ]", spec, maxsplit=1)[0]


def plan(entry: CatalogEntry, version: str | None = None, via: str | None = None) -> Plan:
    """Choose the distribution (a binary for this platform first: it needs no runtime) and
    the version; UsageError when the registry offers neither."""
    if not entry.distributions:
        raise UsageError(f"{entry.name} cannot be installed by acpctl: {entry.install_hint}")
    if via and via not in entry.distributions:
        offered = ", ".join(entry.distributions)
        raise UsageError(f"{entry.name} has no {via} distribution here (it has: {offered})")
    # the catalog keeps an entry's distributions in the order of preference
    distribution = entry.distributions[via] if via else next(iter(entry.distributions.values()))
    target = version or entry.version
    if target is None or not _VERSION_SAFE.fullmatch(target):
        raise UsageError(f"{target!r} is not a version")
    if distribution.kind == "binary":
        if target != entry.version:
            raise UsageError(
                f"the registry has archives of {entry.name} {entry.version} only, not {target}",
                hint="acpctl agents update fetches the registry's newest versions",
            )
        return Plan(entry, distribution, target, str(distribution.archive))
    assert distribution.package is not None
    name = package_name(distribution.package)
    spec = f"{name}@{target}" if distribution.kind == "npx" else f"{name}=={target}"
    return Plan(entry, distribution, target, spec)


def install(
    chosen: Plan, echo: Echo, progress: bool = False, limits: Limits = DEFAULT_LIMITS
) -> installed.Installed:
    """Install into the version's directory, then switch the manifest to it."""
    entry, distribution = chosen.entry, chosen.distribution
    root = paths.ensure_private_dir(installed.agent_dir(entry.id))
    target = root / chosen.version
    current = installed.read(entry.id)
    if current is not None and current.directory == target:
        return current
    if target.exists():  # what an interrupted install left: never referenced
        shutil.rmtree(target)
    target.mkdir(mode=paths.PRIVATE_DIR_MODE)
    try:
        if distribution.kind == "npx":
            command = _install_npm(chosen.source, target, entry, echo, distribution.cmd)
        elif distribution.kind == "uvx":
            command = _install_pypi(chosen.source, target, entry, echo, distribution.cmd)
        else:
            command = _install_archive(distribution, target, progress, limits)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    result = installed.Installed(
        id=entry.id,
        version=chosen.version,
        distribution=distribution.kind,
        directory=target,
        command=[str(command), *distribution.args],
        env=dict(distribution.env),
    )
    installed.write(result)
    return result


def prune(agent_id: str, in_use: Iterable[str] = ()) -> list[Path]:
    """Remove the versions the manifest no longer names, except those a live run's
    command line points into; the directories removed."""
    current = installed.read(agent_id)
    busy = [Path(part) for part in in_use]
    removed = []
    with contextlib.suppress(OSError):
        for directory in installed.agent_dir(agent_id).iterdir():
            if not directory.is_dir() or (current and directory == current.directory):
                continue
            if any(directory == p or directory in p.parents for p in busy):
                continue
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def uninstall(agent_id: str) -> Path:
    """Forget the manifest first (the agent stops resolving), then remove the files."""
    directory = installed.agent_dir(agent_id)
    with contextlib.suppress(FileNotFoundError):
        (directory / installed.MANIFEST).unlink()
    shutil.rmtree(directory, ignore_errors=True)
    return directory


# -- npm and PyPI -------------------------------------------------------------------------


def _run(argv: list[str], what: str) -> None:
    """A package manager's run; its output only when it fails (the last lines)."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise AcpctlError(f"{what} took over {INSTALL_TIMEOUT_S:g}s; gave up") from None
    except OSError as exc:
        raise AcpctlError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-6:]
        raise AcpctlError(
            f"{what} failed (exit {done.returncode}):\n  " + "\n  ".join(tail or ["(no output)"])
        )


def _install_npm(
    spec: str, target: Path, entry: CatalogEntry, echo: Echo, cmd: str | None = None
) -> Path:
    npm = which("npm")
    if npm is None:
        raise AcpctlError("npm is not installed")
    echo(f"npm install {spec}")
    argv = [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund"]
    _run([*argv, "--loglevel=error", spec], f"npm install {spec}")
    modules = target / "node_modules"
    executable = modules / ".bin" / bin_name(modules / package_name(spec), entry, cmd)
    if not executable.exists():
        raise AcpctlError(f"npm installed {spec} without its executable {executable}")
    return executable


def bin_name(package: Path, entry: CatalogEntry, cmd: str | None = None) -> str:
    """The executable an npm package gives: the registry's `cmd` when it names one (which
    must be a bin of the package), else its only bin, else the one acpctl knows, else the
    one named as the package."""
    import json

    try:
        data = json.loads((package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AcpctlError(f"npm installed no readable package.json in {package}: {exc}") from None
    bins = data.get("bin")
    if isinstance(bins, str):
        bins = {str(data.get("name", package.name)).split("/")[-1]: bins}
    if not isinstance(bins, dict) or not bins:
        raise AcpctlError(f"{data.get('name')} has no executable (no bin in its package.json)")
    if cmd is not None:
        if cmd not in bins:
            raise AcpctlError(
                f"{data.get('name')} has no executable {cmd!r} (its bins: {', '.join(bins)})"
            )
        return cmd
    preferred = [b for b in entry.binaries if b in bins] + [package.name] + list(bins)
    return str(next(b for b in preferred if b in bins))


def _install_pypi(
    spec: str, target: Path, entry: CatalogEntry, echo: Echo, cmd: str | None = None
) -> Path:
    venv = target / "venv"
    python = venv / ("Scripts" if sys.platform == "win32" else "bin") / "python"
    uv = which("uv")
    if uv:
        echo(f"uv pip install {spec}")
        _run([uv, "venv", "--quiet", str(venv)], "uv venv")
        _run(
            [uv, "pip", "install", "--quiet", "--python", str(python), spec],
            f"uv pip install {spec}",
        )
    else:
        echo(f"pip install {spec} (uv not found: using venv and pip)")
        _run([sys.executable, "-m", "venv", str(venv)], "python -m venv")
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run([*pip, spec], f"pip install {spec}")
    # uvx runs the command named as the package, or the registry's `cmd`; acpctl's overlay
    # may know better.
    names = [cmd] if cmd else [package_name(spec), *entry.binaries]
    for name in names:
        executable = python.parent / name
        if executable.is_file():
            return executable
    raise AcpctlError(f"{spec} installed no command named {names[0]}")


# -- archives -----------------------------------------------------------------------------


def _install_archive(
    distribution: Distribution, target: Path, progress: bool, limits: Limits
) -> Path:
    url, cmd = str(distribution.archive), str(distribution.cmd)
    download = target / ".download"
    _download(url, download, distribution.sha256, progress, limits)
    name = PurePosixPath(url.split("?", 1)[0]).name.lower()
    if name.endswith(".zip"):
        extract_zip(download, target, limits)
    elif name.endswith(TAR_SUFFIXES):
        extract_tar(download, target, limits)
    else:  # a raw binary: saved under the name its cmd gives
        download.rename(target / _inside(target, cmd).name)
    download.unlink(missing_ok=True)
    executable = _inside(target, cmd)
    if not executable.is_file():
        raise AcpctlError(f"the archive from {url} has no {cmd}")
    if not _within(target, os.path.realpath(executable)):
        raise AcpctlError(f"{cmd} in the archive from {url} links outside it; refused")
    mode = executable.stat().st_mode
    executable.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return executable


def _inside(root: Path, member: str) -> Path:
    """`member` (a relative path inside an archive) under `root`; AcpctlError when it would
    land outside: absolute, `..`, a drive, or through a link an earlier member made."""
    cleaned = member.replace("\\", "/")
    parts = PurePosixPath(cleaned).parts
    if cleaned.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
        raise AcpctlError(f"archive member {member!r} would land outside {root}; refused")
    path = root.joinpath(*[p for p in parts if p != "."])
    if not _within(root, os.path.realpath(path.parent)):
        raise AcpctlError(f"archive member {member!r} would land outside {root}; refused")
    return path


def _within(root: Path, path: str) -> bool:
    real_root = os.path.realpath(root)
    return os.path.commonpath([path, real_root]) == real_root


def _check_link_text(member: str, link: str) -> None:
    if link.replace("\\", "/").startswith("/"):
        raise AcpctlError(f"archive member {member!r} links to an absolute path; refused")


def _make_links(root: Path, links: list[tuple[str, str]]) -> None:
    """The archive's symbolic links, (member, target), made after every file and directory
    is written, so that no member was written through one; then each is resolved as the
    kernel resolves it (realpath, with every link of the archive in place: a `..` after a
    link climbs from where the link leads, not from its text) and must stay inside `root`.
    Checking each link as it is made is not enough: a later link can change what an
    earlier one resolves to."""
    made = []
    for member, target in links:
        _check_link_text(member, target)
        destination = _inside(root, member)
        if os.path.lexists(destination):
            raise AcpctlError(f"archive member {member!r} is a link over another member; refused")
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, destination)
        made.append((member, destination))
    for member, destination in made:
        if not _within(root, os.path.realpath(destination)):
            raise AcpctlError(f"archive member {member!r} links outside {root}; refused")


@contextlib.contextmanager
def _undone_on_refusal(root: Path) -> Iterator[None]:
    """An archive refused half-way leaves nothing of its own in `root`."""
    before = set(os.listdir(root))
    try:
        yield
    except AcpctlError:
        for name in set(os.listdir(root)) - before:
            path = root / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise


def extract_tar(archive: Path, root: Path, limits: Limits = DEFAULT_LIMITS) -> None:
    with _undone_on_refusal(root):
        _extract_tar(archive, root, _Budget(limits))


def extract_zip(archive: Path, root: Path, limits: Limits = DEFAULT_LIMITS) -> None:
    with _undone_on_refusal(root):
        _extract_zip(archive, root, _Budget(limits))


class _Budget:
    """What an archive has unpacked so far, against its limits."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.members = 0
        self.bytes = 0

    def take(self, member: str, size: int) -> None:
        self.members += 1
        self.bytes += max(size, 0)
        if self.members > self.limits.members:
            raise AcpctlError(
                f"the archive has more than {self.limits.members} members; refused "
                "(--max-members raises the limit)"
            )
        if self.bytes > self.limits.unpacked_bytes:
            raise AcpctlError(
                f"the archive unpacks to more than {self.limits.unpacked_bytes >> 20} MiB "
                f"(at {member!r}); refused (--max-unpacked raises the limit)"
            )


def _extract_tar(archive: Path, root: Path, budget: _Budget) -> None:
    """Files and directories first, member by member, checked; hard links must name a
    member; symbolic links last (`_make_links`). Devices and FIFOs are refused."""
    import tarfile

    links: list[tuple[str, str]] = []
    with tarfile.open(archive) as tar:
        for member in tar:
            budget.take(member.name, member.size)
            _inside(root, member.name)
            if member.issym():
                links.append((member.name, member.linkname))
                continue
            if member.islnk():  # a hard link names a path inside the archive
                _inside(root, member.linkname)
            elif not (member.isfile() or member.isdir()):
                raise AcpctlError(f"archive member {member.name!r} is a device or fifo; refused")
            try:
                if hasattr(tarfile, "data_filter"):  # 3.10.12+: Python checks again
                    tar.extract(member, root, filter="data")
                else:
                    tar.extract(member, root)
            except tarfile.TarError as exc:  # FilterError among them
                raise AcpctlError(f"archive member {member.name!r} refused: {exc}") from None
    _make_links(root, links)


def _extract_zip(archive: Path, root: Path, budget: _Budget) -> None:
    """As _extract_tar: files and directories first, symbolic links last."""
    import zipfile

    links: list[tuple[str, str]] = []
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            # file_size bounds what zipfile will unpack of a member, whatever it holds
            budget.take(info.filename, info.file_size)
            destination = _inside(root, info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                links.append((info.filename, zipped.read(info).decode("utf-8", "replace")))
            elif info.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
            else:
                destination.parent.mkdir(parents=True, exist_ok=True)
                # O_EXCL and no symlink followed: a member named twice is refused
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                try:
                    fd = os.open(destination, flags, 0o644)
                except FileExistsError:
                    raise AcpctlError(
                        f"archive member {info.filename!r} appears twice; refused"
                    ) from None
                with zipped.open(info) as source, os.fdopen(fd, "wb") as sink:
                    shutil.copyfileobj(source, sink)
                if mode & 0o111:  # zipfile drops the executable bits: keep them
                    destination.chmod(0o755)
    _make_links(root, links)


def _download(
    url: str, destination: Path, sha256: str | None, progress: bool, limits: Limits
) -> None:

    from acpctl.agents import download

    digest = hashlib.sha256()
    try:
        response = download.open_url(url, limits.download_s, min_rate=limits.min_rate)
    except urllib.error.HTTPError as exc:
        raise AcpctlError(f"downloading {url}: {exc.code} {exc.reason}") from None
    with destination.open("wb") as sink:
        chunks = response.chunks(MAX_ARCHIVE_BYTES)
        for chunk in _shown(chunks, response.length, progress, PurePosixPath(url).name):
            digest.update(chunk)
            sink.write(chunk)
    if sha256 and digest.hexdigest().lower() != sha256.lower():
        raise AcpctlError(
            f"{url} does not match the registry's sha256 (expected {sha256.lower()}, "
            f"got {digest.hexdigest()}); refused, nothing installed"
        )


def _shown(
    chunks: Iterator[bytes], total: int | None, progress: bool, label: str
) -> Iterator[bytes]:
    """The chunks, with a progress bar on stderr when `progress`."""
    if not progress:
        yield from chunks
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    columns: list[Any] = [label, BarColumn(), DownloadColumn(), TransferSpeedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("download", total=total)
        for chunk in chunks:
            bar.advance(task, len(chunk))
            yield chunk

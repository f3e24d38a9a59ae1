"""The official ACP agent registry: the copy acpctl reads, and `acpctl agents update`.

The registry is one JSON document (`{"version", "agents": [agent.json...]}`). acpctl reads
the copy `agents update` last fetched into its data directory, else the snapshot shipped in
the package. A fetched document replaces the copy only after it parses and validates
against the registry's schema (shipped beside the snapshot): a failed update leaves the
copy as it was.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from acpctl import paths
from acpctl.errors import AcpctlError, UsageError
from acpctl.files import atomic_write, read_json_state

LIVE_URL = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"
FETCH_TIMEOUT_S = 15.0
AGENT_ID = re.compile(r"[a-z][a-z0-9-]*")  # the schema's, matched whole
# A release version: digits and dots, then a pre-release or build tag of safe characters.
VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]*)?")
MAX_DOCUMENT_BYTES = 16 << 20  # the live index is ~50 KB; anything this big is not it
SNAPSHOT = Path(__file__).parent / "registry.json"
SCHEMA_DIR = Path(__file__).parent / "registry_schema"


def cached_document() -> Path:
    return paths.registry_dir() / "registry.json"


def _source_file() -> Path:
    """Where the cached copy came from: URL, ETag, Last-Modified, when fetched."""
    return paths.registry_dir() / "source.json"


def load() -> tuple[dict[str, Any], str]:
    """The registry document and where it came from (the cached copy, else the snapshot).
    A damaged cache is passed over, not fatal: it was validated when written."""
    document = read_json_state(cached_document())
    if isinstance(document, dict) and isinstance(document.get("agents"), list):
        return document, str(cached_document())
    return json.loads(SNAPSHOT.read_bytes()), "the snapshot shipped with acpctl"


def source() -> dict[str, Any]:
    data = read_json_state(_source_file())
    return data if isinstance(data, dict) else {}


def validate(document: Any) -> None:
    """Raise AcpctlError naming the first place `document` breaks the registry schema."""
    import jsonschema
    from referencing import Registry, Resource

    schemas = {
        name: json.loads((SCHEMA_DIR / name).read_bytes())
        for name in ("registry.schema.json", "agent.schema.json")
    }
    store = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in schemas.values()
    )
    validator = jsonschema.Draft7Validator(schemas["registry.schema.json"], registry=store)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the top level"
        raise AcpctlError(f"not a valid ACP registry document: at {where}: {error.message}")
    # What the schema leaves open and acpctl relies on: one entry per id, and versions
    # that are versions (the schema's pattern is not anchored at its end, and a version
    # names a directory).
    seen: set[str] = set()
    for agent in document["agents"]:
        if not AGENT_ID.fullmatch(agent["id"]):  # it names a directory
            raise AcpctlError(f"not a valid ACP registry document: agent id {agent['id']!r}")
        if agent["id"] in seen:
            raise AcpctlError(f"not a valid ACP registry document: agent {agent['id']!r} twice")
        seen.add(agent["id"])
        if not VERSION.fullmatch(agent["version"]):
            raise AcpctlError(
                f"not a valid ACP registry document: agent {agent['id']!r} has version "
                f"{agent['version']!r}"
            )


class UpdateResult(NamedTuple):
    changed: bool  # False: the server said 304, or the document is the same
    before: dict[str, Any]
    after: dict[str, Any]
    origin: str


def update(origin: str | None, timeout: float = FETCH_TIMEOUT_S) -> UpdateResult:
    """Fetch the registry from `origin` (a URL or a file; default the live index) into
    the cache. Conditional on the ETag / Last-Modified of the last fetch of that URL."""
    origin = origin or LIVE_URL
    before, _ = load()
    known = source()
    if "://" not in origin or origin.startswith("file://"):
        body = _read_file(origin.removeprefix("file://"))
        headers: dict[str, str] = {}
    else:
        fetched = _fetch(origin, known if known.get("url") == origin else {}, timeout)
        if fetched is None:  # 304: what we have is current
            _save_source({**known, "checked": time.time()})
            return UpdateResult(False, before, before, origin)
        body, headers = fetched
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise AcpctlError(f"{origin} is not JSON ({exc}); the registry copy is unchanged") from None
    except RecursionError:
        raise AcpctlError(
            f"{origin} is nested too deeply to be a registry; the registry copy is unchanged"
        ) from None
    try:
        validate(document)
    except AcpctlError as exc:
        raise AcpctlError(f"{origin}: {exc.message}; the registry copy is unchanged") from None
    paths.ensure_private_dir(paths.registry_dir())
    atomic_write(cached_document(), json.dumps(document, indent=1).encode())
    now = time.time()
    _save_source(
        {
            "url": origin,
            "etag": headers.get("etag"),
            "last_modified": headers.get("last-modified"),
            "fetched": now,
            "checked": now,
        }
    )
    return UpdateResult(document != before, before, document, origin)


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            body = file.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise UsageError(f"{path} is over {MAX_DOCUMENT_BYTES >> 20} MiB: not a registry")
    return body


def _fetch(url: str, known: dict[str, Any], timeout: float) -> tuple[bytes, dict[str, str]] | None:
    """The body and headers, or None for 304 Not Modified; within `timeout` seconds in
    all. Network trouble is one line."""
    import urllib.error

    from acpctl.agents import download

    conditions = {}
    if known.get("etag"):
        conditions["If-None-Match"] = known["etag"]
    if known.get("last_modified"):
        conditions["If-Modified-Since"] = known["last_modified"]
    try:
        response = download.open_url(url, timeout, conditions)
        body = response.read(MAX_DOCUMENT_BYTES)
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return None
        raise AcpctlError(
            f"{url} answered {exc.code} {exc.reason}; the registry copy is unchanged"
        ) from None
    except AcpctlError as exc:
        raise AcpctlError(
            f"{exc.message}; the registry copy is unchanged",
            hint="acpctl agents update --from FILE reads a registry document you downloaded",
        ) from None
    return body, response.headers


def _save_source(record: dict[str, Any]) -> None:
    paths.ensure_private_dir(paths.registry_dir())
    atomic_write(_source_file(), json.dumps(record, indent=1).encode())

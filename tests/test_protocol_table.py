"""Issue 14: acpctl's method table covers every method and update kind of the newest ACP
schema (npm @agentclientprotocol/sdk, pinned in tests/npm/package.json), and maps ids at
every place the schema puts one. Bumping the pin shows what a new schema leaves unhandled."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acpctl import protocol as acp
from tests.npm_agents import npm_package

pytestmark = pytest.mark.npm

SCHEMAS = ("schema.json", "schema.unstable.json")
ID_TYPES = {"SessionId": "session", "RequestId": "request"}


@pytest.fixture(scope="module")
def schemas() -> list[dict[str, Any]]:
    directory = npm_package("@agentclientprotocol/sdk") / "schema" / "v1"
    return [json.loads((directory / name).read_text()) for name in SCHEMAS]


def id_paths(defs: dict[str, Any], node: Any, path: str = "", seen: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    """(dotted path, "session"|"request") for every id the schema node can hold."""
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in ID_TYPES:
            yield path, ID_TYPES[name]
            return
        if name not in seen:
            yield from id_paths(defs, defs[name], path, seen | {name})
    for key, value in node.items():
        if key == "properties":
            for prop, sub in value.items():
                yield from id_paths(defs, sub, f"{path}.{prop}".lstrip("."), seen)
        elif key in ("anyOf", "oneOf", "allOf"):
            for sub in value:
                yield from id_paths(defs, sub, path, seen)
        elif key == "items":
            yield from id_paths(defs, value, f"{path}[]", seen)


def test_every_method_of_the_schema_is_in_the_table(schemas: list[dict[str, Any]]) -> None:
    methods = {
        node["x-method"]
        for schema in schemas
        for node in schema["$defs"].values()
        if "x-method" in node
    }
    assert len(methods) > 30
    missing = sorted(methods - set(acp.METHODS))
    assert not missing, f"methods the schema defines and acpctl's table does not: {missing}"


def test_every_update_kind_of_the_schema_is_in_the_table(schemas: list[dict[str, Any]]) -> None:
    kinds = {
        variant["properties"]["sessionUpdate"]["const"]
        for schema in schemas
        for variant in schema["$defs"]["SessionUpdate"]["oneOf"]
    }
    missing = sorted(kinds - set(acp.UPDATES))
    assert not missing, f"update kinds acpctl's table does not cover: {missing}"


def test_ids_are_mapped_wherever_the_schema_puts_them(schemas: list[dict[str, Any]]) -> None:
    """For each method, the session and request ids in its params and result are exactly
    the paths the table maps (the JSON-RPC envelope's own id aside)."""
    wrong = []
    for schema in schemas:
        defs = schema["$defs"]
        for name, node in defs.items():
            method = node.get("x-method")
            if method is None or method not in acp.METHODS:
                continue
            entry = acp.METHODS[method]
            found: dict[str, set[str]] = {"session": set(), "request": set()}
            for path, kind in id_paths(defs, node, seen=frozenset({name})):
                found[kind].add(path)
            if name.endswith("Response"):
                expected = {"session": set(entry.result_session_ids), "request": set()}
            else:
                expected = {"session": set(entry.session_ids), "request": set(entry.request_ids)}
            for kind in ("session", "request"):
                if not found[kind] <= expected[kind]:
                    wrong.append((method, name, kind, sorted(found[kind] - expected[kind])))
    assert not wrong, f"ids the table does not map: {wrong}"


def test_the_methods_the_table_keeps_beyond_the_schema_say_why(
    schemas: list[dict[str, Any]],
) -> None:
    """Issue 32, 10: session/set_model is in neither v1 schema of the pinned SDK; the table
    keeps it for the agents that still answer it, and says so. When a schema defines it
    again, this fails so that the reason is updated."""
    methods = {
        node["x-method"]
        for schema in schemas
        for node in schema["$defs"].values()
        if "x-method" in node
    }
    extra = sorted(
        name
        for name in set(acp.METHODS) - methods
        if not acp.is_extension(name) and name not in (acp.SESSION_ATTACH, acp.SESSION_DETACH)
    )
    assert extra == [acp.SESSION_SET_MODEL]
    assert "neither v1 schema" in acp.METHODS[acp.SESSION_SET_MODEL].why

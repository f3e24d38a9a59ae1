"""Issue 3: the JSONC editor, byte for byte, on real shapes and generated documents."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import json5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acpctl.editors.jsonc import Document, JsoncError, tokenize

GOLDEN = Path(__file__).parent / "golden"
ENTRY = {
    "type": "custom",
    "command": "/opt/acpctl/bin/acpctl",
    "args": ["run", "--acp", "--agent", "claude"],
    "env": {"A": "1"},
}


def comments(text: str) -> list[str]:
    return [text[t.start : t.end] for t in tokenize(text) if t.kind == "comment"]


def strip_bom(raw: bytes) -> str:
    text = raw.decode("utf-8")
    return text[1:] if text.startswith("\ufeff") else text


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.json")))
def test_golden_install_and_uninstall(name: str) -> None:
    original = strip_bom((GOLDEN / name).read_bytes())
    container = {"vscode_settings.json": "acp.agents", "acpx_config.json": "agents"}.get(
        name, "agent_servers"
    )
    edited = Document(original).set([container, "Claude (acpctl)"], ENTRY)
    before, after = json5.loads(original), json5.loads(edited)
    expected = {**before, container: {**before.get(container, {}), "Claude (acpctl)": ENTRY}}
    assert after == expected
    assert comments(edited) == comments(original)
    # Lines are only added; an existing line may at most gain the comma that now
    # separates it from the new member.
    diff = list(difflib.ndiff(original.splitlines(), edited.splitlines()))
    removed = [line[2:] for line in diff if line.startswith("- ")]
    added = [line[2:] for line in diff if line.startswith("+ ")]
    assert len(removed) <= 1
    for line in removed:
        assert any(a[:i] + a[i + 1 :] == line for a in added for i, c in enumerate(a) if c == ",")
    if ("\r\n" in original) and ("\r\n" in edited):
        assert "\n" not in edited.replace("\r\n", "")  # CRLF kept everywhere
    again = Document(edited).set([container, "Claude (acpctl)"], ENTRY)
    assert again == edited  # setting the same value again changes nothing
    back = Document(edited).remove([container, "Claude (acpctl)"])
    if container in before:
        assert back == original


def test_expected_bytes_for_zed_comments_file() -> None:
    original = (GOLDEN / "zed_agents_comments.json").read_text()
    edited = Document(original).set(
        ["agent_servers", "Demo (acpctl)"], {"type": "custom", "command": "/a", "args": ["x"]}
    )
    assert edited == original.replace(
        '"args": []}, // keep\n',
        '"args": []}, // keep\n    "Demo (acpctl)": {\n      "type": "custom",\n'
        '      "command": "/a",\n      "args": ["x"]\n    },\n',
    )


def test_tabs_and_crlf_are_followed() -> None:
    original = (GOLDEN / "tabs_crlf.json").read_bytes().decode()
    edited = Document(original).set(["agent_servers", "New"], {"command": "/a"})
    assert '\r\n\t\t"New": {\r\n\t\t\t"command": "/a"\r\n\t\t}\r\n\t}' in edited


def test_updates_an_entry_in_place() -> None:
    original = (
        '{\n  "agent_servers": {\n    "A": {"command": "/old"}, // note\n    "B": 1\n  }\n}\n'
    )
    edited = Document(original).set(["agent_servers", "A"], {"command": "/new"})
    assert edited == original.replace('{"command": "/old"}', '{\n      "command": "/new"\n    }')


def test_creates_parents_in_empty_and_comment_only_files() -> None:
    assert json5.loads(Document("").set(["agent_servers", "A"], {"x": 1})) == {
        "agent_servers": {"A": {"x": 1}}
    }
    only_comments = "// my settings\n/* more */\n"
    edited = Document(only_comments).set(["agent_servers", "A"], {"x": 1})
    assert edited.startswith(only_comments) and json5.loads(edited) == {
        "agent_servers": {"A": {"x": 1}}
    }
    inline = Document('{"a": 1}').set(["agent_servers", "A"], {"x": 1})
    assert json5.loads(inline) == {"a": 1, "agent_servers": {"A": {"x": 1}}}


@pytest.mark.parametrize(
    "original",
    [
        '{\n  "agent_servers": {}\n}\n',
        '{\n  "agent_servers": {"x": 1}\n}\n',
        '{\n  "agent_servers": {\n    "x": 1\n  }\n}\n',
        '{\n  "agent_servers": {\n    "x": 1,\n  },\n}\n',
        '{\n  "agent_servers": {\n    "x": 1 /* c */\n  }\n}\n',
        '{\n  "agent_servers": { "x": 1, "y": 2 }\n}\n',
        # found by the fuzzer: the object closes at another indent than its line's
        '{\n   "a": 1, "agent_servers": {// c\n}\n}\n',
    ],
)
def test_install_then_uninstall_returns_the_original(original: str) -> None:
    edited = Document(original).set(["agent_servers", "Mine (acpctl)"], ENTRY)
    assert json5.loads(edited)["agent_servers"]["Mine (acpctl)"] == ENTRY
    assert Document(edited).remove(["agent_servers", "Mine (acpctl)"]) == original


@pytest.mark.parametrize(
    "text,line,column",
    [
        ('{\n  "a": 1\n  "b": 2\n}', 3, 3),
        ('{\n  "a": [1, 2\n}', 3, 1),
        ('{"a": tru}', 1, 7),
        ('{"a": "unterminated}\n', 1, 7),
        ("/* open comment", 1, 1),
        ('{"a": 1} x', 1, 10),
    ],
)
def test_parse_errors_name_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(JsoncError) as failure:
        Document(text)
    assert (failure.value.line, failure.value.column) == (line, column)


def test_container_that_is_not_an_object_is_refused() -> None:
    document = Document('{\n  "agent_servers": [1, 2]\n}')
    with pytest.raises(JsoncError) as failure:
        document.set(["agent_servers", "A"], {})
    assert failure.value.line == 2 and "must be an object" in str(failure.value)


# -- generated documents ------------------------------------------------------------------

KEYS = st.text(st.sampled_from("abcxyz_- ./é"), min_size=1, max_size=8)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(st.characters(codec="utf-8"), max_size=10),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3)
    ),
    max_leaves=8,
)


class Styler:
    """Renders a value as JSONC with the given style, scattering unique comments."""

    def __init__(self, draw: Any, unit: str, newline: str, trailing: bool) -> None:
        self.draw, self.unit, self.newline, self.trailing = draw, unit, newline, trailing
        self.count = 0

    def comment(self, indent: str) -> str:
        if not self.draw(st.booleans()):
            return ""
        self.count += 1
        if self.draw(st.booleans()):
            return f"{indent}// note {self.count}{self.newline}"
        return f"{indent}/* block {self.count} */{self.newline}"

    def render(self, value: Any, indent: str) -> str:
        inner = indent + self.unit
        if isinstance(value, dict) and value:
            parts = []
            for index, (key, item) in enumerate(value.items()):
                last = index == len(value) - 1
                comma = "," if (not last or self.trailing) else ""
                tail = ""
                if self.draw(st.booleans()):
                    self.count += 1
                    tail = f" // tail {self.count}"
                name = json.dumps(key, ensure_ascii=False)
                parts.append(
                    f"{self.comment(inner)}{inner}{name}: {self.render(item, inner)}{comma}{tail}"
                )
            return "{" + self.newline + self.newline.join(parts) + self.newline + indent + "}"
        if isinstance(value, list) and value:
            items = [inner + self.render(item, inner) for item in value]
            end = "," if self.trailing else ""
            return (
                "["
                + self.newline
                + ("," + self.newline).join(items)
                + end
                + self.newline
                + indent
                + "]"
            )
        return json.dumps(value, ensure_ascii=False)  # raw UTF-8, as editors write it


@st.composite
def documents(draw: Any) -> tuple[str, dict[str, Any]]:
    value = draw(st.dictionaries(KEYS, VALUES, max_size=4))
    value.pop("agent_servers", None)
    servers = draw(st.dictionaries(KEYS, VALUES, min_size=1, max_size=3))
    servers.pop("Mine (acpctl)", None)
    if not servers:
        servers = {"other": 1}
    items = list(value.items())
    position = draw(st.integers(0, len(items)))
    items.insert(position, ("agent_servers", servers))
    value = dict(items)
    styler = Styler(
        draw,
        draw(st.sampled_from(["  ", "    ", "\t"])),
        draw(st.sampled_from(["\n", "\r\n"])),
        draw(st.booleans()),
    )
    header = styler.comment("")
    return header + styler.render(value, "") + styler.newline, value


# 60 a run in the fast tier; the JSONC fuzzer (e2e) puts 1,000 files a run through the edit.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_generated_documents_survive_install_and_uninstall(
    generated: tuple[str, dict[str, Any]],
) -> None:
    text, value = generated
    assert json5.loads(text) == value  # the generator makes valid JSONC
    edited = Document(text).set(["agent_servers", "Mine (acpctl)"], ENTRY)
    assert json5.loads(edited) == {
        **value,
        "agent_servers": {**value["agent_servers"], "Mine (acpctl)": ENTRY},
    }
    assert comments(edited) == comments(text)
    assert Document(edited).remove(["agent_servers", "Mine (acpctl)"]) == text


@pytest.mark.parametrize(
    "original",
    [
        '{"agent_servers": {/* keep\n   me */}}',
        '{"agent_servers": {/* keep\n   me */\n  // and me\n}}',
        '{\n  "agent_servers": { /* a\n     long one */ }\n}',
        '{"agent_servers": {/* c */\n}}',
        '{"agent_servers": {/* c */}}',
        '{"agent_servers": {// c\n  /* d */}}',
    ],
)
def test_comments_in_an_empty_object_install_and_uninstall_exactly(original: str) -> None:
    """A multi-line comment alone in an empty object: the entry goes after it (it went
    inside it, so the edit was refused as 'please report this'), and comes out exactly."""
    from acpctl.editors.jsonc import Document

    edited = Document(original).set(["agent_servers", "acpctl"], {"command": "acpctl"})
    assert json5.loads(edited)["agent_servers"]["acpctl"] == {"command": "acpctl"}
    assert Document(edited).remove(["agent_servers", "acpctl"]) == original


REFUSED = sorted((Path(__file__).parent / "golden" / "jsonc-uninstall").glob("*.json"))


@pytest.mark.parametrize("path", REFUSED, ids=[p.stem for p in REFUSED])
def test_an_entry_among_comments_in_odd_places_is_removed_and_nothing_else(path: Path) -> None:
    """Issue 41: nine settings files, as install left them, that uninstall refused (its
    check caught the edit: the line break before the entry went, and a // comment on the
    line before then swallowed the member after it)."""
    before = path.read_text()
    after = Document(before).remove(["agent_servers", "Demo (acpctl)"])
    wanted = json5.loads(before)
    del wanted["agent_servers"]["Demo (acpctl)"]
    assert json5.loads(after) == wanted
    # Only deletions: the entry's own text (and the comma that separated it), every
    # other byte as it was, every comment outside the entry kept.
    edits = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    assert {tag for tag, *_ in edits} <= {"equal", "delete"}, edits
    removed = "".join(before[i1:i2] for tag, i1, i2, _, _ in edits if tag == "delete")
    assert '"Demo (acpctl)"' in removed and '"mine"' not in removed


def test_a_line_comment_before_the_entry_keeps_its_line_break() -> None:
    """The line break that ends a // comment stays, or "y" would be commented out."""
    original = '{\n  "agent_servers": { // mine\n    "x": 1, "y": 2\n  }\n}\n'
    text = Document(original).remove(["agent_servers", "x"])
    assert json5.loads(text) == {"agent_servers": {"y": 2}}
    assert text == '{\n  "agent_servers": { // mine\n     "y": 2\n  }\n}\n'

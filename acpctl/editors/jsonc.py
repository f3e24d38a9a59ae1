"""Format-preserving edits of JSONC (JSON with comments and trailing commas).

tokenizer -> document (a light tree of offsets) -> text edits -> new text. The tree only
records where values, keys and commas are; an edit replaces, inserts or deletes a span, so
every byte outside the edited member stays as it was: comments, trailing commas,
indentation, key order, line endings. It knows nothing of editors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

# The pieces every pattern below is built from, each written once. Strings are strict JSON
# strings (no raw control characters, only JSON's escapes), as the editors' parsers want them.
# Comments are matched so that backtracking can neither cut one short nor stretch one to a
# later `*/`: a line comment runs to the end of its line, a block comment to its first `*/`.
_SPACE = r"[ \t\r\n\ufeff]"
_STRING_TEXT = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
_SKIPPED_STRING = r'"(?:[^"\\\x00-\x1f]|\\.)*"'  # a string only stepped over, escapes unchecked
_NUMBER_TEXT = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_LINE_COMMENT = r"//[^\n]*(?![^\n])"
_BLOCK_COMMENT = r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/"
_COMMENT = rf"{_LINE_COMMENT}|{_BLOCK_COMMENT}"

# One pattern for every token, whitespace and comments included, so that a scan covers
# every character: what matches nothing else is `bad`.
_TOKENS = re.compile(
    rf"(?P<space>{_SPACE}+)|(?P<punct>[{{}}\[\]:,])|(?P<string>{_STRING_TEXT})"
    rf"|(?P<comment>{_COMMENT})|(?P<number>{_NUMBER_TEXT})|(?P<literal>true|false|null)"
    r"|(?P<bad>.)",
    re.S,
)
MAX_DEPTH = 256  # objects and arrays nested deeper are refused, not parsed


class JsoncError(ValueError):
    """The text is not JSONC, or an edit cannot be made; carries a 1-based position."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        self.line = text.count("\n", 0, offset) + 1
        self.column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        self.reason = message
        super().__init__(f"line {self.line}, column {self.column}: {message}")


class Token(NamedTuple):
    kind: str  # { } [ ] : , string number literal comment
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    """Tokens in order; whitespace is skipped, comments are kept."""
    tokens: list[Token] = []
    append = tokens.append
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "space":
            continue
        start, end = match.span()
        if kind == "punct":
            append(Token(text[start], start, end))
        elif kind == "bad":
            raise JsoncError(_bad_token(text, start), text, start)
        else:
            append(Token(kind, start, end))  # type: ignore[arg-type]
    return tokens


def _bad_token(text: str, start: int) -> str:
    if text.startswith('"', start):
        return "invalid string (unterminated, a raw control character, or a bad escape)"
    if text.startswith("/*", start):
        return "unterminated /* comment"
    return f"unexpected character {text[start]!r}"


@dataclass
class Node:
    kind: str  # object array string number literal
    start: int
    end: int
    # An object's members are read when an edit first needs them (see _Scanner).
    members: list[Member] | None = None


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None = None  # offset of the comma after the value, if any


# The document's scanner reads values lazily: an object's members when an edit reaches it,
# every other container only skipped to its end, in large steps matched in C (runs of plain
# characters, whole strings and comments at a time). So a file of megabytes costs about one
# regex pass, and nodes are built only along the edited path. The independent parser checks
# the whole file (settings_file.independent_parse).
_GAP = re.compile(rf"(?:{_SPACE}|{_COMMENT})*")
_STRING = re.compile(_STRING_TEXT)
_SCALAR = re.compile(rf"{_NUMBER_TEXT}|true|false|null")
_TO_BRACKET = re.compile(rf'(?:[^"/\[\]{{}}]+|{_SKIPPED_STRING}|{_COMMENT}|/(?![/*]))*')
_CLOSING = {"{": "}", "[": "]"}
# The common member in one match: key, colon, and a value that is a scalar, a string or a
# container with no container inside (a big settings file is mostly these); the comma and the
# gaps around it too. Anything else takes the step-by-step path in _Scanner.members.
_FLAT = rf'(?:[^"{{}}\[\]/]|{_SKIPPED_STRING}|{_COMMENT}|/(?![/*]))*'
_SIMPLE_MEMBER = re.compile(
    rf"(?P<key>{_STRING_TEXT}){_GAP.pattern}:{_GAP.pattern}"
    rf"(?P<value>{_STRING_TEXT}|{_SCALAR.pattern}|\{{{_FLAT}\}}|\[{_FLAT}\])"
    rf"{_GAP.pattern}(?P<comma>,)?{_GAP.pattern}"
)
_KINDS = {
    "{": "object",
    "[": "array",
    '"': "string",
    "t": "literal",
    "f": "literal",
    "n": "literal",
}


def _key(text: str, start: int, end: int) -> str:
    """An object key's text; json decodes it only when it holds an escape."""
    raw = text[start + 1 : end - 1]
    return json.loads(text[start:end]) if "\\" in raw else raw


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text

    def gap(self, position: int) -> int:
        """Past whitespace and comments."""
        end = _GAP.match(self.text, position).end()  # type: ignore[union-attr]
        if self.text.startswith("/*", end):
            raise JsoncError("unterminated /* comment", self.text, end)
        return end

    def value(self, position: int) -> Node:
        """The value at `position` (after a gap); containers only skipped to their end."""
        text = self.text
        if position >= len(text):
            raise JsoncError("expected a value, found end of file", text, position)
        char = text[position]
        if char in "{[":
            kind = "object" if char == "{" else "array"
            return Node(kind, position, self.skip(position))
        if char == '"':
            match = _STRING.match(text, position)
            if match is None:
                raise JsoncError(_bad_token(text, position), text, position)
            return Node("string", position, match.end())
        match = _SCALAR.match(text, position)
        if match is None:
            raise JsoncError(_bad_token(text, position), text, position)
        return Node("literal" if char in "tfn" else "number", position, match.end())

    def skip(self, start: int) -> int:
        """The offset just past the container opening at `start`."""
        text = self.text
        expected = [_CLOSING[text[start]]]
        position = start + 1
        while True:
            position = _TO_BRACKET.match(text, position).end()  # type: ignore[union-attr]
            if position >= len(text):
                raise JsoncError(f"expected {expected[-1]!r}, found end of file", text, position)
            char = text[position]
            if char in "{[":
                expected.append(_CLOSING[char])
                if len(expected) > MAX_DEPTH:
                    raise JsoncError(f"nested more than {MAX_DEPTH} levels deep", text, position)
            elif char in "}]":
                wanted = expected.pop()
                if char != wanted:
                    raise JsoncError(f"expected ',' or {wanted!r}, found {char!r}", text, position)
                if not expected:
                    return position + 1
            else:  # a string or comment that does not end
                raise JsoncError(_bad_token(text, position), text, position)
            position += 1

    def items(self, node: Node) -> list[Node]:
        """The items of the array `node`, read now."""
        text = self.text
        items: list[Node] = []
        position = self.gap(node.start + 1)
        while not text.startswith("]", position):
            item = self.value(position)
            items.append(item)
            position = self.gap(item.end)
            if text.startswith(",", position):
                position = self.gap(position + 1)
            elif not text.startswith("]", position):
                raise JsoncError("expected ',' or ']' after an array item", text, position)
        return items

    def check(self, node: Node) -> None:
        """Read everything inside `node` (the slow path, for the position of an error)."""
        pending = [node]
        while pending:
            current = pending.pop()
            if current.kind == "object":
                pending.extend(member.value for member in self.members(current))
            elif current.kind == "array":
                pending.extend(self.items(current))

    def members(self, node: Node) -> list[Member]:
        """The members of the object `node`, read now; sets node.end (the root object is
        read this way directly, without skipping over it first)."""
        text = self.text
        members: list[Member] = []
        position = self.gap(node.start + 1)
        while not text.startswith("}", position):
            simple = _SIMPLE_MEMBER.match(text, position)
            if simple is not None:
                key_start, key_end = simple.span("key")
                start, end = simple.span("value")
                comma = simple.start("comma")
                member = Member(
                    _key(text, key_start, key_end),
                    key_start,
                    Node(_KINDS.get(text[start], "number"), start, end),
                    comma if comma >= 0 else None,
                )
                members.append(member)
                position = simple.end()
                if member.comma is None and not text.startswith("}", position):
                    raise JsoncError(
                        "expected ',' or '}' after an object member", text, self.gap(end)
                    )
                continue
            key = _STRING.match(text, position)
            if key is None:
                found = text[position : position + 1] or "end of file"
                raise JsoncError(f"expected 'string', found {found!r}", text, position)
            name = _key(text, key.start(), key.end())
            position = self.gap(key.end())
            if not text.startswith(":", position):
                raise JsoncError("expected ':' after an object key", text, position)
            value = self.value(self.gap(position + 1))
            member = Member(name, key.start(), value)
            members.append(member)
            position = self.gap(value.end)
            if text.startswith(",", position):
                member.comma = position
                position = self.gap(position + 1)
            elif not text.startswith("}", position):
                raise JsoncError("expected ',' or '}' after an object member", text, position)
        node.end = position + 1
        return members


@dataclass
class Edit:
    start: int
    end: int
    replacement: str


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply from the end backwards; of two inserts at one offset, the first listed ends
    up first in the text."""
    ordered = sorted(enumerate(edits), key=lambda pair: (pair[1].start, pair[0]), reverse=True)
    for _, edit in ordered:
        text = text[: edit.start] + edit.replacement + text[edit.end :]
    return text


class Document:
    """A parsed JSONC text (without BOM) that produces edited copies of itself."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.scanner = _Scanner(text)
        self.root: Node | None = None
        start = self.scanner.gap(0)
        if start < len(text):
            if text.startswith("{", start):  # every edit starts here: read it now
                self.root = Node("object", start, start + 1)
                self.root.members = self.scanner.members(self.root)
            else:
                self.root = self.scanner.value(start)
            extra = self.scanner.gap(self.root.end)
            if extra < len(text):
                raise JsoncError("unexpected content after the top-level value", text, extra)
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.indent_unit = _detect_indent(text)

    # -- reading --------------------------------------------------------------------

    def find(self, path: Sequence[str]) -> Node | None:
        """The node at `path` (object keys), None when a key is missing. Raises
        JsoncError when something on the way is not an object."""
        node = self.root
        for depth, key in enumerate(path):
            if node is None:
                return None
            if node.kind != "object":
                where = ".".join(path[:depth]) or "the top level"
                raise JsoncError(f"{where} must be an object", self.text, node.start)
            member = self._member(node, key)
            node = member.value if member else None
        return node

    # -- editing --------------------------------------------------------------------

    def set(self, path: Sequence[str], value: Any) -> str:
        """The text with `path` set to `value`; missing parent objects are created."""
        if not path:
            raise ValueError("empty path")
        if self.root is None:
            return self._create_root(path, value)
        node = self.root
        for depth, key in enumerate(path):
            if node.kind != "object":
                where = ".".join(path[:depth]) or "the top level"
                raise JsoncError(f"{where} must be an object", self.text, node.start)
            member = self._member(node, key)
            if member is None:
                nested: Any = value
                for outer in reversed(path[depth + 1 :]):
                    nested = {outer: nested}
                return apply_edits(self.text, self._insert(node, key, nested))
            if depth == len(path) - 1:
                indent = self._line_indent(member.key_start)
                rendered = self._render(value, indent)
                return apply_edits(
                    self.text, [Edit(member.value.start, member.value.end, rendered)]
                )
            node = member.value
        raise AssertionError("unreachable")

    def remove(self, path: Sequence[str]) -> str:
        """The text without the member at `path` (unchanged when it is not there)."""
        parent = self.find(path[:-1]) if len(path) > 1 else self.root
        if parent is None or parent.kind != "object":
            return self.text
        member = self._member(parent, path[-1])
        if member is None:
            return self.text
        return apply_edits(self.text, self._removal(parent, member))

    # -- helpers ----------------------------------------------------------------------

    def check(self) -> None:
        """Read the whole text strictly; JsoncError names the first thing that is wrong.
        (An edit reads only what it needs; this is for saying where a file is broken.)"""
        if self.root is not None:
            self.scanner.check(self.root)

    def _members(self, node: Node) -> list[Member]:
        if node.members is None:
            node.members = self.scanner.members(node)
        return node.members

    def _member(self, node: Node, key: str) -> Member | None:
        found = None
        for member in self._members(node):
            if member.key == key:
                found = member  # a duplicate key: the last one wins, as in JSON parsers
        return found

    def _line_indent(self, offset: int) -> str:
        line_start = self.text.rfind("\n", 0, offset) + 1
        prefix = self.text[line_start:offset]
        return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]

    def _render(self, value: Any, indent: str) -> str:
        """JSON for `value` in the file's style: nested lines indented from `indent` with
        the file's unit and line ending; arrays of scalars and empty containers inline."""
        inner = indent + self.indent_unit
        if isinstance(value, dict) and value:
            members = [
                f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {self._render(v, inner)}"
                for k, v in value.items()
            ]
            return (
                "{"
                + self.newline
                + ("," + self.newline).join(members)
                + self.newline
                + indent
                + "}"
            )
        if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            items = [inner + self._render(v, inner) for v in value]
            return (
                "[" + self.newline + ("," + self.newline).join(items) + self.newline + indent + "]"
            )
        return json.dumps(value, ensure_ascii=False)

    def _member_text(self, key: str, value: Any, indent: str) -> str:
        return f"{json.dumps(key, ensure_ascii=False)}: {self._render(value, indent)}"

    def _insert(self, node: Node, key: str, value: Any) -> list[Edit]:
        parent_indent = self._line_indent(node.start)
        if not self._members(node):
            child_indent = parent_indent + self.indent_unit
            inner = self.text[node.start + 1 : node.end - 1]
            text = self.newline + child_indent + self._member_text(key, value, child_indent)
            line_break = _last_newline_outside_comments(inner)
            if line_break < 0 and not inner.strip():
                # `{}` or `{ }`: the closing brace goes on a line of its own; what was between
                # the braces stays, so that uninstall can give it back (`{` and `}` on lines
                # of their own with only blanks between come back as `{}`: a known limit).
                return [
                    Edit(node.start + 1, node.end - 1, inner + text + self.newline + parent_indent)
                ]
            if line_break < 0:
                # `{/* a comment */}` (any line breaks inside the comment): the closing brace
                # stays right after our entry, so that the result cannot be mistaken for an
                # insert into `{/* a comment */` + a line break + `}`, and each uninstalls
                # to exactly what it was.
                return [Edit(node.end - 1, node.end - 1, text)]
            if inner.strip():
                # Comments on lines of their own: ours goes after them, on the closing
                # brace's line, so that they stay where they were.
                at = node.start + 1 + line_break + 1
                member = self._member_text(key, value, child_indent)
                return [Edit(at, at, child_indent + member + self.newline)]
            return [Edit(node.start + 1, node.start + 1, text)]
        last = self._members(node)[-1]
        child_indent = self._line_indent(last.key_start)
        if not self._starts_line(last.key_start):
            child_indent = parent_indent + self.indent_unit
        member = self._member_text(key, value, child_indent)
        if last.comma is not None:
            # Keep the file's trailing-comma style: ours gets one too.
            anchor = self._line_end(last.comma + 1)
            return [Edit(anchor, anchor, self.newline + child_indent + member + ",")]
        anchor = self._line_end(last.value.end)
        return [
            Edit(last.value.end, last.value.end, ","),
            Edit(anchor, anchor, self.newline + child_indent + member),
        ]

    def _removal(self, node: Node, member: Member) -> list[Edit]:
        members = self._members(node)
        index = members.index(member)
        end = member.comma + 1 if member.comma is not None else member.value.end
        start = member.key_start
        if self._starts_line(member.key_start):
            # Its line goes whole (a comment on its last line too), with the line break
            # before it; or, when the line before ends in a // comment (which would then
            # swallow what follows), with the line break after it, if it ends the line.
            before = self.text.rfind("\n", 0, member.key_start)
            gap_start = members[index - 1].comma if index else node.start
            line_end = self._line_end(end)
            after = self._newline_at(line_end)
            if not self._line_comment_ends_at(gap_start or node.start, before):
                start = before - 1 if before > 0 and self.text[before - 1] == "\r" else before
                end = line_end
            elif after:
                start, end = before + 1, line_end + after
        edits = [Edit(start, end, "")]
        is_last = index == len(members) - 1
        if is_last and member.comma is None and index > 0:
            previous = members[index - 1]
            if previous.comma is not None:  # the comma that separated us goes too
                edits.append(Edit(previous.comma, previous.comma + 1, ""))
        if len(members) == 1:
            remaining = apply_edits(
                self.text[node.start : node.end],
                [Edit(e.start - node.start, e.end - node.start, e.replacement) for e in edits],
            )
            closing = self.newline + self._line_indent(node.start) + "}"
            kept = remaining[1 : -len(closing)]
            # Undo the expansion of `{}` that an insert made; `kept` is only the object's
            # inside when the object ends the way an insert ends it.
            if remaining.endswith(closing) and not kept.strip():
                return [Edit(node.start, node.end, "{" + kept + "}")]
        return edits

    def _line_comment_ends_at(self, start: int, newline: int) -> bool:
        """Whether the line break at `newline` ends a // comment: in the gap (whitespace
        and comments only) that runs from `start` to it."""
        text = self.text
        position = start
        while position < newline:
            if text.startswith("//", position):
                ends = text.find("\n", position)
                if ends == newline:
                    return True
                position = ends + 1
            elif text.startswith("/*", position):
                position = text.find("*/", position + 2) + 2
            else:
                position += 1
        return False

    def _newline_at(self, offset: int) -> int:
        """The length of the line break at `offset` (0: none there)."""
        if self.text.startswith("\r\n", offset):
            return 2
        return 1 if self.text.startswith("\n", offset) else 0

    def _starts_line(self, offset: int) -> bool:
        line_start = self.text.rfind("\n", 0, offset) + 1
        return not self.text[line_start:offset].strip(" \t")

    def _line_end(self, offset: int) -> int:
        """Past trailing spaces and a `//` or one-line `/* */` comment on the same line."""
        text = self.text
        position = offset
        while position < len(text) and text[position] in " \t":
            position += 1
        if text.startswith("//", position):
            newline = text.find("\n", position)
            position = len(text) if newline < 0 else newline
            if position > 0 and text[position - 1] == "\r":
                position -= 1
            return position
        if text.startswith("/*", position):
            close = text.find("*/", position)
            if close >= 0 and "\n" not in text[position:close]:
                return self._line_end(close + 2)
        return offset

    def _create_root(self, path: Sequence[str], value: Any) -> str:
        nested: Any = value
        for key in reversed(path[1:]):
            nested = {key: nested}
        body = (
            "{"
            + self.newline
            + self.indent_unit
            + self._member_text(path[0], nested, self.indent_unit)
            + self.newline
            + "}"
        )
        text = self.text
        if text and not text.endswith("\n"):
            text += self.newline
        return text + body + self.newline


def _last_newline_outside_comments(text: str) -> int:
    """Where the last line break of `text` is that no comment holds (-1: none)."""
    inside = [(t.start, t.end) for t in tokenize(text) if t.kind == "comment"]
    position = len(text)
    while (position := text.rfind("\n", 0, position)) >= 0:
        if not any(start <= position < end for start, end in inside):
            return position
    return -1


_LINE_INDENT = re.compile(r"^([ \t]+)(?=[^ \t\r\n/*])", re.M)


def _detect_indent(text: str) -> str:
    """The file's indent unit: a tab, or the smallest run of spaces that starts a line (lines
    that start with a comment do not count)."""
    smallest = None
    for prefix in dict.fromkeys(_LINE_INDENT.findall(text)):  # in order, each once
        if prefix.startswith("\t"):
            return "\t"
        if smallest is None or len(prefix) < len(smallest):
            smallest = prefix
    return smallest or "  "

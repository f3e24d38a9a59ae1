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
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# One pattern for every token, whitespace and comments included, so that a scan covers
# every character: what matches nothing else is `bad`. Strings are strict JSON strings (no
# raw control characters, only JSON's escapes), as the editors' parsers want them.
_TOKENS = re.compile(
    r"""
    (?P<space>[ \t\r\n\ufeff]+)
    | (?P<punct>[{}\[\]:,])
    | (?P<string>"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")
    | (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<literal>true|false|null)
    | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
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
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None = None  # offset of the comma after the value, if any


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = [t for t in tokenize(text) if t.kind != "comment"]
        self.index = 0
        self.depth = 0

    def peek(self) -> Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, expected: str) -> Token:
        token = self.peek()
        if token is None or token.kind != expected:
            where = token.start if token else len(self.text)
            found = self.text[token.start : token.end] if token else "end of file"
            raise JsoncError(f"expected {expected!r}, found {found!r}", self.text, where)
        self.index += 1
        return token

    def value(self) -> Node:
        token = self.peek()
        if token is None:
            raise JsoncError("expected a value, found end of file", self.text, len(self.text))
        if token.kind in ("{", "["):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise JsoncError(
                    f"nested more than {MAX_DEPTH} levels deep", self.text, token.start
                )
            node = self.object() if token.kind == "{" else self.array()
            self.depth -= 1
            return node
        if token.kind in ("string", "number", "literal"):
            self.index += 1
            return Node(token.kind, token.start, token.end)
        raise JsoncError(
            f"expected a value, found {self.text[token.start : token.end]!r}",
            self.text,
            token.start,
        )

    def object(self) -> Node:
        open_brace = self.take("{")
        node = Node("object", open_brace.start, open_brace.end)
        while (token := self.peek()) is not None and token.kind != "}":
            key = self.take("string")
            self.take(":")
            raw = self.text[key.start + 1 : key.end - 1]
            name = json.loads(self.text[key.start : key.end]) if "\\" in raw else raw
            member = Member(name, key.start, self.value())
            node.members.append(member)
            member.comma = self.separator("}", "an object member")
        node.end = self.take("}").end
        return node

    def array(self) -> Node:
        open_bracket = self.take("[")
        node = Node("array", open_bracket.start, open_bracket.end)
        while (token := self.peek()) is not None and token.kind != "]":
            node.items.append(self.value())
            self.separator("]", "an array item")
        node.end = self.take("]").end
        return node

    def separator(self, close: str, after: str) -> int | None:
        """Take the comma after an element (returning its offset), or see `close` next."""
        following = self.peek()
        if following is not None and following.kind == ",":
            self.index += 1
            return following.start
        if following is None or following.kind != close:
            where = following.start if following else len(self.text)
            raise JsoncError(f"expected ',' or '{close}' after {after}", self.text, where)
        return None


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
        parser = _Parser(text)
        self.root: Node | None = None
        if parser.peek() is not None:
            self.root = parser.value()
            extra = parser.peek()
            if extra is not None:
                raise JsoncError("unexpected content after the top-level value", text, extra.start)
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
            member = _member(node, key)
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
            member = _member(node, key)
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
        member = _member(parent, path[-1])
        if member is None:
            return self.text
        return apply_edits(self.text, self._removal(parent, member))

    # -- helpers ----------------------------------------------------------------------

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
        if not node.members:
            child_indent = parent_indent + self.indent_unit
            inner = self.text[node.start + 1 : node.end - 1]
            text = self.newline + child_indent + self._member_text(key, value, child_indent)
            if "\n" not in inner:
                # `{}`, `{ }` or `{/* a comment */}`: the closing brace goes on a line of its
                # own; what was between the braces stays, so that uninstall can give it back.
                return [
                    Edit(node.start + 1, node.end - 1, inner + text + self.newline + parent_indent)
                ]
            if inner.strip():
                # Comments on lines of their own: ours goes after them, on the closing
                # brace's line, so that they stay where they were.
                at = node.start + 1 + inner.rfind("\n") + 1
                member = self._member_text(key, value, child_indent)
                return [Edit(at, at, child_indent + member + self.newline)]
            return [Edit(node.start + 1, node.start + 1, text)]
        last = node.members[-1]
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
        index = node.members.index(member)
        end = member.comma + 1 if member.comma is not None else member.value.end
        end = self._line_end(end)  # a comment on the member's own last line goes too
        if self._starts_line(member.key_start):
            start = self.text.rfind("\n", 0, member.key_start)
            start = start - 1 if start > 0 and self.text[start - 1] == "\r" else start
        else:
            start = member.key_start
            end = member.comma + 1 if member.comma is not None else member.value.end
        edits = [Edit(start, end, "")]
        is_last = index == len(node.members) - 1
        if is_last and member.comma is None and index > 0:
            previous = node.members[index - 1]
            if previous.comma is not None:  # the comma that separated us goes too
                edits.append(Edit(previous.comma, previous.comma + 1, ""))
        if len(node.members) == 1:
            remaining = apply_edits(
                self.text[node.start : node.end],
                [Edit(e.start - node.start, e.end - node.start, e.replacement) for e in edits],
            )
            closing = self.newline + self._line_indent(node.start) + "}"
            kept = remaining[1 : -len(closing)]
            last_comment = _last_comment_start(kept)
            ends_in_line_comment = last_comment >= 0 and kept.startswith("//", last_comment)
            if remaining.endswith(closing) and "\n" not in kept and not ends_in_line_comment:
                # Undo the expansion of `{}` (or `{/* a comment */}`) that an insert made.
                return [Edit(node.start, node.end, "{" + kept + "}")]
        return edits

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


def _last_comment_start(text: str) -> int:
    """Where the last comment of `text` starts (-1: none), in `text`'s offsets."""
    comments = [t for t in tokenize(text) if t.kind == "comment"]
    return comments[-1].start if comments else -1


def _member(node: Node, key: str) -> Member | None:
    found = None
    for member in node.members:
        if member.key == key:
            found = member  # a duplicate key: the last one wins, as in JSON parsers
    return found


def _detect_indent(text: str) -> str:
    """The file's indent unit: a tab, or the smallest run of spaces that starts a line."""
    smallest = None
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if not stripped or stripped.startswith(("//", "/*", "*")):
            continue
        prefix = line[: len(line) - len(stripped)]
        if prefix.startswith("\t"):
            return "\t"
        if prefix and (smallest is None or len(prefix) < len(smallest)):
            smallest = prefix
    return smallest or "  "

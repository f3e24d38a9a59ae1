"""JSON text as acpctl reads and writes it: one decoder, faster than json.loads line by
line, that refuses what JSON cannot carry (NaN, Infinity, numbers out of range), and the
one way a message becomes a line. Free of asyncio, so the store, the commands that read it
and `run --acp` before its server is up use it without that import."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


class OutOfRange(ValueError):
    """A number JSON can write but a float cannot hold (1e999 would become Infinity)."""


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise OutOfRange(f"the number {text[:40]} is out of range")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder: json.loads with hooks would build a new one for every line.
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_refuse_constant)
# scan_value(text, start): the JSON value that begins exactly at `start` in `text`, and
# where it ends (raises StopIteration when none begins there, ValueError for one that is
# malformed). The decoder's own C scanner, not a wrapper: the store calls it once a line.
scan_value: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def decode_text(text: str) -> Any:
    """One JSON value (raises ValueError), faster than json.loads for the common case: a
    line that is one value, without decode()'s two regular expressions. Numbers that would
    become Infinity or NaN are refused."""
    try:
        value, end = scan_value(text, 0)
    except StopIteration:  # leading blanks, or not JSON: decode() says which
        return _DECODER.decode(text)
    if end != len(text) and not text[end:].isspace():
        return _DECODER.decode(text)  # raises: extra data
    return value


# One encoder, for the same reason: json.dumps with options builds one for every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_text(value: Any) -> str:
    """Compact JSON text; never NaN or Infinity, which JSON cannot carry (ValueError)."""
    return _ENCODER.encode(value)


def encode(message: Any) -> bytes:
    """One line of JSON; never NaN or Infinity, which JSON cannot carry (ValueError)."""
    return _ENCODER.encode(message).encode() + b"\n"

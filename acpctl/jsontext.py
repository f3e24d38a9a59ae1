"""JSON text as acpctl reads and writes it: one decoder, faster than json.loads line by
line, that refuses what JSON cannot carry (NaN, Infinity, numbers out of range), and the
one way a message becomes a line. Free of asyncio, so the store, the commands that read it
and `run --acp` before its server is up use it without that import.

Every line an agent writes and every stored event is decoded here, so the decoder is most
of what a relayed line costs. msgspec's decoder reads a message about three times as fast as
json's. For every text it accepts it gives the value json gives: the same float rounding,
exact integers, the interpreter's limits on nesting and on an integer's digits, the last of
two equal keys. What it refuses, json reads again: to accept what JSON allows and msgspec
does not (a lone surrogate), or to say why not in json's words, so that acpctl answers a
bad line as it always has.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import msgspec


class OutOfRange(ValueError):
    """A number JSON can write but a float cannot hold (1e999 would become Infinity)."""


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise OutOfRange(f"the number {text[:40]} is out of range")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# decode_fast(data): the value, or one of REFUSED for whatever msgspec refuses, which
# decode_text then reads again. For the relay's loop, which calls it once a line.
decode_fast: Callable[[str | bytes], Any] = msgspec.json.Decoder().decode
# msgspec's DecodeError is a ValueError only since its 0.21; a str that cannot be UTF-8 (a
# lone surrogate) raises UnicodeEncodeError, and nesting past the interpreter's limit
# RecursionError.
REFUSED = (msgspec.DecodeError, ValueError, RecursionError)
# One json decoder: json.loads with hooks would build a new one for every line.
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_refuse_constant)
# The value that begins exactly at `start` in `text`, and where it ends: the decoder's C
# scanner alone (decode() adds two regular expressions). Raises StopIteration when no value
# begins there, ValueError for one that is malformed.
_scan_value: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def decode_text(text: str | bytes) -> Any:
    """One JSON value, from text or UTF-8 bytes (raises ValueError: UnicodeDecodeError for
    bytes that are not UTF-8, OutOfRange for a number that would become Infinity; or
    RecursionError)."""
    try:
        return decode_fast(text)
    except REFUSED:
        pass
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        value, end = _scan_value(text, 0)
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

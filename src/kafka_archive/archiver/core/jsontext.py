"""Parsing JSON from Kafka bytes: orjson first (several times faster), json where orjson is
stricter than the JSON we accept (NaN and Infinity, UTF-16/32 input, integers beyond 64
bits), so the result never depends on which parser ran."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """The parsed value; raises ValueError (or UnicodeDecodeError) when it is not JSON, or
    nests deeper than Python's parser can recurse (a bad record, not a crashed task)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(data)
        except RecursionError:
            raise ValueError("JSON nested too deeply to parse") from None

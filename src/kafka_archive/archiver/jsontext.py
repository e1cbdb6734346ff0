"""Parsing JSON from Kafka bytes: orjson first (several times faster), json where orjson is
stricter than the JSON we accept (NaN and Infinity, UTF-16/32 input, integers beyond 64
bits), so the result never depends on which parser ran."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """The parsed value; raises ValueError (or UnicodeDecodeError) when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)

"""Lark's LALR tables come from a cache in the user's cache directory: a parser loaded from
it reads KCQL as a freshly built one does, a damaged cache file is rebuilt, and each grammar
has its own file."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from kafka_archive.kcql import parser

_TEXT = (
    "INSERT INTO bucket:prefix SELECT * FROM `orders` PARTITIONBY _key, country "
    "STOREAS `JSON` PROPERTIES ('flush.count'=10)"
)


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parser.kcql_parser.cache_clear()
    grammar = resources.files("kafka_archive.kcql").joinpath("kcql.lark").read_bytes()
    yield tmp_path / "kafka-archive" / parser.cache_name(grammar)
    parser.kcql_parser.cache_clear()


def test_a_parser_from_the_cache_reads_as_a_built_one(own_cache: Path) -> None:
    built = parser.parse_tree(_TEXT)
    assert own_cache.stat().st_size > 0
    parser.kcql_parser.cache_clear()
    assert parser.parse_tree(_TEXT) == built
    with pytest.raises(Exception, match="STOREAS"):
        parser.parse_tree("INSERT INTO b:p SELECT * FROM t PARTITIONBY STOREAS `JSON`")


def test_a_damaged_cache_file_is_rebuilt(own_cache: Path) -> None:
    built = parser.parse_tree(_TEXT)
    size = own_cache.stat().st_size
    own_cache.write_bytes(own_cache.read_bytes()[: size // 2])
    parser.kcql_parser.cache_clear()
    assert parser.parse_tree(_TEXT) == built
    assert own_cache.stat().st_size > size // 2  # written anew


def test_another_grammar_has_another_cache_file(own_cache: Path) -> None:
    parser.parse_tree(_TEXT)
    grammar = resources.files("kafka_archive.kcql").joinpath("kcql.lark").read_bytes()
    other = parser.cache_name(grammar + b"\n// another version's grammar\n")
    assert other != own_cache.name
    assert parser.cache_name(grammar) == own_cache.name
    assert [p.name for p in own_cache.parent.glob("kcql-grammar*")] == [own_cache.name]

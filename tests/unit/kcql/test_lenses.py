"""Compatibility with the Lenses S3 sink: its real-world statements are accepted and mean
what they mean to Lenses (fixtures/lenses.kcql names the source of each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_archive import kcql
from kafka_archive.kcql import FieldRef, Padding, Source

FIXTURE = Path(__file__).parent / "fixtures" / "lenses.kcql"


def lenses_statements() -> list[tuple[str, str]]:
    """(source, statement) for every block of the fixture."""
    out: list[tuple[str, str]] = []
    for block in FIXTURE.read_text().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith("#")]
        source = " ".join(line[3:] for line in lines if line.startswith("-- "))
        text = "\n".join(line for line in lines if not line.startswith("--")).strip()
        if text:
            out.append((source, text))
    return out


STATEMENTS = lenses_statements()


def test_fixture_is_sourced() -> None:
    assert len(STATEMENTS) >= 30
    assert all(source for source, _ in STATEMENTS)


@pytest.mark.parametrize(("source", "text"), STATEMENTS, ids=[t for _, t in STATEMENTS])
def test_lenses_statement_is_accepted_and_round_trips(source: str, text: str) -> None:
    (route,) = kcql.parse(text).routes
    again = kcql.parse(kcql.render(route)).routes[0]
    assert again == route


def one(text: str) -> kcql.Route:
    (route,) = kcql.parse(text).routes
    return route


def test_padding_of_twelve_as_lenses_tests_write_it() -> None:
    route = one(
        "insert into bk1:p select * from t PARTITIONBY _topic, _partition STOREAS `CSV` "
        "PROPERTIES('padding.length.partition'='12', 'padding.length.offset'='12')"
    )
    assert (route.naming.partition_width, route.naming.offset_width) == (12, 12)


def test_stating_one_padding_length_pads_only_that_field() -> None:
    # PaddingService: the 'padding.length.*' map replaces the default {offset: 12}.
    route = one("insert into bk1 select * from t PROPERTIES('padding.length.partition'=3)")
    assert (route.naming.partition_width, route.naming.offset_width) == (3, 0)
    route = one("insert into bk1 select * from t PROPERTIES('padding.type'='LeftPad')")
    assert (route.naming.partition_width, route.naming.offset_width) == (0, 12)
    assert route.naming.padding is Padding.LEFT


def test_partitionby_writes_keys_and_values_unless_told_otherwise() -> None:
    # PartitionSelection: with PARTITIONBY the default display is KeysAndValues.
    head = "insert into bk1 select * from t"
    assert one(f"{head} PARTITIONBY a").include_keys is True
    assert one(f"{head} PARTITIONBY a WITHPARTITIONER=Values").include_keys is False
    stated = one(f"{head} PARTITIONBY a PROPERTIES('partition.include.keys'=false)")
    assert stated.include_keys is False
    assert one(head).include_keys is False


def test_underscore_spelling_of_record_parts() -> None:
    route = one("INSERT INTO bk1 SELECT _.topic, _.PARTITION AS p, _.key.a.b, _ FROM t")
    assert route.fields is not None
    assert [f.ref for f in route.fields] == [
        FieldRef(Source.TOPIC),
        FieldRef(Source.PARTITION),
        FieldRef(Source.KEY, ("a", "b")),
        FieldRef(Source.VALUE, ("_",)),
    ]
    assert [f.output_name for f in route.fields] == ["topic", "p", "b", "_"]

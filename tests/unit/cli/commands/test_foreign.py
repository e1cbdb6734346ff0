"""Which sink's archive a KCQL statement continues (``--config`` from import-connector)."""

from __future__ import annotations

import pytest

from kafka_archive.archiver.commands import api
from kafka_archive.archiver.read.listing import parse_location
from kafka_archive.cli.commands.foreign import layout_of


@pytest.mark.parametrize(
    ("properties", "layout"),
    [
        ("PROPERTIES('layout'='confluent')", "confluent"),
        ("PROPERTIES('flush.interval.time'='arrival')", "lenses"),
        ("", None),
        ("PROPERTIES('layout'='hive')", None),
    ],
)
def test_the_statement_writing_to_the_archive_names_its_sink(
    properties: str, layout: str | None
) -> None:
    plan = api.compile_plan(f"INSERT INTO bkt:topics SELECT * FROM t STOREAS JSON {properties}")
    assert layout_of(plan, parse_location("bkt:topics")) == layout
    assert layout_of(plan, parse_location("bkt:elsewhere")) is None

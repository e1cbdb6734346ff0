"""The importer's pieces on their own: the .properties reader, the split of Lenses' KCQL,
Confluent's path.format as a layout template, and the rewrite of each statement's
PROPERTIES that the Lenses settings share."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.cli.connector.common import rewrite_properties
from kafka_archive.cli.connector.confluent import template_of
from kafka_archive.cli.connector.lenses import split_statements
from kafka_archive.cli.connector.properties import parse_properties


def test_properties_read_as_java_reads_them() -> None:
    text = (
        "# comment\n! also\n\n"
        "a=1\n"
        "b : two words\n"
        "c three\n"
        "long = first \\\n    second\n"
        "esc\\=key=tab\\there\\u0041\n"
        "empty\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "two words",
        "c": "three",
        "long": "first second",
        "esc=key": "tab\there" + "A",
        "empty": "",
    }


@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters=";'`"), min_size=0), min_size=1)
)
def test_statements_without_quotes_split_at_every_semicolon(parts: list[str]) -> None:
    assert split_statements(";".join(parts)) == parts


def test_a_semicolon_in_quotes_or_back_ticks_does_not_split() -> None:
    text = "INSERT INTO `b;c` SELECT * FROM t PROPERTIES('a'='x;y'); INSERT INTO d SELECT * FROM u"
    assert split_statements(text) == [
        "INSERT INTO `b;c` SELECT * FROM t PROPERTIES('a'='x;y')",
        " INSERT INTO d SELECT * FROM u",
    ]


@pytest.mark.parametrize(
    ("path", "template"),
    [
        (
            "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
            "year={year}/month={month}/day={day}/hour={hour}",
        ),
        ("YYYY/MM/dd", "{year}/{month}/{day}"),
        ("'dt'=yyyy-MM-dd/HH_mm_ss", "dt={year}-{month}-{day}/{hour}_{minute}_{second}"),
        ("/YYYY/", "{year}"),
        ("'fixed'", None),  # no time folder at all
        ("YYYY/MM ww", None),  # a pattern letter that maps to nothing
        ("", None),
    ],
)
def test_a_confluent_path_format_as_a_template(path: str, template: str | None) -> None:
    assert template_of(path) == template


def test_properties_are_rewritten_only_where_the_change_says_so() -> None:
    statements = [
        "INSERT INTO bkt:p SELECT * FROM t",
        "INSERT INTO bkt:q SELECT * FROM u PROPERTIES('flush.count'=5)",
        "INSERT INTO bkt:r SELECT * FRM broken",
    ]
    seen: list[str] = []

    def change(route: kcql.Route) -> tuple[tuple[str, str], ...] | None:
        seen.append(route.topic)
        if route.topic == "u":
            return None
        return (*route.properties, ("store.envelope", "true"))

    rewrite_properties(statements, change)
    assert seen == ["t", "u"]  # the broken statement is left for the whole-text check
    (expected,) = kcql.parse(
        "INSERT INTO bkt:p SELECT * FROM t PROPERTIES('store.envelope'=true)"
    ).routes
    assert statements[0] == kcql.render(expected)
    assert statements[1:] == [
        "INSERT INTO bkt:q SELECT * FROM u PROPERTIES('flush.count'=5)",
        "INSERT INTO bkt:r SELECT * FRM broken",
    ]

"""Errors: the fixture of bad KCQL, rendering, and the structure every error carries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafka_archive import kcql
from kafka_archive.kcql import KcqlError, KcqlSemanticError, KcqlSyntaxError
from kafka_archive.kcql.examples import KCQL_ERROR_EXAMPLES, UNTERMINATED_QUOTE, SyntaxLabel

FIXTURE = Path(__file__).parent / "fixtures" / "errors.kcql"
_EXPECTATION = re.compile(r"#> (\d+):(\d+) ([a-z-]+)")


@dataclass(frozen=True)
class Case:
    line: int
    column: int
    label: str
    text: str
    fixture_line: int

    def __str__(self) -> str:
        return f"errors.kcql:{self.fixture_line} {self.label}"


def _cases() -> list[Case]:
    cases: list[Case] = []
    lines = FIXTURE.read_text().splitlines()
    index = 0
    while index < len(lines):
        match = _EXPECTATION.fullmatch(lines[index])
        if match is None:
            index += 1
            continue
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip():
            body.append(lines[index])
            index += 1
        line, column, label = match.groups()
        cases.append(Case(int(line), int(column), label, "\n".join(body), start + 1))
    return cases


CASES = _cases()


def test_fixture_has_cases() -> None:
    assert len(CASES) > 90


@pytest.mark.parametrize("case", CASES, ids=str)
def test_error_fixture(case: Case) -> None:
    with pytest.raises(KcqlError) as info:
        kcql.parse(case.text)
    err = info.value
    assert (err.line, err.column, err.label) == (case.line, case.column, case.label), str(err)


def test_every_syntax_label_is_in_the_fixture() -> None:
    labels = {case.label for case in CASES}
    wanted = {label.name for label in KCQL_ERROR_EXAMPLES} | {UNTERMINATED_QUOTE.name}
    assert wanted - labels == set()


@pytest.mark.parametrize(
    ("label", "example"),
    [(label, example) for label, examples in KCQL_ERROR_EXAMPLES.items() for example in examples],
    ids=lambda value: getattr(value, "name", None) or str(value)[:40],
)
def test_each_example_gets_its_own_label(label: SyntaxLabel, example: str) -> None:
    # An example shadowed by another label's example in the same parser state would be dead.
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse(example)
    assert info.value.label == label.name


ISSUE_EXAMPLE = (
    "INSERT INTO bucket:prefix SELECT * FROM orders PARTITIONBY _header.country "
    "STOREAS `AVOR` WITH_FLUSH_COUNT = 5000"
)


def test_render_matches_the_issue_layout() -> None:
    with pytest.raises(KcqlSemanticError) as info:
        kcql.parse(ISSUE_EXAMPLE)
    assert info.value.render() == (
        "kcql:1:84: unknown STOREAS format 'AVOR'. Did you mean 'AVRO'?\n"
        "  … PARTITIONBY _header.country STOREAS `AVOR` WITH_FLUSH_COUNT = 5000\n"
        "                                        ^^^^^^"
    )


def test_str_is_one_line_with_source_position_message_and_hint() -> None:
    with pytest.raises(KcqlError) as info:
        kcql.parse(ISSUE_EXAMPLE, source="--kcql")
    err = info.value
    assert str(err) == "--kcql:1:84: unknown STOREAS format 'AVOR'. Did you mean 'AVRO'?"
    assert err.message == "unknown STOREAS format 'AVOR'"
    assert err.hint == "Did you mean 'AVRO'?"
    assert (err.end_line, err.end_column) == (1, 90)
    assert err.source == "--kcql"
    assert "AVRO" in err.expected


def test_render_takes_the_text_explicitly_too() -> None:
    with pytest.raises(KcqlError) as info:
        kcql.parse("INSERT INTO b:p FROM t")
    rendered = info.value.render("INSERT INTO b:p FROM t")
    assert rendered.splitlines()[1:] == ["  INSERT INTO b:p FROM t", "                  ^^^^"]


def test_render_shows_the_error_line_of_a_multi_line_text() -> None:
    text = "INSERT INTO bkt:p SELECT * FROM orders;\nINSERT INTO bkt:p SELECT * FROM orders"
    with pytest.raises(KcqlError) as info:
        kcql.parse(text)
    lines = info.value.render().splitlines()
    assert lines[0].startswith("kcql:2:33: ")
    assert lines[1] == "  INSERT INTO bkt:p SELECT * FROM orders"
    assert lines[2] == "  " + " " * 32 + "^" * len("orders")


def test_render_elides_the_right_side_of_a_long_line() -> None:
    text = (
        "INSERT INTO bkt SELECT * FROM orders STOREAS `AVOR` PROPERTIES("
        + ", ".join(f"'flush.count'={n}" for n in range(8))
        + ")"
    )
    with pytest.raises(KcqlError) as info:
        kcql.parse(text)
    shown, carets = info.value.render().splitlines()[1:]
    assert shown.endswith(" …")
    assert shown[carets.index("^") :].startswith("`AVOR`")


def test_render_of_an_error_at_the_end_of_input_points_after_the_text() -> None:
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("INSERT INTO bkt SELECT * FROM t STOREAS")
    shown, carets = info.value.render().splitlines()[1:]
    assert carets.index("^") == len(shown)
    assert carets.strip() == "^"


def test_syntax_error_falls_back_to_expected_words() -> None:
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("INSERT INTO `bkt`: SELECT * FROM orders")
    err = info.value
    assert err.label == "unexpected"
    assert err.message == "unexpected SELECT, expected a `back-ticked` name"
    assert err.expected == ("a `back-ticked` name",)


def test_expected_words_list_only_what_can_follow_here() -> None:
    # The state after a path is shared by SELECT and PARTITIONBY; only PARTITIONBY's
    # followers may be offered.
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("INSERT INTO bkt SELECT * FROM orders PARTITIONBY a.b !")
    expected = info.value.expected
    assert "STOREAS" in expected
    assert "end of input" in expected
    assert "AS" not in expected
    assert "FROM" not in expected


def test_expected_words_are_human_not_terminal_names() -> None:
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("INSERT INTO bkt SELECT")
    assert set(info.value.expected) == {"a name", "a `back-ticked` name", "'*'"}


def test_no_statement_has_no_line_to_show() -> None:
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("")
    err = info.value
    assert (err.line, err.column, err.label) == (1, 1, "no-statement")
    assert err.render() == str(err)


def test_errors_are_kcql_errors_and_carry_the_label_in_repr() -> None:
    assert issubclass(KcqlSyntaxError, KcqlError)
    assert issubclass(KcqlSemanticError, KcqlError)
    with pytest.raises(KcqlError) as info:
        kcql.parse("INSERT INTO b:p FROM t")
    assert "missing-select" in repr(info.value)


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("\ufeffINSERT INTO bkt:p SELECT * FROM t", "byte-order mark"),
        ("INSERT INTO bkt:p SELECT * FROM t PROPERTIES(\u2018flush.count\u2019=1)", "quote"),
    ],
)
def test_characters_pasted_from_documents_are_named(text: str, what: str) -> None:
    with pytest.raises(KcqlSyntaxError) as caught:
        kcql.parse(text)
    assert what in str(caught.value) and caught.value.span is not None

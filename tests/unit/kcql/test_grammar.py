"""The grammar itself: strict build, loaded lazily, tree shape, lexical rules."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lark import Lark, Tree

from kafka_archive import kcql
from kafka_archive.kcql import KcqlSyntaxError
from kafka_archive.kcql.parser import KEYWORDS, TERMINAL_WORDS, can_be_bare, kcql_parser, parse_tree
from kafka_archive.kcql.syntax import Statement, ValueKind
from kafka_archive.kcql.transform import ToSyntax


def test_grammar_builds_in_strict_mode() -> None:
    # strict=True turns shift/reduce conflicts and terminal collisions into errors.
    pytest.importorskip("interegular")
    parser = Lark.open_from_package(
        "kafka_archive.kcql",
        "kcql.lark",
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        strict=True,
    )
    assert isinstance(parser.parse("INSERT INTO bkt SELECT * FROM t"), Tree)


def test_grammar_is_not_built_at_import_time() -> None:
    code = (
        "import kafka_archive.kcql as k, kafka_archive.kcql.parser as p\n"
        "assert p.kcql_parser.cache_info().currsize == 0\n"
        "k.parse('INSERT INTO bkt SELECT * FROM t')\n"
        "assert p.kcql_parser.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parser_is_built_once() -> None:
    assert kcql_parser() is kcql_parser()


def test_every_terminal_has_words() -> None:
    names = {terminal.name for terminal in kcql_parser().terminals} - {"WS", "COMMENT"}
    assert names <= set(TERMINAL_WORDS)


def statements(text: str) -> tuple[Statement, ...]:
    return ToSyntax().transform(parse_tree(text))


def test_tree_keeps_what_was_written() -> None:
    (stmt,) = statements(
        "INSERT INTO `bkt`:`pre fix` SELECT a.`b.c` AS x FROM `*` NOPARTITION STOREAS `avro` "
        "WITHPARTITIONER = Values WITH_FLUSH_SIZE = 10 PROPERTIES('k'='it''s', 'n'=5, 'b'=true)"
    )
    assert (stmt.target.bucket, stmt.target.prefix, stmt.target.quoted) == ("bkt", "pre fix", True)
    assert stmt.fields is not None
    (item,) = stmt.fields
    assert [(w.text, w.quoted) for w in item.path.segments] == [("a", False), ("b.c", True)]
    assert item.alias is not None and item.alias.text == "x"
    assert (stmt.topic.text, stmt.topic.quoted) == ("*", True)
    assert stmt.partition_by is None and stmt.no_partition is not None
    assert stmt.format is not None and (stmt.format.text, stmt.format.quoted) == ("avro", True)
    assert [(s.keyword, s.value.text) for s in stmt.legacy] == [
        ("WITHPARTITIONER", "Values"),
        ("WITH_FLUSH_SIZE", "10"),
    ]
    assert stmt.properties is not None
    assert [(p.key, p.value.text, p.value.kind) for p in stmt.properties] == [
        ("k", "it's", ValueKind.STRING),
        ("n", "5", ValueKind.NUMBER),
        ("b", "true", ValueKind.WORD),
    ]


def test_target_spans_split_at_the_colon() -> None:
    (stmt,) = statements("INSERT INTO bkt:pre SELECT * FROM t")
    assert (stmt.target.bucket_span.column, stmt.target.bucket_span.end_column) == (13, 16)
    assert stmt.target.prefix_span is not None
    assert (stmt.target.prefix_span.column, stmt.target.prefix_span.end_column) == (17, 20)
    (quoted,) = statements("INSERT INTO `bkt:pre` SELECT * FROM t")
    assert quoted.target.bucket_span.column == 14
    assert quoted.target.prefix_span is not None and quoted.target.prefix_span.column == 18


def test_spans_on_later_lines() -> None:
    (_, second) = statements(
        "INSERT INTO bkt SELECT * FROM t;\n  INSERT INTO bkt\n SELECT * FROM u"
    )
    assert (second.span.line, second.span.column, second.span.end_line) == (2, 3, 3)
    assert (second.topic.span.line, second.topic.span.column) == (3, 16)


@pytest.mark.parametrize("keyword", sorted(KEYWORDS))
def test_keywords_are_reserved_everywhere_a_word_goes(keyword: str) -> None:
    assert not can_be_bare("NAME", keyword)
    assert not can_be_bare("TOPIC", keyword.lower())
    assert not can_be_bare("TARGET", keyword.title())
    for text in (
        f"INSERT INTO {keyword} SELECT * FROM t",
        f"INSERT INTO bkt SELECT {keyword} FROM t",
        f"INSERT INTO bkt SELECT * FROM {keyword}",
        f"INSERT INTO bkt SELECT * FROM t PARTITIONBY {keyword}",
    ):
        with pytest.raises(KcqlSyntaxError):
            kcql.parse(text)


def test_words_that_contain_keywords_are_plain_words() -> None:
    r = kcql.parse("INSERT INTO selected SELECT fromage AS asx FROM storeas_topic").routes[0]
    assert (r.target.bucket, r.topic) == ("selected", "storeas_topic")
    assert r.fields is not None and r.fields[0].output_name == "asx"


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO bkt SELECT * FROM t STOREASJSON",
        "INSERT INTO bkt SELECT * FROM t WITH_FLUSH_COUNT = 5000STOREAS JSON",
        "INSERT INTO bkt SELECT * FROM t WITH_FLUSH_COUNT = 50 00",
        "INSERT INTO bkt SELECT * FROM t PARTITIONBY a b",
        "INSERT INTO bkt SELECT a b FROM t",
        "INSERT INTO bkt SELECTa FROM t",
        "INSERTINTO bkt SELECT * FROM t",
    ],
)
def test_words_never_merge_or_split(text: str) -> None:
    with pytest.raises(KcqlSyntaxError):
        kcql.parse(text)


def test_double_dash_starts_a_comment_even_after_a_word() -> None:
    r = kcql.parse("INSERT INTO bkt\nSELECT a-b--c\nFROM t PARTITIONBY a--d\n").routes[0]
    assert (r.target.bucket, r.topic) == ("bkt", "t")
    assert r.fields is not None and r.fields[0].ref.path == ("a-b",)
    assert [ref.path for ref in r.partition_by] == [("a",)]


def test_a_double_dash_inside_a_topic_or_target_is_part_of_it() -> None:
    # As for Lenses, whose topic and target words take '-': no comment starts inside a word.
    r = kcql.parse("INSERT INTO bkt--x:a--b\nSELECT * FROM t--d\n").routes[0]
    assert (r.target.bucket, r.target.prefix, r.topic) == ("bkt--x", "a--b", "t--d")


@pytest.mark.parametrize(
    ("text", "glued"),
    [
        ("INSERT INTO bkt SELECT * FROM orders -- old topic", "orders--oldtopic"),
        ("INSERT INTO bkt SELECT * FROM `t`\n  -- x\n;", "`t`--x"),
        ("INSERT INTO bkt-x\n--x\nSELECT * FROM t", "bkt-x--x"),
        ("INSERT INTO bkt:p -- x\nSELECT * FROM t", "bkt:p--x"),
        ("INSERT INTO bkt SELECT * FROM t STOREAS `JSON` -- x", "`JSON`--x"),
    ],
)
def test_a_comment_lenses_would_glue_to_a_name_is_refused(text: str, glued: str) -> None:
    # Lenses' KCQL has no comments: '-' is a topic character and adjacent words join, so its
    # parser reads these comments as part of the topic, target or format.
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse(text)
    assert info.value.label == "glued-comment"
    assert repr(glued) in str(info.value)


@pytest.mark.parametrize(
    ("terminal", "text", "bare"),
    [
        ("NAME", "a_b-c1", True),
        ("NAME", "a-", False),
        ("NAME", "a--b", False),
        ("NAME", "1a", True),
        ("NAME", "@timestamp", True),
        ("NAME", "12", False),
        ("NAME", "a.b", False),
        ("TOPIC", "a.b+c-d_1", True),
        ("TOPIC", "a--b", True),
        ("TOPIC", "--b", False),
        ("TOPIC", "*", False),
        ("TARGET", "bkt:a/b=c", True),
        ("TARGET", "bkt:a b", False),
    ],
)
def test_what_can_be_written_bare(terminal: str, text: str, bare: bool) -> None:
    assert can_be_bare(terminal, text) is bare

"""Parity with Lenses' own KCQL parser.

The promise (docs/kcql.md): a statement Lenses accepts and means something by, we accept and
mean the same; we are stricter only where Lenses silently drops or misreads text, and say so.

The oracle is ``com.datamountaineer:kcql`` 3.0.0 from Maven Central, Lenses' ANTLR parser
(``Kcql.parse``), run in one JVM for the whole session (``testbed/lenses_kcql.py``). The
current S3 sink carries a fork of it in stream-reactor (``io.lenses.kcql``, not on Maven
Central) whose grammar accepts more: what only the fork accepts is listed in ``FORK_ONLY``
with the grammar rule that accepts it, and there the jar's answer is not the reference.

Every difference is listed below with its reason and examples, and each example is checked
against the oracle: ``STRICTER`` (Lenses accepts and drops or misreads text; we refuse),
``LENIENT`` (Lenses refuses; we accept), ``FORK_ONLY``. The corpus (the README, samples,
fixtures, Lenses' own tests and documentation) and hypothesis-generated statements are then
compared: both accept with the same meaning, both refuse, or a listed difference explains it.

"Meaning" is what both parsers state: topic, bucket and prefix, the SELECT fields (record part,
path, alias as written; as a set, since the jar lists key and header fields apart), the
PARTITIONBY entries in order, the STOREAS format, and the settings (WITH_FLUSH_*,
WITHPARTITIONER and PROPERTIES as one table of keys and values).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.kcql import KcqlError, Route
from kafka_archive.kcql.examples import KCQL_ERROR_EXAMPLES
from lenses_kcql import LensesKcql, OracleUnavailable

ROOT = Path(__file__).parents[3]
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def lenses() -> Iterator[LensesKcql]:
    try:
        oracle = LensesKcql()
    except OracleUnavailable as err:
        pytest.fail(f"Lenses' KCQL parser cannot run: {err}", pytrace=False)
    yield oracle
    oracle.close()


# ------------------------------------------------------------------------------------------
# Meaning, as each parser states it.

Field = tuple[str, tuple[str, ...], str | None]  # record part, path, alias as written


@dataclass(frozen=True)
class Meaning:
    topic: str
    target: tuple[str, str]
    fields: tuple[Field, ...] | None  # None: SELECT *
    partition_by: tuple[tuple[str, tuple[str, ...]], ...]
    format: str
    settings: tuple[tuple[str, str], ...]


_METADATA = {"_topic", "_partition", "_offset", "_timestamp"}
_SOURCES = {"_value", "_key", "_header", "_date"}
_FLUSH = {
    "flush_size": "flush.size",
    "flush_interval": "flush.interval",
    "flush_count": "flush.count",
}


def _ref(path: list[str]) -> tuple[str, tuple[str, ...]]:
    first, *rest = path
    if first in _METADATA and not rest:
        return first, ()
    if first in _SOURCES:
        return first, tuple(rest)
    return "_value", tuple(path)


def _alias(alias: str | None, path: list[str]) -> str | None:
    return None if alias is None or alias == path[-1] else alias


def _segments(text: str) -> list[str]:
    """``_key.`a.b`.c`` -> ``["_key", "a.b", "c"]``."""
    return [s.strip("`") for s in re.findall(r"`[^`]*`|[^.`]+", text)]


def lenses_meaning(answer: dict[str, Any]) -> Meaning:
    """The meaning of the jar's ``Kcql`` (its JSON from KcqlOracle.java)."""
    bucket, _, prefix = (answer["target"] or "").replace("`", "").partition(":")
    fields: list[Field] = []
    star = False
    for f in answer["fields"]:
        path = [*(f["parents"] or []), f["name"]]
        if path == ["*"]:
            star = True
            continue
        kind = f["type"]
        source, rest = ("_" + kind.lower(), tuple(path)) if kind != "VALUE" else _ref(path)
        if source in _METADATA:
            rest = ()
        fields.append((source, rest, _alias(f["alias"], path)))
    for key, source in (("key_fields", "_key"), ("header_fields", "_header")):
        for f in answer[key]:
            path = [*(f["parents"] or []), f["name"]]
            fields.append((source, tuple(path), _alias(f["alias"], path)))
    stated = {key: value for key, value in answer["properties"].items()}
    for name, key in _FLUSH.items():
        if answer[name]:
            stated[key] = str(answer[name])
    if answer["partitioner"] is not None:
        values = answer["partitioner"].casefold() == "values"
        stated["partition.include.keys"] = "false" if values else "true"
    stored = answer["stored_as"]
    return Meaning(
        topic=answer["source"],
        target=(bucket, prefix),
        fields=None if star and not fields else tuple(sorted(fields, key=repr)),
        partition_by=tuple(_ref(_segments(p)) for p in answer["partition_by"]),
        format=(stored.strip("`").upper() if stored else "JSON"),
        settings=tuple(sorted((k, v.casefold()) for k, v in stated.items())),
    )


def our_meaning(route: Route) -> Meaning:
    fields = None
    if route.fields is not None:
        fields = tuple(
            sorted(
                (
                    (
                        f.ref.source.value,
                        f.ref.path,
                        None if f.alias is None or f.alias == f.ref.name else f.alias,
                    )
                    for f in route.fields
                ),
                key=repr,
            )
        )
    return Meaning(
        topic=route.topic,
        target=(route.target.bucket, route.target.prefix),
        fields=fields,
        partition_by=tuple((ref.source.value, ref.path) for ref in route.partition_by),
        format=route.format.value,
        settings=tuple(sorted((k, v.casefold()) for k, v in route.properties)),
    )


def ours(statement: str) -> Meaning | KcqlError:
    try:
        (route,) = kcql.parse(statement).routes
    except KcqlError as err:
        return err
    return our_meaning(route)


def theirs(lenses: LensesKcql, statement: str) -> Meaning | str:
    answer = lenses.read(statement)
    return lenses_meaning(answer) if answer["ok"] else answer["error"]


# ------------------------------------------------------------------------------------------
# The differences, each with its reason and examples (checked against the oracle below).


@dataclass(frozen=True)
class Difference:
    name: str
    reason: str
    examples: tuple[str, ...]
    # Which statements it explains (corpus and generated statements).
    applies: Callable[[str], bool]
    # STRICTER: the labels of our refusal.
    labels: tuple[str, ...] = ()


def _search(pattern: str, flags: int = 0) -> Callable[[str], bool]:
    regex = re.compile(pattern, flags)
    return lambda text: regex.search(text) is not None


def _in_properties(pattern: str) -> Callable[[str], bool]:
    regex = re.compile(pattern)

    def applies(text: str) -> bool:
        start = re.search(r"(?i)\bPROPERTIES\s*\(", text)
        return start is not None and regex.search(text, start.end() - 1) is not None

    return applies


H = "INSERT INTO bkt SELECT * FROM orders"

STRICTER: tuple[Difference, ...] = (
    Difference(
        "dropped-trailing-text",
        "Lenses' parser stops at the first word no later clause can take and silently drops "
        "it and all that follows (a second PROPERTIES, a clause out of order, a typo)",
        (
            f"{H} STOREAS `JSON` PROPERTIES('flush.count'=5) junk",
            f"{H} PROPERTIES('flush.count'=5) PROPERTIES('flush.size'=5)",
            f"{H} WITH_FLUSH_COUNT = 1 PARTITIONBY b",
            f"{H} PROPERTIES('flush.count'=5) STOREAS `AVRO`",
            f"{H} STOREAS `AVRO` WITH_FLUSH_COUNT = 5 x",
        ),
        _search(r"junk|\bx$|PROPERTIES\(.*PROPERTIES|FLUSH_COUNT = 1 PARTITIONBY|\) STOREAS"),
        ("clause-order", "unexpected"),
    ),
    Difference(
        "flush-clause-order",
        "Lenses reads WITH_FLUSH_SIZE, WITH_FLUSH_INTERVAL, WITH_FLUSH_COUNT in this order "
        "and silently drops one out of it (and all after it)",
        (
            f"{H} WITH_FLUSH_INTERVAL = 5 WITH_FLUSH_SIZE = 6",
            f"{H} WITH_FLUSH_COUNT = 5 WITH_FLUSH_INTERVAL = 6",
            f"{H} WITH_FLUSH_COUNT = 5 WITH_FLUSH_COUNT = 6",
        ),
        _search(
            r"FLUSH_(COUNT|INTERVAL)\s*=\s*\d+\s+WITH_FLUSH_SIZE|"
            r"FLUSH_COUNT\s*=\s*\d+\s+WITH_FLUSH_(INTERVAL|COUNT)",
            re.I,
        ),
        ("clause-order",),
    ),
    Difference(
        "glued-words",
        "Lenses joins adjacent words of a topic or target, whitespace or not: 'orders v1' is "
        "the topic 'ordersv1', 'bkt : p' the target 'bkt:p'",
        (
            f"{H} v1",
            f"{H} . v1",
            "INSERT INTO bkt : pre SELECT * FROM orders",
            "INSERT INTO bkt:p q SELECT * FROM orders",
        ),
        _search(r" (v1|\. v1)$|bkt : pre|bkt:p q"),
        ("clause-order", "bad-target", "unexpected"),
    ),
    Difference(
        "dropped-characters",
        "Lenses' lexer skips a character it cannot read ('?', '#', '$', …; a warning on "
        "stderr) and goes on: 'bkt:p?' is the target 'bkt:p'",
        ("INSERT INTO bkt:p? SELECT * FROM orders", f"{H}$"),
        _search(r"bkt:p\?|orders\$"),
        ("bad-target", "unexpected", "clause-order"),
    ),
    Difference(
        "no-insert",
        "Lenses' parser also takes SELECT … FROM without INSERT INTO (a source connector's "
        "statement, no target); for an archive it means nothing",
        ("SELECT * FROM orders",),
        _search(r"^SELECT"),
        ("missing-insert",),
    ),
    Difference(
        "glued-comment",
        "Lenses has no comments: '-- x' right after a topic, target or STOREAS name becomes "
        "part of it ('orders--x')",
        (f"{H} -- note", f"{H} STOREAS `JSON` -- note"),
        _search(r"(orders|`JSON`) *--"),
        ("glued-comment",),
    ),
    Difference(
        "fraction",
        "Lenses reads WITH_FLUSH_COUNT = 1.5 as 1 and drops '.5'",
        (f"{H} WITH_FLUSH_COUNT = 1.5",),
        _search(r"= 1\.5"),
        ("bad-flush-value",),
    ),
    Difference(
        "storeas-parameters",
        "Lenses' parser keeps STOREAS `X` (k=v) parameters but its S3 sink ignores them",
        (f"{H} STOREAS `AVRO` (a=1)",),
        _search(r"`AVRO` \("),
        ("storeas-parameters",),
    ),
    Difference(
        "format-combinations",
        "a SELECT list, or PARTITIONBY a value field, on TEXT or BYTES, which store each "
        "value as it is (Lenses' parser takes any combination)",
        (
            "INSERT INTO bkt SELECT a FROM orders STOREAS `TEXT`",
            f"{H} PARTITIONBY a STOREAS BYTES",
            # '@' and digits are FIELD characters too: '@' and '1a' are value fields.
            f"{H} PARTITIONBY @ STOREAS BYTES",
            f"{H} PARTITIONBY _key, 1a STOREAS `TEXT`",
        ),
        _search(
            r"(?is)(SELECT\s+(?![\s*])|PARTITIONBY\s+([^;]*,\s*)?(_value\.|[a-z0-9@]))[^;]*"
            r"STOREAS\s+`?(text|bytes)\b"
        ),
        ("select-unstructured", "value-partition-unstructured"),
    ),
    Difference(
        "duplicate-partition",
        "one field twice in PARTITIONBY (a and _value.a are one field): the same segment twice",
        (f"{H} PARTITIONBY a, _value.a",),
        _search(r"PARTITIONBY a, _value\.a"),
        ("duplicate-partition",),
    ),
    Difference(
        "conflicting-settings",
        "a setting stated twice with different values (WITHPARTITIONER and "
        "'partition.include.keys', WITH_FLUSH_COUNT and 'flush.count'): Lenses' parser keeps "
        "both and which one counts is not said",
        (
            f"{H} WITHPARTITIONER = Values PROPERTIES('partition.include.keys'=true)",
            f"{H} WITH_FLUSH_COUNT = 5 PROPERTIES('flush.count'=6)",
        ),
        _search(r"Values PROPERTIES\('partition|COUNT = 5 PROPERTIES\('flush.count'=6"),
        ("conflicting-setting",),
    ),
    Difference(
        "other-connectors-clauses",
        "Lenses' parser is shared by all its connectors and takes their clauses (UPSERT, "
        "IGNORE, WITHGROUP, AUTOCREATE, a.* …), which the S3 sink silently ignores",
        (
            "UPSERT INTO bkt SELECT * FROM orders",
            f"{H} IGNORE a",
            f"{H} WITHGROUP x",
            f"{H} AUTOCREATE",
            "INSERT INTO bkt SELECT a.* FROM orders",
            f"{H} PARTITIONBY a.*",
        ),
        _search(r"^UPSERT|IGNORE a|WITHGROUP|AUTOCREATE|a\.\*"),
        ("no-statement", "clause-order", "missing-path-segment"),
    ),
    Difference(
        "semantic-checks",
        "what Lenses' parser takes whatever it says and its S3 sink refuses only when it runs "
        "(an unknown format or partitioner, an envelope in CSV or BYTES, a date pattern), or "
        "what would give unsafe or unreadable keys or overlapping archives (padding that gives "
        "two offsets one key, a layout template without the partition or offset, two "
        "statements writing one topic to one place), or a setting of another format or "
        "with nothing to apply to (envelope fields without the envelope)",
        (
            f"{H} STOREAS `AVOR`",
            f"{H} WITHPARTITIONER = KeyAndValues",
            f"{H} STOREAS CSV PROPERTIES('store.envelope'=true)",
            f"{H} PARTITIONBY _date.YYYY",
            f"{H} PARTITIONBY _offset",
            f"{H} PROPERTIES('padding.type'='RightPad')",
        ),
        _search(r"`AVOR`|KeyAndValues|CSV PROPERTIES\('store|_date\.YYYY|_offset$|RightPad'\)"),
        (
            "unknown-format",
            "unknown-partitioner",
            "envelope-format",
            "empty-envelope",
            "envelope-fields-without-envelope",
            "date-pattern",
            "source-not-allowed",
            "metadata-path",
            "header-name",
            "underscore-path",
            "ambiguous-padding",
            "bad-template",
            "layout-template",
            "property-format",
            "duplicate-route",
            "duplicate-setting",
        ),
    ),
    Difference(
        "star-and-fields",
        "Lenses reads SELECT *, a as both; what that stores is not defined",
        ("INSERT INTO bkt SELECT *, a FROM orders",),
        _search(r"SELECT \*, a"),
        ("star-and-fields",),
    ),
    Difference(
        "duplicate-output-name",
        "two SELECT fields stored under one name: one would overwrite the other",
        ("INSERT INTO bkt SELECT a, b AS a FROM orders",),
        _search(r"SELECT a, b AS a"),
        ("duplicate-field",),
    ),
    Difference(
        "record-part-typo",
        "a first name of '_' followed by a near-miss of a record part (_headers) is taken for "
        "a typo; a value field of that name is written _value._headers",
        ("INSERT INTO bkt SELECT _headers FROM orders",),
        _search(r"SELECT _headers"),
        ("unknown-source",),
    ),
    Difference(
        "not-a-kafka-topic",
        "a topic Kafka cannot have (whitespace, longer than 249)",
        ("INSERT INTO bkt SELECT * FROM `orders topic`",),
        _search(r"`orders topic`"),
        ("bad-topic",),
    ),
    Difference(
        "s3-bucket-rules",
        "a bucket S3 cannot have (upper case, '_', too short): S3 would refuse it at run time",
        ("INSERT INTO Bkt_1 SELECT * FROM orders", "INSERT INTO ab SELECT * FROM orders"),
        _search(r"INTO (Bkt_1|ab) "),
        ("bad-bucket",),
    ),
    Difference(
        "s3-prefix-rules",
        "a prefix with a second ':' or an empty, '.' or '..' segment",
        ("INSERT INTO bkt:p:q SELECT * FROM orders", "INSERT INTO bkt:a//b SELECT * FROM orders"),
        _search(r"bkt:(p:q|a//b)"),
        ("bad-target", "bad-prefix"),
    ),
    Difference(
        "settings-checked",
        "settings the S3 sink would ignore or fall back on silently: an unknown property key, "
        "'flush.*'=0, a value of the wrong type",
        (
            f"{H} PROPERTIES('flush.cuont'=5)",
            f"{H} PROPERTIES('flush.count'=0)",
            f"{H} PROPERTIES('flush.count'='many')",
        ),
        _in_properties(r"cuont|'flush.count'=(0|'many')"),
        ("unknown-property", "bad-property-value"),
    ),
)

LENIENT: tuple[Difference, ...] = (
    Difference(
        "keyword-case",
        "keywords in any case (Lenses takes INSERT or insert, not Insert)",
        ("Insert Into bkt Select * From orders",),
        _search(r"\b(Insert|Into|Select|From|StoreAs|PartitionBy|Properties)\b"),
    ),
    Difference(
        "quoted-select-names",
        "back-ticked names in SELECT (Lenses' column rule takes plain names only)",
        ("INSERT INTO bkt SELECT _value.`a.b` FROM orders",),
        _search(r"SELECT [^*]*`.*FROM"),
    ),
    Difference(
        "quoted-partitioner",
        "a back-ticked WITHPARTITIONER value",
        (f"{H} WITHPARTITIONER = `Values`",),
        _search(r"WITHPARTITIONER\s*=\s*`"),
    ),
    Difference(
        "one-character-string",
        "a one-character 'x' string (Lenses' lexer takes it for a key delimiter)",
        (f"{H} PROPERTIES('padding.char'='x')",),
        _in_properties(r"=\s*'[^']'"),
    ),
    Difference(
        "doubled-quote",
        "'' inside a string stands for one quote (Lenses' strings cannot hold a quote)",
        (f"{H} PROPERTIES('key.suffix'='it''s')",),
        _in_properties(r"''[^,)]"),
    ),
    Difference(
        "same-field-twice",
        "two SELECT fields of one last name under two names (a, a AS b; b, _key.b AS c): "
        "Lenses' parser fails with an index error",
        (
            "INSERT INTO bkt SELECT a, a AS b FROM orders",
            "INSERT INTO bkt SELECT b, _key.b AS c FROM orders",
        ),
        _search(r"SELECT (a, a AS b|b, _key.b AS c)"),
    ),
    Difference(
        "number-names",
        "a bucket or topic of digits only, or with a part of digits only after a '.' (Lenses "
        "lexes it as a number)",
        ("INSERT INTO 123 SELECT * FROM 456", "INSERT INTO bkt.0 SELECT * FROM orders"),
        _search(r"INTO (\d+|bkt\.0) "),
    ),
    Difference(
        "target-characters",
        "'=' in a bare prefix, date patterns with '-' (_date.uuuu-MM-dd)",
        ("INSERT INTO bkt:a=1 SELECT * FROM orders", f"{H} PARTITIONBY _date.uuuu-MM-dd"),
        _search(r"INTO \S*:\S*=|_date\.\w+-"),
    ),
    Difference(
        "comments",
        "'--' comment lines before a statement (Lenses has no comments)",
        ("-- orders\nINSERT INTO bkt SELECT * FROM orders",),
        _search(r"^\s*--"),
    ),
)

FORK_ONLY: tuple[Difference, ...] = (
    Difference(
        "bare-format-word",
        "STOREAS AVRO, JSON, TEXT unquoted: the jar lexes them as keywords; the fork's "
        "storeas_type is FIELD | (DOT | TOPICNAME)+",
        (f"{H} STOREAS AVRO", f"{H} STOREAS JSON", f"{H} STOREAS TEXT"),
        _search(r"(?i)STOREAS\s+(AVRO|JSON|TEXT)\b"),
    ),
    Difference(
        "bare-property-key",
        "PROPERTIES(flush.count=1): the fork's property_name is FIELD | (DOT | TOPICNAME)+ | "
        "STRING",
        (f"{H} PROPERTIES(flush.count=1)",),
        _in_properties(r"[(,]\s*[A-Za-z_][\w.]*\s*="),
    ),
    Difference(
        "nopartition",
        "NOPARTITION (stream-reactor KcqlPartitionByTest.allowNoPartition; the jar glues it "
        "into the topic)",
        (f"{H} NOPARTITION",),
        _search(r"(?i)\bNOPARTITION\b"),
    ),
    Difference(
        "quoted-partition-names",
        "back-ticked PARTITIONBY names (the fork's partition_column takes ESCAPED_FIELD; "
        "Lenses' documentation escapes `a.b`)",
        (f"{H} PARTITIONBY _key.`cost.centre.id`", f"{H} PARTITIONBY `a.b`"),
        _search(r"(?i)PARTITIONBY[^`]*`"),
    ),
)

DIFFERENCES = {d.name: d for d in (*STRICTER, *LENIENT, *FORK_ONLY)}


def explained(statement: str, group: tuple[Difference, ...]) -> list[str]:
    return [d.name for d in group if d.applies(statement)]


@pytest.mark.parametrize(
    ("name", "example"),
    [(d.name, e) for d in STRICTER for e in d.examples],
)
def test_stricter_where_lenses_drops_or_misreads(
    lenses: LensesKcql, name: str, example: str
) -> None:
    difference = DIFFERENCES[name]
    assert difference.applies(example)
    answer = theirs(lenses, example)
    assert isinstance(answer, Meaning), f"Lenses refuses it too: {answer}"
    result = ours(example)
    assert isinstance(result, KcqlError), f"we accept it as {result}"
    assert result.label in difference.labels, str(result)


@pytest.mark.parametrize(
    ("name", "example"),
    [(d.name, e) for d in (*LENIENT, *FORK_ONLY) for e in d.examples],
)
def test_accepted_where_the_jar_refuses_or_misreads(
    lenses: LensesKcql, name: str, example: str
) -> None:
    assert DIFFERENCES[name].applies(example)
    result = ours(example)
    assert isinstance(result, Meaning), str(result)
    answer = theirs(lenses, example)
    assert answer != result  # refused or read otherwise: else this is no difference


# ------------------------------------------------------------------------------------------
# The corpus.


def _statements_of(text: str) -> list[str]:
    """Statements of a .kcql file, without our comment lines (Lenses has none)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def _lenses_fixture() -> list[str]:
    out: list[str] = []
    for block in (FIXTURES / "lenses.kcql").read_text().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(("#", "--"))]
        if "\n".join(lines).strip():
            out.append("\n".join(lines).strip())
    return out


# The manual's statements (each is checked to appear in the README or a page of docs/).
README_STATEMENTS = (
    "INSERT INTO my-bucket:archive SELECT * FROM orders STOREAS `JSON` WITH_FLUSH_COUNT = 5000",
    "INSERT INTO acme-archive:orders SELECT * FROM orders PARTITIONBY _header.country\n"
    "  STOREAS `AVRO` WITHPARTITIONER = KeysAndValues WITH_FLUSH_COUNT = 5000",
    "INSERT INTO acme-archive:orders SELECT * FROM orders PARTITIONBY _header.country\n"
    "  STOREAS AVRO PROPERTIES('partition.include.keys'=true, 'flush.count'=5000)",
    "INSERT INTO acme-lake:tables/orders SELECT * FROM orders STOREAS PARQUET",
    "INSERT INTO my-bucket:archive SELECT * FROM orders",
)

# Real statements from stream-reactor's tests and Lenses' documentation, beyond the fixture.
LENSES_STATEMENTS = (
    # kafka-connect-aws-s3 README-sink.md
    "insert into bucket-name:prefix-name select * from topic-name STOREAS `parquet` "
    "WITH_FLUSH_COUNT = 5000",
    # io.lenses.kcql KcqlPartitionByTest
    "INSERT INTO table-a SELECT * FROM TOPIC_A PARTITIONBY _header.col1,_header.col2",
    "INSERT INTO table-a SELECT col1, col2 as colABC, col3 FROM TOPIC_A PARTITIONBY col1,colABC",
    "INSERT INTO table-a SELECT * FROM TOPIC_A NOPARTITION",
    "INSERT INTO table-a SELECT * FROM TOPIC_A PARTITIONBY _header.cost.centre.id,"
    "_header.`cost.centre.id`",
)


def corpus() -> list[str]:
    texts = [
        *README_STATEMENTS,
        *LENSES_STATEMENTS,
        *_lenses_fixture(),
        *(
            line
            for line in (FIXTURES / "identity.kcql").read_text().splitlines()
            if line.strip() and not line.startswith("--")
        ),
        *_statements_of((ROOT / "samples" / "orders.kcql").read_text()),
    ]
    for sample in sorted((ROOT / "samples" / "kcql").glob("*.kcql")):
        texts.extend(_statements_of(sample.read_text()))
    return texts


CORPUS = corpus()


def test_readme_statements_are_in_the_manual() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    manual = "\n".join(page.read_text() for page in pages).replace("\\`", "`")
    for statement in README_STATEMENTS:
        assert statement in manual, statement


def check(lenses_answer: Meaning | str, result: Meaning | KcqlError, statement: str) -> None:
    """Both accept alike, both refuse, or a listed difference explains why not."""
    fork = explained(statement, FORK_ONLY)
    if isinstance(result, Meaning) and isinstance(lenses_answer, Meaning):
        if not fork:
            assert result == lenses_answer, statement
    elif isinstance(result, Meaning):
        assert fork or explained(statement, LENIENT), (statement, lenses_answer)
    elif isinstance(lenses_answer, Meaning):
        reasons = explained(statement, STRICTER)
        assert reasons, (statement, str(result))
        assert any(result.label in DIFFERENCES[r].labels for r in reasons), str(result)


def test_corpus_is_large(lenses: LensesKcql) -> None:
    assert len(CORPUS) >= 80


@pytest.mark.parametrize("statement", CORPUS)
def test_corpus_statement(lenses: LensesKcql, statement: str) -> None:
    result = ours(statement)
    assert isinstance(result, Meaning), str(result)  # the corpus is all good KCQL
    check(theirs(lenses, statement), result, statement)


def test_corpus_agrees_with_lenses_on_most_statements(lenses: LensesKcql) -> None:
    # The listed differences must stay exceptions, not the rule.
    agree = sum(ours(s) == theirs(lenses, s) for s in CORPUS)
    assert agree >= len(CORPUS) // 2


# examples.py labels whose statements Lenses may accept, and the difference that explains it.
EXAMPLES_LENSES_ACCEPTS = {
    "clause-order": "dropped-trailing-text",
    "star-and-fields": "star-and-fields",
    "missing-insert": "no-insert",
    "bad-target": "glued-words",
}


def test_our_error_examples(lenses: LensesKcql) -> None:
    # examples.py's bad statements: Lenses refuses them too, or drops or misreads text.
    cases = [(label, e) for label, examples in KCQL_ERROR_EXAMPLES.items() for e in examples]
    answers = lenses.read_many([e for _, e in cases])
    for (label, statement), answer in zip(cases, answers, strict=True):
        result = ours(statement)
        assert isinstance(result, KcqlError) and result.label == label.name, statement
        if answer["ok"]:
            assert label.name in EXAMPLES_LENSES_ACCEPTS, (statement, answer)


def test_our_error_fixture(lenses: LensesKcql) -> None:
    # fixtures/errors.kcql: Lenses refuses each too, or it is a listed strictness.
    from tests.unit.kcql.test_errors import CASES

    labels = {label for d in STRICTER for label in d.labels}
    answers = lenses.read_many([case.text for case in CASES])
    accepted = [case for case, answer in zip(CASES, answers, strict=True) if answer["ok"]]
    assert accepted  # (the fixture has statements Lenses takes and we refuse on purpose)
    for case in accepted:
        assert case.label in labels, (case.text, case.label)


# ------------------------------------------------------------------------------------------
# Generated statements: the grammar both parsers share, then one known deviation.

# Every keyword of the jar's lexer (a name spelled so is a keyword there) and its formats.
LENSES_WORDS = frozenset(
    [
        "insert",
        "upsert",
        "update",
        "into",
        "select",
        "from",
        "ignore",
        "as",
        "autocreate",
        "autoevolve",
        "clusterby",
        "buckets",
        "batch",
        "capitalize",
        "initialize",
        "partitionby",
        "distributeby",
        "withtimestamp",
        "withgroup",
        "withoffset",
        "withtag",
        "withkey",
        "keydelimiter",
        "withstructure",
        "withtype",
        "pk",
        "sample",
        "every",
        "withformat",
        "withunwrap",
        "format",
        "projectto",
        "storeas",
        "limit",
        "incrementalmode",
        "withdoctype",
        "withindexsuffix",
        "withconverter",
        "withjmsselector",
        "withtarget",
        "withcompression",
        "withpartitioner",
        "withsubscription",
        "timestampunit",
        "withpipeline",
        "withdelay",
        "withregex",
        "with_flush_interval",
        "with_flush_size",
        "with_flush_count",
        "with_schema_evolution",
        "with_table_location",
        "with_overwrite",
        "with_partitioning",
        "with_session",
        "ttl",
        "with_ack",
        "with_encode_base64",
        "with_lock_time",
        "properties",
        "nopartition",
        "avro",
        "json",
        "text",
        "binary",
        "protobuf",
        "map",
        "object",
    ]
)

# Lenses' FIELD: letters, digits, '_' and '@', not digits only.
names = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True),
    st.from_regex(r"[A-Za-z@0-9][A-Za-z0-9_@]{0,6}", fullmatch=True),
).filter(lambda n: n.casefold() not in LENSES_WORDS and not n.isdigit() and n[0] != "_")
buckets = st.from_regex(r"[a-z][a-z0-9.-]{1,20}[a-z0-9]", fullmatch=True).filter(
    lambda b: (
        "--" not in b
        and ".." not in b
        and not re.search(r"\.-|-\.", b)
        and not b.startswith(("xn-", "sthree-"))
        and not any(word in LENSES_WORDS or word.isdigit() for word in b.split("."))
    )
)
prefixes = st.lists(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,8}", fullmatch=True), max_size=3)
topics = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9._+-]{0,20}", fullmatch=True).filter(
        lambda t: (
            "--" not in t
            and ".." not in t
            and not t.endswith(".")
            and not any(w.casefold() in LENSES_WORDS for w in re.split(r"[.+-]", t))
            and not any(w.isdigit() for w in t.split("."))
        )
    ),
    # Back-ticked or in single quotes: any character but a quote, whitespace or control.
    st.tuples(
        st.from_regex(r"[A-Za-z0-9._+#$%&!-]{1,20}", fullmatch=True).filter(
            lambda t: t not in (".", "..") and len(t) > 1
        ),
        st.sampled_from("`'"),
    ).map(lambda tq: f"{tq[1]}{tq[0]}{tq[1]}"),
)
# Formats both accept: back-ticked in any case, or bare where the jar has no keyword.
formats = st.one_of(
    st.sampled_from(["JSON", "AVRO", "PARQUET", "CSV", "CSV_WITHHEADERS", "TEXT", "BYTES"]).map(
        lambda f: f"`{f.lower() if f[0] in 'AJ' else f}`"
    ),
    st.sampled_from(["PARQUET", "CSV", "CSV_WITHHEADERS", "BYTES", "parquet", "csv"]),
)
PROPERTY_VALUES: dict[str, st.SearchStrategy[str]] = {
    "'flush.count'": st.integers(1, 10**6).map(str),
    "'flush.size'": st.integers(1, 10**9).map(str),
    "'flush.interval'": st.integers(1, 10**5).map(str),
    "'padding.type'": st.sampled_from(["'LeftPad'", "'NoOp'"]),
    "'padding.length.offset'": st.integers(10, 20).map(lambda n: f"'{n}'"),
    "'key.suffix'": st.from_regex(r"'[a-z_.]{2,6}'", fullmatch=True),
    "'partition.include.keys'": st.sampled_from(["true", "false", "'true'", "TRUE"]),
    "'store.envelope'": st.sampled_from(["false", "'false'"]),
}


equals = st.sampled_from(["=", " = ", "= ", " ="])


def spaced(draw: st.DrawFn) -> str:
    return draw(st.sampled_from([" ", " ", "  ", "\n", "\t", " \n  "]))


def keyword(draw: st.DrawFn, word: str) -> str:
    return draw(st.sampled_from([word, word.lower()]))


@st.composite
def shared(draw: st.DrawFn) -> tuple[str, set[str]]:
    """A statement in the grammar the jar, the fork and we share; the clauses it uses."""

    def kw(word: str) -> str:
        return keyword(draw, word)

    def ws() -> str:
        return spaced(draw)

    used: set[str] = set()
    bucket = draw(buckets)
    prefix = "/".join(draw(prefixes))
    target = f"{bucket}:{prefix}" if prefix else bucket
    quoting = draw(st.integers(0, 5))
    if quoting == 0:
        target = f"`{target}`"
    elif quoting == 1 and prefix:
        target = f"`{bucket}`:`{prefix}`"
    elif quoting == 2:
        target = f"'{target}'"
    sources = st.sampled_from(["", "", "_value.", "_key.", "_header.", "_.key."])
    fields: list[str] = []
    if draw(st.booleans()):
        select = "*"
    else:
        seen: set[str] = set()
        for _ in range(draw(st.integers(1, 4))):
            path = draw(sources) + ".".join(draw(st.lists(names, min_size=1, max_size=3)))
            if draw(st.integers(0, 5)) == 0:
                path = draw(st.sampled_from(["_.topic", "_.partition", "_.offset", "_.timestamp"]))
            alias = draw(st.one_of(st.none(), names))
            last = path.rsplit(".", 1)[-1]
            out = alias or last
            if {out, last} & seen:
                continue
            seen |= {out, last}
            fields.append(f"{path}{ws()}{kw('AS')}{ws()}{alias}" if alias else path)
        select = ("," + ws()).join(fields)
    parts = [kw("INSERT"), kw("INTO"), target, kw("SELECT"), select, kw("FROM"), draw(topics)]
    if draw(st.booleans()):
        entries = draw(
            st.lists(
                st.one_of(
                    st.sampled_from(["_key", "_topic", "_partition", "_date.uuuu", "_date.MM"]),
                    st.tuples(st.sampled_from(["", "_value.", "_key.", "_header."]), names).map(
                        "".join
                    ),
                ),
                min_size=1,
                max_size=3,
                unique_by=lambda e: e.casefold().removeprefix("_value."),
            )
        )
        parts += [kw("PARTITIONBY"), ("," + ws()).join(entries)]
        used.add("partitionby")
    if draw(st.booleans()):
        parts += [kw("STOREAS"), draw(formats)]
        used.add("storeas")
    if draw(st.booleans()):
        value = draw(st.sampled_from(["Values", "KeysAndValues", "values", "keysandvalues"]))
        parts += [kw("WITHPARTITIONER"), draw(equals), value]
        used.add("partitioner")
    stated: set[str] = set()
    for clause, key in (
        ("WITH_FLUSH_SIZE", "'flush.size'"),
        ("WITH_FLUSH_INTERVAL", "'flush.interval'"),
        ("WITH_FLUSH_COUNT", "'flush.count'"),
    ):
        if draw(st.integers(0, 3)) == 0:
            parts += [kw(clause), draw(equals), str(draw(st.integers(1, 10**6)))]
            stated.add(key)
            used.add("flush")
    if draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(sorted(PROPERTY_VALUES)), unique=True, max_size=4))
        keys = [k for k in keys if k not in stated]
        if "partitioner" in used and "'partition.include.keys'" in keys:
            keys.remove("'partition.include.keys'")
        if "'padding.length.offset'" in keys and "'padding.type'" not in keys:
            keys.remove("'padding.length.offset'")
        body = ("," + ws()).join(f"{k}{draw(equals)}{draw(PROPERTY_VALUES[k])}" for k in keys)
        parts.append(kw("PROPERTIES") + draw(st.sampled_from(["", " "])) + f"({body})")
        used.add("properties")
    text = "".join(p + ws() for p in parts).strip()
    if draw(st.integers(0, 4)) == 0:
        text += ";"
    return text, used


# One deviation applied to a shared statement: its Difference name, and how to make it.
DEVIATIONS: dict[str, Callable[[str], str]] = {
    "dropped-trailing-text": lambda s: s.rstrip(";") + " junk",
    "glued-words": lambda s: s,  # needs the topic last: see deviate()
    "keyword-case": lambda s: re.sub(r"^insert|^INSERT", "Insert", s),
    "comments": lambda s: "-- archive\n" + s,
    "bare-format-word": lambda s: s,
    "nopartition": lambda s: s,
}


@st.composite
def generated(draw: st.DrawFn) -> tuple[str, str | None]:
    """A shared statement, unchanged or with one listed deviation (its name)."""
    text, used = draw(shared())
    if DIFFERENCES["format-combinations"].applies(text):
        return text, "format-combinations"
    kind = draw(st.sampled_from([None, None, None, None, *sorted(DEVIATIONS)]))
    if kind is None:
        return text, None
    base = text.rstrip(";")
    if kind in ("glued-words", "nopartition", "bare-format-word") and used & {
        "partitionby",
        "storeas",
        "partitioner",
        "flush",
        "properties",
    }:
        return text, None
    if kind == "glued-words":
        changed = base + " v1"
    elif kind == "nopartition":
        changed = base + " NOPARTITION"
    elif kind == "bare-format-word":
        changed = base + " STOREAS " + draw(st.sampled_from(["AVRO", "JSON", "TEXT"]))
    else:
        changed = DEVIATIONS[kind](text)
    if DIFFERENCES["format-combinations"].applies(changed):
        return text, None
    return changed, kind


def check_generated(lenses: LensesKcql, text: str, kind: str | None) -> None:
    result = ours(text)
    answer = theirs(lenses, text)
    if kind is None:
        assert isinstance(answer, Meaning), (text, answer)
        assert isinstance(result, Meaning), (text, str(result))
        assert result == answer, text
        return
    difference = DIFFERENCES[kind]
    if difference in STRICTER:
        assert isinstance(answer, Meaning), (text, answer)
        assert isinstance(result, KcqlError), (text, result)
        assert result.label in difference.labels, str(result)
    elif difference in LENIENT:
        assert isinstance(result, Meaning), (text, str(result))
        assert not isinstance(answer, Meaning), (text, answer)
    else:
        assert isinstance(result, Meaning), (text, str(result))


_HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much]


@settings(max_examples=300, deadline=None, suppress_health_check=_HEALTH)
@given(case=generated())
def test_generated_statements(lenses: LensesKcql, case: tuple[str, str | None]) -> None:
    check_generated(lenses, *case)


@pytest.mark.full
@settings(max_examples=5000, deadline=None, suppress_health_check=_HEALTH)
@given(case=generated())
def test_generated_statements_full(lenses: LensesKcql, case: tuple[str, str | None]) -> None:
    check_generated(lenses, *case)


def test_generator_covers_every_deviation() -> None:
    assert set(DEVIATIONS) <= set(DIFFERENCES)

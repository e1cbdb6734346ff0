"""Labelled bad KCQL: each syntax mistake users make, with the message we give for it.

``parser.py`` passes :data:`KCQL_ERROR_EXAMPLES` to Lark's ``match_examples``: an error
that stops the parser in the same state as one of these examples gets that example's label
and message. ``{found}`` in a message is replaced by what was found (``'x'``, ``STOREAS``,
``end of input``). Errors that match no example fall back to "unexpected X, expected Y".

To teach the parser a new message: add a label and one or more examples that fail at the
same point, then a block to ``tests/unit/kcql/fixtures/errors.kcql``. (An unterminated quote is
recognised by ``parser.py`` directly: it can happen in any state.)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class SyntaxLabel:
    """A kind of syntax error: stable ``name`` (asserted by tests), message and fix."""

    name: str
    message: str
    hint: str | None = None


NO_STATEMENT = SyntaxLabel(
    "no-statement",
    "expected a KCQL statement, found {found}",
    "Write INSERT INTO bucket[:prefix] SELECT * FROM topic",
)
MISSING_INSERT = SyntaxLabel(
    "missing-insert",
    "a statement starts with INSERT INTO, found {found}",
    "Write INSERT INTO bucket[:prefix] SELECT * FROM topic",
)
MISSING_INTO = SyntaxLabel("missing-into", "expected INTO after INSERT, found {found}")
MISSING_TARGET = SyntaxLabel(
    "missing-target",
    "expected the target bucket[:prefix] after INSERT INTO, found {found}",
    "A bucket or prefix spelled like a keyword goes in back-ticks: `select`",
)
BAD_TARGET = SyntaxLabel(
    "bad-target",
    "unexpected {found} in the target",
    "Put a target with spaces or other characters in back-ticks: `bucket:my prefix`",
)
MISSING_SELECT = SyntaxLabel("missing-select", "expected SELECT after the target, found {found}")
MISSING_PROJECTION = SyntaxLabel(
    "missing-projection",
    "expected '*' or a field list after SELECT, found {found}",
    "A field spelled like a keyword goes in back-ticks: `from`",
)
STAR_AND_FIELDS = SyntaxLabel(
    "star-and-fields",
    "SELECT * cannot be combined with other fields",
    "Write SELECT * or a list of fields, not both",
)
MISSING_FIELD = SyntaxLabel(
    "missing-field",
    "expected a field after ',', found {found}",
    "Remove the trailing comma",
)
MISSING_ALIAS = SyntaxLabel("missing-alias", "expected a name after AS, found {found}")
MISSING_PATH_SEGMENT = SyntaxLabel(
    "missing-path-segment",
    "expected a name after '.', found {found}",
    "A name with dots or other characters goes in back-ticks: _key.`cost.centre.id`",
)
MISSING_FROM = SyntaxLabel(
    "missing-from",
    "expected FROM after the SELECT list, found {found}",
    "Separate fields with ',' and give aliases with AS",
)
MISSING_TOPIC = SyntaxLabel(
    "missing-topic",
    "expected a topic after FROM, found {found}",
    "A topic spelled like a keyword, or with other characters, goes in back-ticks: `my topic`",
)
MISSING_PARTITION_FIELD = SyntaxLabel(
    "missing-partition-field",
    "expected a field after PARTITIONBY, found {found}",
    "Write NOPARTITION for no partitioning; a field spelled like a keyword goes in back-ticks",
)
MISSING_FORMAT = SyntaxLabel(
    "missing-format",
    "expected a format after STOREAS, found {found}",
    "Formats: JSON, AVRO, PARQUET, CSV, CSV_WITHHEADERS, TEXT, BYTES",
)
MISSING_EQUALS = SyntaxLabel("missing-equals", "expected '=' after the setting, found {found}")
BAD_PARTITIONER = SyntaxLabel(
    "bad-partitioner",
    "expected KeysAndValues or Values after WITHPARTITIONER =, found {found}",
)
BAD_FLUSH_VALUE = SyntaxLabel(
    "bad-flush-value",
    "expected a positive whole number, found {found}",
    "Flush settings are counts of records, bytes or seconds: WITH_FLUSH_COUNT = 5000",
)
MISSING_PROPERTIES_PAREN = SyntaxLabel(
    "missing-properties-paren", "expected '(' after PROPERTIES, found {found}"
)
BAD_PROPERTY_KEY = SyntaxLabel(
    "bad-property-key",
    "expected a property name, found {found}",
    "Write PROPERTIES('flush.count'=5000)",
)
BAD_PROPERTY_VALUE = SyntaxLabel(
    "bad-property-value",
    "expected a property value, found {found}",
    "A value is a number, true, false, or text in single quotes: 'LeftPad'",
)
UNCLOSED_PROPERTIES = SyntaxLabel(
    "unclosed-properties",
    "expected ',' or ')' after a property, found {found}",
)
CLAUSE_ORDER = SyntaxLabel(
    "clause-order",
    "unexpected {found} here",
    "Clauses go in this order: PARTITIONBY or NOPARTITION, STOREAS, WITHPARTITIONER, "
    "WITH_FLUSH_SIZE, WITH_FLUSH_INTERVAL, WITH_FLUSH_COUNT, PROPERTIES (Lenses silently "
    "drops a clause out of this order); separate statements with ';'",
)
UNTERMINATED_QUOTE = SyntaxLabel(
    "unterminated-quote",
    "unterminated quote {found}",
    "Close it on the same line: `name` or 'text'",
)

_HEAD = "INSERT INTO b SELECT * FROM t"

# Every combination of the optional clauses, in order. Lark's LALR states after a clause
# depend on which clauses came before, so an example of "something after the last clause"
# is needed for each combination.
_OPTIONAL_CLAUSES = (
    ("", " PARTITIONBY a", " NOPARTITION"),
    ("", " STOREAS JSON"),
    ("", " WITHPARTITIONER = Values"),
    ("", " WITH_FLUSH_SIZE = 1"),
    ("", " WITH_FLUSH_INTERVAL = 1"),
    ("", " WITH_FLUSH_COUNT = 1"),
    ("", " PROPERTIES('a'=1)"),
)


def _after_every_clause_combination(bad: str) -> tuple[str, ...]:
    return tuple(
        _HEAD + "".join(clauses) + bad for clauses in itertools.product(*_OPTIONAL_CLAUSES)
    )


def _for_each_flush_clause(bad_value: str) -> tuple[str, ...]:
    return tuple(
        f"{_HEAD} {keyword} = {bad_value}"
        for keyword in ("WITH_FLUSH_COUNT", "WITH_FLUSH_SIZE", "WITH_FLUSH_INTERVAL")
    )


KCQL_ERROR_EXAMPLES: Mapping[SyntaxLabel, tuple[str, ...]] = MappingProxyType(
    {
        NO_STATEMENT: ("", "-- only a comment", ";"),
        MISSING_INSERT: ("SELECT * FROM t", "INSERT INTO b SELECT * FROM t; SELECT"),
        MISSING_INTO: ("INSERT b SELECT * FROM t", "INSERT SELECT"),
        MISSING_TARGET: ("INSERT INTO SELECT * FROM t", "INSERT INTO", "INSERT INTO *"),
        BAD_TARGET: ("INSERT INTO b:p? SELECT * FROM t", "INSERT INTO b:p q SELECT * FROM t"),
        MISSING_SELECT: ("INSERT INTO b:p FROM t", "INSERT INTO b"),
        MISSING_PROJECTION: ("INSERT INTO b SELECT FROM t", "INSERT INTO b SELECT"),
        MISSING_FIELD: ("INSERT INTO b SELECT a, FROM t", "INSERT INTO b SELECT a,"),
        MISSING_ALIAS: ("INSERT INTO b SELECT a AS FROM t", "INSERT INTO b SELECT a AS"),
        MISSING_PATH_SEGMENT: (
            "INSERT INTO b SELECT a. FROM t",
            "INSERT INTO b SELECT a.",
            "INSERT INTO b SELECT * FROM t PARTITIONBY a.",
        ),
        MISSING_FROM: (
            "INSERT INTO b SELECT * t",
            "INSERT INTO b SELECT a b FROM t",
            "INSERT INTO b SELECT a AS b c FROM t",
            "INSERT INTO b SELECT a.b c FROM t",
            "INSERT INTO b SELECT *",
        ),
        # After MISSING_FROM: in the same state, only an exact ',' picks this label.
        STAR_AND_FIELDS: ("INSERT INTO b SELECT *, a FROM t",),
        MISSING_TOPIC: ("INSERT INTO b SELECT * FROM", "INSERT INTO b SELECT * FROM STOREAS"),
        MISSING_PARTITION_FIELD: (
            "INSERT INTO b SELECT * FROM t PARTITIONBY",
            "INSERT INTO b SELECT * FROM t PARTITIONBY STOREAS JSON",
            "INSERT INTO b SELECT * FROM t PARTITIONBY a,",
        ),
        MISSING_FORMAT: (
            "INSERT INTO b SELECT * FROM t STOREAS",
            "INSERT INTO b SELECT * FROM t STOREAS 1",
        ),
        MISSING_EQUALS: (
            "INSERT INTO b SELECT * FROM t WITH_FLUSH_COUNT 5",
            "INSERT INTO b SELECT * FROM t WITHPARTITIONER Values",
            "INSERT INTO b SELECT * FROM t PROPERTIES('a' 1)",
        ),
        BAD_PARTITIONER: (
            "INSERT INTO b SELECT * FROM t WITHPARTITIONER =",
            "INSERT INTO b SELECT * FROM t WITHPARTITIONER = 1",
        ),
        BAD_FLUSH_VALUE: (
            *_for_each_flush_clause("x"),
            *_for_each_flush_clause(""),
            *_for_each_flush_clause("-1"),
            *_for_each_flush_clause("'5'"),
        ),
        MISSING_PROPERTIES_PAREN: (
            "INSERT INTO b SELECT * FROM t PROPERTIES 'a'=1",
            "INSERT INTO b SELECT * FROM t PROPERTIES",
        ),
        BAD_PROPERTY_KEY: (
            "INSERT INTO b SELECT * FROM t PROPERTIES(1=1)",
            "INSERT INTO b SELECT * FROM t PROPERTIES('a'=1,)",
        ),
        BAD_PROPERTY_VALUE: (
            "INSERT INTO b SELECT * FROM t PROPERTIES('a'=)",
            "INSERT INTO b SELECT * FROM t PROPERTIES('a'=-1)",
            "INSERT INTO b SELECT * FROM t PROPERTIES('a'=`x`)",
        ),
        UNCLOSED_PROPERTIES: (
            "INSERT INTO b SELECT * FROM t PROPERTIES('a'=1",
            "INSERT INTO b SELECT * FROM t PROPERTIES('a'=1 'b'=2)",
        ),
        CLAUSE_ORDER: _after_every_clause_combination(" x"),
    }
)

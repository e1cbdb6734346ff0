"""KCQL -> Plan: every clause and property, the defaults, and the strictness rules."""

from __future__ import annotations

import pytest

from kafka_archive import kcql
from kafka_archive.kcql import (
    Envelope,
    FieldRef,
    FlushPolicy,
    Format,
    KcqlError,
    KcqlSemanticError,
    KcqlSyntaxError,
    KeyNaming,
    Padding,
    Route,
    SelectField,
    Source,
    Target,
)
from kafka_archive.kcql.plan import (
    DEFAULT_FLUSH_COUNT,
    DEFAULT_FLUSH_INTERVAL_SECONDS,
    DEFAULT_FLUSH_SIZE,
)
from kafka_archive.kcql.properties import PROPERTY_SPECS

HEAD = "INSERT INTO bkt:p SELECT * FROM orders"


def route(text: str) -> Route:
    plan = kcql.parse(text)
    assert len(plan.routes) == 1
    return plan.routes[0]


def error(text: str) -> KcqlError:
    with pytest.raises(KcqlError) as info:
        kcql.parse(text)
    return info.value


# -- the walking-skeleton subset -----------------------------------------------------------


def test_skeleton_statement() -> None:
    r = route(
        "INSERT INTO my-bucket:archive SELECT * FROM orders STOREAS `JSON` WITH_FLUSH_COUNT = 5000"
    )
    assert r == Route(
        target=Target("my-bucket", "archive"),
        topic="orders",
        format=Format.JSON,
        flush=FlushPolicy(count=5000),
        properties=(("flush.count", "5000"),),
    )


def test_defaults_without_optional_clauses() -> None:
    r = route("INSERT INTO bkt SELECT * FROM orders")
    assert r.target == Target("bkt", "")
    assert r.fields is None
    assert r.partition_by == ()
    assert r.format is Format.JSON
    assert r.flush == FlushPolicy(
        DEFAULT_FLUSH_COUNT, DEFAULT_FLUSH_SIZE, DEFAULT_FLUSH_INTERVAL_SECONDS, False
    )
    assert r.naming == KeyNaming(Padding.LEFT, "0", 12, 0)
    assert r.envelope == Envelope()
    assert r.include_keys is False
    assert r.properties == ()


@pytest.mark.parametrize(
    "text",
    [
        "insert into bkt select * from orders storeas `json` with_flush_count = 7",
        "Insert Into bkt Select * From orders StoreAs Json With_Flush_Count=7",
        "INSERT\n  INTO bkt\n  SELECT *\n  FROM orders\n  STOREAS JSON\n  WITH_FLUSH_COUNT = 7",
    ],
)
def test_keywords_are_case_insensitive_and_layout_free(text: str) -> None:
    r = route(text)
    assert (r.topic, r.format, r.flush.count) == ("orders", Format.JSON, 7)


def test_several_statements() -> None:
    plan = kcql.parse(
        "INSERT INTO bkt:a SELECT * FROM t1 STOREAS `TEXT`;\n"
        "INSERT INTO bkt:b SELECT * FROM t2 STOREAS BYTES WITH_FLUSH_COUNT = 2;"
    )
    assert [(r.target.prefix, r.topic, r.format, r.flush.count) for r in plan.routes] == [
        ("a", "t1", Format.TEXT, DEFAULT_FLUSH_COUNT),
        ("b", "t2", Format.BYTES, 2),
    ]


def test_extra_semicolons_and_comments_are_ignored() -> None:
    plan = kcql.parse(
        "-- archive two topics\n;;INSERT INTO bkt SELECT * FROM a; -- the first\n;\n"
        "INSERT INTO bkt SELECT * FROM b; -- done\n"
    )
    assert [r.topic for r in plan.routes] == ["a", "b"]


def test_semicolon_inside_quotes_is_data() -> None:
    plan = kcql.parse(
        "INSERT INTO `bkt:a;b` SELECT * FROM `t;1` PROPERTIES('key.suffix'='x;y'); "
        "INSERT INTO bkt SELECT _value.`f;g` FROM t2"
    )
    first, second = plan.routes
    assert first.target == Target("bkt", "a;b")
    assert first.topic == "t;1"
    assert dict(first.properties).get("key.suffix") == "x;y"
    assert second.fields == (SelectField(FieldRef(Source.VALUE, ("f;g",))),)


def test_double_dash_inside_quotes_is_data() -> None:
    r = route("INSERT INTO bkt SELECT * FROM `a--b` PROPERTIES('key.suffix'='--x')")
    assert (r.topic, dict(r.properties).get("key.suffix")) == ("a--b", "--x")


def test_spans_are_recorded_but_not_compared() -> None:
    text = "INSERT INTO bkt SELECT a FROM t PARTITIONBY _key"
    r = route(text)
    assert r.span is not None and (r.span.line, r.span.column) == (1, 1)
    assert r.span.end_column == len(text) + 1
    assert r.fields is not None and r.fields[0].span is not None
    assert r.partition_by[0].span is not None and r.partition_by[0].span.column == 45
    assert route("insert into bkt select a from t partitionby _key") == r


# -- target ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("bkt", Target("bkt", "")),
        ("my.bucket-1:a/b/c", Target("my.bucket-1", "a/b/c")),
        ("bkt:year=2024/x_y+z.json", Target("bkt", "year=2024/x_y+z.json")),
        ("`bkt:with space/and:colon`", Target("bkt", "with space/and:colon")),
        ("`bkt`:`pre fix`", Target("bkt", "pre fix")),
        ("`bkt`", Target("bkt", "")),
        ("`select`", Target("select", "")),
        ("select:x", Target("select", "x")),
    ],
)
def test_target(text: str, target: Target) -> None:
    assert route(f"INSERT INTO {text} SELECT * FROM t").target == target


@pytest.mark.parametrize(
    ("bucket", "rule"),
    [
        ("ab", "3 to 63 characters"),
        ("a" * 64, "3 to 63 characters"),
        ("My-Bucket", "lower case"),
        ("my_bucket", "not '_'"),
        ("-bucket", "begin and end with a letter or a digit"),
        ("bucket.", "begin and end with a letter or a digit"),
        ("my..bucket", "two adjacent periods"),
        ("10.0.0.1", "IP addresses"),
        ("`xn--bucket`", "'xn--' is reserved"),
        ("sthree-bkt", "'sthree-' is reserved"),
        ("amzn-s3-demo-bkt", "'amzn-s3-demo-' is reserved"),
        ("bkt-s3alias", "'-s3alias' is reserved"),
        ("`bkt--ol-s3`", "'--ol-s3' is reserved"),
        ("bkt.mrap", "'.mrap' is reserved"),
        ("`bkt--x-s3`", "'--x-s3' is reserved"),
        ("`bkt--table-s3`", "'--table-s3' is reserved"),
    ],
)
def test_bucket_naming_rules_say_which_rule_failed(bucket: str, rule: str) -> None:
    target = f"`{bucket.strip('`')}:p`" if bucket.startswith("`") else f"{bucket}:p"
    err = error(f"INSERT INTO {target} SELECT * FROM t")
    assert isinstance(err, KcqlSemanticError)
    assert err.label == "bad-bucket"
    assert rule in err.message
    assert err.column == 13 + (1 if bucket.startswith("`") else 0)


def test_upper_case_bucket_suggests_the_lower_case_name() -> None:
    assert error("INSERT INTO My-Bucket SELECT * FROM t").hint == "Did you mean 'my-bucket'?"


@pytest.mark.parametrize("prefix", ["", "a//b", "/a", "a/", "a/./b", "`a/../b`"])
def test_bad_prefixes(prefix: str) -> None:
    target = f"`bkt:{prefix.strip('`')}`" if prefix.startswith("`") else f"bkt:{prefix}"
    assert error(f"INSERT INTO {target} SELECT * FROM t").label == "bad-prefix"


def test_prefix_with_slashes_suggests_the_clean_prefix() -> None:
    assert error("INSERT INTO bkt:/a//b/ SELECT * FROM t").hint == "Write 'a/b'"


# -- topic ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("orders", "orders"),
        ("orders.v1_eu-west+x", "orders.v1_eu-west+x"),
        ("`*`", "*"),
        ("`from`", "from"),
        ("`a--b`", "a--b"),
        ("2024", "2024"),
    ],
)
def test_topic(text: str, topic: str) -> None:
    assert route(f"INSERT INTO bkt SELECT * FROM {text}").topic == topic


@pytest.mark.parametrize("topic", ["`.`", "..", "`a b`", "`" + "t" * 250 + "`"])
def test_bad_topics(topic: str) -> None:
    assert error(f"INSERT INTO bkt SELECT * FROM {topic}").label == "bad-topic"


def test_topic_of_249_characters_is_fine() -> None:
    assert route(f"INSERT INTO bkt SELECT * FROM {'t' * 249}").topic == "t" * 249


# -- SELECT ------------------------------------------------------------------------------------


def select(fields: str, fmt: str = "JSON") -> tuple[SelectField, ...]:
    r = route(f"INSERT INTO bkt SELECT {fields} FROM t STOREAS {fmt}")
    assert r.fields is not None
    return r.fields


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("a", FieldRef(Source.VALUE, ("a",))),
        ("a.b.c", FieldRef(Source.VALUE, ("a", "b", "c"))),
        ("_value.a.b", FieldRef(Source.VALUE, ("a", "b"))),
        ("_value", FieldRef(Source.VALUE, ())),
        ("_id", FieldRef(Source.VALUE, ("_id",))),
        ("`_key`", FieldRef(Source.VALUE, ("_key",))),
        ("`a.b`.c", FieldRef(Source.VALUE, ("a.b", "c"))),
        ("order-id", FieldRef(Source.VALUE, ("order-id",))),
        ("`from`", FieldRef(Source.VALUE, ("from",))),
        ("_key", FieldRef(Source.KEY, ())),
        ("_key.a", FieldRef(Source.KEY, ("a",))),
        ("_header.country", FieldRef(Source.HEADER, ("country",))),
        ("_header.`X-Trace.Id`", FieldRef(Source.HEADER, ("X-Trace.Id",))),
        ("_topic", FieldRef(Source.TOPIC, ())),
        ("_partition", FieldRef(Source.PARTITION, ())),
        ("_offset", FieldRef(Source.OFFSET, ())),
        ("_timestamp", FieldRef(Source.TIMESTAMP, ())),
    ],
)
def test_select_field_sources(text: str, ref: FieldRef) -> None:
    (field,) = select(text)
    assert field.ref == ref
    assert field.alias is None


def test_select_aliases_and_output_names() -> None:
    fields = select("_value.id AS id2, _key AS `the key`, _header.h, customer.name")
    assert [(f.alias, f.output_name) for f in fields] == [
        ("id2", "id2"),
        ("the key", "the key"),
        (None, "h"),
        (None, "name"),
    ]


def test_whitespace_around_dots_is_allowed() -> None:
    (field,) = select("_key . a")
    assert field.ref == FieldRef(Source.KEY, ("a",))


@pytest.mark.parametrize(
    ("fields", "label"),
    [
        ("_date.uuuu", "source-not-allowed"),
        ("_topic.x", "metadata-path"),
        ("_offset.x", "metadata-path"),
        ("_header", "header-name"),
        ("_heder.country", "unknown-source"),
        ("_Key", "unknown-source"),
        ("a, a", "duplicate-field"),
        ("_key.id, _value.id", "duplicate-field"),
        ("x AS y, y", "duplicate-field"),
    ],
)
def test_bad_select_fields(fields: str, label: str) -> None:
    assert error(f"INSERT INTO bkt SELECT {fields} FROM t").label == label


def test_unknown_source_suggests_the_source_and_the_value_spelling() -> None:
    err = error("INSERT INTO bkt SELECT _heder.country FROM t")
    assert err.hint is not None
    assert "Did you mean '_header'?" in err.hint
    assert "_value._heder" in err.hint


@pytest.mark.parametrize("fmt", ["TEXT", "BYTES"])
def test_select_list_on_unstructured_formats_is_refused(fmt: str) -> None:
    assert error(f"INSERT INTO bkt SELECT _key FROM t STOREAS {fmt}").label == "select-unstructured"
    assert route(f"INSERT INTO bkt SELECT * FROM t STOREAS {fmt}").fields is None


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET", "CSV", "CSV_WITHHEADERS"])
def test_select_list_on_structured_formats(fmt: str) -> None:
    assert len(select("a, _key AS k", fmt)) == 2


# -- PARTITIONBY -------------------------------------------------------------------------------


def partition_by(entries: str, rest: str = "") -> tuple[FieldRef, ...]:
    return route(f"{HEAD} PARTITIONBY {entries} {rest}").partition_by


def test_partition_entries() -> None:
    assert partition_by(
        "_key, _key.a, _value.b.c, d, _header.h, _header.h.p, _topic, _partition, "
        "_date.uuuu, _date.`uuuu-LL-dd`, _key.`cost.centre.id`"
    ) == (
        FieldRef(Source.KEY, ()),
        FieldRef(Source.KEY, ("a",)),
        FieldRef(Source.VALUE, ("b", "c")),
        FieldRef(Source.VALUE, ("d",)),
        FieldRef(Source.HEADER, ("h",)),
        FieldRef(Source.HEADER, ("h", "p")),
        FieldRef(Source.TOPIC, ()),
        FieldRef(Source.PARTITION, ()),
        FieldRef(Source.DATE, ("uuuu",)),
        FieldRef(Source.DATE, ("uuuu-LL-dd",)),
        FieldRef(Source.KEY, ("cost.centre.id",)),
    )


def test_nopartition_is_the_default_layout() -> None:
    assert route(f"{HEAD} NOPARTITION STOREAS AVRO") == route(f"{HEAD} STOREAS AVRO")


def test_adjacent_words_never_merge() -> None:
    # Lenses' grammar reads a field named salaryWITHPARTITIONER here.
    r = route(f"{HEAD} PARTITIONBY salary WITHPARTITIONER=Values")
    assert r.partition_by == (FieldRef(Source.VALUE, ("salary",)),)
    assert r.include_keys is False
    assert dict(r.properties).get("partition.include.keys") == "false"


def test_a_word_glued_to_a_keyword_is_one_word() -> None:
    assert error(f"{HEAD} PARTITIONBY salary WITHPARTITIONER=Values STOREASJSON").label == (
        "clause-order"
    )


def test_flush_setting_after_storeas_is_kept() -> None:
    # Lenses (current) silently drops this WITH_FLUSH_COUNT.
    r = route(f"{HEAD} STOREAS `AVRO` WITH_FLUSH_COUNT = 5000")
    assert (r.format, r.flush.count) == (Format.AVRO, 5000)


def test_keywords_are_reserved_but_back_ticks_free_them() -> None:
    assert error(f"{HEAD} PARTITIONBY storeas").label == "missing-partition-field"
    assert partition_by("`storeas`") == (FieldRef(Source.VALUE, ("storeas",)),)


@pytest.mark.parametrize(
    ("entries", "label"),
    [
        ("_offset", "source-not-allowed"),
        ("_timestamp", "source-not-allowed"),
        ("_header", "header-name"),
        ("_date", "date-pattern"),
        ("_date.uuuu.MM", "date-pattern"),
        ("_date.`uuuu/MM`", "date-pattern"),
        ("_date.`uuuu MM`", "date-pattern"),
        ("_date.Jjj", "date-pattern"),
        ("_partition.x", "metadata-path"),
        ("_key, _key", "duplicate-partition"),
        ("a, _value.a", "duplicate-partition"),
        ("_header.h, _header.`h`", "duplicate-partition"),
    ],
)
def test_bad_partition_entries(entries: str, label: str) -> None:
    assert error(f"{HEAD} PARTITIONBY {entries}").label == label


@pytest.mark.parametrize("fmt", ["TEXT", "BYTES"])
def test_value_partition_on_unstructured_formats_is_refused(fmt: str) -> None:
    assert error(f"{HEAD} PARTITIONBY a STOREAS {fmt}").label == "value-partition-unstructured"
    assert partition_by("_key, _header.h, _date.dd", f"STOREAS {fmt}")


def test_whole_value_partition_is_allowed_for_text_not_bytes() -> None:
    assert partition_by("_value", "STOREAS TEXT") == (FieldRef(Source.VALUE, ()),)
    assert error(f"{HEAD} PARTITIONBY _value STOREAS BYTES").label == (
        "value-partition-unstructured"
    )


def test_partitioner_keys_and_values() -> None:
    assert route(f"{HEAD} PARTITIONBY a WITHPARTITIONER = KeysAndValues").include_keys is True
    assert route(f"{HEAD} PARTITIONBY a WITHPARTITIONER = `keysandvalues`").include_keys is True
    assert route(f"{HEAD} PROPERTIES('partition.include.keys'=true)").include_keys is True


def test_unknown_partitioner_suggests() -> None:
    err = error(f"{HEAD} WITHPARTITIONER = KeyAndValues")
    assert (err.label, err.hint) == ("unknown-partitioner", "Did you mean 'KeysAndValues'?")


# -- STOREAS -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize("spell", [str, str.lower, lambda s: f"`{s}`", lambda s: f"`{s.title()}`"])
def test_every_format_in_any_spelling(fmt: Format, spell: object) -> None:
    assert callable(spell)
    assert route(f"{HEAD} STOREAS {spell(fmt.value)}").format is fmt


def test_unknown_format_lists_formats_when_nothing_is_close() -> None:
    err = error(f"{HEAD} STOREAS xml")
    assert err.label == "unknown-format"
    assert err.hint is not None and "PARQUET" in err.hint
    assert err.expected == Format.names()


# -- flush settings --------------------------------------------------------------------------


def test_legacy_flush_clauses_mean_their_properties() -> None:
    a = route(f"{HEAD} WITH_FLUSH_SIZE = 1000 WITH_FLUSH_INTERVAL = 60 WITH_FLUSH_COUNT = 10")
    assert a.flush == FlushPolicy(count=10, size=1000, interval_seconds=60, interval_set=True)
    assert a.properties == (
        ("flush.count", "10"),
        ("flush.interval", "60"),
        ("flush.size", "1000"),
    )


@pytest.mark.parametrize(
    "clauses",
    [
        "WITH_FLUSH_INTERVAL = 60 WITH_FLUSH_SIZE = 1000",
        "WITH_FLUSH_COUNT = 10 WITH_FLUSH_INTERVAL = 60",
        "WITH_FLUSH_COUNT = 10 WITH_FLUSH_SIZE = 1000",
        "WITH_FLUSH_COUNT = 10 WITH_FLUSH_COUNT = 10",
    ],
)
def test_legacy_flush_clauses_out_of_lenses_order_are_refused(clauses: str) -> None:
    # Lenses' parser reads WITH_FLUSH_SIZE, _INTERVAL, _COUNT in this order and silently drops
    # a clause out of it (and all that follows): the second clause here would not count.
    err = error(f"{HEAD} {clauses}")
    assert err.label == "clause-order"
    assert (
        err.hint is not None
        and "WITH_FLUSH_SIZE, WITH_FLUSH_INTERVAL, WITH_FLUSH_COUNT" in err.hint
    )


def test_legacy_and_properties_mean_the_same() -> None:
    legacy = route(
        f"{HEAD} PARTITIONBY a WITHPARTITIONER = KeysAndValues WITH_FLUSH_SIZE = 6 "
        "WITH_FLUSH_INTERVAL = 7 WITH_FLUSH_COUNT = 5"
    )
    current = route(
        f"{HEAD} PARTITIONBY a PROPERTIES('partition.include.keys'=true, 'flush.count'=5, "
        "'flush.size'=6, 'flush.interval'=7)"
    )
    assert legacy == current


def test_stating_a_setting_both_ways_with_the_same_value_is_fine() -> None:
    r = route(f"{HEAD} WITH_FLUSH_COUNT = 5 PROPERTIES('flush.count'='5')")
    assert r.flush.count == 5


@pytest.mark.parametrize(
    "clauses",
    [
        "WITH_FLUSH_COUNT = 5 PROPERTIES('flush.count'=6)",
        "WITH_FLUSH_SIZE = 5 PROPERTIES('flush.size'=6)",
        "WITH_FLUSH_INTERVAL = 5 PROPERTIES('flush.interval'=6)",
        "WITHPARTITIONER = KeysAndValues PROPERTIES('partition.include.keys'=false)",
    ],
)
def test_legacy_and_property_conflict(clauses: str) -> None:
    err = error(f"{HEAD} {clauses}")
    assert err.label == "conflicting-setting"
    assert err.column == len(HEAD) + 2 + clauses.index("PROPERTIES(") + len("PROPERTIES(")


def test_interval_set_only_when_stated() -> None:
    assert route(HEAD).flush.interval_set is False
    stated = route(f"{HEAD} PROPERTIES('flush.interval'=3600)").flush
    assert (stated.interval_seconds, stated.interval_set) == (3600, True)


@pytest.mark.parametrize("value", ["0", "'0'", "'-3'", "'1.5'", "'x'", "true", "'five'"])
@pytest.mark.parametrize("key", ["flush.count", "flush.size", "flush.interval"])
def test_flush_values_must_be_positive_integers(key: str, value: str) -> None:
    err = error(f"{HEAD} PROPERTIES('{key}'={value})")
    assert err.label == "bad-property-value"


def test_flush_value_with_leading_zeros_is_canonical() -> None:
    r = route(f"{HEAD} PROPERTIES('flush.count'='007')")
    assert dict(r.properties)["flush.count"] == "7" and r.flush.count == 7


def test_flush_zero_in_legacy_clause_is_refused() -> None:
    assert error(f"{HEAD} WITH_FLUSH_SIZE = 0").label == "bad-property-value"


# -- PROPERTIES ----------------------------------------------------------------------------------


def test_property_table_has_the_lenses_keys() -> None:
    assert {
        "flush.count",
        "flush.size",
        "flush.interval",
        "partition.include.keys",
        "padding.type",
        "padding.char",
        "padding.length.offset",
        "padding.length.partition",
        "store.envelope",
        "store.envelope.fields.key",
        "store.envelope.fields.value",
        "store.envelope.fields.headers",
        "store.envelope.fields.metadata",
        "key.suffix",
    } <= set(PROPERTY_SPECS)


def test_padding_properties_map_onto_key_naming() -> None:
    r = route(
        f"{HEAD} PROPERTIES('padding.type'='rightpad', 'padding.char'='x', "
        "'padding.length.offset'=20, 'padding.length.partition'=3)"
    )
    assert r.naming == KeyNaming(Padding.RIGHT, "x", 20, 3)
    assert dict(r.properties).get("padding.type") == "RightPad"


@pytest.mark.parametrize(
    ("spelling", "padding"), [("LeftPad", Padding.LEFT), ("NOOP", Padding.NONE)]
)
def test_padding_types(spelling: str, padding: Padding) -> None:
    assert route(f"{HEAD} PROPERTIES('padding.type'={spelling})").naming.padding is padding


def test_unknown_padding_type_suggests() -> None:
    err = error(f"{HEAD} PROPERTIES('padding.type'='LeftPadding')")
    assert err.hint == "Did you mean 'LeftPad'?"


@pytest.mark.parametrize(
    "prop",
    [
        "'padding.char'=''",
        "'padding.char'='ab'",
        "'padding.char'=' '",
        "'padding.length.offset'='-1'",
        "'padding.length.offset'=2147483648",
        "'padding.length.partition'=99999999999999999999999999",
        "'store.envelope'=1",
        "'store.envelope'='maybe'",
        "'partition.include.keys'=yes",
        "'key.suffix'='a/b'",
        "'partition.timezone'='Nowhere/City'",
    ],
)
def test_bad_property_values(prop: str) -> None:
    assert error(f"{HEAD} PROPERTIES({prop})").label == "bad-property-value"


def test_unknown_property_suggests() -> None:
    err = error(f"{HEAD} PROPERTIES('padding.lenght.offset'=3)")
    assert (err.label, err.hint) == ("unknown-property", "Did you mean 'padding.length.offset'?")


def test_duplicate_property() -> None:
    assert error(f"{HEAD} PROPERTIES('key.suffix'='a', 'key.suffix'='a')").label == (
        "duplicate-setting"
    )


def test_bool_values_any_case_quoted_or_not() -> None:
    r = route(f"{HEAD} PARTITIONBY a PROPERTIES('partition.include.keys'='TRUE')")
    assert r.include_keys is True
    assert dict(r.properties).get("partition.include.keys") == "true"


def test_properties_are_sorted_canonical_strings() -> None:
    r = route(
        f"{HEAD} PROPERTIES('store.envelope'=True, 'flush.count'=9, 'key.suffix'='it''s', "
        "'partition.timezone'='Europe/Berlin')"
    )
    assert r.properties == (
        ("flush.count", "9"),
        ("key.suffix", "it's"),
        ("partition.timezone", "Europe/Berlin"),
        ("store.envelope", "true"),
    )


# -- envelope --------------------------------------------------------------------------------


def test_envelope() -> None:
    r = route(
        f"{HEAD} STOREAS AVRO PROPERTIES('store.envelope'=true, "
        "'store.envelope.fields.headers'=false, 'store.envelope.fields.metadata'=false)"
    )
    assert r.envelope == Envelope(enabled=True, key=True, value=True, headers=False, metadata=False)


def test_envelope_off_is_the_default_envelope() -> None:
    assert route(f"{HEAD} PROPERTIES('store.envelope'=false)").envelope == Envelope()


@pytest.mark.parametrize("fmt", ["CSV", "CSV_WITHHEADERS", "TEXT", "BYTES"])
def test_envelope_with_unstructured_or_flat_formats_is_refused(fmt: str) -> None:
    err = error(f"{HEAD} STOREAS {fmt} PROPERTIES('store.envelope'=true)")
    assert err.label == "envelope-format"


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET"])
def test_envelope_formats(fmt: str) -> None:
    assert route(f"{HEAD} STOREAS {fmt} PROPERTIES('store.envelope'=true)").envelope.enabled


def test_envelope_fields_need_the_envelope() -> None:
    err = error(f"{HEAD} PROPERTIES('store.envelope.fields.value'=false)")
    assert err.label == "envelope-fields-without-envelope"


# -- across statements -----------------------------------------------------------------------


def test_same_topic_to_same_bucket_and_prefix_is_refused() -> None:
    err = error("INSERT INTO bkt:p SELECT * FROM t; INSERT INTO bkt:p SELECT * FROM t STOREAS AVRO")
    assert (err.label, err.line, err.column) == ("duplicate-route", 1, 68)


def test_wildcard_overlaps_every_topic_under_the_same_target() -> None:
    assert error("INSERT INTO bkt SELECT * FROM `*`; INSERT INTO bkt SELECT * FROM t").label == (
        "duplicate-route"
    )


def test_same_topic_to_different_prefixes_is_fine() -> None:
    plan = kcql.parse(
        "INSERT INTO bkt:a SELECT * FROM t; INSERT INTO bkt:b SELECT * FROM t; "
        "INSERT INTO other SELECT * FROM t; INSERT INTO bkt:a SELECT * FROM u"
    )
    assert len(plan.routes) == 4


# -- end of input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"{HEAD} STOREAS `AVRO` WITH_FLUSH_COUNT = 5000 extra",
        f"{HEAD} STOREAS `AVRO` WITH_FLUSH_COUNT = 5000)",
        f"{HEAD} PROPERTIES('flush.count'=1) PROPERTIES('flush.size'=1)",
        f"{HEAD} STOREAS JSON STOREAS AVRO",
        f"{HEAD} INSERT INTO bkt SELECT * FROM u",
    ],
)
def test_text_the_grammar_does_not_consume_is_an_error(text: str) -> None:
    with pytest.raises(KcqlSyntaxError):
        kcql.parse(text)


# -- plan helpers ----------------------------------------------------------------------------


def test_all_topics_flag() -> None:
    assert route("INSERT INTO bkt SELECT * FROM `*`").all_topics is True
    assert route("INSERT INTO bkt SELECT * FROM orders").all_topics is False


def test_timezone_defaults_to_utc() -> None:
    assert route(f"{HEAD} PARTITIONBY _date.HH").layout.timezone == "UTC"
    tz = route(f"{HEAD} PARTITIONBY _date.HH PROPERTIES('partition.timezone'='Asia/Tokyo')")
    assert tz.layout.timezone == "Asia/Tokyo"


def test_time_field_names_a_record_field() -> None:
    assert route(f"{HEAD} PARTITIONBY _date.HH").layout.time_field is None
    for written, source, path in (
        ("_value.meta.created_at", Source.VALUE, ("meta", "created_at")),
        ("created_at", Source.VALUE, ("created_at",)),
        ("_key.ts", Source.KEY, ("ts",)),
        ("_key", Source.KEY, ()),
        ("_header.event_time", Source.HEADER, ("event_time",)),
    ):
        r = route(f"{HEAD} PARTITIONBY _date.HH PROPERTIES('partition.time.field'='{written}')")
        assert r.layout.time_field is not None
        assert (r.layout.time_field.source, r.layout.time_field.path) == (source, path)


@pytest.mark.parametrize(
    "written", ["_offset", "_topic", "_header", "a..b", "", "_vlue.x", "_date.HH"]
)
def test_time_field_that_holds_no_time_is_refused(written: str) -> None:
    err = error(f"{HEAD} PARTITIONBY _date.HH PROPERTIES('partition.time.field'='{written}')")
    assert err.label == "bad-property-value"
    assert "partition.time.field" in err.message


def test_avro_schema_file_is_a_path_for_avro_and_parquet_only() -> None:
    r = route(f"{HEAD} STOREAS AVRO PROPERTIES('avro.schema.file'='/etc/schemas/order.avsc')")
    assert dict(r.properties).get("avro.schema.file") == "/etc/schemas/order.avsc"
    r = route(f"{HEAD} STOREAS PARQUET PROPERTIES('avro.schema.file'='order.avsc')")
    assert dict(r.properties).get("avro.schema.file") == "order.avsc"
    err = error(f"{HEAD} STOREAS JSON PROPERTIES('avro.schema.file'='order.avsc')")
    assert err.label == "property-format" and "AVRO, PARQUET" in (err.hint or "")
    err = error(
        f"{HEAD} STOREAS AVRO PROPERTIES('avro.schema.file'='order.avsc', 'store.envelope'=true)"
    )
    assert err.label == "schema-file-with-envelope"
    assert error(f"{HEAD} STOREAS AVRO PROPERTIES('avro.schema.file'=' ')").label == (
        "bad-property-value"
    )


def test_a_schema_registry_subject_declares_the_schema_instead_of_a_file() -> None:
    r = route(f"{HEAD} STOREAS AVRO PROPERTIES('avro.schema.subject'='orders-value')")
    assert (r.avro_schema_subject, r.avro_schema_version) == ("orders-value", None)
    r = route(
        f"{HEAD} STOREAS PARQUET PROPERTIES('avro.schema.subject'='com.shop.Order', "
        "'avro.schema.subject.version'=3)"
    )
    assert (r.avro_schema_subject, r.avro_schema_version) == ("com.shop.Order", "3")
    both = "'avro.schema.subject'='o', 'avro.schema.file'='o.avsc'"
    assert error(f"{HEAD} STOREAS AVRO PROPERTIES({both})").label == "schema-file-and-subject"
    envelope = "'avro.schema.subject'='o', 'store.envelope'=true"
    assert error(f"{HEAD} STOREAS AVRO PROPERTIES({envelope})").label == (
        "schema-subject-with-envelope"
    )
    alone = "'avro.schema.subject.version'=2"
    assert error(f"{HEAD} STOREAS AVRO PROPERTIES({alone})").label == (
        "subject-version-without-subject"
    )
    zero = "'avro.schema.subject'='o', 'avro.schema.subject.version'=0"
    assert error(f"{HEAD} STOREAS AVRO PROPERTIES({zero})").label == "bad-property-value"
    assert error(f"{HEAD} STOREAS JSON PROPERTIES('avro.schema.subject'='o')").label == (
        "property-format"
    )


def test_transform_and_schema_compatibility_compile_into_typed_fields() -> None:
    from kafka_archive.kcql.plan import SchemaCompatibility

    (route,) = kcql.parse(
        "INSERT INTO bkt SELECT * FROM t STOREAS `AVRO` "
        "PROPERTIES('transform'='pii.rules:drop_pii', 'schema.compatibility'='backward')"
    ).routes
    assert route.transform == "pii.rules:drop_pii"
    assert route.schema_compatibility is SchemaCompatibility.BACKWARD
    (default,) = kcql.parse("INSERT INTO bkt SELECT * FROM t STOREAS `PARQUET`").routes
    assert default.transform is None
    assert default.schema_compatibility is SchemaCompatibility.NONE


def test_field_names_lenses_spells_with_digits_first_or_at_signs() -> None:
    # Lenses' FIELD is letters, digits, '_' and '@' in any order: `SELECT @timestamp, 1col`.
    r = route("INSERT INTO bkt SELECT @timestamp, 1col AS c FROM t PARTITIONBY 1col, _key.@id")
    assert r.fields is not None
    assert [(f.ref.source, f.ref.path, f.output_name) for f in r.fields] == [
        (Source.VALUE, ("@timestamp",), "@timestamp"),
        (Source.VALUE, ("1col",), "c"),
    ]
    assert [(ref.source, ref.path) for ref in r.partition_by] == [
        (Source.VALUE, ("1col",)),
        (Source.KEY, ("@id",)),
    ]
    assert error(f"{HEAD} PARTITIONBY 12").label == "missing-partition-field"


def test_single_quoted_target_and_topic_as_lenses_reads_them() -> None:
    # Lenses' table_name and topic_name take a STRING: 'bkt:p' is the target bkt:p.
    r = route("INSERT INTO 'bkt:archive/v1' SELECT * FROM 'orders.v2'")
    assert (r.target, r.topic) == (Target("bkt", "archive/v1"), "orders.v2")
    assert kcql.render(r) == "INSERT INTO bkt:archive/v1 SELECT * FROM orders.v2 STOREAS `JSON`"

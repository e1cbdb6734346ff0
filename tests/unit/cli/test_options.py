"""The shared flags' own syntax: -X KEY=VALUE (librdkafka) and --conf KEY=VALUE (Spark)."""

from __future__ import annotations

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.cli.options import kafka_properties, spark_conf

KEYS = st.text(min_size=1).filter(lambda k: "=" not in k and k.strip() == k and k != "")


def test_kafka_properties_split_at_the_first_equals_and_strip_the_name() -> None:
    assert kafka_properties(["a=b", " c =d=e", "empty="]) == {"a": "b", "c": "d=e", "empty": ""}
    assert kafka_properties([]) == {}


@pytest.mark.parametrize("pair", ["novalue", "=v", "  =v"])
def test_a_kafka_property_without_a_name_is_a_usage_error(pair: str) -> None:
    with pytest.raises(click.UsageError, match="-X expects KEY=VALUE"):
        kafka_properties([pair])


@given(KEYS, st.text())
def test_any_kafka_property_round_trips(key: str, value: str) -> None:
    assert kafka_properties([f"{key}={value}"]) == {key: value}


def test_spark_conf_keeps_order_and_repeats() -> None:
    items = ["spark.a=1", "spark.b=x=y", "spark.a=2"]
    assert spark_conf(items, "--conf") == [("spark.a", "1"), ("spark.b", "x=y"), ("spark.a", "2")]


@pytest.mark.parametrize("item", ["spark.a", "=1"])
def test_a_spark_property_without_a_key_is_a_bad_parameter(item: str) -> None:
    with pytest.raises(click.BadParameter, match="expected KEY=VALUE") as raised:
        spark_conf([item], "--conf")
    assert raised.value.param_hint == "--conf"

"""FROM `*`: resolving the topics of an every-topic route (archiver/plan/topics.py)."""

from __future__ import annotations

import dataclasses

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.config.settings import Settings as _Settings
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.plan.topics import resolve

ON_CLUSTER = ("orders.eu", "orders.us", "payments", "orders.eu-dlq")


def Settings(**kw: str) -> _Settings:
    return _Settings(kafka=KafkaSettings("broker:9092"), **kw)  # type: ignore[arg-type]


def plan(text: str) -> kcql.Plan:
    return kcql.parse(text)


def names() -> tuple[str, ...]:
    return ON_CLUSTER


def test_a_regex_matches_whole_topic_names() -> None:
    every = plan("INSERT INTO bkt:a SELECT * FROM `*`")
    resolved = resolve(every, Settings(topics_regex=r"orders\.(eu|us)"), names)
    assert [r.topic for r in resolved.routes] == ["orders.eu", "orders.us"]
    assert all(dataclasses.replace(r, topic="*") == every.routes[0] for r in resolved.routes)
    assert all(r.matched for r in resolved.routes) and not every.routes[0].matched


def test_a_topics_list_is_taken_as_given_beside_named_routes() -> None:
    both = plan(
        "INSERT INTO bkt:a SELECT * FROM `*` STOREAS TEXT; "
        "INSERT INTO bkt:b SELECT * FROM payments STOREAS BYTES"
    )
    resolved = resolve(both, Settings(topics="payments, orders.eu,payments"), names)
    assert [(r.topic, r.target.prefix, r.format.value) for r in resolved.routes] == [
        ("payments", "a", "TEXT"),
        ("orders.eu", "a", "TEXT"),
        ("payments", "b", "BYTES"),
    ]


def test_a_plan_without_star_is_unchanged() -> None:
    named = plan("INSERT INTO bkt:a SELECT * FROM orders")
    assert resolve(named, Settings(), names) is named


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (Settings(), "none is given"),
        (Settings(topics="a", topics_regex="b"), "not both"),
        (Settings(topics_regex="("), "not a regular expression"),
        (Settings(topics=" , "), "topics is empty"),
    ],
)
def test_mistakes_are_config_errors(settings: _Settings, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(plan("INSERT INTO bkt:a SELECT * FROM `*`"), settings, names)


def test_a_regex_that_matches_nothing_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    every = plan("INSERT INTO bkt:a SELECT * FROM `*`")
    with caplog.at_level("WARNING"):
        resolved = resolve(every, Settings(topics_regex=r"ordrs\..*"), names)
    assert resolved.routes == ()
    assert "matches no topic" in caplog.text and "ordrs" in caplog.text

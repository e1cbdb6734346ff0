"""The default job name names the state: it must survive edits that keep topic and target."""

from __future__ import annotations

import dataclasses

import pytest

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.plan.naming import check_job_name, job_name_for
from kafka_archive.kcql.plan import FlushPolicy, Format, Plan, Route, Target

ROUTE = Route(target=Target("bucket-one", "archive"), topic="orders")


def test_name_is_stable_across_format_and_flush_edits() -> None:
    edited = dataclasses.replace(ROUTE, format=Format.BYTES, flush=FlushPolicy(count=7))
    assert job_name_for(Plan((ROUTE,))) == job_name_for(Plan((edited,)))


def test_name_changes_with_target_or_topic() -> None:
    base = job_name_for(Plan((ROUTE,)))
    assert job_name_for(Plan((dataclasses.replace(ROUTE, topic="payments"),))) != base
    other = dataclasses.replace(ROUTE, target=Target("bucket-one", "other"))
    assert job_name_for(Plan((other,))) != base


def test_name_is_readable_and_valid() -> None:
    name = job_name_for(Plan((ROUTE,)))
    assert name.startswith("orders-")
    assert check_job_name(name) == name


@pytest.mark.parametrize("bad", ["", "..", "a/b", "-x", "x" * 129])
def test_bad_job_names_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        check_job_name(bad)

"""S3 requests by type and their estimated price (issue 38): the arithmetic, over all counts."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices
from kafka_archive.archiver.core.model import (
    REQUEST_TYPES,
    RunResult,
    S3Requests,
    TopicPartition,
    UnitResult,
    total_requests,
)

counts = st.dictionaries(st.sampled_from(REQUEST_TYPES), st.integers(0, 10**12))
prices = st.floats(0, 100, allow_nan=False)


def test_aws_list_prices_of_s3_standard() -> None:
    """$0.005 per 1,000 PUT, COPY, POST, LIST; $0.0004 per 1,000 GET, HEAD and the rest;
    DELETE free."""
    assert S3Prices(0.005, 0.0004) == LIST_PRICES
    thousand = dict.fromkeys(REQUEST_TYPES, 1000)
    assert {kind: LIST_PRICES.cost(S3Requests.of({kind: n})) for kind, n in thousand.items()} == {
        "PUT": 0.005,
        "COPY": 0.005,
        "POST": 0.005,
        "LIST": 0.005,
        "GET": 0.0004,
        "HEAD": 0.0004,
        "DELETE": 0.0,
        "OTHER": 0.0004,
    }
    # 40 PUT, 12 GET, 3 LIST, 5 DELETE: 43 at the PUT price, 12 at the GET price.
    sample = S3Requests.of({"PUT": 40, "GET": 12, "LIST": 3, "DELETE": 5})
    assert math.isclose(LIST_PRICES.cost(sample), (43 * 0.005 + 12 * 0.0004) / 1000)


@given(counts, prices, prices)
def test_the_cost_is_each_tier_at_its_price(given: dict[str, int], put: float, get: float) -> None:
    requests = S3Requests.of(given)
    tier1 = sum(given.get(k, 0) for k in ("PUT", "COPY", "POST", "LIST"))
    tier2 = sum(given.get(k, 0) for k in ("GET", "HEAD", "OTHER"))
    assert math.isclose(requests.cost(put, get), (tier1 * put + tier2 * get) / 1000)
    assert requests.total == sum(given.values())
    assert requests.by_type() == {k: given.get(k, 0) for k in REQUEST_TYPES}
    assert S3Requests.of(requests.by_type()) == requests  # zeros are not kept


@given(counts, counts)
def test_sums_and_differences_are_by_type(a: dict[str, int], b: dict[str, int]) -> None:
    x, y = S3Requests.of(a), S3Requests.of(b)
    summed = x + y
    assert summed == y + x == total_requests([x, y])
    assert summed.by_type() == {k: a.get(k, 0) + b.get(k, 0) for k in REQUEST_TYPES}
    assert summed - y == x


@given(st.lists(counts, max_size=20))
def test_a_total_is_the_sum_one_by_one(parts: list[dict[str, int]]) -> None:
    """``total_requests`` (a run's, summed once over 10,000 partitions' units) is the sum
    of its parts added one at a time, empty or not."""
    requests = [S3Requests.of(c) for c in parts]
    one_by_one = S3Requests()
    for r in requests:
        one_by_one = one_by_one + r
    assert total_requests(requests) == one_by_one
    assert total_requests(iter(requests)) == one_by_one


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="not an S3 request type"):
        S3Requests.of({"PATCH": 1})


def test_a_runs_requests_are_its_units_and_the_rest() -> None:
    unit = UnitResult(0, TopicPartition("t", 0), 0, 1, 1, 1, (), 0.0)
    result = RunResult(
        "job",
        "run",
        (
            dataclasses.replace(unit, s3_requests=S3Requests.of({"PUT": 2})),
            dataclasses.replace(unit, s3_requests=S3Requests.of({"PUT": 1, "GET": 1})),
        ),
        (),
        1.0,
        other_s3=S3Requests.of({"LIST": 1, "DELETE": 1}),
    )
    assert result.s3_requests == S3Requests.of({"PUT": 3, "GET": 1, "LIST": 1, "DELETE": 1})

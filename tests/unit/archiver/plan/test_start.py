"""Where a partition starts and stops, and why; start positions for jobs without state;
bounded-run stops (pure logic)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.config.positions import StartKind, StartPosition
from kafka_archive.archiver.config.settings import KafkaSettings, Settings
from kafka_archive.archiver.core.errors import TopicRecreatedError
from kafka_archive.archiver.core.model import Gap, TopicPartition
from kafka_archive.archiver.kafka.admin import Watermarks
from kafka_archive.archiver.plan.start import (
    Begun,
    Rest,
    StartDecision,
    Why,
    at_rest,
    decide,
    initial_offset,
    stop_offset,
)
from kafka_archive.archiver.plan.views import PartitionView
from kafka_archive.archiver.state.checkpoint import Gaps, LoadedState, PartitionState
from kafka_archive.kcql.plan import Route, Target


def _never(_: object) -> int | None:
    raise AssertionError("must not be consulted")


def test_earliest_and_latest() -> None:
    assert initial_offset(StartPosition(StartKind.EARLIEST), 5, 90, _never, _never) == (5, None)
    assert initial_offset(StartPosition(StartKind.LATEST), 5, 90, _never, _never) == (90, None)


def test_timestamp_uses_the_lookup_and_falls_to_the_end_when_nothing_is_newer() -> None:
    at = StartPosition(StartKind.TIMESTAMP, timestamp_ms=1000)
    assert initial_offset(at, 0, 90, lambda ms: 42 if ms == 1000 else None, _never) == (42, None)
    assert initial_offset(at, 0, 90, lambda ms: None, _never) == (90, None)


def test_group_offsets_are_adopted_exactly() -> None:
    group = StartPosition(StartKind.GROUP, group="sink")
    assert initial_offset(group, 0, 90, _never, lambda g: 37 if g == "sink" else None) == (37, None)


def test_group_without_commits_starts_at_earliest_and_says_so() -> None:
    group = StartPosition(StartKind.GROUP, group="sink")
    offset, note = initial_offset(group, 3, 90, _never, lambda g: None)
    assert offset == 3
    assert note is not None and "no committed offset" in note


def test_a_start_below_retention_moves_to_the_earliest_retained() -> None:
    group = StartPosition(StartKind.GROUP, group="sink")
    offset, note = initial_offset(group, 50, 90, _never, lambda g: 10)
    assert offset == 50
    assert note is not None and "no longer retained" in note


def test_stop_offset_bounds() -> None:
    assert stop_offset(10, 100, None) == 100
    assert stop_offset(10, 100, 25) == 35
    assert stop_offset(10, 20, 25) == 20


# decide: where a partition starts and stops, and why; at_rest: what an idle one writes.

TARGET = Target("bucket", "archive")
ROUTE = Route(target=TARGET, topic="orders")
MATCHED = dataclasses.replace(ROUTE, matched=True)
TP = TopicPartition("orders", 0)


class Lookups:
    """Kafka's answers to --start: a fixed offset by time and a group's commit."""

    def __init__(self, by_time: int | None = None, group: int | None = None) -> None:
        self.by_time, self.group = by_time, group

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        assert tp == TP
        return self.by_time

    def group_offset(self, tp: TopicPartition, group: str) -> int | None:
        assert tp == TP
        return self.group


NO_LOOKUPS = Lookups()


def _settings(**changes: Any) -> Settings:
    return dataclasses.replace(Settings(KafkaSettings("kafka:9092")), **changes)


def _view(
    low: int,
    end: int,
    high: int,
    next_offset: int | None = None,
    route: Route = ROUTE,
    gaps: Gaps = (),
) -> PartitionView:
    state = None if next_offset is None else PartitionState(next_offset, "r", "t", gaps=gaps)
    return PartitionView(0, route, TP, LoadedState(state, "etag"), Watermarks(low, high, end))


BEGUN = Begun(frozenset({(0, "orders")}), frozenset({TARGET}))


def test_a_partition_with_state_starts_at_its_next_offset_whatever_start_says() -> None:
    latest = _settings(start=StartPosition(StartKind.LATEST))
    decision = decide(_view(0, 90, 90, next_offset=40), latest, BEGUN, NO_LOOKUPS)
    assert decision == StartDecision(40, 90, Why.COMMITTED)
    bounded = _settings(max_records_per_partition=25)
    assert decide(_view(0, 90, 90, next_offset=40), bounded, BEGUN, NO_LOOKUPS).stop == 65


def test_state_past_kafkas_end_is_a_recreated_topic() -> None:
    with pytest.raises(TopicRecreatedError) as caught:
        decide(_view(0, 5, 5, next_offset=80), _settings(), BEGUN, NO_LOOKUPS)
    assert caught.value.tp == TP
    assert "offsets up to 79" in str(caught.value) and "at offset 5" in str(caught.value)


def test_a_partition_added_since_the_route_began_starts_at_zero() -> None:
    latest = _settings(start=StartPosition(StartKind.LATEST))
    assert decide(_view(0, 9, 9), latest, BEGUN, NO_LOOKUPS) == StartDecision(0, 9, Why.ADDED)


def test_deleted_head_of_an_added_partition_is_a_gap_that_stops_it() -> None:
    decision = decide(_view(30, 90, 90), _settings(), BEGUN, NO_LOOKUPS)
    assert decision.lost and decision.idle
    assert decision.start == 0
    assert decision.gap == Gap(0, TP, 0, 29, passed=False)


def test_allow_gaps_passes_the_gap_and_records_it_with_the_older_ones() -> None:
    view = _view(30, 90, 90, next_offset=12, gaps=((2, 4),))
    decision = decide(view, _settings(allow_gaps=True), BEGUN, NO_LOOKUPS)
    assert not decision.lost
    assert (decision.start, decision.stop) == (30, 90)
    assert decision.gap == Gap(0, TP, 12, 29, passed=True)
    assert decision.gaps == ((2, 4), (12, 29))


def test_a_topic_matched_since_the_statements_first_run_starts_at_its_first_record() -> None:
    latest = _settings(start=StartPosition(StartKind.LATEST))
    begun = Begun(frozenset(), frozenset({TARGET}))
    decision = decide(_view(5, 9, 9, route=MATCHED), latest, begun, NO_LOOKUPS)
    assert decision == StartDecision(5, 9, Why.NEW_TOPIC)
    # Not matched by FROM `*`, or the statement has not begun: --start latest.
    assert decide(_view(5, 9, 9), latest, begun, NO_LOOKUPS) == StartDecision(9, 9, Why.START)
    assert decide(_view(5, 9, 9, route=MATCHED), latest, Begun(), NO_LOOKUPS).why is Why.START


def test_a_new_job_starts_where_start_says_with_its_note() -> None:
    group = _settings(start=StartPosition(StartKind.GROUP, group="sink"))
    assert decide(_view(5, 90, 90), group, Begun(), Lookups(group=37)) == StartDecision(
        37, 90, Why.START
    )
    fallback = decide(_view(5, 90, 90), group, Begun(), Lookups(group=None))
    assert fallback.start == 5 and fallback.note is not None and fallback.gap is None


def test_idle_partitions_pin_move_or_keep_their_state() -> None:
    earliest, latest = _settings(), _settings(start=StartPosition(StartKind.LATEST))
    state = PartitionState(10, "r", "t")
    assert at_rest(0, None, earliest, state_object=True) is Rest.KEEP
    assert at_rest(0, None, latest, state_object=True) is Rest.PIN
    assert at_rest(7, None, earliest, state_object=True) is Rest.PIN
    assert at_rest(10, state, latest, state_object=True) is Rest.KEEP
    assert at_rest(30, state, earliest, state_object=True) is Rest.MOVE
    assert at_rest(7, None, latest, state_object=False) is Rest.NONE


KINDS = st.sampled_from(
    [
        StartPosition(StartKind.EARLIEST),
        StartPosition(StartKind.LATEST),
        StartPosition(StartKind.TIMESTAMP, timestamp_ms=1000),
        StartPosition(StartKind.GROUP, group="sink"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    low=st.integers(0, 1000),
    ahead=st.integers(0, 1000),
    open_=st.integers(0, 50),
    committed=st.none() | st.integers(0, 2100),
    matched=st.booleans(),
    began=st.booleans(),
    began_matched=st.booleans(),
    start=KINDS,
    allow_gaps=st.booleans(),
    max_records=st.none() | st.integers(1, 500),
    by_time=st.none() | st.integers(-1, 2100),
    group=st.none() | st.integers(-1, 2100),
)
def test_start_is_never_below_kafkas_low_watermark_unless_a_reported_gap_stops_it(
    low: int,
    ahead: int,
    open_: int,
    committed: int | None,
    matched: bool,
    began: bool,
    began_matched: bool,
    start: StartPosition,
    allow_gaps: bool,
    max_records: int | None,
    by_time: int | None,
    group: int | None,
) -> None:
    end = low + ahead
    marks = Watermarks(low, end + open_, end)
    view = _view(marks.low, marks.end, marks.high, committed, MATCHED if matched else ROUTE)
    begun = Begun(
        frozenset({(0, "orders")} if began else ()),
        frozenset({TARGET} if began_matched else ()),
    )
    options = _settings(start=start, allow_gaps=allow_gaps, max_records_per_partition=max_records)
    if committed is not None and committed > marks.high:
        with pytest.raises(TopicRecreatedError):
            decide(view, options, begun, Lookups(by_time, group))
        return
    decision = decide(view, options, begun, Lookups(by_time, group))
    if decision.start < marks.low:  # only where a gap is reported, and the partition stays
        assert decision.lost and decision.idle
        assert decision.gap == Gap(0, TP, decision.start, marks.low - 1, passed=False)
        assert not allow_gaps
    if decision.gap is not None:  # only for a partition with state or added since
        assert committed is not None or began
        assert decision.gap.passed == allow_gaps
        assert decision.gap.first == (committed if committed is not None else 0)
        if allow_gaps:
            assert decision.start == marks.low
            assert decision.gaps[-1] == (decision.gap.first, marks.low - 1)
    else:
        assert decision.gaps == ()
    if committed is not None and decision.gap is None:
        assert decision.start == committed and decision.why is Why.COMMITTED
    if committed is None and not began:
        assert marks.low <= decision.start <= marks.end  # a new job: within what Kafka holds
    assert decision.stop <= marks.end
    if max_records is not None:
        assert decision.stop - decision.start <= max_records

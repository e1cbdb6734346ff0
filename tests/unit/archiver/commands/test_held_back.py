"""Which offsets a batch held back as young (batch_end.held_back): pure."""

from __future__ import annotations

from kafka_archive import kcql
from kafka_archive.archiver.commands.batch_end import held_back
from kafka_archive.archiver.core.model import TopicPartition, UnitResult, WorkUnit

ROUTE = kcql.parse("INSERT INTO bkt:p SELECT * FROM t PROPERTIES('flush.interval'=60)").routes[0]
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def unit(tp: TopicPartition, start: int, stop: int, **kwargs: object) -> WorkUnit:
    return WorkUnit(0, ROUTE, tp, start, stop, "run", "job", "group", **kwargs)  # type: ignore[arg-type]


def done(tp: TopicPartition, start: int, next_offset: int) -> UnitResult:
    return UnitResult(0, tp, start, next_offset, next_offset - start, 0, (), 0.0)


def test_a_partition_committed_short_of_its_stop_under_a_flush_interval_is_held_back() -> None:
    units = [unit(TP0, 0, 50, young_after_ms=1), unit(TP1, 0, 50, young_after_ms=1)]
    assert held_back(units, [done(TP0, 0, 30), done(TP1, 0, 50)]) == [(0, TP0, 30, 49)]


def test_pieces_count_by_the_partition_s_last_stop_and_furthest_commit() -> None:
    # Split pieces: only the last carries young_after_ms; the first committed in full.
    units = [unit(TP0, 0, 100), unit(TP0, 100, 200, young_after_ms=1)]
    assert held_back(units, [done(TP0, 0, 100), done(TP0, 100, 150)]) == [(0, TP0, 150, 199)]
    assert held_back(units, [done(TP0, 0, 100), done(TP0, 100, 200)]) == []


def test_without_an_interval_or_bounded_by_until_or_failed_nothing_is_named() -> None:
    assert held_back([unit(TP0, 0, 50)], [done(TP0, 0, 30)]) == []
    bounded = unit(TP0, 0, 50, young_after_ms=1, until_ms=5)
    assert held_back([bounded], [done(TP0, 0, 30)]) == []
    assert held_back([unit(TP0, 0, 50, young_after_ms=1)], []) == []  # the unit failed

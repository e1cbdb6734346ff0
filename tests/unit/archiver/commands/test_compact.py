"""The maintenance session's refusals, per route (archiver.commands.compact.refusal): what
compact, erase and expire cannot rewrite yet, each said in one line naming the topic."""

from __future__ import annotations

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.commands.compact import refusal
from kafka_archive.archiver.plan import maintenance

_INTO = "INSERT INTO bkt:p SELECT * FROM t"


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        (
            f"{_INTO} PROPERTIES('store.compression'='gzip', 'store.gzip.block.bytes'=1024)",
            "t: a rewrite entry does not name the new objects' gzip block indexes",
        ),
        (f"{_INTO} STOREAS JSON PROPERTIES('store.envelope'=true)", None),
    ],
)
def test_each_route_is_refused_for_its_own_reason_or_not_at_all(
    statement: str, reason: str | None
) -> None:
    why = refusal(kcql.parse(statement).routes[0])
    if reason is None:
        assert why is None
    else:
        assert why is not None and why.startswith(reason) and "\n" not in why, why


def test_partitionby_is_compacted_but_not_erased_or_expired() -> None:
    """compact merges one group's objects (an untiled rewrite); erase and expire would have
    to name removed offsets one by one, so they are refused for such routes."""
    route = kcql.parse(f"{_INTO} PARTITIONBY region").routes[0]
    assert refusal(route) is None
    assert refusal(route, maintenance.Compact()) is None
    for request in (maintenance.Erase(frozenset({b"k"})), maintenance.Expire(0)):
        why = refusal(route, request)
        assert why is not None and why.startswith("t: PARTITIONBY and time layouts interleave")

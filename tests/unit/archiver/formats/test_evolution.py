"""schema.compatibility decisions, pure: versions, inferred schemas merged and projected."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.formats import evolution
from kafka_archive.archiver.formats.evolution import Action
from kafka_archive.archiver.formats.schema import fits, infer
from kafka_archive.kcql.plan import SchemaCompatibility as Mode


def test_registry_versions_follow_confluent() -> None:
    for mode in (Mode.BACKWARD, Mode.FULL):
        assert evolution.by_version(mode, 2, 1) is Action.PROJECT  # older: projected
        assert evolution.by_version(mode, 1, 2) is Action.ROLL  # newer: rolls
    assert evolution.by_version(Mode.FORWARD, 1, 2) is Action.PROJECT
    assert evolution.by_version(Mode.FORWARD, 2, 1) is Action.ROLL
    assert evolution.by_version(Mode.NONE, 1, 2) is Action.ROLL
    assert evolution.by_version(Mode.NONE, 2, 1) is Action.ROLL


def test_inferred_rename_merges_under_backward_and_projects_under_forward() -> None:
    v1, v2 = {"id": 1, "name": "a"}, {"id": 2, "label": "b"}
    current = infer(v1)
    assert evolution.inferred(Mode.NONE, current, v2) == (Action.ROLL, None)
    for mode in (Mode.BACKWARD, Mode.FULL):
        action, newer = evolution.inferred(mode, current, v2)
        assert action is Action.ROLL and newer is not None
        assert [n for n, _ in newer.fields] == ["id", "name", "label"]
        assert fits(v1, newer) and fits(v2, newer)
    action, newer = evolution.inferred(Mode.FORWARD, current, v2)
    assert (action, newer) == (Action.PROJECT, None)
    assert evolution.projected(v2, current) == {"id": 2}


def test_a_type_change_always_rolls() -> None:
    current = infer({"id": 1})
    for mode in Mode:
        assert evolution.inferred(mode, current, {"id": "x"}) == (Action.ROLL, None)


json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=3)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
objects = st.dictionaries(st.sampled_from("abcde"), json_values, max_size=5)


def _schema(value: dict[str, Any]) -> Any:
    try:
        return infer(value)
    except ValueError:
        return None


@given(objects, objects)
def test_a_merged_schema_takes_both_values_or_there_is_none(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    sa, sb = _schema(a), _schema(b)
    if sa is None or sb is None or not fits(a, sa) or not fits(b, sb):
        return
    merged = evolution.merge(sa, sb)
    if merged is not None:
        assert fits(a, merged) and fits(b, merged)
    if not fits(b, sa):
        # FORWARD projects b onto a's schema only when the projection fits it.
        action, _ = evolution.inferred(Mode.FORWARD, sa, b)
        assert (action is Action.PROJECT) == (merged is not None and evolution.settles(b, sa))
        if action is Action.PROJECT:
            assert fits(evolution.projected(b, sa), sa)

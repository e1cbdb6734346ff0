"""One object as bytes (write/objects.py): opened on the spool, records encoded through its
writer and compressor, closed into what waits for its upload, or let go."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.write import objects
from kafka_archive.archiver.write.objects import Objects


def _objects(props: str, spool: Path) -> Objects:
    route = kcql.parse(f"INSERT INTO bkt:arch SELECT * FROM t STOREAS `JSON` {props}").routes[0]
    unit = WorkUnit(0, route, TopicPartition("t", 0), 0, 100, "run", "job", "g")
    return Objects(unit, None, str(spool), None, None, in_memory=False)  # type: ignore[arg-type]


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.integers(), min_size=1, max_size=20),
    gzip_it=st.booleans(),
)
def test_a_closed_object_holds_its_records_and_says_what_it_holds(
    tmp_path: Path, values: list[int], gzip_it: bool
) -> None:
    props = "PROPERTIES('store.compression'='gzip')" if gzip_it else ""
    made = _objects(props, tmp_path)
    chunk = made.open("k", 7, 1000)
    for i, v in enumerate(values):
        objects.write(chunk, Record("t", 0, 7 + i, 1000, None, json.dumps(v).encode()))
    closed = objects.close(chunk)
    assert closed.path is not None and closed.keys == ("k",) and closed.index is None
    data = closed.path.read_bytes()
    assert closed.written.size == len(data)
    assert (closed.written.first_offset, closed.written.last_offset) == (7, 6 + len(values))
    assert closed.written.records == len(values)
    text = gzip.decompress(data) if gzip_it else data
    assert [json.loads(line) for line in text.splitlines()] == values
    objects.release(closed.path, closed.upload)
    assert not closed.path.exists()


def test_a_gzip_block_object_carries_its_index(tmp_path: Path) -> None:
    made = _objects(
        "PROPERTIES('store.compression'='gzip', 'store.gzip.block.bytes'=1024)", tmp_path
    )
    assert made.blocked
    chunk = made.open("k.json.gz", 0, None)
    objects.write(chunk, Record("t", 0, 0, None, None, b"1"))
    closed = objects.close(chunk)
    assert len(closed.keys) == 2 and closed.index is not None


def test_release_closes_and_removes_an_open_spool_file(tmp_path: Path) -> None:
    chunk = _objects("", tmp_path).open("k", 0, None)
    assert chunk.path is not None and chunk.path.exists()
    objects.release(chunk.path, chunk.upload, chunk.file)
    assert chunk.file.closed and not chunk.path.exists()
    with pytest.raises(ValueError):
        chunk.file.write(b"x")


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.one_of(st.none(), st.integers(0, 2**45)), min_size=1, max_size=20))
def test_a_closed_object_names_its_records_time_bounds_where_it_stores_them(
    tmp_path: Path, times: list[int | None]
) -> None:
    """The min and max of its records' times (any order), for the commit log: only where
    the records store their time (the envelope with its metadata) and every record has one."""
    for props, stored in (
        ("PROPERTIES('store.envelope'=true)", True),
        ("PROPERTIES('store.envelope'=true, 'store.envelope.fields.metadata'=false)", False),
        ("", False),
    ):
        chunk = _objects(props, tmp_path).open("k", 0, times[0])
        for i, t in enumerate(times):
            objects.write(chunk, Record("t", 0, i, t, None, b"1"))
        written = objects.close(chunk).written
        known = [t for t in times if t is not None]
        expected = (min(known), max(known)) if stored and len(known) == len(times) else (None, None)
        assert (written.min_time_ms, written.max_time_ms) == expected, props

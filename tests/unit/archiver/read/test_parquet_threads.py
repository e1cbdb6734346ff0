"""Reading Parquet objects back (cat, verify, restore) starts none of Arrow's thread pools:
a process that started them can abort as it exits ("terminate called without an active
exception", exit 134, apache/arrow#34314), which `cat` did in about one run in 30."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.kcql.plan import Format

_READ = """
import os, sys
import pyarrow.parquet  # its import starts jemalloc's background thread, not a pool
from kafka_archive.archiver.read.decoding import read_object
from kafka_archive.kcql.plan import Format
data = open(sys.argv[1], "rb").read()
before = len(os.listdir("/proc/self/task"))
for _ in range(3):
    assert len(read_object(Format.PARQUET, data)) == 500
print(before, len(os.listdir("/proc/self/task")))
"""


def test_reading_a_parquet_object_starts_no_thread(tmp_path: Path) -> None:
    (route,) = kcql.parse("INSERT INTO bkt:a SELECT * FROM t STOREAS PARQUET").routes
    sink = io.BytesIO()
    writer = writer_for(Format.PARQUET)(sink, route)
    for i in range(500):
        value = json.dumps({"id": i, "name": f"n{i}", "tags": ["a", "b"]}).encode()
        writer.write(Record("t", 0, i, None, None, value, ()))
    writer.close()
    path = tmp_path / "object.parquet"
    path.write_bytes(sink.getvalue())
    out = subprocess.run(
        [sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, check=True
    ).stdout
    before, after = map(int, out.split())
    assert after == before

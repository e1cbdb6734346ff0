"""The compaction bench's case and figures (issue 38), shared by ``make bench
BENCH_SHAPE=compact`` (bench/run.py: the ``compact`` command as a process, through a counting
proxy) and tests/integration/maintenance/test_compact_bench.py (the rewrite engine alone).

The case: what ``run --follow`` with a small flush count leaves, :data:`OBJECTS` small
objects of :data:`PER_OBJECT` records of about 1 KB in one partition, merged into one
object (the default target size, 128 MB). The figures: MB read per second, and S3 requests
per object compacted by type, as AWS bills them (:func:`billed_type`, from each HTTP
request the proxy forwarded).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

OBJECTS = 1_000
PER_OBJECT = 10
TYPES = ("PUT", "COPY", "POST", "LIST", "GET", "HEAD", "DELETE", "OTHER")


def value(i: int) -> dict[str, Any]:
    """Record ``i``'s value: its id and about 1 KB of padding."""
    return {"id": i, "pad": f"{i:0>1000}"}


def statement(bucket: str, topic: str, fmt: str) -> str:
    """The route: an object every :data:`PER_OBJECT` records."""
    return (
        f"INSERT INTO {bucket}:arch SELECT * FROM {topic} STOREAS `{fmt}` "
        f"WITH_FLUSH_COUNT = {PER_OBJECT}"
    )


def billed_type(method: str, path: str) -> str:
    """An HTTP request to a path-style S3 endpoint as AWS bills it: a GET of a bucket (a
    listing) or of a multipart upload's parts is a LIST, a POST ``?delete`` (a batch of
    DELETEs) a DELETE, any other request its method."""
    parts = urlsplit(path)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.lstrip("/").partition("/")[2]
    if method == "GET":
        return "LIST" if not key or "uploadId" in query else "GET"
    if method == "POST" and "delete" in query:
        return "DELETE"
    return method if method in TYPES else "OTHER"


def by_type(requests: Iterable[tuple[str, str, Any]]) -> dict[str, int]:
    """Requests (method, path, ...) counted by billed type, every type listed."""
    counted = Counter(billed_type(method, path) for method, path, *_ in requests)
    return {kind: counted.get(kind, 0) for kind in TYPES}


@dataclass(frozen=True)
class Figures:
    """One compaction measured."""

    fmt: str
    objects: int  # compacted (replaced)
    bytes_read: int
    bytes_written: int
    seconds: float
    requests: dict[str, int]  # by type

    @property
    def mb_s(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds else 0.0

    def per_object(self) -> str:
        """``1.000 GET, 0.0020 PUT, ...`` per object compacted, the types sent."""
        return ", ".join(f"{n / self.objects:.4g} {kind}" for kind, n in self.requests.items() if n)

    def line(self) -> str:
        return (
            f"compact {self.fmt}: {self.objects} objects, {self.bytes_read / 1e6:.1f} MB read, "
            f"{self.bytes_written / 1e6:.1f} MB written in {self.seconds:.2f} s = "
            f"{self.mb_s:.1f} MB/s; S3 requests {sum(self.requests.values())} = "
            f"{self.per_object()} per object compacted"
        )

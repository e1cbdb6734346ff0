"""S3 requests by type, counted by a proxy in front of the bench's S3 endpoint, and as the
run's own summary line states them (``S3: 57 requests (40 PUT, 3 LIST, ...)``): the two are
cross-checked, and shown per object written.

The proxy is ``tests/integration/faultproxy.py`` with no faults (``rate`` 0): it forwards
every request and records its method and path. Types as AWS bills them: a GET of a bucket
(``?list-type=2``, ``?uploads``) is a LIST, a POST (bulk delete, multipart create and
complete) a POST.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

TYPES = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")
# cli.output.render_requests: "S3: 57 requests (40 PUT, 3 LIST, 12 GET, 2 DELETE), est. $…"
SUMMARY_LINE = re.compile(r"^S3: (?P<total>\d+) requests \((?P<kinds>[^)]*)\)", re.M)


def request_type(method: str, path: str) -> str:
    """The billed type of one request: LIST for a GET of a bucket (no key), else the method."""
    parts = urlsplit(path)
    if method == "GET" and (
        "list-type=" in parts.query
        or "uploads" in parts.query.split("&")
        or parts.path.strip("/").count("/") == 0
    ):
        return "LIST"
    return method


@dataclass(frozen=True)
class Counts:
    by_type: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_type.values())

    def per_object(self, objects: int) -> str:
        """``1.20 per object (1.00 PUT, 0.10 GET, …)``; the types sent only."""
        if not objects:
            return f"{self.total} requests, no object written"
        kinds = ", ".join(
            f"{self.by_type[t] / objects:.2f} {t}" for t in TYPES if self.by_type.get(t)
        )
        return f"{self.total / objects:.2f} per object ({kinds})"

    def text(self) -> str:
        kinds = ", ".join(f"{self.by_type[t]} {t}" for t in TYPES if self.by_type.get(t))
        return f"{self.total} ({kinds})"


def summary_counts(stdout: str, *, every: bool = False) -> Counts | None:
    """The S3 requests the run's summary printed (its last such line; ``every``: the sum of
    all, one a batch of a follow session), or None."""
    found = list(SUMMARY_LINE.finditer(stdout))
    if not found:
        return None
    kinds: Counter[str] = Counter()
    for line in found if every else found[-1:]:
        for part in line.group("kinds").split(","):
            number, _, kind = part.strip().partition(" ")
            if number.isdigit():
                kinds[kind.strip()] += int(number)
    return Counts(dict(kinds))


class Counter_:
    """The proxy's requests since the last :meth:`take`."""

    def __init__(self, proxy: object) -> None:
        self.proxy = proxy
        self._seen = 0

    def take(self) -> Counts:
        requests = list(self.proxy.requests)  # type: ignore[attr-defined]
        mine, self._seen = requests[self._seen :], len(requests)
        return Counts(dict(Counter(request_type(m, p) for m, p, _ in mine)))


@contextmanager
def counting(endpoint: str) -> Iterator[tuple[str, Counter_]]:
    """A counting proxy in front of ``endpoint``: its URL, and its counter."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
    from faultproxy import FaultProxy

    with FaultProxy(endpoint, rate=0.0, seed=0) as proxy:
        yield proxy.url, Counter_(proxy)

"""S3 requests counted by type, as AWS bills them (:data:`..core.model.REQUEST_TYPES`), at
one place: a handler of each client's ``before-send`` event, which botocore emits once per
HTTP attempt, inside its retry loop (``botocore.endpoint.Endpoint._do_get_response``), so a
retried request counts once per attempt, as each is billed. (``after-call`` is once per
API call, retries folded in.) An attempt that never reached the endpoint (a refused
connection) counts too: it cannot be told from one whose answer was lost.

Every store counts its own (a unit's, sent back with its result) and this process's
(:data:`PROCESS`: the driver's, read before and after what it times).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from kafka_archive.archiver.core.model import S3Requests

# Operations billed otherwise than their HTTP method says.
_NAMED = {
    "CopyObject": "COPY",  # a PUT with a copy source
    "UploadPartCopy": "COPY",
    "DeleteObjects": "DELETE",  # a POST of a batch of DELETEs
    "SelectObjectContent": "OTHER",  # SELECT: a POST at the GET price
}
_METHODS = {"PUT": "PUT", "POST": "POST", "HEAD": "HEAD", "DELETE": "DELETE"}


def request_type(operation: str, method: str) -> str:
    """The billed type of a botocore S3 operation sent with HTTP ``method``
    (``PutObject``, ``PUT`` -> ``PUT``; ``ListObjectsV2``, ``GET`` -> ``LIST``; aborting a
    multipart upload is a DELETE, free as AWS's CANCEL)."""
    named = _NAMED.get(operation)
    if named is not None:
        return named
    if method == "GET":
        return "LIST" if operation.startswith("List") else "GET"
    return _METHODS.get(method, "OTHER")


class RequestCounter:
    """S3 requests by type, counted from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def read(self) -> S3Requests:
        with self._lock:
            return S3Requests.of(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


PROCESS = RequestCounter()
"""Every request of every store of this process (a forked child starts from its parent's
counts: read it as differences)."""


def count_requests(client: Any, counter: RequestCounter) -> None:
    """Count every HTTP attempt of ``client`` in ``counter`` and :data:`PROCESS`."""

    def counted(request: Any = None, event_name: str = "", **_: Any) -> None:
        kind = request_type(event_name.rsplit(".", 1)[-1], str(getattr(request, "method", "")))
        counter.add(kind)
        PROCESS.add(kind)

    client.meta.events.register("before-send.s3", counted)

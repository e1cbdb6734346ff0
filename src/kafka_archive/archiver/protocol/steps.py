"""Store requests as values, and the step machines that yield them.

A step machine is a generator that yields one store request at a time (`Get`, `Head`, `Put`,
`Delete`, `List`; or `Wait`, no request: the driver waits for its attempts) and is sent back
the reply (a value, or the `StoreError` the request failed with). `drive` runs one against a
real `Store`; the simulation steps several against `MemStore`, one request per step.
`read_log` is the one every writer and reader shares: the newest checkpoint plus the tail.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kafka_archive.archiver.core.errors import S3UnavailableError
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    checkpoint_key,
    checkpoint_prefix,
    checkpoint_seq,
    decode_checkpoint,
    decode_entry,
    entry_key,
)
from kafka_archive.archiver.protocol.store import (
    Ambiguous,
    NotFound,
    Store,
    Stored,
    StoreError,
)

T = TypeVar("T")

# Answers without effect known (`Ambiguous`: a timeout, a dropped connection, a 5xx after
# botocore's own retries) a writer takes for one request before it stops: an endpoint that
# never answers, or answers only after applying, ends the run with the runtime's S3 error
# (`no_answer`), not a loop. A random fault in ten requests exhausts it once in 10^10.
AMBIGUOUS_TRIES = 10

# -- requests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Get:
    key: str


@dataclass(frozen=True)
class Head:
    key: str


@dataclass(frozen=True)
class Put:
    key: str
    body: bytes
    metadata: Mapping[str, str]
    if_none_match: bool = False
    if_match: str | None = None


@dataclass(frozen=True)
class Delete:
    key: str
    if_match: str | None = None


@dataclass(frozen=True)
class List:
    prefix: str
    start_after: str = ""


@dataclass(frozen=True)
class CreateUpload:
    key: str
    metadata: Mapping[str, str]


@dataclass(frozen=True)
class UploadPart:
    key: str
    upload_id: str
    number: int
    body: bytes


@dataclass(frozen=True)
class CompleteUpload:
    key: str
    upload_id: str
    parts: tuple[tuple[int, str], ...]
    if_none_match: bool = False


@dataclass(frozen=True)
class AbortUpload:
    key: str
    upload_id: str


@dataclass(frozen=True)
class ListUploads:
    prefix: str


Request = (
    Get
    | Head
    | Put
    | Delete
    | List
    | CreateUpload
    | UploadPart
    | CompleteUpload
    | AbortUpload
    | ListUploads
)


@dataclass(frozen=True)
class Wait:
    """Not a store request: the driver waits for its attempts. `drive` runs them in turn;
    the simulation steps each as an executor of its own (and steps the driver once ready)."""

    ready: Callable[[], bool]
    running: Callable[[], Sequence[Running]]


class Running(Protocol):
    """An attempt as `Wait` hands it out: the steps it runs."""

    steps: Steps[None]


Steps = Generator[Request | Wait, object, T]


def execute(store: Store, req: Request) -> object:
    """Does `req` against `store`: its result, or the `StoreError` it failed with."""
    try:
        if isinstance(req, Get):
            return store.get(req.key)
        if isinstance(req, Head):
            return store.head(req.key)
        if isinstance(req, Put):
            return store.put(
                req.key,
                req.body,
                req.metadata,
                if_none_match=req.if_none_match,
                if_match=req.if_match,
            )
        if isinstance(req, Delete):
            store.delete(req.key, if_match=req.if_match)
            return None
        if isinstance(req, List):
            return store.list(req.prefix, req.start_after)
        if isinstance(req, CreateUpload):
            return store.create_upload(req.key, req.metadata)
        if isinstance(req, UploadPart):
            return store.upload_part(req.key, req.upload_id, req.number, req.body)
        if isinstance(req, CompleteUpload):
            return store.complete_upload(
                req.key, req.upload_id, req.parts, if_none_match=req.if_none_match
            )
        if isinstance(req, AbortUpload):
            store.abort_upload(req.key, req.upload_id)
            return None
        return store.list_uploads(req.prefix)
    except StoreError as e:
        return e


def drive(steps: Steps[T], store: Store) -> T:
    """Runs a session (or any step machine) to its end against `store`, attempts in turn."""
    try:
        req = next(steps)
        while True:
            if isinstance(req, Wait):
                while not req.ready():
                    running = req.running()
                    if not running:
                        raise RuntimeError("the driver waits for attempts none of which runs")
                    for a in running:
                        drive(a.steps, store)
                req = steps.send(None)
            else:
                req = steps.send(execute(store, req))
    except StopIteration as stop:
        result: T = stop.value
        return result


def send(req: Request) -> Steps[Any]:
    reply = yield req
    if isinstance(reply, StoreError):
        raise reply
    return reply


def send_read(req: Get | Head | List | ListUploads) -> Steps[Any]:
    """A read: no effect, so a read without answer is sent again (`AMBIGUOUS_TRIES` in all)."""
    for _ in range(AMBIGUOUS_TRIES):
        try:
            return (yield from send(req))
        except Ambiguous:
            continue
    raise no_answer(req)


def no_answer(req: Request) -> S3UnavailableError:
    """The error a writer stops with when `req` had `AMBIGUOUS_TRIES` answers without effect
    known (one line; what was committed stays committed)."""
    what = type(req).__name__.upper()
    where = req.prefix if isinstance(req, List | ListUploads) else req.key
    return S3UnavailableError(
        f"no answer from S3 to {AMBIGUOUS_TRIES} tries of {what} {where}",
        hint="The endpoint times out or drops connections; what was committed is kept, "
        "run again once it answers",
    )


def get_or_none(key: str) -> Steps[Stored | None]:
    try:
        got: Stored = yield from send_read(Get(key))
    except NotFound:
        return None
    return got


def read_log(prefix: str, known: core.LogState | None = None) -> Steps[core.LogState]:
    """The log folded to its tail: from `known`, or from the newest listed checkpoint."""
    state = known
    if state is None:
        state = core.LogState()
        listed = yield from send_read(List(checkpoint_prefix(prefix)))
        seqs = sorted(s for k in listed if (s := checkpoint_seq(k.key)) is not None)
        if seqs:
            got = yield from get_or_none(checkpoint_key(prefix, seqs[-1]))
            if got is not None:
                state = core.LogState.from_checkpoint(decode_checkpoint(got.body))
    while True:
        got = yield from get_or_none(entry_key(prefix, state.seq + 1))
        if got is None:
            return state
        state = core.fold(state, decode_entry(got.body))

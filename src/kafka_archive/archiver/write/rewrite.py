"""The maintenance engine (issue 38): committed objects read and written again in their
route's format, without the records a predicate drops (erase, expire), or merged (compact).

:func:`rewrite` takes one group of the planner's (:mod:`kafka_archive.archiver.plan.maintenance`):
consecutive committed objects of one partition and group. It reads them one at a time,
decodes their records (:func:`records_of`: the envelope's key, headers, time and offset
where the route keeps them; else the value, its offset the object's first offset plus its
position), drops those ``drop`` says, and encodes the rest through the route's own format
writer and compression (a block index rebuilt as a run builds it) into a spool file, rolled
at ``target_size`` bytes or where the writer refuses a record (a new schema). Each new object
is created (``If-None-Match: *``, once the whole group is encoded: a failed rewrite creates
nothing) at the key of its first kept offset in the group's folder, with ``suffix`` after
the offset (where ``key.suffix`` goes) so that it never takes the key of the object it
replaces, and the result says what a commit needs of it: key, offsets, records, size, checksum; and
the offsets dropped. Nothing is deleted here: the commit names the new objects and forgets
the replaced ones.

``stamp`` (commit_protocol=log: compact's attempt) makes the attempt's objects its own, as a
run's task does (:mod:`kafka_archive.archiver.formats.stamp`): in the bytes where the
format has a place (Parquet and Avro file metadata, the gzip FNAME), else in the key, the
attempt after the suffix (``<first>.g<N>.e<epoch>a<attempt>.<ext>``,
:func:`.protocol.writer.attempt_key`). Two attempts of one group then never create the same
bytes at one key: an object found at a new key is told by its stamp, not by its bytes.

Memory: one input object's bytes (decompressed) and one Parquet row group, Avro block or
line at a time as Python values; the output goes to spool files as it is encoded (a PARQUET
writer holds its open row group, as in a run), uploaded from there. A group of many objects
never sits in memory.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from kafka_archive.archiver.core.errors import ConfigError, DamagedObjectError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import compression
from kafka_archive.archiver.formats.base import FormatWriter, WriterFactory
from kafka_archive.archiver.formats.blocks import BlockGzipSink, index_document, index_key
from kafka_archive.archiver.formats.readback import Replaced, records_of
from kafka_archive.archiver.formats.stamp import has_place
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.protocol.tasks import Stamp
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Format, Route

_SPOOL_BUFFER = 1024 * 1024
READ_AHEAD = 8
"""GETs of a group's objects in flight at once while earlier ones are decoded."""


Drop = Callable[[Record], bool]
"""Whether a record goes (True) or stays."""


@dataclass(frozen=True, slots=True)
class NewObject:
    """A new object as a commit names it; ``index`` its block index's key, if it has one."""

    key: str
    first: int
    last: int
    records: int
    size: int
    checksum: str
    index: str | None = None
    min_time_ms: int | None = None  # its records' time bounds (None: a record has no time)
    max_time_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What :func:`rewrite` did: the new objects in offset order, the offsets dropped as
    ``(first, last)`` ranges, and what it read. ``unchanged``: one object of which nothing
    was dropped, so nothing was written."""

    objects: tuple[NewObject, ...]
    dropped: tuple[tuple[int, int], ...]
    objects_read: int
    bytes_read: int
    unchanged: bool = False

    @property
    def dropped_count(self) -> int:
        return sum(last - first + 1 for first, last in self.dropped)


def keep_all(record: Record) -> bool:
    """compact's predicate: nothing goes."""
    return False


def drop_offsets(offsets: Collection[int]) -> Drop:
    """The records at ``offsets`` go."""
    return lambda record: record.offset in offsets


def drop_keys(keys: Collection[bytes], key_field: str | None = None) -> Drop:
    """The records whose key is one of ``keys`` go: the record's key (the envelope keeps it),
    or with ``key_field`` (a dotted path, as ``--key-field`` names it) that field of the JSON
    value, compared as its text (a string as it is, anything else as compact JSON)."""
    wanted = frozenset(keys)
    if key_field is None:
        return lambda record: record.key is not None and record.key in wanted
    path = key_field.split(".")

    def held(record: Record) -> bool:
        value: Any = _value_json(record)
        for name in path:
            if not isinstance(value, dict) or name not in value:
                return False
            value = value[name]
        if value is None:
            return False
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return text.encode() in wanted

    return held


def drop_before(cut_ms: int, tp: TopicPartition | None = None) -> Drop:
    """The records whose time is before ``cut_ms`` go; a record without its time (a route
    without the envelope's metadata) is refused: its time is not in the archive."""

    def before(record: Record) -> bool:
        if record.timestamp is None:
            raise ConfigError(
                "expire needs each record's time, and this route's objects do not store it",
                tp=tp,
                offset=record.offset,
                hint="Only archives with PROPERTIES('store.envelope'=true) (with its metadata)"
                " can be expired record by record",
            )
        return record.timestamp < cut_ms

    return before


def _value_json(record: Record) -> Any:
    if record.value is None:
        return None
    try:
        return json.loads(record.value)
    except ValueError:
        return None


# -- writing ------------------------------------------------------------------------------


@dataclass
class _Output:
    """A new object being written into its spool file. Mutable, local to one rewrite."""

    key: str
    first: int
    path: Path
    file: BinaryIO
    writer: FormatWriter
    compressor: BinaryIO | None
    last: int = -1
    records: int = 0
    low: int | None = None  # its records' least and greatest time so far
    high: int | None = None
    untimed: bool = False  # a record without its time: bounds unknown

    def bounds(self) -> tuple[int | None, int | None]:
        return (None, None) if self.untimed else (self.low, self.high)


class _Outputs:
    """Opens, fills and creates the new objects of one group, in offset order."""

    def __init__(
        self,
        store: S3Store,
        route: Route,
        tp: TopicPartition,
        group: tuple[str | None, ...],
        settings: _Settings,
    ) -> None:
        self._store, self._tp, self._group, self._settings = store, tp, group, settings
        # Stored values are already projected (SELECT) and decoded (registry): written as
        # they are, under the same layout, with the suffix after the offset.
        layout = dataclasses.replace(
            route.layout, key_suffix=route.layout.key_suffix + settings.suffix
        )
        self._route = dataclasses.replace(route, fields=None, layout=layout)
        self._layout = layout_for(self._route)
        if self._layout.key(tp, 0, group) == layout_for(route).key(tp, 0, group):
            raise ConfigError(
                "the route's layout template has no {suffix}, so a rewritten object would take"
                " the key of the object it replaces",
                tp=tp,
                hint="Add {suffix} before the extension in 'layout.template'",
            )
        stamp = settings.stamp
        in_bytes = stamp is not None and has_place(route)
        self._stamp = stamp.text if stamp is not None and in_bytes else None
        self._keyed = stamp if stamp is not None and not in_bytes else None
        self._factory = _factory(route.format, settings.value_schema, settings.columns, self._stamp)
        self._codec = compression.codec_of(route)
        blocks = route.codecs.gzip_block_bytes
        self._block_bytes = int(blocks) if blocks else None
        self.open: _Output | None = None
        # Closed, waiting for publish (spool files: disk, not memory).
        self._finished: list[tuple[_Output, bytes | None]] = []

    def write(self, record: Record) -> None:
        out = self.open
        if out is not None and (
            out.writer.bytes_written() >= self._settings.target_size
            or not out.writer.accepts(record)
        ):
            self.close()
            out = None
        if out is None:
            out = self.open = self._open(record.offset)
        out.writer.write(record)
        if isinstance(out.compressor, BlockGzipSink):
            out.compressor.record_done(record.offset)
        out.records += 1
        out.last = record.offset
        t = record.timestamp
        if t is None:
            out.untimed = True
        else:
            out.low = t if out.low is None else min(out.low, t)
            out.high = t if out.high is None else max(out.high, t)

    def _open(self, offset: int) -> _Output:
        key = self._layout.key(self._tp, offset, self._group)
        if self._keyed is not None:
            key = self._keyed.key(key)
        fd, name = tempfile.mkstemp(
            prefix="kafka-archive-rewrite-", suffix=".spool", dir=self._settings.spool_dir
        )
        file = os.fdopen(fd, "wb", buffering=_SPOOL_BUFFER)
        compressor: BinaryIO | None
        if self._block_bytes is not None:
            compressor = cast(BinaryIO, BlockGzipSink(file, self._block_bytes))
        else:
            compressor = compression.compressing(file, self._codec, self._stamp)
        writer = self._factory(compressor or file, self._route, None)
        return _Output(key, offset, Path(name), file, writer, compressor)

    def close(self) -> None:
        """Finish the open object into its spool file, to be created by :meth:`publish`."""
        out, self.open = self.open, None
        if out is None:
            return
        try:
            out.writer.close()
            if out.compressor is not None:
                out.compressor.close()
            out.file.close()
        except BaseException:
            _discard(out)
            raise
        index = None
        if isinstance(out.compressor, BlockGzipSink):
            index = index_document(out.compressor.blocks)
        self._finished.append((out, index))

    def publish(self) -> tuple[NewObject, ...]:
        """Create every finished object (and its block index) in S3, in offset order: all
        or, when one fails, those before it (new keys no commit names: vacuum's)."""
        self.close()
        bucket = self._route.target.bucket
        metadata = self._settings.metadata
        done: list[NewObject] = []
        while self._finished:
            out, index = self._finished[0]
            with self._store.creating(bucket, out.key, metadata):
                self._store.upload_file(bucket, out.key, out.path)
            if index is not None:
                with self._store.creating(bucket, index_key(out.key), metadata):
                    self._store.upload_bytes(bucket, index_key(out.key), index)
            size, digest = _digest(out.path)
            named = index_key(out.key) if index is not None else None
            done.append(
                NewObject(
                    out.key, out.first, out.last, out.records, size, digest, named, *out.bounds()
                )
            )
            _discard(self._finished.pop(0)[0])
        return tuple(done)

    def abandon(self) -> None:
        """Let every object not created yet go (a failed or needless rewrite)."""
        out, self.open = self.open, None
        if out is not None:
            _discard(out)
        for finished, _ in self._finished:
            _discard(finished)
        self._finished.clear()


def _discard(out: _Output) -> None:
    with contextlib.suppress(OSError):
        out.file.close()
    out.path.unlink(missing_ok=True)


def _digest(path: Path) -> tuple[int, str]:
    """The size and checksum of a spool file: the commit log's (SHA-256, 32 hex digits,
    as ``protocol.writer.checksum`` computes it over the bytes)."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as file:
        while chunk := file.read(_SPOOL_BUFFER):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()[:32]


def _factory(
    fmt: Format, value_schema: str | None, columns: str | None, stamp: str | None = None
) -> WriterFactory:
    """The format's writer, with the route's declared schema or committed columns (AVRO,
    PARQUET), and the stamp for its file metadata, as a run's objects get them."""
    factory = writer_for(fmt)
    if fmt not in (Format.AVRO, Format.PARQUET):
        return factory
    if stamp is not None:
        stamped: Any = factory
        factory = cast(WriterFactory, functools.partial(stamped, stamp=stamp))
    structured: Any = factory
    if value_schema is not None:
        return cast(WriterFactory, functools.partial(structured, user_schema=value_schema))
    if columns is not None:
        return cast(WriterFactory, functools.partial(structured, columns=columns))
    return factory


@dataclass(frozen=True, slots=True)
class _Settings:
    suffix: str
    target_size: int
    spool_dir: str | None
    metadata: Mapping[str, str] | None
    value_schema: str | None
    columns: str | None
    stamp: Stamp | None = None


def rewrite(
    store: S3Store,
    route: Route,
    tp: TopicPartition,
    group: tuple[str | None, ...],
    objects: Sequence[Replaced],
    *,
    suffix: str,
    drop: Drop = keep_all,
    target_size: int = 128 * 1000 * 1000,
    spool_dir: str | None = None,
    metadata: Mapping[str, str] | None = None,
    value_schema: str | None = None,
    columns: str | None = None,
    stamp: Stamp | None = None,
) -> Rewritten:
    """Read ``objects`` (consecutive committed objects of ``tp`` in ``group``, in offset
    order) and write what ``drop`` keeps of their records as new objects of ``route``.

    ``suffix`` is added to each new key after its offset (where ``key.suffix`` goes), so a
    new object never takes the key of one it replaces (its first offset may be the same);
    ``metadata`` goes on every new object (its writer); ``stamp`` makes them the attempt's
    own (the module's doc); ``value_schema`` and ``columns`` seed an AVRO or PARQUET writer
    as a run's units are seeded. With a single
    object of which nothing goes, nothing is written (``unchanged``). A group of which every
    record goes writes nothing either: its result has no objects.

    Raises:
        ValueError: an empty suffix, or ``objects`` not in offset order.
        DamagedObjectError: an object is missing, damaged, or not as its commit names it.
        ConfigError: the predicate needs what the objects do not store (expire: times).
        PreconditionFailed: a new key exists already (the caller decides whose it is).
    """
    if not suffix:
        raise ValueError("a rewrite needs a key suffix: a new object must not take an old key")
    if any(a.last >= b.first for a, b in itertools.pairwise(objects)):
        raise ValueError("the objects of a rewrite must be in offset order, without overlap")
    settings = _Settings(suffix, target_size, spool_dir, metadata, value_schema, columns, stamp)
    outputs = _Outputs(store, route, tp, group, settings)
    dropped = _Ranges()
    read = 0
    try:
        for obj, data in _fetched(store, route.target.bucket, objects, tp):
            read += len(data)
            for record in records_of(route, obj, data):
                if drop(record):
                    dropped.add(record.offset)
                    continue
                outputs.write(record)
            del data
        if len(objects) == 1 and not dropped.ranges:
            outputs.abandon()
            return Rewritten((), (), 1, read, unchanged=True)
        created = outputs.publish()
    except BaseException:
        outputs.abandon()
        raise
    return Rewritten(created, tuple(dropped.ranges), len(objects), read)


def _fetched(
    store: S3Store, bucket: str, objects: Sequence[Replaced], tp: TopicPartition
) -> Iterator[tuple[Replaced, bytes]]:
    """Each object's bytes, in order, up to :data:`READ_AHEAD` GETs ahead of the one being
    decoded (a GET costs a round trip; the group's objects are small): at most that many
    objects' bytes in memory at once."""
    with concurrent.futures.ThreadPoolExecutor(READ_AHEAD) as pool:
        pending: collections.deque[concurrent.futures.Future[bytes | None]] = collections.deque()
        try:
            ahead = iter(objects)
            for obj in objects:
                while len(pending) < READ_AHEAD and (nxt := next(ahead, None)) is not None:
                    pending.append(pool.submit(store.get_bytes, bucket, nxt.key))
                data = pending.popleft().result()
                if data is None:
                    raise DamagedObjectError(
                        f"s3://{bucket}/{obj.key} is committed but missing",
                        tp=tp,
                        hint="Run kafka-archive verify on this archive",
                    )
                yield obj, data
        finally:
            for future in pending:
                future.cancel()


class _Ranges:
    """Offsets in increasing order, kept as ``(first, last)`` ranges."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def add(self, offset: int) -> None:
        if self.ranges and self.ranges[-1][1] + 1 == offset:
            self.ranges[-1] = (self.ranges[-1][0], offset)
        else:
            self.ranges.append((offset, offset))

"""The archive as stored: which objects hold which records, from their keys alone.

Listing is by the fixed start of the route's layout (one paginated listing per route, keys
only); every key is read with :func:`~kafka_archive.archiver.partition.parse.parse_key`,
so the topic, partition, start offset and group come from the key itself, and objects of
other topics, formats or layouts under the same prefix are ignored. The runtime's own
objects under ``<prefix>/.kafka-archive/`` are never data. Also here: where an archive is
(``--from``), the route of a default-layout archive told by its objects' extension, and the
committed offsets its state holds.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.core.errors import BucketNotFoundError, ConfigError, NotInArchiveError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.formats.compression import SUFFIXES
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.partition.parse import listing_prefix, parse_key, without_suffixes
from kafka_archive.archiver.partition.values import topic_segment
from kafka_archive.archiver.state.paths import STATE_DIR
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Codecs, Compression, Format, Plan, Route, Target

_EXTENSION_FORMATS = {fmt.extension: fmt for fmt in Format if fmt is not Format.CSV_WITHHEADERS}
_LENSES_NAME = re.compile(r"^[0-9]+/[0-9]+\.(?P<ext>[A-Za-z]+)(?P<suffix>\.gz|\.bz2|\.zst)?$")
_SUFFIX_CODECS = {suffix: codec for codec, suffix in SUFFIXES.items()}
# A route's state (``state/``), or a job's (``<job>/state/``: the layout before routes owned
# their state), under ``.kafka-archive/``.
_STATE_NAME = re.compile(
    r"/\.kafka-archive/(?P<job>[^/]+/)?state/(?P<topic>[^/]+)/(?P<partition>[0-9]+)\.json$"
)


@dataclass(frozen=True, slots=True, order=True)
class StoredObject:
    """One archived object: whose records, from which offset, in which group."""

    start_offset: int
    key: str
    tp: TopicPartition
    group: tuple[str | None, ...]
    size: int


def list_partition_objects(
    store: S3Store, route: Route, keys: Iterable[tuple[str, int]] | None = None
) -> dict[TopicPartition, tuple[StoredObject, ...]]:
    """Every object of ``route`` by topic-partition, each tuple sorted by start offset.

    Args:
        store: where the archive is.
        route: the route whose layout, format and topic select the objects.
        keys: (key, size) pairs to use instead of listing (tests, or a listing made once
            for several routes).
    """
    layout = layout_for(route)
    head = listing_prefix(layout)
    own = f"{route.target.head}{STATE_DIR}/"
    listing = keys if keys is not None else store.list_objects(route.target.bucket, head)
    found: dict[TopicPartition, list[StoredObject]] = defaultdict(list)
    for key, size in listing:
        if key.startswith(own):
            continue
        parsed = parse_key(layout, key)
        if parsed is None:
            continue
        if not route.all_topics and parsed.tp.topic != route.topic:
            continue
        found[parsed.tp].append(
            StoredObject(parsed.start_offset, key, parsed.tp, parsed.group, size)
        )
    return {tp: tuple(sorted(objects)) for tp, objects in sorted(found.items())}


def parse_location(text: str) -> Target:
    """``bucket`` or ``bucket:prefix`` (a ``/`` at either end of the prefix is dropped)."""
    bucket, _, prefix = text.partition(":")
    prefix = prefix.strip("/")
    bad_segment = any(s in ("", ".", "..") for s in prefix.split("/")) if prefix else False
    if not bucket or "/" in bucket or bad_segment:
        raise ConfigError(
            f"--from expects bucket or bucket:prefix, not {text!r}",
            hint="For example --from my-bucket:archive",
        )
    return Target(bucket, prefix)


def default_route(store: S3Store, target: Target, topic: str) -> Route:
    """The route of a default-layout archive (``<prefix>/<topic>/<partition>/<offset>.<ext>``),
    its format told by the objects' extension.

    Raises:
        NotInArchiveError: no such objects.
        ConfigError: ``.csv`` objects, which may or may not start with a header row.
    """
    head = target.head
    folder = f"{head}{topic_segment(topic)}/"
    for key, _ in store.list_objects(target.bucket, folder):
        match = _LENSES_NAME.match(without_suffixes(key[len(folder) :]))
        if match and match["ext"] == Format.CSV.extension:
            raise ConfigError(
                f"the archive of {topic} under s3://{target.bucket}/{folder} holds .csv "
                "objects, written by STOREAS CSV or CSV_WITHHEADERS (with a header row)",
                hint="Pass the statement that wrote it with --kcql",
            )
        if match and match["ext"] in _EXTENSION_FORMATS:
            codec = _SUFFIX_CODECS.get(match["suffix"] or "")
            codecs = Codecs(compression=Compression(codec)) if codec else Codecs()
            return Route(
                target=target, topic=topic, format=_EXTENSION_FORMATS[match["ext"]], codecs=codecs
            )
    committed = {tp: n for tp, n in committed_offsets(store, target).items() if tp.topic == topic}
    if any(committed.values()) and _other_layout(store, target):
        raise NotInArchiveError(
            f"no objects of {topic} in the default layout under s3://{target.bucket}/{folder}, "
            f"but {len(committed)} partition(s) of it are archived there (up to offset "
            f"{max(committed.values()):,}): in another layout",
            hint="Pass the KCQL that wrote the archive with --kcql (PARTITIONBY or a layout "
            "template decides where its objects are)",
        )
    if committed:
        raise NotInArchiveError(
            f"the archive of {topic} under s3://{target.bucket}/{head} holds no records yet "
            "(its runs found nothing to archive)"
        )
    raise NotInArchiveError(
        f"no archived objects of {topic} under s3://{target.bucket}/{folder}",
        hint="Check --from and --topic; for an archive written with PARTITIONBY or another "
        "layout, pass the KCQL that wrote it with --kcql",
    )


def _other_layout(store: S3Store, target: Target) -> bool:
    """Whether ``target`` holds an object outside the runtime's own that is not in the
    default layout of some topic (a key the listing of a default-layout route ignores)."""
    own = f"{target.head}{STATE_DIR}/"
    for key, _ in store.list_objects(target.bucket, target.head):
        if not key.startswith(own) and not _LENSES_NAME.match(
            key[len(target.head) :].partition("/")[2]
        ):
            return True
    return False


def archived_route(store: S3Store, plan: Plan | None, target: Target, topic: str) -> Route:
    """The route that wrote ``topic`` to ``target``: from the plan, or the default layout."""
    iceberg.refuse_tables(plan, "cat and restore")
    try:
        store.check_bucket(target.bucket)
    except BucketNotFoundError as exc:
        raise BucketNotFoundError(
            exc.message, hint="Check --from (the bucket and prefix the archive was written to)"
        ) from None
    if plan is None:
        return default_route(store, target, topic)
    for route in plan.routes:
        if route.target == target and (route.topic == topic or route.all_topics):
            return dataclasses.replace(route, topic=topic)
    raise ConfigError(
        f"no KCQL statement writes {topic} to {target}",
        hint="Pass the statement that wrote the archive, or leave out --kcql",
    )


def committed_offsets(store: S3Store, target: Target) -> dict[TopicPartition, int]:
    """Committed offsets of the partitions archived under ``target``: the route's state, or
    (an archive not run since routes own their state) the one job's that archived it."""
    head = target.head
    found: dict[TopicPartition, list[int]] = {}
    routes: dict[TopicPartition, int] = {}
    for key, _ in store.list_objects(target.bucket, f"{head}{STATE_DIR}/"):
        match = _STATE_NAME.search(f"/{key}")
        if match is None:
            continue
        doc = store.get_document(target.bucket, key)
        if doc is not None:
            tp = TopicPartition(match["topic"], int(match["partition"]))
            if not match["job"]:
                routes[tp] = int(doc.body["next_offset"])
            else:
                found.setdefault(tp, []).append(int(doc.body["next_offset"]))
    legacy = {tp: offsets[0] for tp, offsets in found.items() if len(offsets) == 1}
    return {**legacy, **routes}


def partition_objects(
    store: S3Store, route: Route, tp: TopicPartition, committed: int | None
) -> tuple[StoredObject, ...]:
    """The committed objects of ``tp`` (listing only its folder where the layout allows)."""
    layout = layout_for(route)
    head = route.target.head
    folder = f"{head}{topic_segment(tp.topic)}/{layout.partition_text(tp.partition)}/"
    keys = (
        store.list_objects(route.target.bucket, folder)
        if layout.template.startswith("{prefix}/{topic}/{partition}/")
        else None
    )
    objects = list_partition_objects(store, route, keys).get(tp, ())
    return tuple(o for o in objects if committed is None or o.start_offset < committed)

"""Iceberg routes (``'table.format'='iceberg'``): the route's Parquet files appended to an
Apache Iceberg table, exactly once, through pyiceberg on the driver.

- The table is the state. Each batch makes ONE commit per table: it adds every file the
  batch's tasks wrote and records, in the new snapshot's summary and (same transaction) in
  the table's properties, the next offset of every partition the table holds
  (``kafka-archive.offsets.<topic>.<partition>``). A run resumes from the last snapshot of
  ours in the current snapshot's ancestry (another tool's compaction on top carries none),
  or from the properties when expiry removed it (:func:`_table_offsets`); there is no
  state object.
- Files are written by the Spark tasks like PARQUET objects, under ``<location>/data/``,
  named ``<topic>/<partition>/<first offset>_<run id>_<job>.parquet``. A run that dies before its
  commit leaves files no snapshot references: the next run of the job removes them
  (:func:`remove_orphans`, after a commit that refuses a stale driver's) before it writes
  anything, so no record is ever in the table twice.
- Concurrent writers are fenced by the catalog's optimistic commit: a commit that lost the
  race re-reads the table and retries only when the partitions it moves are still where it
  planned them; otherwise the run stops with a state conflict (exit 9).
- The catalog is configured as pyiceberg users configure it (``.pyiceberg.yaml``,
  ``PYICEBERG_CATALOG__<NAME>__*``); the archiver's S3 settings (endpoint, region,
  credentials) fill in the FileIO properties the catalog's configuration does not state.
  They are passed in-process, never on a command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import botocore.session

from kafka_archive.archiver.config.secrets import has_userinfo, is_secret, remember, scrub
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import (
    ArchiveError,
    BadRecordError,
    CatalogError,
    ConfigError,
    StateConflictError,
)
from kafka_archive.archiver.core.model import TopicPartition, UnitResult, WorkUnit
from kafka_archive.archiver.partition.values import decode_segment
from kafka_archive.archiver.store.client import credentials
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import (
    RECORD_TIME_COLUMN,
    LayoutKind,
    LayoutSpec,
    Placeholder,
    Plan,
    Route,
    Source,
    TemplateSlot,
    TemplateText,
)

log = logging.getLogger(__name__)

OFFSETS_PREFIX = "kafka-archive.offsets."
RECORDS = "kafka-archive.records"
RUN_ID = "kafka-archive.run-id"
JOB = "kafka-archive.job"
# Table properties: the id, sequence number and time of the snapshot our last commit made,
# set in the same transaction as the offsets it also sets as table properties (which
# survive that snapshot's expiry).
STATE_SNAPSHOT = "kafka-archive.snapshot-id"
STATE_SEQUENCE = "kafka-archive.snapshot-sequence-number"
STATE_TIME = "kafka-archive.snapshot-timestamp-ms"
DATA_DIR = "data"
COMMIT_ATTEMPTS = 5
# pyiceberg retries a commit that lost a race by replaying it onto the new snapshot, with
# the summary it computed before: offsets it did not re-decide. The tables we write have its
# retries off; we re-read and re-decide instead (:func:`commit`).
NO_REPLAY = {"commit.retry.num-retries": "0"}
_DATA_NAME = re.compile(r"^\d+_(?P<run>[0-9a-f]{16})_(?P<job>.+)\.parquet$")


def offset_property(tp: TopicPartition) -> str:
    return f"{OFFSETS_PREFIX}{tp.topic}.{tp.partition}"


def offsets_of(summary: Mapping[str, str]) -> dict[TopicPartition, int]:
    """The next offset of each partition, from a snapshot summary's properties."""
    out: dict[TopicPartition, int] = {}
    for key, value in summary.items():
        if key.startswith(OFFSETS_PREFIX):
            topic, _, partition = key[len(OFFSETS_PREFIX) :].rpartition(".")
            if topic and partition.isdigit():
                out[TopicPartition(topic, int(partition))] = int(value)
    return out


def location(route: Route) -> str:
    target = route.target
    return f"s3://{target.bucket}/{target.prefix}" if target.prefix else f"s3://{target.bucket}"


def with_data_layout(
    units: Sequence[WorkUnit], tables: Sequence[TableRoute] = ()
) -> tuple[WorkUnit, ...]:
    """The units, each Iceberg route's given the layout of :func:`data_route` and the
    columns of its table, if it exists (:func:`table_schema`)."""
    schemas: dict[int, str | None] = {}
    for table in tables:
        text = table_schema(table.table) if table.table is not None else None
        schemas.update((index, text) for index in table.routes)
    return tuple(
        dataclasses.replace(
            u,
            route=data_route(u.route, u.run_id, u.job),
            table_schema=schemas.get(u.route_index),
        )
        if u.route.iceberg is not None
        else u
        for u in units
    )


def table_schema(table: Any) -> str | None:
    """The table's columns as an Avro record schema (JSON), those of a type an inferred
    field can take (:func:`_plain`: numbers, booleans, strings, structs and lists of
    them); None when there is none. Files start from their types (int and long as long,
    float and double as double): a table made by another tool or an older kafka-archive
    with long columns takes whole numbers as they are, not as doubles it cannot promote."""
    from pyiceberg.utils.schema_conversion import AvroSchemaConversion

    from kafka_archive.archiver.formats import schema

    avro = AvroSchemaConversion().iceberg_to_avro(table.schema(), schema_name="Table")
    fields = [
        f
        for f in (avro.get("fields", ()) if isinstance(avro, dict) else ())
        if _plain(f["type"])
        and schema.from_avro({"type": "record", "name": "Table", "fields": [f]}) is not None
    ]
    if not fields:
        return None
    return json.dumps({"type": "record", "name": "Table", "fields": fields}, sort_keys=True)


_PLAIN = frozenset(("null", "boolean", "int", "long", "float", "double", "string"))


def _plain(node: Any) -> bool:
    """Whether an Avro type (of pyiceberg's conversion) holds only types an inferred field
    can take: no logical type (dates, times, decimals, UUIDs, maps), bytes or fixed."""
    if isinstance(node, str):
        return node in _PLAIN
    if isinstance(node, list):
        return all(_plain(branch) for branch in node)
    if not isinstance(node, dict) or "logicalType" in node:
        return False
    if node.get("type") == "record":
        return all(_plain(f["type"]) for f in node.get("fields", ()))
    if node.get("type") == "array":
        return _plain(node.get("items"))
    return _plain(node.get("type"))


def data_route(route: Route, run_id: str, job: str) -> Route:
    """The route as its tasks write it: files under ``<prefix>/data/``, named by topic,
    partition, first offset, run id and job (what makes an orphan provably this job's)."""
    template = (
        TemplateText(f"{DATA_DIR}/"),
        TemplateSlot(Placeholder.TOPIC),
        TemplateText("/"),
        TemplateSlot(Placeholder.PARTITION),
        TemplateText("/"),
        TemplateSlot(Placeholder.OFFSET),
        TemplateText(f"_{run_id}_{job}."),
        TemplateSlot(Placeholder.EXT),
    )
    return dataclasses.replace(
        route, layout=LayoutSpec(kind=LayoutKind.TEMPLATE, template=template)
    )


# ------------------------------------------------------------------------------------------
# The catalog.


def s3_properties(s3: S3Settings, frozen: Any = None) -> dict[str, str]:
    """pyiceberg FileIO properties from the archiver's S3 settings (the credentials:
    ``frozen``, else those of the chain now)."""
    props: dict[str, str] = {}
    if s3.endpoint_url:
        props["s3.endpoint"] = s3.endpoint_url
    region = s3.region or botocore.session.Session().get_config_variable("region")
    if region:
        props["s3.region"] = region
    if s3.addressing_style == "virtual":
        props["s3.force-virtual-addressing"] = "true"
    if s3.sse in ("AES256", "aws:kms"):
        props["s3.server-side-encryption"] = s3.sse
        if s3.sse_kms_key_id:
            props["s3.sse-kms-key-id"] = s3.sse_kms_key_id
    if frozen is None:
        found = credentials(s3)
        frozen = None if found is None else found.get_frozen_credentials()
    if frozen is not None:
        props["s3.access-key-id"] = frozen.access_key
        props["s3.secret-access-key"] = frozen.secret_key
        if frozen.token:
            props["s3.session-token"] = frozen.token
    return props


def secret_values(properties: Mapping[str, Any]) -> list[str]:
    """The values of the catalog properties that are secret (:mod:`.config.secrets`):
    keys, tokens, credentials, and the password of a URL (``postgresql://u:pw@host``)."""
    values: list[str] = []
    for key, value in properties.items():
        if not isinstance(value, str) or not value:
            continue
        if is_secret(key):
            values.append(value)
        elif has_userinfo(value):
            with contextlib.suppress(ValueError):
                password = urllib.parse.urlsplit(value).password
                if password:
                    values += [password, urllib.parse.unquote(password)]
    return values


def remember_secrets(properties: Mapping[str, Any]) -> None:
    """Note the secret values of catalog ``properties``: scrubbed from every message
    (:func:`kafka_archive.archiver.config.secrets.scrub`), ours and the CLI's."""
    remember(secret_values(properties))


@contextlib.contextmanager
def _catalog_errors(what: str) -> Iterator[None]:
    """pyiceberg's and its drivers' errors as one line that says what failed, without the
    secret values of the catalog's properties (its errors may quote them: an unknown
    catalog type echoes every property, an unknown URI scheme the URI)."""
    try:
        yield
    except ArchiveError:
        raise
    except Exception as exc:
        raise CatalogError(
            scrub(f"the Iceberg catalog could not {what}: {type(exc).__name__}: {_line(exc)}"),
            hint="Check the catalog's configuration (.pyiceberg.yaml or "
            "PYICEBERG_CATALOG__<NAME>__* variables) and that it is reachable",
        ) from exc


def _line(exc: BaseException) -> str:
    """An exception's message on one line (drivers' messages may span several)."""
    return " ".join(str(exc).split())


def load_catalog(name: str, s3: S3Settings, frozen: Any = None) -> Any:
    from pyiceberg.catalog import load_catalog as pyiceberg_load
    from pyiceberg.utils.config import Config

    configured = Config().get_catalog_config(name) or {}
    if not configured.get("uri") and not configured.get("type"):
        raise ConfigError(
            f"no Iceberg catalog named {name!r} is configured",
            hint=f"Configure it in .pyiceberg.yaml (catalog: {name}: uri: …) or with "
            f"PYICEBERG_CATALOG__{name.upper()}__URI (e.g. sqlite:///catalog.db for a "
            "SQL catalog), or name another with 'iceberg.catalog'",
        )
    # The catalog's own settings win; the archiver's S3 settings fill in the rest. (Passed
    # as properties: pyiceberg reads its environment once, when it is first imported.)
    properties: dict[str, Any] = {**s3_properties(s3, frozen), **configured}
    remember_secrets(properties)
    with _catalog_errors(f"be opened ({name!r})"):
        return pyiceberg_load(name, **properties)


class CatalogSource:
    """One catalog, opened with the credentials of the AWS chain and opened again when
    they are renewed: short-lived ones (IRSA, an assumed role: an hour or less) would fail
    a long follow session's commits. botocore renews refreshable credentials when asked
    within its refresh window before they expire (15 minutes); each use asks."""

    def __init__(self, name: str, s3: S3Settings) -> None:
        self.name, self.s3 = name, s3
        self._credentials = credentials(s3)
        self._frozen = self._now()
        self._catalog = load_catalog(name, s3, self._frozen)

    def _now(self) -> Any:
        return None if self._credentials is None else self._credentials.get_frozen_credentials()

    def renewed(self) -> bool:
        """Whether the credentials changed since the catalog was opened: it is opened again
        (the tables loaded from it keep the old ones in their FileIO: load them again)."""
        with _catalog_errors(f"renew the credentials of catalog {self.name!r}"):
            frozen = self._now()
        if frozen == self._frozen:
            return False
        self._catalog = load_catalog(self.name, self.s3, frozen)
        self._frozen = frozen
        log.info("the S3 credentials were renewed; catalog %r opened with them", self.name)
        return True

    @property
    def catalog(self) -> Any:
        self.renewed()
        return self._catalog


# ------------------------------------------------------------------------------------------
# One route's table, on the driver.


@dataclass
class TableRoute:
    """One table as the run knows it, and the routes (by index) that write it: ``table`` is
    None until it exists; ``offsets`` is its latest snapshot's state, which this run's
    commit must still find for the partitions it moves."""

    identifier: str
    source: CatalogSource
    routes: dict[int, Route]
    table: Any = None
    offsets: dict[TopicPartition, int] = dataclasses.field(default_factory=dict)

    @property
    def catalog(self) -> Any:
        return self.source.catalog

    def renew(self) -> None:
        """Load the table again if the credentials were renewed (its FileIO holds them)."""
        if self.source.renewed():
            self.refresh()

    def refresh(self) -> None:
        from pyiceberg.exceptions import NoSuchTableError

        with _catalog_errors(f"load table {self.identifier}"):
            try:
                self.table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                self.table = None
        self.offsets = _table_offsets(self.table)

    @property
    def committed_at(self) -> str | None:
        """When the latest snapshot was committed (ISO-8601 UTC), or None."""
        snapshot = None if self.table is None else _last_of_ours(self.table)[0]
        if snapshot is None:
            snapshot = None if self.table is None else self.table.current_snapshot()
        if snapshot is None:
            return None
        moment = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, dt.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def files_by_partition(self) -> dict[TopicPartition, tuple[int, int]]:
        """(data files, bytes) of each Kafka partition in the latest snapshot, told by the
        files' names (``data/<topic>/<partition>/…``, :func:`data_route`); for ``status``."""
        if self.table is None or self.table.current_snapshot() is None:
            return {}
        with _catalog_errors(f"list the files of table {self.identifier}"):
            files = self.table.inspect.files().select(["file_path", "file_size_in_bytes"])
        found: dict[TopicPartition, tuple[int, int]] = {}
        for row in files.to_pylist():
            _, sep, rest = str(row["file_path"]).partition(f"/{DATA_DIR}/")
            parts = rest.split("/")
            if not sep or len(parts) < 3 or not parts[1].isdigit():
                continue  # not a file of ours
            try:
                topic = decode_segment(parts[0])
            except ValueError:
                continue
            if topic is None:
                continue
            tp = TopicPartition(topic, int(parts[1]))
            count, size = found.get(tp, (0, 0))
            found[tp] = (count + 1, size + int(row["file_size_in_bytes"]))
        return found

    def turn_off_replay(self) -> None:
        """Set :data:`NO_REPLAY` on a table that does not have it (one metadata commit)."""
        if self.table is None or all(
            self.table.properties.get(k) == v for k, v in NO_REPLAY.items()
        ):
            return
        what = f"set the properties of table {self.identifier}"
        with _catalog_errors(what), self.table.transaction() as tx:
            tx.set_properties(NO_REPLAY)
        self.refresh()


def _table_offsets(table: Any) -> dict[TopicPartition, int]:
    """The table's state: the offsets of the last snapshot we committed in the current
    snapshot's ancestry (another writer's compaction, rewrite or delete on top of it
    carries none); when that snapshot was expired, the offsets the table's properties
    carry, which our commits set in the same transaction as their snapshot
    (:data:`STATE_SNAPSHOT` names it, :data:`STATE_SEQUENCE` and :data:`STATE_TIME` date it)."""
    if table is None:
        return {}
    found, oldest = _last_of_ours(table)
    if found is not None:
        return offsets_of(found.summary.additional_properties)
    properties = table.properties
    stamped = _number(properties.get(STATE_SNAPSHOT))
    if stamped is None or oldest is None or table.metadata.snapshot_by_id(stamped) is not None:
        # None of ours ever, or ours were rolled back: the snapshot the properties name is
        # still there, off the current ancestry, which holds none of ours.
        return {}
    # That snapshot is gone. Older than all the ancestry has left: expired with the history
    # before it (the properties hold). Else it was rolled back, then expired.
    sequence = _number(properties.get(STATE_SEQUENCE)) or 0
    if sequence and oldest.sequence_number:
        expired = bool(oldest.sequence_number > sequence)
    else:  # format 1: no sequence numbers; the commit times tell
        expired = oldest.timestamp_ms > (_number(properties.get(STATE_TIME)) or 0)
    return offsets_of(properties) if expired else {}


def _last_of_ours(table: Any) -> tuple[Any, Any]:
    """The newest snapshot of the current snapshot's ancestry that holds our offsets (or
    None), and the oldest of the ancestry's snapshots that are left (or None when there is
    no current snapshot)."""
    metadata = table.metadata
    snapshot = oldest = table.current_snapshot()
    while snapshot is not None:
        oldest = snapshot
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if RUN_ID in summary or offsets_of(summary):
            return snapshot, oldest
        parent = snapshot.parent_snapshot_id
        # pyiceberg's expiry sets a child's parent to None; Java's leaves a missing id.
        snapshot = None if parent is None else metadata.snapshot_by_id(parent)
    return None, oldest


def _number(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def open_tables(plan: Plan, s3: S3Settings) -> list[TableRoute]:
    """The tables the plan's Iceberg routes write (catalogs opened once per name)."""
    catalogs: dict[str, CatalogSource] = {}
    tables: dict[tuple[str, str], TableRoute] = {}
    for index, route in enumerate(plan.routes):
        if route.iceberg is None:
            continue
        name = route.iceberg.catalog
        if name not in catalogs:
            catalogs[name] = CatalogSource(name, s3)
        key = (name, route.iceberg.table)
        if key not in tables:
            tables[key] = TableRoute(route.iceberg.table, catalogs[name], {})
            tables[key].refresh()
        tables[key].routes[index] = route
    return list(tables.values())


def offsets_by_route(tables: Sequence[TableRoute]) -> dict[int, Mapping[TopicPartition, int]]:
    """What planning needs: each Iceberg route's committed offsets, by route index."""
    return {index: table.offsets for index, table in by_route(tables).items()}


def by_route(tables: Sequence[TableRoute]) -> dict[int, TableRoute]:
    return {index: table for table in tables for index in table.routes}


def _create(table: TableRoute, first_file: str) -> Any:
    """Create the table from the schema of its first file (location: the route's target)."""
    import pyarrow.parquet as pq
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError
    from pyiceberg.io import load_file_io

    catalog = table.catalog
    with _catalog_errors(f"create table {table.identifier}"):
        io = load_file_io(catalog.properties, first_file)
        with io.new_input(first_file).open() as stream:
            schema = pq.read_schema(stream)
    _check_types(table, schema.remove_metadata())
    with _catalog_errors(f"create table {table.identifier}"):
        namespace = table.identifier.rsplit(".", 1)[0]
        with contextlib.suppress(NamespaceAlreadyExistsError):
            catalog.create_namespace(namespace)
        route = next(iter(table.routes.values()))
        try:
            with catalog.create_table_transaction(
                table.identifier,
                schema=schema.remove_metadata(),
                location=location(route),
                properties=NO_REPLAY,
            ) as tx:
                _partition(tx, route)
            log.info("created Iceberg table %s at %s", table.identifier, location(route))
        except TableAlreadyExistsError:
            pass
        return catalog.load_table(table.identifier)


def _check_types(table: TableRoute, schema: Any) -> None:
    """Refuse a first file whose columns Iceberg has no type for as what it is: a type
    problem of the records (exit 10, one line), not of the catalog. Our writers give every
    column a type Iceberg holds (formats/schema.py: no Null type); a schema declared with
    'avro.schema.file' is what can still bring one.

    Raises:
        BadRecordError: a column Iceberg cannot type.
    """
    try:
        table.catalog._convert_schema_if_needed(schema)
    except (ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split())
        raise BadRecordError(
            f"the records' schema cannot make Iceberg table {table.identifier}: {reason}",
            hint="Give the column a type Iceberg holds: declare the schema with "
            "'avro.schema.file' (README: Formats), or reshape the records with a 'transform'",
        ) from None


def partition_spec(route: Route) -> list[tuple[str, str, str]]:
    """The table's partition fields for ``route``, as (source column, transform, name), in
    PARTITIONBY order: value fields are identity partitions; the ``_date`` entries together
    are one ``day`` or ``hour`` partition of :data:`RECORD_TIME_COLUMN`, where the first of
    them is. Each file holds one value of each: the tasks group records by the PARTITIONBY
    values (and ``_date`` text, in UTC), as for objects."""
    fields: list[tuple[str, str, str]] = []
    time = route.iceberg.time if route.iceberg is not None else None
    for ref in route.partition_by:
        if ref.source is Source.DATE:
            if time is not None and not any(f[0] == RECORD_TIME_COLUMN for f in fields):
                name = f"{RECORD_TIME_COLUMN}_{time.value}"
                fields.append((RECORD_TIME_COLUMN, time.value, name))
            continue
        column = ".".join(ref.path)
        fields.append((column, "identity", column.replace(".", "_")))
    return fields


def _partition(tx: Any, route: Route) -> None:
    """Set the partition spec of a new table (:func:`partition_spec`)."""
    from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform

    transforms = {"identity": IdentityTransform, "day": DayTransform, "hour": HourTransform}
    fields = partition_spec(route)
    if not fields:
        return
    with tx.update_spec() as update:
        for column, transform, name in fields:
            update.add_field(column, transforms[transform](), name)


def commit(
    table: TableRoute,
    results: Sequence[UnitResult],
    *,
    run_id: str,
    job: str,
    check_lease: Callable[[], None],
) -> None:
    """Append the files of ``results`` and move their partitions, in one snapshot.

    Raises:
        StateConflictError: another writer moved one of the partitions meanwhile.
        CatalogError: the catalog failed the commit.
    """
    from pyiceberg.exceptions import CommitFailedException

    results = [u for u in results if u.route_index in table.routes]
    moved = {u.tp: u.next_offset for u in results if u.next_offset > u.start}
    if not moved:
        return
    files = [
        f"s3://{table.routes[u.route_index].target.bucket}/{o.key}"
        for u in results
        for o in u.objects
    ]
    planned = {tp: table.offsets.get(tp) for tp in moved}
    table.renew()  # after `planned`: the offsets planning read are what must still hold
    records = sum(u.records for u in results)
    for _ in range(COMMIT_ATTEMPTS):
        changed = [tp for tp in moved if table.offsets.get(tp) != planned[tp]]
        if changed:
            raise StateConflictError(
                f"another writer committed {', '.join(map(str, changed))} to Iceberg table "
                f"{table.identifier} while this run archived it",
                tp=changed[0],
                hint="Run again: it resumes from that commit (this run's files are removed)",
            )
        if table.table is None:
            if not files:
                return  # nothing to add yet: the partitions are read again next run
            table.table = _create(table, files[0])
            # Another writer may have created it first, and committed: check against it.
            table.offsets = _table_offsets(table.table)
            continue
        state = {**table.offsets, **moved}
        props = {offset_property(tp): str(offset) for tp, offset in sorted(state.items())}
        props |= {RECORDS: str(records), RUN_ID: run_id, JOB: job}
        check_lease()
        try:
            with _catalog_errors(f"commit to table {table.identifier}"):
                try:
                    _append(table.table, files, props)
                except CommitFailedException:
                    log.info("%s: a concurrent commit won; re-reading the table", table.identifier)
                    table.refresh()
                    continue
        except CatalogError:
            table.refresh()
            if _committed_by(table.table, run_id) and all(
                table.offsets.get(tp) == offset for tp, offset in moved.items()
            ):
                return  # the commit went through; its answer was lost
            raise
        table.refresh()
        return
    raise StateConflictError(
        f"Iceberg table {table.identifier} kept changing under this run's commit",
        hint="Run again; archive a table from one job at a time",
    )


def _committed_by(table: Any, run_id: str) -> bool:
    snapshot = None if table is None else _last_of_ours(table)[0]
    if snapshot is None or snapshot.summary is None:
        return False
    return bool(snapshot.summary.additional_properties.get(RUN_ID) == run_id)


def _append(table: Any, files: list[str], props: dict[str, str]) -> None:
    """One transaction: the files appended (a snapshot whose summary holds ``props``), and
    the offsets set as table properties too, stamped with that snapshot's id."""
    with table.transaction() as tx:
        if files:
            _evolve(tx, table, files)
            tx.add_files(files, snapshot_properties=props, check_duplicate_files=False)
        else:
            # Offsets moved without files (records skipped by the error policy).
            with tx.update_snapshot(snapshot_properties=props).fast_append():
                pass
        made = tx.table_metadata.current_snapshot()
        assert made is not None, "the append made the current snapshot"
        offsets = {k: v for k, v in props.items() if k.startswith(OFFSETS_PREFIX)}
        stamp = {
            STATE_SNAPSHOT: str(made.snapshot_id),
            STATE_SEQUENCE: str(made.sequence_number or 0),
            STATE_TIME: str(made.timestamp_ms),
        }
        tx.set_properties({**offsets, **stamp})


def _evolve(tx: Any, table: Any, files: list[str]) -> None:
    """Add the columns the files have and the table does not, widen types (Iceberg schema
    evolution; an incompatible change fails the commit). Files of inferred schemas agree
    with each other and take the table's column types where the values fit them
    (:func:`table_schema`); a value that does not (a fractional number for a long column)
    fails here: the error says how to declare the schema."""
    import pyarrow.parquet as pq
    from pyiceberg.exceptions import ValidationError

    seen: set[str] = set()
    for path in files:
        with table.io.new_input(path).open() as stream:
            schema = pq.read_schema(stream).remove_metadata()
        signature = str(schema)
        if signature in seen:
            continue
        seen.add(signature)
        try:
            with tx.update_schema() as update:
                update.union_by_name(schema)
        except (ValidationError, ValueError) as exc:
            reason = " ".join(str(exc).split())
            raise BadRecordError(
                f"the records' schema does not fit Iceberg table {table.name()}: {reason}",
                hint="Iceberg takes new columns and wider types (int to long, float to "
                "double), nothing else; a file takes the table's column types where the "
                "values fit them: declare the schema with 'avro.schema.file', reshape the "
                "records, or archive into a new table",
            ) from None


def remove_orphans(
    table: TableRoute,
    store: S3Store,
    run_id: str,
    job: str,
    check_lease: Callable[[], None] = lambda: None,
) -> int:
    """Delete the files under the table's ``data/`` that this job's earlier runs wrote
    (named ``<topic>/<partition>/<offset>_<run id>_<job>.parquet`` for the routes' topics)
    and no snapshot references: a run died (or lost its lease) between writing and
    committing them. Call it holding the job's lease, before this run writes; another
    job's files are never touched.

    A run that lost the lease may still be inside its commit of such files (frozen past
    its lease after its last proof). Before deleting any, the table is moved by a commit
    of ours that changes nothing but the current snapshot (:func:`_fence`): that run's
    commit, conditional on the snapshot it planned from, is refused; the files are
    deleted only if no snapshot references them after it."""

    def earlier_run_of_job(key: str) -> bool:
        match = _DATA_NAME.match(key.rsplit("/", 1)[-1])
        return match is not None and match["run"] != run_id and match["job"] == job

    candidates: list[tuple[str, str]] = []
    for route in table.routes.values():
        head = f"{route.target.prefix}/" if route.target.prefix else ""
        folder = f"{head}{DATA_DIR}/{route.topic}/"
        bucket = route.target.bucket
        candidates += [
            (bucket, k) for k in store.list_keys(bucket, folder) if earlier_run_of_job(k)
        ]
        # Multipart uploads of such files that a killed run left open.
        for key, upload in store.incomplete_uploads(bucket, folder):
            if earlier_run_of_job(key):
                check_lease()
                store.abort_upload(bucket, key, upload)
    if not candidates:
        return 0
    referenced = _referenced(table)
    orphans = [(b, k) for b, k in candidates if f"s3://{b}/{k}" not in referenced]
    if orphans and table.table is not None:
        _fence(table, run_id, job, check_lease)
        referenced = _referenced(table)
        orphans = [(b, k) for b, k in candidates if f"s3://{b}/{k}" not in referenced]
    for bucket in sorted({b for b, _ in orphans}):
        check_lease()
        store.delete(bucket, [k for b, k in orphans if b == bucket])
    if orphans:
        log.info(
            "%s: removed %d file(s) a crashed run wrote and never committed",
            table.identifier,
            len(orphans),
        )
    return len(orphans)


def _fence(table: TableRoute, run_id: str, job: str, check_lease: Callable[[], None]) -> None:
    """Commit a snapshot of ours without files, the table's state unchanged: whatever
    commit another writer planned from the snapshot before it is refused by the catalog
    (each append requires the branch to be at the snapshot it planned from)."""
    from pyiceberg.exceptions import CommitFailedException

    for _ in range(COMMIT_ATTEMPTS):
        props = {offset_property(tp): str(o) for tp, o in sorted(table.offsets.items())}
        props |= {RECORDS: "0", RUN_ID: run_id, JOB: job}
        check_lease()
        with _catalog_errors(f"commit to table {table.identifier}"):
            try:
                _append(table.table, [], props)
            except CommitFailedException:
                table.refresh()  # a commit came first (that run's, maybe): on top of it
                continue
        table.refresh()
        return
    raise StateConflictError(
        f"Iceberg table {table.identifier} kept changing while this run cleaned it up",
        hint="Run again; archive a table from one job at a time",
    )


def _referenced(table: TableRoute) -> set[str]:
    """Every data file any snapshot of the table references."""
    if table.table is None:
        return set()
    paths: set[str] = set()
    with _catalog_errors(f"read the manifests of table {table.identifier}"):
        io = table.table.io
        seen: set[str] = set()
        for snapshot in table.table.snapshots():
            for manifest in snapshot.manifests(io):
                if manifest.manifest_path in seen:
                    continue
                seen.add(manifest.manifest_path)
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    paths.add(entry.data_file.file_path)
    return paths


def refuse_tables(plan: Plan | None, command: str) -> None:
    """``verify``, ``cat``, ``restore`` and ``reset`` read or write objects archives: an
    Iceberg route is refused with what to do instead."""
    for route in plan.routes if plan is not None else ():
        if route.iceberg is not None:
            raise ConfigError(
                f"{command} works on objects archives; the route for {route.topic} writes "
                f"Iceberg table {route.iceberg.table}",
                hint="Query the table with an Iceberg reader (pyiceberg, Spark, Trino, "
                "DuckDB); `status` shows its offsets. See README: Iceberg tables",
            )


def prepare(
    plan: Plan,
    store: S3Store,
    s3: S3Settings,
    run_id: str,
    job: str,
    check_lease: Callable[[], None] = lambda: None,
) -> list[TableRoute]:
    """Open the plan's tables and remove what crashed runs left in them (holding the
    job's lease, proved by ``check_lease`` before each write, before anything is written)."""
    tables = open_tables(plan, s3)
    for table in tables:
        table.turn_off_replay()
        remove_orphans(table, store, run_id, job, check_lease)
    return tables


def commit_all(
    tables: Sequence[TableRoute],
    results: Sequence[UnitResult],
    *,
    run_id: str,
    job: str,
    check_lease: Callable[[], None],
) -> None:
    """One commit per table for a batch's results (see :func:`commit`)."""
    for table in tables:
        commit(table, results, run_id=run_id, job=job, check_lease=check_lease)

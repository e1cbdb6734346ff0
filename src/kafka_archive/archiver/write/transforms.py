"""User transforms: ``PROPERTIES('transform'='package.module:function')``.

The function is called in the Spark tasks with a list of :class:`~kafka_archive.archiver.
records.Record` (a batch as read from one partition, in offset order) and returns the
records to store: each one a record of the batch, changed (``dataclasses.replace``) or not,
fewer, or none, in offset order. It may change key, value, headers and timestamp; topic,
partition and offset say which record of the batch it is and must be kept. Whatever it
returns then goes through the route as read records do (SELECT, PARTITIONBY, format).

It must be deterministic and a function of each record alone: a retry reads the same
records again, possibly in other batches, and must store the same objects (exactly once).
The first batch of every unit is transformed twice and the two results compared, which
catches the obvious violations (random ids, the wall clock); the run then fails.

An exception in the function is a bad record under ``error.policy``: the batch is taken
again record by record, and each record whose call raises is refused (fail, skip or
dead-letter), named by its offset. Messages name the exception's type and where it was
raised, never its text (it may hold payload).

The driver imports every route's function before the run starts (a bad path fails fast,
exit 2), from the working directory when it is not importable otherwise. Executors import it
again: on local masters from the directory the driver found it in; ``submit`` ships that
module or package with ``--py-files``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_archive.archiver.core.errors import ConfigError, TransformError
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.kcql.plan import Plan

Transform = Callable[[list[Record]], Iterable[Record]]


class RefusedByTransform(BadRecordError):
    """The transform raised on this record (a bad record under the error policy)."""


def load(spec: str, root: str | None = None) -> Transform:
    """Import ``package.module:function`` and return the function.

    ``root`` is a directory to import from when the module is not importable as it is (the
    driver's directory of the module, on an executor of a local master).

    Raises:
        ConfigError: the module cannot be imported, has no such attribute, or it is not
            callable.
    """
    module_name, _, attribute = spec.partition(":")
    try:
        module = _import(module_name, root)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module failed while it was imported
        raise ConfigError(
            f"transform {spec!r}: importing {module_name} raised {_described(exc)}",
            hint="Fix the module; it is imported before the run starts",
        ) from None
    target: Any = module
    for name in attribute.split("."):
        if not hasattr(target, name):
            raise ConfigError(
                f"transform {spec!r}: {module_name} has no {attribute}",
                hint=f"Name a function defined in {getattr(module, '__file__', module_name)}",
            )
        target = getattr(target, name)
    if not callable(target):
        raise ConfigError(
            f"transform {spec!r}: {attribute} is a {type(target).__name__}, not a function",
            hint="Name a function that takes a list of records and returns the records to store",
        )
    function: Transform = target
    return function


def _import(module_name: str, root: str | None) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if root is not None and (module_name == missing or module_name.startswith(missing + ".")):
            if root not in sys.path:
                sys.path.append(root)
            importlib.invalidate_caches()
            try:
                return importlib.import_module(module_name)
            except ModuleNotFoundError:
                pass
        if module_name != missing and not module_name.startswith(missing + "."):
            raise  # the module imports something missing: an error inside it
        raise ConfigError(
            f"transform module {module_name!r} not found",
            hint="Run kafka-archive from the directory that holds it, or put it on PYTHONPATH",
        ) from None


def source_root(spec: str) -> Path | None:
    """The directory the module of an imported transform was found under (its ``sys.path``
    entry), or None for a module without a file."""
    module_name = spec.partition(":")[0]
    top = sys.modules.get(module_name.split(".")[0])
    file = getattr(top, "__file__", None)
    if file is None:
        return None
    path = Path(file).resolve()
    # A package's __init__.py sits in the package directory, one level below the root.
    return path.parent.parent if path.name == "__init__.py" else path.parent


def shipped_path(spec: str) -> Path | None:
    """What ``submit`` gives ``--py-files`` for the transform: the top-level module file, or
    the top-level package directory (zipped by the caller)."""
    module_name = spec.partition(":")[0]
    top = sys.modules.get(module_name.split(".")[0])
    file = getattr(top, "__file__", None)
    if file is None:
        return None
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path


def load_plan(plan: Plan) -> dict[int, str]:
    """Import every route's transform on the driver (fail fast); route index -> the
    directory its module was found in ("" when it has none), for the executors."""
    roots: dict[int, str] = {}
    for index, route in enumerate(plan.routes):
        if route.transform is None:
            continue
        # The working directory, as ``python -m`` has it on sys.path: the console script
        # does not, and "run it from the module's directory" must work from either.
        load(route.transform, os.getcwd())
        root = source_root(route.transform)
        roots[index] = "" if root is None else str(root)
    return roots


def with_roots(units: Sequence[WorkUnit], roots: Mapping[int, str]) -> tuple[WorkUnit, ...]:
    """``units`` with the directory of their route's transform module set."""
    return tuple(
        dataclasses.replace(u, transform_root=roots[u.route_index]) if u.route_index in roots else u
        for u in units
    )


def for_unit(unit: WorkUnit) -> Transformer | None:
    """The transformer of the unit's route, or None when it has no transform."""
    spec = unit.route.transform
    return None if spec is None else Transformer(spec, unit.transform_root, unit.tp)


@functools.cache
def _cached(spec: str, root: str | None) -> Transform:
    return load(spec, root or None)


def _described(exc: BaseException) -> str:
    """The exception's type and where it was raised (file:line), never its message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    return f"{type(exc).__name__} at {Path(last.filename).name}:{last.lineno}"


class TransformedBatch:
    """The records a transform returned for one batch, with the columns ``ChunkSet.add_batch``
    reads. ``refused`` holds the offsets of records the transform raised on (offset ->
    message); their original record stays in place so the error policy sees it in order."""

    __slots__ = ("_records", "refused")

    def __init__(self, records: list[Record], refused: dict[int, str]) -> None:
        self._records = records
        self.refused = refused

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    @property
    def first_offset(self) -> int:
        return self._records[0].offset

    def records(self) -> list[Record]:
        return self._records

    def values(self) -> list[bytes | None]:
        return [r.value for r in self._records]

    def offsets(self) -> list[int]:
        return [r.offset for r in self._records]

    def timestamps(self) -> list[int | None]:
        return [r.timestamp for r in self._records]

    def offset_at(self, index: int) -> int:
        return self._records[index].offset

    def timestamp_at(self, index: int) -> int | None:
        return self._records[index].timestamp

    def latest_timestamp(self) -> int:
        """No record has a later timestamp (-1 when none has one)."""
        return max((r.timestamp for r in self._records if r.timestamp is not None), default=-1)

    def check(self, record: Record) -> None:
        """Raise :class:`RefusedByTransform` if the transform raised on ``record``."""
        if self.refused and record.offset in self.refused:
            message = self.refused.get(record.offset)
            if message is not None:
                raise RefusedByTransform(message)


def refusals(batch: object) -> bool:
    """Whether the transform raised on some record of ``batch`` (it then goes record by
    record, so that the error policy sees each in order)."""
    return isinstance(batch, TransformedBatch) and bool(batch.refused)


def refusal_of(batch: object, record: Record) -> None:
    """Raise :class:`RefusedByTransform` when ``record`` is one the transform raised on."""
    if isinstance(batch, TransformedBatch):
        batch.check(record)


class Transformer:
    """Applies one route's transform to the batches of one unit (executor side)."""

    def __init__(
        self, spec: str, root: str | None, tp: TopicPartition, function: Transform | None = None
    ) -> None:
        self.spec = spec
        self._function = function if function is not None else _cached(spec, root)
        self._tp = tp
        self._probed = False

    def apply(self, records: Sequence[Record]) -> TransformedBatch:
        batch = list(records)
        try:
            out = self._checked(self._function(list(batch)), batch)
        except TransformError:
            raise
        except Exception:
            return self._one_by_one(batch)
        if not self._probed:
            self._probed = True
            self._probe(batch, out)
        return TransformedBatch(out, {})

    def _one_by_one(self, batch: list[Record]) -> TransformedBatch:
        out: list[Record] = []
        refused: dict[int, str] = {}
        for record in batch:
            try:
                out += self._checked(self._function([record]), [record])
            except TransformError:
                raise
            except Exception as exc:
                refused[record.offset] = f"the transform {self.spec} raised {_described(exc)}"
                out.append(record)
        self._probed = True  # a batch that raises is not compared
        return TransformedBatch(out, refused)

    def _probe(self, batch: list[Record], out: list[Record]) -> None:
        """Transform the unit's first batch again: a different result is not deterministic."""
        try:
            again = self._checked(self._function(list(batch)), batch)
        except TransformError:
            raise
        except Exception:
            again = None
        if again != out:
            raise TransformError(
                f"the transform {self.spec} is not deterministic: two calls on the records "
                f"from offset {batch[0].offset} returned different records",
                tp=self._tp,
                offset=batch[0].offset,
                hint="A transform must return the same records for the same input (no random "
                "ids, no wall clock): a retry must store the same objects",
            )

    def _checked(self, returned: Iterable[Record] | None, batch: list[Record]) -> list[Record]:
        if returned is None:
            raise self._broken(batch, "returned None (return an empty list to store nothing)")
        if not isinstance(returned, Iterable):
            raise self._broken(batch, f"returned a {type(returned).__name__}, not a list")
        out = list(returned)
        offsets = {r.offset: r for r in batch}
        previous = -1
        for item in out:
            if not isinstance(item, Record):
                raise self._broken(
                    batch,
                    f"returned a {type(item).__name__}: return Record values "
                    "(dataclasses.replace one of the batch)",
                )
            source = offsets.get(item.offset)
            if source is None or item.topic != source.topic or item.partition != source.partition:
                raise self._broken(
                    batch,
                    f"returned a record (offset {item.offset}) that is not one of its "
                    "batch: keep topic, partition and offset",
                )
            if item.offset <= previous:
                raise self._broken(
                    batch, "returned records out of offset order, or two for one offset"
                )
            previous = item.offset
        return out

    def _broken(self, batch: list[Record], what: str) -> TransformError:
        return TransformError(
            f"the transform {self.spec} {what}",
            tp=self._tp,
            offset=batch[0].offset if batch else None,
            hint="Fix the transform; nothing from this batch on was archived",
        )

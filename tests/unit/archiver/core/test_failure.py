"""Errors crossing back from Spark tasks as values: every error class a task can raise
(those of ``errors.py`` and their subclasses anywhere in the package) comes back as its class
(or, for a subclass defined elsewhere, the registered class it refines), with its exit code,
retriable bit, message, hint and place; an unknown kind becomes a plain ArchiveError."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

from hypothesis import given
from hypothesis import strategies as st

import kafka_archive.archiver
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.failure import KINDS, TaskFailure, kind_of
from kafka_archive.archiver.core.model import TopicPartition

TP = TopicPartition("orders", 3)


def _every_error_class() -> set[type[ArchiveError]]:
    """ArchiveError and every subclass of it the archiver defines, once every module of it
    is imported (a task runs the executor's modules; a subclass may be in any of them)."""
    package = kafka_archive.archiver
    for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        importlib.import_module(module.name)
    found: set[type[ArchiveError]] = set()
    todo: list[type[ArchiveError]] = [ArchiveError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return {cls for cls in found if cls.__module__.startswith(f"{package.__name__}.")}


def _crossed(failure: TaskFailure) -> ArchiveError:
    """``failure`` as the driver gets it: pickled by the task, unpickled by Spark."""
    again = pickle.loads(pickle.dumps(failure))
    assert again == failure
    return again.to_error()


def test_every_class_of_the_taxonomy_is_a_kind() -> None:
    defined = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, ArchiveError) and cls.__module__ == errors.__name__
    }
    assert defined == set(KINDS.values()), "register every error class of errors.py in KINDS"
    assert all(KINDS[cls.__name__] is cls for cls in defined)


def test_every_error_a_task_can_raise_crosses_back_as_its_class() -> None:
    classes = _every_error_class()
    assert len(classes) > len(KINDS)  # subclasses defined outside errors.py were found too
    for cls in classes:
        error = cls("S3 refused to write s3://b/k", tp=TP, offset=42, hint="Try again")
        back = _crossed(TaskFailure.of(error))
        expected = cls if cls in KINDS.values() else KINDS[kind_of(cls)]
        assert issubclass(cls, expected), cls
        assert type(back) is expected, cls
        assert (back.exit_code, back.retriable) == (cls.exit_code, cls.retriable), cls
        assert (back.message, back.hint, back.tp, back.offset) == (
            "S3 refused to write s3://b/k",
            "Try again",
            TP,
            42,
        )
        assert str(back) == str(error)


def test_a_subclass_defined_elsewhere_crosses_as_the_class_it_refines() -> None:
    class Refined(errors.UploadError):
        pass

    back = _crossed(TaskFailure.of(Refined("precondition failed")))
    assert type(back) is errors.UploadError and back.exit_code == 12 and back.retriable


def test_an_unknown_kind_is_a_plain_archive_error_with_the_message() -> None:
    for kind in ("NoSuchError", "globals", "__builtins__", "TopicPartition", ""):
        back = _crossed(TaskFailure(kind, "the unit failed", "Look at it", TP, 7))
        assert type(back) is ArchiveError and back.exit_code == 1
        assert str(back) == "orders-3 offset 7: the unit failed. Look at it"


def test_the_partition_of_the_unit_is_named_when_the_error_names_none() -> None:
    assert TaskFailure.of(errors.SpoolError("full"), tp=TP).tp == TP
    other = TopicPartition("other", 0)
    assert TaskFailure.of(errors.SpoolError("full", tp=other), tp=TP).tp == other


def test_is_a_compares_kinds() -> None:
    fenced = TaskFailure.of(errors.FencedError("fenced"))
    assert fenced.is_a(errors.FencedError) and not fenced.is_a(errors.StateConflictError)


@given(
    kind=st.sampled_from(sorted(KINDS)),
    message=st.text(),
    hint=st.none() | st.text(),
    offset=st.none() | st.integers(min_value=0),
)
def test_any_failure_round_trips(
    kind: str, message: str, hint: str | None, offset: int | None
) -> None:
    failure = TaskFailure(kind, message, hint, TP, offset)
    back = _crossed(failure)
    assert type(back) is KINDS[kind]
    assert TaskFailure.of(back) == failure

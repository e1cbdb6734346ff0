"""Retired locks of the job-scoped layout: an earlier version must refuse them (exit 8), or
it would take the job's old lock, find no state there and archive again from ``--start``
over the objects this version wrote."""

from __future__ import annotations

import importlib
import itertools
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kafka_archive.archiver.core.errors import JobLockedError
from kafka_archive.archiver.state import legacy
from kafka_archive.archiver.store.s3 import Document, PreconditionFailed
from kafka_archive.kcql.plan import Target

REPO = Path(__file__).resolve().parents[4]
# The last version of the job-scoped layout (with epochs and lease.may_take_over), and the
# first one (which parsed expires_at itself).
EARLIER = {"job-scoped-with-epochs": "c80cfa7^", "first": "0e5a94e"}


class Bucket:
    """Objects in memory, written conditionally as S3 does (ETag per write)."""

    def __init__(self) -> None:
        self.docs: dict[str, Document] = {}
        self._etags = (f'"etag-{n}"' for n in itertools.count())

    def get_document(self, bucket: str, key: str) -> Document | None:
        return self.docs.get(key)

    def put_document(
        self, bucket: str, key: str, body: dict[str, Any], *, if_match: str | None
    ) -> str:
        held = self.docs.get(key)
        if (held.etag if held is not None else None) != if_match:
            raise PreconditionFailed(key)
        self.docs[key] = Document(body, next(self._etags))
        return self.docs[key].etag


def _earlier_lock_module(commit: str, tmp_path: Path) -> ModuleType:
    """``state/lock.py`` (with the ``lease.py`` and ``paths.py`` it imports) as they were at
    ``commit``, importable beside today's package."""
    package = f"earlier_state_{abs(hash(commit))}"
    folder = tmp_path / package
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name in ("lock", "lease", "paths"):
        shown = subprocess.run(
            ["git", "show", f"{commit}:src/kafka_archive/archiver/state/{name}.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if shown.returncode != 0:
            continue  # (lease.py came later)
        source = shown.stdout.replace("kafka_archive.archiver.state", package)
        for moved in ("errors", "model"):  # (to core/ since, by issue 36's regrouping)
            source = source.replace(f"archiver.{moved} ", f"archiver.core.{moved} ")
        (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(f"{package}.lock")
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("commit", EARLIER.values(), ids=EARLIER.keys())
def test_an_earlier_version_refuses_a_retired_lock(commit: str, tmp_path: Path) -> None:
    target, job = Target(bucket="bkt", prefix="arch"), "orders"
    store = Bucket()
    old_key = f"arch/.kafka-archive/{job}/lock.json"
    store.docs[old_key] = Document(
        {"job": job, "run_id": "old", "epoch": 5, "expires_at_ms": 0, "released": True},
        '"etag-old"',
    )
    layout = legacy.LegacyLayout(locks=[job])
    legacy.retire_locks(store, target, layout, "new-run", 1_700_000_000_000)  # type: ignore[arg-type]
    retired = store.docs[old_key].body
    assert retired["retired"] is True and retired["epoch"] > 5

    earlier = _earlier_lock_module(commit, tmp_path)
    lock = earlier.JobLock(store, target, job, "earlier-run", 600)
    with pytest.raises(JobLockedError) as refused:
        lock.acquire()
    assert refused.value.exit_code == 8
    assert "already running" in str(refused.value)
    assert store.docs[old_key].body == retired, "the earlier version wrote the retired lock"


def test_a_retired_lock_is_not_retired_again() -> None:
    """This version skips a lock it retired (the next run must not stop at it)."""
    target, job = Target(bucket="bkt", prefix="arch"), "orders"
    store = Bucket()
    old_key = f"arch/.kafka-archive/{job}/lock.json"
    store.docs[old_key] = Document({"job": job, "epoch": 5, "released": True}, '"etag-old"')
    layout = legacy.LegacyLayout(locks=[job])
    legacy.retire_locks(store, target, layout, "run-1", 1_700_000_000_000)  # type: ignore[arg-type]
    retired = store.docs[old_key]
    legacy.retire_locks(store, target, layout, "run-2", 1_700_000_000_001)  # type: ignore[arg-type]
    assert store.docs[old_key] == retired


def test_the_topic_record_of_a_topic_named_lock_is_not_retired() -> None:
    """Earlier versions kept topic ``lock``'s id record at ``topics/lock.json``, where the
    old layout kept the lock of a job named ``topics``: it stays as it is."""
    target, store = Target(bucket="bkt", prefix="arch"), Bucket()
    key = "arch/.kafka-archive/topics/lock.json"
    record = Document({"version": 1, "topic": "lock", "topic_id": "id-1"}, '"etag-r"')
    store.docs[key] = record
    layout = legacy.LegacyLayout(locks=["topics"])
    legacy.retire_locks(store, target, layout, "run-1", 1_700_000_000_000)  # type: ignore[arg-type]
    assert store.docs[key] == record

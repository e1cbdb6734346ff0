import json
from collections.abc import Generator
from typing import Any

import pytest

from kafka_archive.archiver.protocol.log import PartitionRef, decode_entry, entry_key
from kafka_archive.archiver.protocol.memstore import MemStore
from kafka_archive.archiver.protocol.simulation import steady_state_requests
from kafka_archive.archiver.protocol.simworld import PREFIX, Kafka
from kafka_archive.archiver.protocol.steps import Put, Wait, drive, execute
from kafka_archive.archiver.protocol.writer import Writer, attempt_key

REFS = [PartitionRef("r", "t", p) for p in range(2)]


def writer(store: MemStore, run: str, highs: dict[PartitionRef, int], size: int = 2) -> Writer:
    return Writer(PREFIX, run, REFS, Kafka(highs, size), clock=lambda: store.now)


def archived(store: MemStore) -> dict[int, list[int]]:
    """Offsets per partition as a reader of the log sees them: entries by seq, objects' bodies."""
    out: dict[int, list[int]] = {}
    seq = 1
    while (raw := store.raw(entry_key(PREFIX, seq))) is not None:
        doc = json.loads(raw[1])
        for c in doc["commits"]:
            for o in c["objects"]:
                body = store.raw(o["key"])
                assert body is not None
                out.setdefault(c["partition"], []).extend(json.loads(body[1])["offsets"])
        seq += 1
    return out


class Stepper:
    """One request of a session at a time, as the simulation steps it."""

    def __init__(self, store: MemStore, steps: Generator[Any, object, str]) -> None:
        self.store, self.steps = store, steps
        self.pending = next(steps)
        self.result: str | None = None

    def step(self) -> Any:
        req = self.pending
        try:
            if isinstance(req, Wait):  # its attempts, each to its end
                while not req.ready():
                    for a in req.running():
                        drive(a.steps, self.store)
                self.pending = self.steps.send(None)
            else:
                self.pending = self.steps.send(execute(self.store, req))
        except StopIteration as stop:
            self.result = stop.value
        return req

    def until(self, pred: Any) -> None:
        while not pred(self.pending):
            self.step()


def test_a_session_archives_every_offset_once_and_leaves_only_committed_objects() -> None:
    store = MemStore()
    highs = {REFS[0]: 7, REFS[1]: 3}
    assert drive(writer(store, "run-1", highs).session(), store) == "done"
    assert archived(store) == {0: list(range(7)), 1: list(range(3))}
    highs[REFS[0]] = 9
    assert drive(writer(store, "run-2", highs, size=5).session(), store) == "done"
    assert archived(store) == {0: list(range(9)), 1: list(range(3))}


def test_a_writer_claimed_over_never_commits_and_the_new_one_replaces_its_objects() -> None:
    store = MemStore()
    highs = {REFS[0]: 4, REFS[1]: 4}
    a = Stepper(store, writer(store, "run-a", highs).session())
    # a writes its first object and is about to commit ... then b claims and writes
    a.until(lambda r: isinstance(r, Put) and r.key == entry_key(PREFIX, 2))
    assert drive(writer(store, "run-b", highs, size=1).session(), store) == "done"
    a.step()  # a's commit at seq 2: taken by b's claim
    while a.result is None:
        a.step()
    assert a.result == "fenced"
    runs = []
    while (raw := store.raw(entry_key(PREFIX, len(runs) + 1))) is not None:
        runs.append(decode_entry(raw[1]).writer.run_id)
    assert runs[0] == "run-a" and set(runs[1:]) == {"run-b"}
    assert archived(store) == {0: list(range(4)), 1: list(range(4))}


@pytest.mark.parametrize("mutation", [None, "lower_attempt_dead"])
def test_a_speculative_copy_never_deletes_its_live_sibling_s_object(mutation: str | None) -> None:
    store = MemStore()
    w = Writer(PREFIX, "run-1", REFS[:1], Kafka({REFS[0]: 2}, 1), clock=lambda: store.now)
    w.mutations = frozenset([mutation] if mutation else [])
    driver = Stepper(store, w.session())
    driver.until(lambda r: isinstance(r, Wait))
    (first,) = w.launched
    one = Stepper(store, first.steps)
    key = one.step().key  # attempt 1 creates its first object, then is slow
    etag = store.head(key).etag
    w.speculate(first)
    second = w.launched[1]
    drive(second.steps, store)  # the copy finds attempt 1's object: live, not its own
    if mutation:  # the old rule: a lower attempt number is dead
        assert store.raw(key) is None or store.raw(key)[0] != etag  # type: ignore[index]
        return
    assert second.outcome == "in the way" and store.head(key).etag == etag
    while one.result is None and first.outcome is None:
        one.step()
    while driver.result is None:
        driver.step()
    assert driver.result == "done" and archived(store) == {0: [0, 1]}
    assert store.head(key).metadata["attempt"] == "1"


def test_a_dead_attempt_s_object_is_replaced_and_the_zombie_gives_way() -> None:
    store = MemStore()
    w = Writer(PREFIX, "run-1", REFS[:1], Kafka({REFS[0]: 2}, 1), clock=lambda: store.now)
    driver = Stepper(store, w.session())
    driver.until(lambda r: isinstance(r, Wait))
    (first,) = w.launched
    zombie = Stepper(store, first.steps)
    key = zombie.step().key  # attempt 1 creates its first object, then goes silent
    w.declare_dead(first)
    second = w.launched[1]
    assert second.dead == {1}
    drive(second.steps, store)  # deletes (If-Match) the dead attempt's object, creates both
    assert store.head(key).metadata["attempt"] == "2"
    while zombie.result is None and first.outcome is None:
        zombie.step()  # it finds attempt 2's next object: live for all it knows
    assert first.outcome == "in the way"
    while driver.result is None:
        driver.step()
    assert driver.result == "done" and archived(store) == {0: [0, 1]}
    assert {store.head(k).metadata["attempt"] for k in store.objects if "/t/0/" in k} == {"2"}


@pytest.mark.parametrize("per_batch", [6, 10, 100])
def test_steady_state_costs_at_most_1_2_requests_per_object(per_batch: int) -> None:
    assert steady_state_requests(per_batch, batches=50) <= 1.2


def test_steady_state_cost_is_one_put_per_object_plus_the_entry_and_checkpoint_shares() -> None:
    # 5 objects a batch: 5 object PUTs + 1 entry + 1/10 checkpoint = 1.22 per object
    assert steady_state_requests(5, batches=50) == pytest.approx((5 + 1 + 0.1) / 5)


def test_an_attempt_key_keeps_the_folder_and_the_first_offset_and_names_the_attempt() -> None:
    key = f"{PREFIX}/t/0/{3:020d}.csv"
    assert attempt_key(key, 4, 12) == f"{PREFIX}/t/0/{3:020d}.e4a12.csv"
    assert attempt_key(f"{3:020d}.json", 1, 1) == f"{3:020d}.e1a1.json"
    assert attempt_key(key, 4, 1) != attempt_key(key, 4, 2) != attempt_key(key, 5, 2)
    assert sorted([attempt_key(key, 9, 9), f"{PREFIX}/t/0/{4:020d}.csv"])[0].startswith(key[:-4])

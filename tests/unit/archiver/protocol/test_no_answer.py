"""A writer that meets `Ambiguous` answers for ever (an endpoint that always times out after
applying a request, or never applies one) stops with the runtime's one-line error after a
bounded number of tries per request, and leaves the archive as the invariants want it: a
writer after it archives every offset once, and vacuum leaves only the committed objects."""

import pytest

from kafka_archive.archiver.core.errors import S3UnavailableError
from kafka_archive.archiver.protocol.invariants import Checker
from kafka_archive.archiver.protocol.log import PartitionRef
from kafka_archive.archiver.protocol.memstore import Fate, Faults, MemStore
from kafka_archive.archiver.protocol.simworld import PREFIX, Kafka
from kafka_archive.archiver.protocol.steps import drive
from kafka_archive.archiver.protocol.writer import Writer

from .test_writer import archived

REFS = [PartitionRef("r", "t", p) for p in range(2)]
LOOPING = 5_000  # requests: far above what a bounded writer sends before it stops


class Unanswered(Faults):
    """Every request from the `after`-th on gets `fate`; a writer still sending after
    `LOOPING` requests loops."""

    def __init__(self, fate: Fate, after: int) -> None:
        self.kind, self.after, self.calls = fate, after, 0

    def fate(self, op: str, key: str) -> Fate:
        self.calls += 1
        if self.calls > LOOPING:
            raise AssertionError(f"the writer loops: {self.calls} requests without answer")
        return self.kind if self.calls > self.after else Fate.DELIVER


@pytest.mark.parametrize("fate", [Fate.LOSE_RESPONSE, Fate.DROP])
@pytest.mark.parametrize("after", [0, 2, 4, 7, 10])  # of 12: reads, claim, objects, entry, vacuum
def test_a_writer_without_answers_stops_with_one_line_and_the_archive_stays_whole(
    fate: Fate, after: int
) -> None:
    faults = Unanswered(fate, after)
    store = MemStore(faults)
    highs = {REFS[0]: 5, REFS[1]: 3}
    w = Writer(PREFIX, "run-1", REFS, Kafka(highs, 2), clock=lambda: store.now)
    checker = Checker(store, PREFIX, is_dead=lambda run, n: run == "run-1" and n in w.dead)
    with pytest.raises(S3UnavailableError) as stopped:
        drive(w.session(), store)
    assert faults.calls < 100  # bounded: tries per request, not a loop
    message = str(stopped.value)
    assert "\n" not in message and "no answer" in message, message
    assert stopped.value.exit_code == 5
    assert w.outcome == "no answer"
    checker.check()

    store.faults = Faults()  # the endpoint answers again; what was in flight lands
    store.deliver_all()
    checker.check()
    store.now += 61
    after_it = Writer(PREFIX, "run-2", REFS, Kafka(highs, 1), clock=lambda: store.now)
    assert drive(after_it.session(), store) == "done"
    checker.check()
    assert archived(store) == {0: list(range(5)), 1: list(range(3))}
    store.now += 61
    drive(Writer(PREFIX, "run-3", REFS, Kafka(highs, 1), clock=lambda: store.now).session(), store)
    data = {k for k in store.objects if "/.kafka-archive/" not in k}
    assert data == set(checker.committed)

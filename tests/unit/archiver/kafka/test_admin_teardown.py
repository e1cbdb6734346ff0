"""KafkaAdmin destroys its admin clients in the thread that leaves it: one left to the garbage
collector (a KafkaAdmin in an exception's reference cycle) was destroyed in whatever thread
collected it, also librdkafka's own delivering another client's admin result, and librdkafka
aborted the process there (SIGABRT instead of the error's exit code)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent(
    """
    import gc, threading
    from confluent_kafka import TopicCollection
    from kafka_archive.archiver.kafka.admin import KafkaAdmin
    from kafka_archive.archiver.config.settings import KafkaSettings

    gc.disable()  # collected only where the test says
    admin = KafkaAdmin(KafkaSettings("127.0.0.1:1"), "g")
    # A request still in flight on the KafkaAdmin's client (a lookup that failed on one of
    # its answers while the others were pending): its answer comes in the client's own
    # librdkafka background thread, where the collector then runs.
    done = threading.Event()
    client = admin._admin_client()
    future = client.describe_topics(TopicCollection(["t"]), request_timeout=2)["t"]
    future.add_done_callback(lambda _: (gc.collect(), done.set()))
    del client
    with admin:
        pass
    loop = [admin]
    loop.append(loop)  # garbage only the collector frees, as an exception's cycle is
    del admin, loop
    done.wait(10)  # a client destroyed first may never answer
    print("survived")
    """
)


def test_admin_clients_are_not_left_to_the_garbage_collector() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "survived" in done.stdout, done.stderr[-2000:]

"""Every `kafka-archive` command in the README and the docs runs, as written (issue 35).

The commands of the fenced blocks of the README and of every page of the manual (mkdocs.yml's
nav, in its order) run one by one, each as written through ``bash -c`` in a scratch directory
(``samples/`` linked into it), against the session's Kafka broker and moto's S3: the pages
take the brokers and the endpoint from ``KAFKA_ARCHIVE_BOOTSTRAP_SERVERS`` and
``KAFKA_ARCHIVE_ENDPOINT_URL``, which this test points at the test services; the text of a
command is never rewritten. Each must exit 0, or the code its page states in an HTML comment
just before the block (``<!-- exit 1: why -->``). A block that cannot run here says so the same
way (``<!-- not run: why -->``): those are counted and listed, and kept few.

Before the first command, the topics and buckets the commands name (in their KCQL, their
options, and the files they read) are created, each topic with 10,000 records ``{"id": i}``
per partition over 3 partitions, and a consumer group a command starts from
(``--start group:NAME``) has committed offsets. Where a page shows a situation (a lag, a
damaged archive), :data:`SITUATIONS` makes it before that page's first command.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import foreign_sinks as sinks
import pytest
import yaml
from archive_helpers import kafka_records, produce_to
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devstack import MOTO_CREDENTIALS

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 3
RECORDS_PER_PARTITION = 10_000
MOST_NOT_RUN = 5  # keep the list short: a block that cannot run here is the exception
COMMAND_TIMEOUT = 600.0

_FENCE = re.compile(r"^(\s*)(```+)(.*)$")
# kafka-archive, after any VAR=value assignments of its environment
_COMMAND = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*kafka-archive\s")
_ANNOTATION = re.compile(r"^\s*<!--\s*(exit\s+(\d+)|not run)\s*(?::\s*(.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Documented:
    """One command of a page: where it is, its text, and what the page says of it."""

    page: str
    line: int
    command: str
    exit_code: int | None  # None: not run here
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.command}"


def pages() -> list[Path]:
    """The README, then the manual's pages in the order of mkdocs.yml's nav."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    found: list[Path] = [ROOT / "README.md"]

    def walk(entries: Any) -> None:
        for entry in entries:
            if isinstance(entry, str):
                found.append(ROOT / config.get("docs_dir", "docs") / entry)
            elif isinstance(entry, dict):
                for value in entry.values():
                    walk([value] if isinstance(value, str) else value)

    walk(config["nav"])
    return found


def documented_commands(path: Path) -> list[Documented]:
    """The ``kafka-archive`` commands of a page's fenced blocks, with their annotations.

    In a block with ``$ `` prompts, the prompted lines are the commands (the others are
    output); in a block without, every line starting ``kafka-archive`` (or ``VAR=value
    kafka-archive``). Lines ending in ``\\`` continue on the next."""
    page = str(path.relative_to(ROOT))
    lines = path.read_text().splitlines()
    found: list[Documented] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, ticks = fence.group(1), fence.group(2)
        start = i
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append((i + 1, lines[i].removeprefix(indent)))
            i += 1
        i += 1
        expected: int | None = 0
        reason = ""
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        annotation = _ANNOTATION.match(lines[before]) if before >= 0 else None
        if annotation is not None:
            expected = int(annotation.group(2)) if annotation.group(2) else None
            reason = annotation.group(3) or ""
        prompted = any(text.startswith("$ ") for _, text in body)
        logical: list[tuple[int, str]] = []
        for number, text in body:
            if logical and logical[-1][1].endswith("\\"):
                first, joined = logical[-1]
                logical[-1] = (first, joined[:-1].rstrip() + " " + text.strip())
            else:
                logical.append((number, text))
        for number, text in logical:
            if prompted:
                if not text.startswith("$ "):
                    continue
                text = text.removeprefix("$ ")
            if _COMMAND.match(text.strip()):
                found.append(Documented(page, number, text.strip(), expected, reason))
    return found


def all_documented() -> list[Documented]:
    return [command for page in pages() for command in documented_commands(page)]


# -- what the commands name ----------------------------------------------------------------

_BUCKETS = (r"\bINTO\s+[`']?([a-z0-9][a-z0-9.-]*)", r"--from\s+([a-z0-9][a-z0-9.-]*):")
_TOPICS = (r"\bFROM\s+[`']?([A-Za-z0-9][A-Za-z0-9._-]*)", r"--topic\s+([A-Za-z0-9._-]+)")
_EMPTY_TOPICS = (r"--to-topic\s+([A-Za-z0-9._-]+)",)
_GROUPS = (r"--start\s+group:([A-Za-z0-9._-]+)",)


def _named(patterns: tuple[str, ...], texts: list[str]) -> set[str]:
    return {name for text in texts for p in patterns for name in re.findall(p, text)}


def _texts(commands: list[Documented]) -> list[str]:
    """The commands, and the files they read that are in the repository (a connector's
    configuration names its topics and bucket)."""
    texts = [c.command for c in commands]
    for command in commands:
        for word in shlex.split(command.command.split(">")[0]):
            if (ROOT / word).is_file():
                texts.append((ROOT / word).read_text())
    return texts


# -- situations the pages show ---------------------------------------------------------------


def _lagging(world: World) -> None:
    """operations.md's `status --max-lag 5000` shows a partition 9,000 records behind."""
    world.produce("orders", 9_000, partition=1)


def _damaged(world: World) -> None:
    """reading.md's `verify` shows an archive with an object gone."""
    key = "archive/orders/1/000000005000.json"
    world.s3.head_object(Bucket="my-bucket", Key=key)  # there: the README's run wrote it
    world.s3.delete_object(Bucket="my-bucket", Key=key)


CONNECT_ARCHIVED = 6_000  # records of each partition the sink archived before it stopped


def _connect_sink_archive(world: World) -> None:
    """foreign.md's commands read the archive Confluent's S3 sink `orders-s3`
    (samples/connectors/confluent-orders-sink.json) wrote of `orders`: its first 6,000
    records of each partition, JSON, 1,000 an object, under `old-bucket:connect/topics`;
    the connector's consumer group (Connect's `connect-<name>`) committed past them."""
    records = kafka_records(world.broker, "orders", PARTITIONS)
    for p in range(PARTITIONS):
        archived = [r for r in records if r.partition == p][:CONNECT_ARCHIVED]
        assert len(archived) == CONNECT_ARCHIVED, (p, len(archived))
        for key, body, _ in sinks.confluent_json("orders", archived, 1_000):
            world.s3.put_object(Bucket="old-bucket", Key=f"connect/{key}", Body=body)
    world.commit_group("connect-orders-s3", {"orders"}, CONNECT_ARCHIVED)


SITUATIONS: dict[str, Callable[[World], None]] = {
    "docs/operations.md": _lagging,
    "docs/reading.md": _damaged,
    "docs/foreign.md": _connect_sink_archive,
}


@dataclass
class World:
    broker: str
    s3: Any
    admin: AdminClient

    def produce(self, topic: str, count: int, *, partition: int | None = None) -> None:
        if partition is None:
            produce_to(self.broker, topic, count, partitions=PARTITIONS)
            return
        records = ({"value": b'{"id": %d}' % i, "partition": partition} for i in range(count))
        produce_to(self.broker, topic, records)

    def create_topics(self, names: set[str]) -> None:
        existing = set(self.admin.list_topics(timeout=30).topics)
        clash = names & existing
        assert not clash, f"topics the docs name exist already in the test broker: {clash}"
        futures = self.admin.create_topics([NewTopic(n, num_partitions=PARTITIONS) for n in names])
        for future in futures.values():
            future.result(timeout=30)

    def commit_group(self, group: str, topics: set[str], offset: int) -> None:
        consumer = Consumer({"bootstrap.servers": self.broker, "group.id": group})
        try:
            consumer.commit(
                offsets=[
                    KafkaTopicPartition(topic, p, offset)
                    for topic in sorted(topics)
                    for p in range(PARTITIONS)
                ],
                asynchronous=False,
            )
        finally:
            consumer.close()


@pytest.fixture
def world(stack: Any, s3_client: Any, admin: AdminClient) -> World:
    return World(stack.bootstrap_servers, s3_client, admin)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    return tmp_path


def _environment(broker: str, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_ARCHIVE_")}
    env.update(MOTO_CREDENTIALS)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["KAFKA_ARCHIVE_BOOTSTRAP_SERVERS"] = broker
    env["KAFKA_ARCHIVE_ENDPOINT_URL"] = endpoint
    return env


def _run(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    return done.returncode, (done.stdout + done.stderr)


def _by_page(commands: list[Documented]) -> Iterator[tuple[str, list[Documented]]]:
    page: str | None = None
    group: list[Documented] = []
    for command in commands:
        if command.page != page and group:
            yield page or "", group
            group = []
        page = command.page
        group.append(command)
    if group:
        yield page or "", group


# -- the tests -------------------------------------------------------------------------------


def test_the_pages_have_commands_and_say_why_one_does_not_run() -> None:
    commands = all_documented()
    assert len([c for c in commands if c.exit_code is not None]) >= 10
    for command in commands:
        if command.exit_code is None:
            assert command.reason, f"{command}: say why it does not run: <!-- not run: why -->"
        for flag in ("--bootstrap-servers", "--endpoint-url"):
            assert flag not in command.command or command.exit_code is None, (
                f"{command}: give the connection through KAFKA_ARCHIVE_* in the environment, "
                "as the manual's examples do, so that the command runs as written here"
            )
    assert set(SITUATIONS) <= {c.page for c in commands}


@pytest.mark.integration
def test_every_documented_command_runs_as_written(
    world: World, stack: Any, scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = all_documented()
    runnable = [c for c in commands if c.exit_code is not None]
    not_run = [c for c in commands if c.exit_code is None]

    texts = _texts(runnable)
    empty = _named(_EMPTY_TOPICS, texts)
    topics = _named(_TOPICS, texts) - empty
    world.create_topics(topics | empty)
    for topic in sorted(topics):
        world.produce(topic, PARTITIONS * RECORDS_PER_PARTITION)
    for bucket in sorted(_named(_BUCKETS, texts)):
        world.s3.create_bucket(Bucket=bucket)
    for group in sorted(_named(_GROUPS, texts)):
        world.commit_group(group, topics, RECORDS_PER_PARTITION // 2)

    env = _environment(stack.bootstrap_servers, stack.endpoint_url)
    failures: list[str] = []
    timings: list[tuple[float, Documented]] = []
    for page, on_page in _by_page(runnable):
        if page in SITUATIONS:
            SITUATIONS[page](world)
        for command in on_page:
            began = time.monotonic()
            code, output = _run(command.command, scratch, env)
            timings.append((time.monotonic() - began, command))
            if code != command.exit_code:
                tail = "\n    ".join(output.strip().splitlines()[-8:])
                failures.append(
                    f"{command}\n  exit {code}, the page says {command.exit_code}:\n    {tail}"
                )

    with capsys.disabled():
        print(f"\n{len(runnable)} documented command(s) run, {len(not_run)} not run:")
        for command in not_run:
            print(f"  not run ({command.reason}): {command}")
        for seconds, command in timings:
            print(f"  {seconds:6.1f} s  {command}")
    assert not failures, "\n".join(failures)
    assert len(not_run) <= MOST_NOT_RUN, [str(c) for c in not_run]

"""Pure object naming: the same inputs always give the same key."""

from __future__ import annotations

from kafka_archive.archiver.model import TopicPartition
from kafka_archive.kcql.plan import Padding, Route


def _pad(number: int, width: int, padding: Padding, char: str) -> str:
    text = str(number)
    if padding is Padding.LEFT:
        return text.rjust(width, char)
    if padding is Padding.RIGHT:
        return text.ljust(width, char)
    return text


def object_key(route: Route, tp: TopicPartition, start_offset: int, values: tuple[str, ...]) -> str:
    """Return the key of the object whose first record is at ``start_offset``.

    ``values`` are the raw PARTITIONBY values of the object's records, in PARTITIONBY
    order (empty without PARTITIONBY).
    """
    naming = route.naming
    offset = _pad(start_offset, naming.offset_width, naming.padding, naming.padding_char)
    partition = _pad(tp.partition, naming.partition_width, naming.padding, naming.padding_char)
    ext = route.format.extension
    head = [route.target.prefix] if route.target.prefix else []
    if not route.partition_by:
        return "/".join([*head, tp.topic, partition, f"{offset}.{ext}"])
    raise NotImplementedError("PARTITIONBY keys are not built yet")

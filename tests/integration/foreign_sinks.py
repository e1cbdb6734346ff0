"""Archives written the way other sinks write them, for the tests of foreign archives.

Each builder takes a partition's Kafka records (as a plain consumer read them) and returns
the objects the sink would upload, key and bytes, with the sink's quirks. The rule each
follows names the sink's own source file (the public repositories, read for issue 39):

- Confluent (confluentinc/kafka-connect-storage-cloud, kafka-connect-s3):
  ``TopicPartitionWriter.fileKeyToCommit``: ``<topics.dir>/<topic>/partition=<p>/``
  ``<topic>+<p>+<start offset, %010d>.<ext>`` (``file.delim`` ``+``,
  ``filename.offset.zero.pad.width`` 10); ``JsonRecordWriterProvider``: one value per line,
  compact (Jackson ``writeObject``) + ``.gz`` when compressed; ``AvroRecordWriterProvider``:
  an Avro container with the value schema (Connect's ``ConnectDefault`` record for a
  schemaless struct); ``ByteArrayRecordWriterProvider``: the value then the line separator,
  ``.bin``; ``ParquetRecordWriterProvider``: the Avro schema's rows, ``.snappy.parquet``.
- Lenses (lensesio/stream-reactor, kafka-connect-cloud-common): ``FileNamer.OffsetFileNamer``:
  ``<topic>/<partition>/<last offset, 12 wide, '0'>_<earliest ts>_<latest ts>.json``
  (``PaddingService`` defaults); ``SchemalessEnvelopeTransformer``: ``{"key", "value",
  "headers": {…}, "metadata": {"timestamp", "topic", "partition", "offset"}}``;
  ``IndexManagerV2.generateLockFilePath``: ``.indexes/<connector>/.locks/<topic>/<p>.lock``.
- Aiven (Aiven-Open/cloud-storage-connectors-for-apache-kafka, commons):
  ``FileNameFragment.DEFAULT_FILENAME_TEMPLATE`` ``{{topic}}-{{partition}}-{{start_offset}}``
  + ``CompressionType.extension()`` (``.gz``); ``PlainOutputStreamWriter`` (``,`` and
  ``\\n``), ``Base64ValuePlainWriter``, ``KeyPlainWriter``, ``HeadersPlainWriter``
  (``b64(name):b64(value);``); ``JsonLinesOutputStreamWriter`` with ``ValueBuilder``
  (JsonConverter, schemas off), ``TimestampBuilder`` (ISO-8601), ``HeaderBuilder``
  (``[{"key", "value"}]``); ``JsonOutputStreamWriter`` (an array: ``[\\n``, ``,\\n``,
  ``\\n]``); ``ParquetSchemaBuilder`` (offset and timestamp longs).
- Secor (pinterest/secor): ``LogFilePath``: ``<topic>/offset=<range>/<generation>_<p>_``
  ``<first offset, %020d>``; ``SequenceFileReaderWriterFactory``: Hadoop SequenceFile of
  LongWritable offset keys and BytesWritable values (written here from Hadoop's format:
  ``SEQ`` 6, class names as Text, no compression, metadata count, sync marker; records
  ``<record length><key length><key><value>``, a sync escape every 2,000 bytes).
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import io
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from archive_helpers import KafkaRecord

Objects = list[tuple[str, bytes, int]]
"""Each object: its key, its bytes, and the offset of its first record (-1: not data)."""


def _chunks(records: Sequence[KafkaRecord], size: int) -> list[Sequence[KafkaRecord]]:
    return [records[i : i + size] for i in range(0, len(records), size)]


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _confluent_key(topic: str, first: KafkaRecord, ext: str) -> str:
    p = first.partition
    return f"topics/{topic}/partition={p}/{topic}+{p}+{first.offset:010d}{ext}"


def confluent_json(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        key = _confluent_key(topic, first, ".json")
        assert all(r.value is not None for r in chunk)
        body = b"".join(_compact(json.loads(r.value or b"")) + b"\n" for r in chunk)
        out.append((key, body, first.offset))
    return out


def confluent_avro(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    import fastavro

    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        values = [json.loads(r.value or b"") for r in chunk]
        fields = [
            {"name": name, "type": ["null", "long" if isinstance(v, int) else "string"]}
            for name, v in values[0].items()
        ]
        schema = {
            "type": "record",
            "name": "ConnectDefault",
            "namespace": "io.confluent.connect.avro",
            "fields": fields,
        }
        buffer = io.BytesIO()
        fastavro.writer(buffer, fastavro.parse_schema(schema), values, codec="null")
        key = _confluent_key(topic, first, ".avro")
        out.append((key, buffer.getvalue(), first.offset))
    return out


def confluent_parquet(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """``ParquetRecordWriterProvider``: ``AvroParquetWriter`` with the value's Avro schema
    (Connect's ``ConnectDefault`` record, optional fields), ``parquet.codec`` snappy by
    default, named ``<codec>.parquet`` (``CompressionCodecName.SNAPPY.getExtension()``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        values = [json.loads(r.value or b"") for r in chunk]
        columns = {
            name: pa.array([v[name] for v in values], pa.int64() if isinstance(x, int) else None)
            for name, x in values[0].items()
        }
        buffer = io.BytesIO()
        pq.write_table(pa.table(columns), buffer, compression="snappy")
        key = _confluent_key(topic, first, ".snappy.parquet")
        out.append((key, buffer.getvalue(), first.offset))
    return out


def confluent_bytes(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """``ByteArrayRecordWriterProvider``: each value as it is, then
    ``format.bytearray.separator`` (the line separator, ``\\n``); ``.bin``
    (``format.bytearray.extension``)."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        body = b"".join((r.value or b"") + b"\n" for r in chunk)
        out.append((_confluent_key(topic, first, ".bin"), body, first.offset))
    return out


def lenses_json(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    out = []
    for chunk in _chunks(records, size):
        last = chunk[-1]
        stamps = [r.timestamp for r in chunk]
        lines = []
        for r in chunk:
            doc = {
                "key": None if r.key is None else r.key.decode(),
                "value": json.loads(r.value or b"null"),
                "metadata": {
                    "timestamp": r.timestamp,
                    "topic": topic,
                    "partition": r.partition,
                    "offset": r.offset,
                },
                "headers": {name: (v or b"").decode() for name, v in r.headers},
            }
            lines.append(_compact(doc) + b"\n")
        key = f"{topic}/{last.partition}/{last.offset:012d}_{min(stamps)}_{max(stamps)}.json"
        out.append((key, b"".join(lines), chunk[0].offset))
    if records:
        lock = {"owner": "c0ffee", "committedOffset": records[-1].offset, "pendingState": None}
        out.append(
            (
                f".indexes/lenses-s3-sink/.locks/{topic}/{records[0].partition}.lock",
                _compact(lock),
                -1,
            )
        )
    return out


def lenses_values_json(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """Without the envelope: the value alone per line (``JsonFormatWriter``), named as
    :func:`lenses_json` names objects."""
    out = []
    for chunk in _chunks(records, size):
        last = chunk[-1]
        stamps = [r.timestamp for r in chunk]
        body = b"".join(_compact(json.loads(r.value or b"null")) + b"\n" for r in chunk)
        key = f"{topic}/{last.partition}/{last.offset:012d}_{min(stamps)}_{max(stamps)}.json"
        out.append((key, body, chunk[0].offset))
    return out


def _b64(data: bytes | None) -> bytes:
    return b"" if data is None else base64.b64encode(data)


def aiven_csv(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """fields key,value,offset,timestamp,headers; gzip."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        rows = []
        for r in chunk:
            headers = b"".join(_b64(n.encode()) + b":" + _b64(v) + b";" for n, v in r.headers)
            cells = [
                _b64(r.key),
                _b64(r.value),
                str(r.offset).encode(),
                str(r.timestamp).encode(),
                headers,
            ]
            rows.append(b",".join(cells) + b"\n")
        out.append(
            (
                f"{topic}-{first.partition}-{first.offset}.gz",
                gzip.compress(b"".join(rows)),
                first.offset,
            )
        )
    return out


def aiven_csv_default(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """The defaults: ``format.output.type`` csv, ``format.output.fields`` value,
    ``format.output.fields.value.encoding`` base64 (``Base64ValuePlainWriter``), one value a
    line; ``file.compression.type`` gzip (the S3 sink's default), so ``.gz``."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        body = b"".join(_b64(r.value) + b"\n" for r in chunk)
        key = f"{topic}-{first.partition}-{first.offset}.gz"
        out.append((key, gzip.compress(body), first.offset))
    return out


def aiven_json(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """``format.output.type=json`` (``JsonOutputStreamWriter``): ``[\\n``, the records
    separated by ``,\\n``, then ``\\n]``; each record an object of the fields (the
    envelope, ``format.output.envelope`` true by default), here value and offset; the
    value as Connect's JsonConverter (schemas off) makes it; no compression."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        docs = [
            _compact({"value": json.loads(r.value or b"null"), "offset": r.offset}) for r in chunk
        ]
        body = b"[\n" + b",\n".join(docs) + b"\n]"
        out.append((f"{topic}-{first.partition}-{first.offset}", body, first.offset))
    return out


def _iso(ms: int) -> str:
    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def aiven_jsonl(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """fields value,key,offset,timestamp,headers; no compression."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        lines = []
        for r in chunk:
            doc = {
                "value": json.loads(r.value or b"null"),
                "key": None if r.key is None else r.key.decode(),
                "offset": r.offset,
                "timestamp": _iso(r.timestamp),
                "headers": [{"key": n, "value": (v or b"").decode()} for n, v in r.headers],
            }
            lines.append(_compact(doc) + b"\n")
        out.append((f"{topic}-{first.partition}-{first.offset}", b"".join(lines), first.offset))
    return out


def aiven_parquet(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """fields key,offset,timestamp,headers,value; the value a struct."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        table = pa.table(
            {
                "key": [None if r.key is None else r.key.decode() for r in chunk],
                "offset": pa.array([r.offset for r in chunk], pa.int64()),
                "timestamp": pa.array([r.timestamp for r in chunk], pa.int64()),
                "headers": pa.array(
                    [[(n, (v or b"").decode()) for n, v in r.headers] for r in chunk],
                    pa.map_(pa.string(), pa.string()),
                ),
                "value": [json.loads(r.value or b"null") for r in chunk],
            }
        )
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        out.append((f"{topic}-{first.partition}-{first.offset}", buffer.getvalue(), first.offset))
    return out


def _hadoop_text(s: str) -> bytes:
    raw = s.encode()
    assert len(raw) < 128  # WritableUtils.writeVInt: one byte below 128
    return bytes([len(raw)]) + raw


def sequence_file(pairs: Sequence[tuple[int, bytes]]) -> bytes:
    sync = bytes(range(16))
    out = bytearray(b"SEQ\x06")
    out += _hadoop_text("org.apache.hadoop.io.LongWritable")
    out += _hadoop_text("org.apache.hadoop.io.BytesWritable")
    out += b"\x00\x00" + struct.pack(">i", 0) + sync
    last_sync = len(out)
    for key, value in pairs:
        if len(out) - last_sync >= 2000:
            out += struct.pack(">i", -1) + sync
            last_sync = len(out)
        body = struct.pack(">q", key) + struct.pack(">i", len(value)) + value
        out += struct.pack(">ii", len(body), 8) + body
    return bytes(out)


def secor(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        key = f"{topic}/offset=0/1_{first.partition}_{first.offset:020d}"
        out.append((key, sequence_file([(r.offset, r.value or b"") for r in chunk]), first.offset))
    return out


def _by(records: Sequence[KafkaRecord], field: str) -> dict[str, list[KafkaRecord]]:
    groups: dict[str, list[KafkaRecord]] = {}
    for r in records:
        groups.setdefault(str(json.loads(r.value or b"{}")[field]), []).append(r)
    return groups


def confluent_field_json(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """FieldPartitioner on ``region`` (storage-common ``FieldPartitioner.encodePartition``:
    ``<field>=<value>``): each region's records rotate on their own every ``size``."""
    out = []
    for region, group in sorted(_by(records, "region").items()):
        for chunk in _chunks(group, size):
            first = chunk[0]
            name = f"{topic}+{first.partition}+{first.offset:010d}.json"
            body = b"".join(_compact(json.loads(r.value or b"")) + b"\n" for r in chunk)
            out.append((f"topics/{topic}/region={region}/{name}", body, first.offset))
    return sorted(out, key=lambda o: o[2])


def confluent_hourly_json(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """TimeBasedPartitioner with ``path.format='year'=YYYY/'month'=MM/'day'=dd/'hour'=HH``
    (Joda: quoted text is literal) on the record time (``timestamp.extractor=Record``)."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        at = dt.datetime.fromtimestamp(first.timestamp / 1000, dt.UTC)
        folder = f"year={at:%Y}/month={at:%m}/day={at:%d}/hour={at:%H}"
        name = f"{topic}+{first.partition}+{first.offset:010d}.json"
        body = b"".join(_compact(json.loads(r.value or b"")) + b"\n" for r in chunk)
        out.append((f"topics/{topic}/{folder}/{name}", body, first.offset))
    return out


def aiven_padded_jsonl(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """``file.name.template={{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}``
    (``%010d``/``%020d``), JSONL of value and offset."""
    out = []
    for chunk in _chunks(records, size):
        first = chunk[0]
        lines = [_compact({"value": json.loads(r.value or b""), "offset": r.offset}) for r in chunk]
        key = f"{topic}/{first.partition:010d}/{first.offset:020d}"
        out.append((key, b"".join(line + b"\n" for line in lines), first.offset))
    return out


def lenses_keys_and_values(topic: str, records: Sequence[KafkaRecord], size: int) -> Objects:
    """PARTITIONBY region with ``'partition.include.keys'=true`` (KeysAndValues:
    ``region=<value>/``, ``CloudKeyNamer.partitionValuePrefix``), named by
    ``TopicPartitionOffsetFileNamer``: ``<topic>(<partition>_<last offset, 12 wide>).json``;
    the envelope."""
    out = []
    for region, group in sorted(_by(records, "region").items()):
        for key, body, first in lenses_json(topic, group, size):
            if key.startswith(".indexes/"):
                continue
            last = key.rpartition("/")[2].partition("_")[0]
            name = f"{topic}({group[0].partition}_{last}).json"
            out.append((f"region={region}/{name}", body, first))
    return sorted(out, key=lambda o: o[2])


Builder = Callable[[str, Sequence[KafkaRecord], int], Objects]

"""The TEXT and BYTES batch encoders against their writers' value-by-value encoding."""

from __future__ import annotations

import io
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import bytes_, text
from kafka_archive.archiver.formats.base import BadRecordError

value = st.one_of(
    st.binary(max_size=12),
    st.text(max_size=12).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"", b"a\nb", b"\r", b"\xff", b"caf\xc3\xa9", b"\xc3"]),
    st.none(),
)


def one_by_one(fmt: str, values: list[bytes | None]) -> bytes | None:
    route = kcql.parse(f"INSERT INTO bkt:p SELECT * FROM t STOREAS `{fmt}`").routes[0]
    sink = io.BytesIO()
    writer = {"TEXT": text.TextWriter, "BYTES": bytes_.BytesWriter}[fmt](sink, route)
    try:
        for offset, v in enumerate(values):
            writer.write(Record("t", 0, offset, None, None, v))
    except BadRecordError:
        return None
    return sink.getvalue()


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from(["TEXT", "BYTES"]), values=st.lists(value, max_size=8))
def test_a_batch_is_encoded_and_refused_as_its_values_one_by_one(
    fmt: str, values: list[bytes | None]
) -> None:
    encode = {"TEXT": text.encode_values, "BYTES": bytes_.encode_values}[fmt]
    try:
        encoded = encode(values)
    except BadRecordError:
        assert one_by_one(fmt, values) is None
        return
    assert encoded.data == one_by_one(fmt, values)
    # Each record's bytes are what the writer wrote for it alone.
    for (a, b), v in zip(itertools.pairwise(encoded.ends), values, strict=True):
        assert encoded.data[a:b] == one_by_one(fmt, [v])

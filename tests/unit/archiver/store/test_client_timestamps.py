"""The timestamps of S3's answers parse to the instant botocore's own parser gives."""

from __future__ import annotations

import datetime
import email.utils

import botocore.utils
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.store.client import parse_timestamp

INSTANTS = st.datetimes(
    min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(9998, 12, 31)
).map(lambda d: d.replace(tzinfo=datetime.UTC))


@given(INSTANTS)
def test_a_listings_iso_timestamp(instant: datetime.datetime) -> None:
    text = instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"
    assert parse_timestamp(text) == botocore.utils.parse_timestamp(text)


@given(INSTANTS)
def test_a_last_modified_header(instant: datetime.datetime) -> None:
    text = email.utils.format_datetime(instant.replace(microsecond=0), usegmt=True)
    assert parse_timestamp(text) == botocore.utils.parse_timestamp(text)


def test_other_forms_go_to_botocore() -> None:
    for text in ("1700000000", "2026-11-24T12:17:01+02:00", "2026-11-24"):
        assert parse_timestamp(text) == botocore.utils.parse_timestamp(text)

"""The checksums the store computes for its uploads, against botocore's own."""

from __future__ import annotations

import os

import pytest
from botocore.httpchecksum import Crc32Checksum, Sha1Checksum, Sha256Checksum

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.store.s3 import S3Store, store_pool


@pytest.mark.parametrize(
    ("setting", "algorithm", "reference"),
    [
        (None, "CRC32", Crc32Checksum),  # botocore's default
        ("CRC32", "CRC32", Crc32Checksum),
        ("SHA1", "SHA1", Sha1Checksum),
        ("SHA256", "SHA256", Sha256Checksum),
    ],
)
def test_a_checksum_is_what_botocore_would_send(
    setting: str | None, algorithm: str, reference: type
) -> None:
    store = S3Store(
        S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1", checksum=setting)
    )
    for body in (b"", b"hello", os.urandom(100_000)):
        expected = reference().handle(body)
        assert store.checksum(body) == {
            "ChecksumAlgorithm": algorithm,
            f"Checksum{algorithm}": expected,
        }
        assert store.checksum(bytearray(body))[f"Checksum{algorithm}"] == expected


@pytest.mark.parametrize("setting", ["OFF", "CRC32C"])
def test_other_algorithms_are_left_to_botocore(setting: str) -> None:
    store = S3Store(
        S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1", checksum=setting)
    )
    assert store.checksum(b"hello") == {}


def test_a_store_given_back_serves_the_next_unit_of_the_same_settings_afresh() -> None:
    pool = store_pool()
    one = S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    other = S3Settings(endpoint_url="http://127.0.0.1:8", region="us-east-1")
    store = pool.take(one)
    store.retries, store.object_metadata = 3, {"writer": "run-1"}
    pool.give(one, store)
    again = pool.take(one)
    assert again is store and again.retries == 0 and again.object_metadata == {}
    assert pool.take(one) is not store  # one unit at a time: taken, it is not idle
    assert pool.take(other) is not store  # other settings, another client
    with store.creating("b", "k"):
        pool.give(one, store)  # a write in flight: not kept
    assert pool.take(one) is not store

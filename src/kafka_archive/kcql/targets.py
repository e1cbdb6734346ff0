"""Where a statement writes and what it reads: the bucket and prefix of ``INSERT INTO`` (S3's
naming rules) and the topic of ``FROM`` (Kafka's)."""

from __future__ import annotations

import ipaddress
import re

from kafka_archive.kcql.errors import KcqlSemanticError
from kafka_archive.kcql.plan import ALL_TOPICS, Span, Target
from kafka_archive.kcql.properties import has_control
from kafka_archive.kcql.syntax import TargetText, Word

# S3 bucket naming rules (general purpose buckets).
_BUCKET_CHARS = re.compile(r"[a-z0-9.-]+")
_RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_MAX_TOPIC_LENGTH = 249


def compile_target(target: TargetText) -> Target:
    check_bucket(target.bucket, target.bucket_span)
    prefix = ""
    if target.prefix is not None:
        assert target.prefix_span is not None
        prefix = check_prefix(target.prefix, target.prefix_span)
    return Target(target.bucket, prefix)


def check_bucket(bucket: str, span: Span) -> None:
    """Raise unless ``bucket`` follows S3's naming rules; the message names the rule."""

    def fail(rule: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(
            f"invalid bucket name {bucket!r}: {rule}", span=span, hint=hint, label="bad-bucket"
        )

    if not 3 <= len(bucket) <= 63:
        raise fail(f"S3 bucket names are 3 to 63 characters long, this one has {len(bucket)}")
    if bucket != bucket.lower():
        lowered = bucket.lower()
        hint = f"Did you mean {lowered!r}?" if _BUCKET_CHARS.fullmatch(lowered) else None
        raise fail("S3 bucket names are lower case", hint)
    if not _BUCKET_CHARS.fullmatch(bucket):
        bad = next(c for c in bucket if not _BUCKET_CHARS.fullmatch(c))
        raise fail(
            f"S3 bucket names contain only lower-case letters, digits, '.' and '-', not {bad!r}"
        )
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        raise fail("S3 bucket names begin and end with a letter or a digit")
    if ".." in bucket:
        raise fail("S3 bucket names do not contain two adjacent periods")
    try:
        ipaddress.IPv4Address(bucket)
    except ValueError:
        pass
    else:
        raise fail("S3 bucket names are not formatted as IP addresses")
    for reserved in _RESERVED_BUCKET_PREFIXES:
        if bucket.startswith(reserved):
            raise fail(f"the prefix {reserved!r} is reserved by S3")
    for reserved in _RESERVED_BUCKET_SUFFIXES:
        if bucket.endswith(reserved):
            raise fail(f"the suffix {reserved!r} is reserved by S3")


def check_prefix(prefix: str, span: Span) -> str:
    """Return ``prefix`` if it is a clean key prefix: no empty, ``.`` or ``..`` segments."""

    def fail(message: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(message, span=span, hint=hint, label="bad-prefix")

    if not prefix:
        raise fail("empty prefix after ':'", "Name a prefix, or drop the ':'")
    if has_control(prefix):
        raise fail(f"the prefix {prefix!r} contains a control character")
    segments = prefix.split("/")
    if "" in segments:
        cleaned = "/".join(s for s in segments if s)
        raise fail(
            f"the prefix {prefix!r} has an empty path segment (a leading, trailing or double '/')",
            f"Write {cleaned!r}" if cleaned else None,
        )
    if any(s in (".", "..") for s in segments):
        raise fail(f"the prefix {prefix!r} has a '.' or '..' path segment")
    return prefix


def compile_topic(word: Word) -> str:
    topic = word.text

    def fail(message: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(message, span=word.span, hint=hint, label="bad-topic")

    if topic == ALL_TOPICS:
        return topic
    if topic in (".", ".."):
        raise fail(f"{topic!r} is not a valid Kafka topic name")
    if len(topic) > _MAX_TOPIC_LENGTH:
        raise fail(f"Kafka topic names have at most {_MAX_TOPIC_LENGTH} characters")
    if has_control(topic) or any(c.isspace() for c in topic):
        raise fail(f"the topic {topic!r} contains whitespace or a control character")
    return topic

"""The option table: every setting's name, type, default and help, declared once here
(:class:`.settings.Settings` takes its defaults from it, :func:`.load.load_settings` its
environment variables and types), and the values some options allow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "KAFKA_ARCHIVE_"


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    kind: type
    default: Any = None
    help: str = ""

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("bootstrap_servers", str, None, "Kafka brokers, HOST:PORT[,HOST:PORT]"),
    Option(
        "endpoint_url", str, None, "S3-compatible endpoint URL (MinIO, Ceph, …); absent means AWS"
    ),
    Option("region", str, None, "S3 region; absent means the standard AWS settings"),
    Option("master", str, "local[*]", "Spark master"),
    Option(
        "job_name",
        str,
        None,
        "names the run: the consumer group kafka-archive.<job>, the Spark application, reports "
        "and metrics; default derived from the topics and targets. The archive's state belongs "
        "to each route (target + topic), not to the job: renaming a job, or adding or removing "
        "a statement, keeps every route's progress",
    ),
    Option(
        "spool_dir",
        str,
        None,
        "local directory for spool files, on the driver and every executor (default: the "
        "system's temporary directory)",
    ),
    Option(
        "schema_registry_url",
        str,
        None,
        "Confluent Schema Registry: values in its Avro wire format are decoded with their "
        "writer schema",
    ),
    Option(
        "s3_max_attempts",
        int,
        8,
        "attempts per S3 request: retries with exponential backoff and full jitter (base 1 s, "
        "cap 20 s) on throttling (503 SlowDown), 5xx and connection errors; past the budget the "
        "run fails (exit 5 or 12) with nothing uncommitted counted as archived",
    ),
    # AWS's list prices of S3 Standard in us-east-1 (https://aws.amazon.com/s3/pricing/,
    # "Requests & data retrievals"; transcribed at https://c3x.dev/blog/s3-request-fees-explained):
    # $0.005 per 1,000 PUT, COPY, POST, LIST requests; $0.0004 per 1,000 GET, SELECT and all
    # other requests; DELETE and CANCEL free.
    Option(
        "s3_price_put_per_1000",
        float,
        0.005,
        "USD per 1,000 PUT, COPY, POST and LIST requests, for the cost estimate of the summary, "
        "--report and metrics (default: AWS's list price of S3 Standard in us-east-1; 0 for a "
        "store that does not bill requests)",
    ),
    Option(
        "s3_price_get_per_1000",
        float,
        0.0004,
        "USD per 1,000 GET, HEAD and all other requests but DELETE (free), for the cost "
        "estimate (default: AWS's list price of S3 Standard in us-east-1)",
    ),
    Option(
        "s3_stream_part_mb",
        int,
        None,
        "the part size (N MiB, at least 5; default 16) of objects written in memory, which are "
        "uploaded in parts while they are written (routes without PARTITIONBY or time in the "
        "layout); set, spooled objects (the other routes) stream their parts too instead of "
        "uploading at roll",
    ),
    Option(
        "s3_sse",
        str,
        None,
        "server-side encryption of every object: SSE-S3 (AES256), "
        "SSE-KMS (aws:kms) or DSSE-KMS (aws:kms:dsse); absent means the bucket's default",
    ),
    Option(
        "s3_sse_kms_key_id",
        str,
        None,
        "with SSE-KMS: the KMS key id, alias or ARN (absent: the AWS managed key aws/s3)",
    ),
    Option("s3_bucket_key", bool, None, "with SSE-KMS: use an S3 Bucket Key (fewer KMS calls)"),
    Option(
        "s3_storage_class",
        str,
        None,
        "storage class of archived objects (STANDARD, "
        "STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE, "
        "…); kafka-archive's own small objects stay STANDARD",
    ),
    Option(
        "s3_addressing_style",
        str,
        None,
        "path (https://host/bucket/key), virtual "
        "(https://bucket.host/key) or auto (boto3's choice, the default)",
    ),
    Option(
        "s3_checksum",
        str,
        None,
        "checksum sent with every upload: CRC32 (boto3's "
        "default), CRC32C, CRC64NVME, SHA1, SHA256, or off (only where S3 requires one, "
        "for stores that refuse the others)",
    ),
    Option(
        "s3_acl",
        str,
        None,
        "canned ACL of every object, e.g. bucket-owner-full-control "
        "for a bucket of another account",
    ),
    Option(
        "s3_role_arn",
        str,
        None,
        "assume this IAM role (with the credentials of the "
        "standard AWS chain) for every S3 request, on the driver and every executor",
    ),
    Option(
        "s3_external_id",
        str,
        None,
        "with s3_role_arn: the external id the role's trust policy asks for",
    ),
    Option(
        "s3_role_session_name",
        str,
        "kafka-archive",
        "with s3_role_arn: the session name (shown in CloudTrail)",
    ),
    Option(
        "sts_endpoint_url",
        str,
        None,
        "with s3_role_arn: the STS endpoint (absent: AWS's regional one)",
    ),
    Option(
        "max_open_writers",
        int,
        64,
        "open objects per Spark task at most (PARTITIONBY with many values): past it the least "
        "recently written one is rolled (uploaded) early",
    ),
    Option(
        "max_records_per_unit",
        int,
        250_000,
        "split a partition with more pending offsets than this into Spark tasks of that many, "
        "rounded down to a multiple of flush.count, run in parallel and committed in offset "
        "order; set it above your largest partition's backlog to keep one task per partition",
    ),
    Option(
        "lock_ttl_seconds",
        int,
        900,
        "the target prefix's lease: a dead run's lock expires after it, and a run that cannot "
        "renew it for two thirds of it stops with exit 18",
    ),
    Option(
        "commit_protocol",
        str,
        "states",
        "how a run commits what it archived: states (a lease, per-partition states and intent "
        "markers) or log (experimental: one claim per session and one create-only commit-log "
        "entry per batch under <prefix>/.kafka-archive/log/, about one S3 request per object; "
        "each attempt's objects are its own: its run, epoch and attempt in Parquet or Avro "
        "file metadata or the gzip header, else in the key, "
        "<first offset>.e<epoch>a<attempt>.<ext>; a target that holds partition states is "
        "migrated onto the log by its first log-mode run: the lock becomes a migrated marker, "
        "the states an import entry; refused, exit 2, while a states run's intent markers or "
        "an earlier version's per-job states remain: a states run settles them first)",
    ),
    Option(
        "log_vacuum_grace_seconds",
        int,
        3600,
        "commit_protocol=log: at a session's start, objects no log entry names, written by a "
        "fenced writer and older than this by the store's clock, are deleted (at most once "
        "per this period: the listing reads every object of the target)",
    ),
    Option(
        "read_timeout_seconds",
        int,
        60,
        "fail a partition read (exit 11) after this long without data",
    ),
    Option(
        "start",
        str,
        "earliest",
        "where a route with no state begins: earliest, latest, an ISO-8601 time, or "
        "group:<consumer-group> (adopt a group's committed offsets). A route with state "
        "(written as its first run starts archiving a partition) ignores it and says so, and a "
        "partition added to a topic after its route began is archived from offset 0, whatever "
        "--start says (what retention deleted of it before it was archived is a gap: exit 16, "
        "--allow-gaps). It applies to what a statement's first run finds: that run pins every "
        "partition it finds (an empty one at 0), so with latest every record produced after it "
        "is archived; a topic that FROM `*` matches after its first run has no pin and begins "
        "at its first record under latest (under a time or a group, where those say). To leave "
        "out an existing topic's history, give it a statement of its own",
    ),
    Option(
        "max_records_per_partition",
        int,
        None,
        "bound a run (backfills): archive at most this many offsets of each partition; the next "
        "run resumes where it stopped",
    ),
    Option(
        "until",
        str,
        None,
        "bound a run (backfills): stop each partition at its first record at or after this "
        "ISO-8601 time; the next run resumes where it stopped",
    ),
    Option(
        "topics",
        str,
        None,
        "for FROM `*`: the topics to archive, comma-separated (fixed at the start of a --follow "
        "session)",
    ),
    Option(
        "topics_regex",
        str,
        None,
        "for FROM `*`: every non-internal topic whose whole name matches (checked at each run "
        "and every 10 s of a --follow session, so new topics join the job)",
    ),
    Option(
        "unsafe_single_writer_without_conditional_writes",
        bool,
        False,
        "run against an S3 endpoint that ignores If-None-Match/If-Match (exit 19 otherwise): no "
        "fencing, so overlapping runs writing a prefix can lose or duplicate records; a warning "
        "per run",
    ),
    Option(
        "jvm_class_cache",
        bool,
        True,
        "local master: start Spark's JVM from a class-data-sharing archive kept in the user's "
        "cache directory (made by the first run, ~70 MB), so that later runs start it at about "
        "half the CPU; submit and non-local masters never use it",
    ),
    Option(
        "allow_gaps",
        bool,
        False,
        "continue past records Kafka deleted before they were archived (the gap is still "
        "reported once and recorded in the partition's state, exit 0) instead of leaving those "
        "partitions where they were and exiting 16",
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}
# Options kept in S3Settings, by the name of their field there.
S3_FIELDS = {
    "endpoint_url": "endpoint_url",
    "region": "region",
    "s3_max_attempts": "max_attempts",
    "s3_sse": "sse",
    "s3_sse_kms_key_id": "sse_kms_key_id",
    "s3_bucket_key": "bucket_key",
    "s3_storage_class": "storage_class",
    "s3_addressing_style": "addressing_style",
    "s3_checksum": "checksum",
    "s3_acl": "acl",
    "s3_role_arn": "role_arn",
    "s3_external_id": "external_id",
    "s3_role_session_name": "role_session_name",
    "sts_endpoint_url": "sts_endpoint_url",
}
# Keys of the config file that are not options: the statements and librdkafka properties.
FILE_ONLY = ("kcql", "kafka")


def default(name: str) -> Any:
    """The default of option ``name`` (the one place it is declared)."""
    return BY_NAME[name].default


SSE_MODES = {
    "SSE-S3": "AES256",
    "AES256": "AES256",
    "SSE-KMS": "aws:kms",
    "AWS:KMS": "aws:kms",
    "DSSE-KMS": "aws:kms:dsse",
    "AWS:KMS:DSSE": "aws:kms:dsse",
}
STORAGE_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "GLACIER_IR",
    "OUTPOSTS",
    "SNOW",
    "EXPRESS_ONEZONE",
)
CHECKSUMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256", "OFF")
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
)
ADDRESSING_STYLES = ("auto", "path", "virtual")
COMMIT_PROTOCOLS = ("states", "log")

"""The end-to-end demo behind ``make demo``: nothing to set up, everything on loopback.

Starts a local Kafka broker (tansu) and S3 endpoint (moto), produces sample orders, runs
``kafka-archive run`` on local Spark exactly as a user would, lists the objects it wrote,
shows the first lines of one, runs again to show that only new records are archived, and
stops everything it started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_orders import create_topic, produce

from devstack import MOTO_CREDENTIALS, TANSU_ENV, LocalStack

BUCKET = "demo-bucket"
TOPIC = "orders"
KCQL = f"INSERT INTO {BUCKET}:archive SELECT * FROM {TOPIC} STOREAS `JSON` WITH_FLUSH_COUNT = 5000"


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def archive(stack: LocalStack, env: dict[str, str]) -> None:
    command = [
        str(Path(sys.executable).with_name("kafka-archive")),
        "run",
        "--kcql",
        KCQL,
        "--bootstrap-servers",
        stack.bootstrap_servers,
        "--endpoint-url",
        stack.endpoint_url,
    ]
    print(
        '$ kafka-archive run --kcql "' + KCQL.replace("`", "\\`") + '" \\\n'
        f"    --bootstrap-servers {stack.bootstrap_servers} --endpoint-url {stack.endpoint_url}",
        flush=True,
    )
    code = subprocess.call(command, env=env)
    if code != 0:
        raise SystemExit(f"kafka-archive run exited with {code}")


def main() -> int:
    env = {
        **os.environ,
        **MOTO_CREDENTIALS,
        **TANSU_ENV,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    os.environ.update(MOTO_CREDENTIALS)
    logs = Path(tempfile.mkdtemp(prefix="kafka-archive-demo-"))
    say("starting a local Kafka broker and S3 endpoint")
    with LocalStack(logs) as stack:
        print(f"broker {stack.bootstrap_servers}, S3 {stack.endpoint_url}")
        s3 = boto3.client("s3", endpoint_url=stack.endpoint_url, region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)

        say("producing 30,000 sample orders into 3 partitions")
        create_topic(stack.bootstrap_servers, TOPIC, 3)
        produce(stack.bootstrap_servers, TOPIC, 30_000, 3)

        say("archiving with Spark (local[*])")
        archive(stack, env)

        say(f"objects in s3://{BUCKET}/archive/")
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            for item in page.get("Contents", []):
                keys.append(item["Key"])
                print(f"{item['Size']:>10}  {item['Key']}")
        first = next(k for k in keys if "/.kafka-archive/" not in f"/{k}")
        say(f"first lines of {first}")
        body = s3.get_object(Bucket=BUCKET, Key=first)["Body"].read().decode()
        print("\n".join(body.splitlines()[:3]))

        say("producing 3,000 more orders and archiving again: only the new ones are written")
        produce(stack.bootstrap_servers, TOPIC, 3_000, 3, first=30_000)
        archive(stack, env)

        say("archiving once more with nothing new")
        archive(stack, env)
    shutil.rmtree(logs, ignore_errors=True)
    say("done: broker and S3 endpoint stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

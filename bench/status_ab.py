"""A/B ``kafka-archive status`` of two source trees on the wide shape, S3 requests counted.

``PYTHONPATH=testbed .venv/bin/python bench/status_ab.py BASE_SRC NEW_SRC`` starts Apache
Kafka and the S3 endpoint as the wide bench does, makes ``--topics`` x ``--partitions``
partitions of one record each, archives them once (``run`` of one statement per topic, with
NEW_SRC: it writes the state index), then runs ``status`` of the same statements with each
tree first on ``PYTHONPATH``, alternating which goes first, ``--pairs`` times, after one
unmeasured warm-up each. Every request to S3 goes through a counting proxy
(``tests/integration/faultproxy.py``). Prints each run's wall time, CPU-seconds of its
process tree, S3 requests (total, state GETs) and the load average at its start, then the
medians per tree.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from procstat import become_subreaper, measure  # bench/, the script's directory
from run import HERE, archive_command, produce_wide, services

from devstack import MOTO_CREDENTIALS

sys.path.insert(0, str(HERE.parent / "tests" / "integration"))
from faultproxy import FaultProxy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("base", help="source tree A (the directory holding kafka_archive/)")
    parser.add_argument("new", help="source tree B (archives the topics)")
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    trees = {"A": str(Path(args.base).resolve()), "B": str(Path(args.new).resolve())}
    for tree in trees.values():
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", tree], check=False, stdout=subprocess.DEVNULL
        )
    become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.update(MOTO_CREDENTIALS)
    bindir = Path(sys.executable).parent
    work = Path(tempfile.mkdtemp(prefix="kafka-archive-status-ab-"))
    with services("kafka", work) as (broker, endpoint, extra_env):
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="bench"
        )
        records, _ = produce_wide(broker, 1, 100, args.topics, args.partitions)
        print(f"{records} records over {args.topics * args.partitions} partitions", flush=True)
        kcql = ";\n".join(
            f"INSERT INTO bench:wide SELECT * FROM wide-{t:02d} STOREAS `JSON`"
            for t in range(args.topics)
        )
        with FaultProxy(endpoint, rate=0.0, seed=0) as proxy:

            def env(side: str) -> dict[str, str]:
                return {
                    **os.environ,
                    **extra_env,
                    "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable,
                    "PYTHONPATH": trees[side],
                    "KAFKA_ARCHIVE_SPOOL_DIR": str(work),
                    "XDG_CACHE_HOME": str(work / f"cache-{side}"),
                }

            archive = archive_command(bindir, kcql, broker, proxy.url)
            done = subprocess.run(archive, env=env("B"), capture_output=True)
            if done.returncode != 0:
                print(f"the archiving run failed: {done.stderr.decode()[-2000:]}", file=sys.stderr)
                return 1
            status = [str(bindir / "kafka-archive"), "status", *archive[2:]]
            runs = [(-1, side) for side in ("A", "B")]
            for pair in range(args.pairs):
                runs += [(pair, side) for side in (("A", "B") if pair % 2 == 0 else ("B", "A"))]
            rows: dict[str, list[tuple[float, float, int, int]]] = collections.defaultdict(list)
            for pair, side in runs:
                load = os.getloadavg()[0]
                proxy.requests.clear()
                usage = measure(status, env(side), stdout=subprocess.DEVNULL)
                if usage.code != 0:
                    print(f"{side}: status exited {usage.code}", file=sys.stderr)
                    return 1
                total = len(proxy.requests)
                state_gets = sum(
                    1 for m, p, _ in proxy.requests if m == "GET" and "/.kafka-archive/state/" in p
                )
                print(
                    f"pair {pair} {side}: wall {usage.seconds:5.2f} s, CPU {usage.cpu_seconds:5.2f}"
                    f" s, S3 requests {total} ({state_gets} state GETs), load {load:.2f}"
                    f"{' (warm-up)' if pair < 0 else ''}",
                    flush=True,
                )
                if pair >= 0:
                    rows[side].append((usage.seconds, usage.cpu_seconds, total, state_gets))
            for side in ("A", "B"):
                walls, cpus, totals, gets = zip(*rows[side], strict=True)
                print(
                    f"median {side}: wall {statistics.median(walls):.2f} s, CPU "
                    f"{statistics.median(cpus):.2f} s, S3 requests {statistics.median(totals):.0f}"
                    f" ({statistics.median(gets):.0f} state GETs)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())

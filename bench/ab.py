"""A/B the CPU cost of two source trees of kafka-archive on one produced topic.

``PYTHONPATH=testbed .venv/bin/python bench/ab.py BASE_SRC NEW_SRC`` starts the bench's
stack (tansu + S3 endpoint), produces the keyed topic once (``--mb``), then runs
``kafka-archive run`` per format with each tree first on ``PYTHONPATH`` (driver, Spark JVM
and Python workers all import it), alternating which goes first, ``--pairs`` times, after
one unmeasured warm-up run per tree (a tree's first run dumps its own class-data-sharing
archive for Spark's JVM and KCQL's parser tables into the tree's own cache directory; both
trees are compiled to bytecode first, as a pip install does). Prints
each run's CPU-seconds per GB (the Python workers, by process name, and the whole tree),
the JVM's and the CLI's CPU-seconds, the tree's peak RSS, wall time and the load average
at its start, then the medians per tree and format.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import boto3
from procstat import become_subreaper, measure  # bench/, the script's directory
from run import PARTITIONS, archive_command, empty_bucket, produce

from devstack import MOTO_CREDENTIALS, TANSU_ENV, LocalStack


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("base", help="source tree A (the directory holding kafka_archive/)")
    parser.add_argument("new", help="source tree B")
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--formats", default="JSON,TEXT,BYTES")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="instead of measuring, run each tree once per format under py-spy (collapsed "
        "stacks of every process, DIR/<tree>-<format>.txt)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        metavar="N",
        help="also sample every thread's CPU and print each run's N costliest threads "
        "(process name / thread name, digits as #)",
    )
    args = parser.parse_args()
    formats = [f.strip().upper() for f in args.formats.split(",") if f.strip()]
    trees = {"A": str(Path(args.base).resolve()), "B": str(Path(args.new).resolve())}

    for tree in trees.values():
        # Bytecode as a pip install writes it (this machine may set PYTHONDONTWRITEBYTECODE):
        # the runs then measure running, not compiling ~90 modules (~0.12 CPU-s a process).
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", tree], check=False, stdout=subprocess.DEVNULL
        )

    become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.update(MOTO_CREDENTIALS)
    bindir = Path(sys.executable).parent
    work = Path(tempfile.mkdtemp(prefix="kafka-archive-ab-"))
    rows: list[tuple[str, str, int, float, float, float, float, float, float, float]] = []
    try:
        with LocalStack(work / "services") as stack:
            broker, endpoint = stack.bootstrap_servers, stack.endpoint_url
            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            s3.create_bucket(Bucket="bench")
            records, size, _ = produce(
                broker, "bench", args.mb * 1_000_000, args.value_bytes, keyed=True
            )
            print(f"{records} records, {size / 1e6:.0f} MB over {PARTITIONS} partitions")
            gb = size / 1e9
            runs = [(-1, formats[0], side) for side in ("A", "B")] if not args.profile else []
            for pair in range(1 if args.profile else args.pairs):
                for fmt in formats:
                    order = ("A", "B") if pair % 2 == 0 else ("B", "A")
                    runs.extend((pair, fmt, side) for side in order)
            for pair, fmt, side in runs:
                env = {
                    **os.environ,
                    **TANSU_ENV,
                    "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable,
                    "PYTHONPATH": trees[side],
                    "KAFKA_ARCHIVE_SPOOL_DIR": str(work),
                    # Each tree's own cache directory (JVM class archive, KCQL parser tables),
                    # made by its warm-up run: other runs on the machine cannot replace them.
                    "XDG_CACHE_HOME": str(work / f"cache-{side}"),
                }
                kcql = (
                    f"INSERT INTO bench:{side.lower()}{pair + 1}{fmt.lower()} SELECT * "
                    f"FROM bench STOREAS `{fmt}` WITH_FLUSH_COUNT = 1000000"
                )
                load = os.getloadavg()[0]
                command = archive_command(bindir, kcql, broker, endpoint)
                if args.profile:
                    out = Path(args.profile) / f"{side}-{fmt}.txt"
                    spy = [str(bindir / "py-spy"), "record", "--subprocesses"]
                    command = [
                        *spy,
                        "-r",
                        "200",
                        "-f",
                        "raw",
                        "-o",
                        str(out),
                        "--",
                        *command,
                    ]
                usage = measure(command, env, stdout=subprocess.DEVNULL, threads=args.threads > 0)
                if usage.code != 0:
                    print(f"{side} {fmt}: exit {usage.code}", file=sys.stderr)
                    return 1
                by_name = usage.sampled_by_name
                python = sum(v for k, v in by_name.items() if k.startswith("python"))
                jvm, cli = by_name.get("java", 0.0), by_name.get("kafka-archive", 0.0)
                rss = usage.peak_rss / 1e6
                print(
                    f"pair {pair} {fmt:5} {side}: workers {python / gb:5.2f} CPU-s/GB, "
                    f"tree {usage.cpu_seconds / gb:5.2f}, JVM {jvm:4.2f} s, CLI "
                    f"{cli:4.2f} s, peak RSS {rss:4.0f} MB, wall {usage.seconds:5.1f} s, "
                    f"load {load:.2f}{' (warm-up)' if pair < 0 else ''}",
                    flush=True,
                )
                costliest = sorted(usage.sampled_by_thread.items(), key=lambda kv: -kv[1])
                for (process, thread), cpu_s in costliest[: args.threads]:
                    print(f"    {cpu_s:5.2f} s  {process} / {thread}")
                empty_bucket(s3, "bench")
                if pair < 0:
                    continue
                rows.append(
                    (
                        side,
                        fmt,
                        pair,
                        python / gb,
                        usage.cpu_seconds / gb,
                        usage.seconds,
                        load,
                        jvm,
                        cli,
                        rss,
                    )
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nmedians (CPU-s/GB: workers / tree; JVM, CLI CPU-s; peak RSS MB; wall s)")
    for fmt in formats:
        line = [f"{fmt:5}"]
        for side in ("A", "B"):
            mine = [r for r in rows if r[0] == side and r[1] == fmt]
            if not mine:
                continue
            line.append(
                f"{side}: {statistics.median(r[3] for r in mine):.2f} / "
                f"{statistics.median(r[4] for r in mine):.2f}; "
                f"{statistics.median(r[7] for r in mine):.2f}, "
                f"{statistics.median(r[8] for r in mine):.2f}; "
                f"{statistics.median(r[9] for r in mine):.0f} MB; "
                f"{statistics.median(r[5] for r in mine):.1f} s"
            )
        print("  ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())

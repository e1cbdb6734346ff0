"""The benchmark's CPU-seconds of a process tree count every process of the tree once:
children its parent reaped, and a grandchild orphaned before anyone reaped it.

The measuring runs in a process of its own: a subreaper (as the benchmark makes itself)
would otherwise adopt the orphans of every later test in this session."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[3] / "bench"
BURN = 0.4  # CPU-seconds each process burns

_TREE = textwrap.dedent(f"""
    import os, subprocess, sys, time

    def burn():
        end = time.process_time() + {BURN}
        while time.process_time() < end:
            pass

    # A child that the top process reaps.
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + {BURN}\\n"
                    "while time.process_time() < end: pass"], check=True)
    # A grandchild orphaned at once: its parent exits without reaping it.
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.5)  # still alive when the sampler looks
            burn()
            os._exit(0)
        os._exit(0)
    burn()
    time.sleep(0.5)
""")


def _measure(program: str, threads: bool = False) -> dict[str, Any]:
    driver = textwrap.dedent(f"""
        import dataclasses, json, os, sys
        sys.path.insert(0, {str(BENCH)!r})
        from procstat import become_subreaper, measure
        become_subreaper()
        usage = measure([sys.executable, "-c", {program!r}], dict(os.environ), threads={threads})
        found = dataclasses.asdict(usage)
        found["sampled_by_thread"] = [[*k, v] for k, v in usage.sampled_by_thread.items()]
        print(json.dumps(found))
    """)
    done = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_cpu_seconds_of_reaped_children_and_orphans_count() -> None:
    usage = _measure(_TREE)
    assert usage["code"] == 0
    # top + reaped child + orphaned grandchild, each BURN; interpreter start-ups on top.
    assert usage["reaped_cpu_seconds"] >= 3 * BURN * 0.95, usage
    # Sampling every 0.1 s sees each of the three burning for most of its 0.4 s.
    assert usage["sampled_cpu_seconds"] >= 3 * (BURN - 0.2), usage
    assert usage["cpu_seconds"] == max(usage["reaped_cpu_seconds"], usage["sampled_cpu_seconds"])
    assert usage["peak_rss"] > 0
    assert usage["sampled_by_name"]
    assert set(usage["sampled_by_name"]) <= {"python", "python3", usage_name(sys.executable)}
    assert usage["until_watch"] is None  # no java in this tree


def usage_name(executable: str) -> str:
    """The command name (/proc/<pid>/comm) of a process running ``executable``."""
    return Path(executable).name[:15]


def test_a_failing_command_reports_its_exit_code() -> None:
    usage = _measure("raise SystemExit(3)")
    assert usage["code"] == 3
    assert usage["seconds"] > 0


def test_threads_cpu_is_sampled_by_process_and_thread_name() -> None:
    program = textwrap.dedent(f"""
        import threading, time
        def burn():
            end = time.thread_time() + {BURN}
            while time.thread_time() < end:
                pass
        worker = threading.Thread(target=burn)
        worker.start()
        burn()
        worker.join()
        time.sleep(0.3)
    """)
    usage = _measure(program, threads=True)
    assert usage["code"] == 0
    rows = usage["sampled_by_thread"]
    # Python names no OS thread: both burning threads carry the process's name (digits as
    # #), one row.
    names = {"python", "python3", usage_name(sys.executable)}
    assert {(p, t) for p, t, _ in rows} <= {(n, re.sub(r"\d+", "#", n)) for n in names}, rows
    assert sum(seconds for *_, seconds in rows) >= 2 * (BURN - 0.2), rows

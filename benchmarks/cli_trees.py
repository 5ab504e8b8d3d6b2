"""The CLI's fixed cost in several checkouts, interleaved (A B A B ...): CPU and wall time of fresh processes.

    python benchmarks/cli_trees.py TREE... [--pairs N] [--case empty|demo|version]...

Each TREE is a checkout with its own .venv (e.g. /work/wt-base, the commit before issue 21, and
this one). Cases: ``ctxengine build`` of an empty folder with a new request each run (nothing
cached to reuse but the configuration), of the bundled demo with the same request (served from
the cache after the first run), and ``ctxengine --version``. One run of each tree is made first
(not counted: it fills the cache and compiles the bytecode the runs read); then ``--pairs`` rounds,
each running every tree once in turn, so a load that comes and goes on a shared machine falls on
all trees alike. CPU is the child's user + system time (``RUSAGE_CHILDREN``), steadier than wall
time under load. Prints min and median per tree and case.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

REQUEST = "Fix the login endpoint: a bad password must return 401"


def argv_for(tree: str, case: str, empty: str) -> list[str]:
    """The command of ``case`` with the console script of ``tree`` (a new request for the empty folder)."""
    script = os.path.join(tree, ".venv", "bin", "ctxengine")
    if case == "version":
        return [script, "--version"]
    if case == "empty":
        return [script, "build", empty, "--request", f"{REQUEST} ({uuid.uuid4().hex})"]
    return [script, "build", "--request", REQUEST]


def run_ms(argv: list[str], cwd: str) -> tuple[float, float]:
    """(CPU ms, wall ms) of one fresh process, which must exit 0."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=cwd)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu * 1000, wall * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="checkouts, each with its .venv")
    parser.add_argument("--pairs", type=int, default=6, help="rounds of one run per tree (default 6)")
    parser.add_argument("--case", action="append", choices=("empty", "demo", "version"),
                        help="repeatable (default: all three)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as empty:
        for case in args.case or ["empty", "demo", "version"]:
            times: dict[str, list[tuple[float, float]]] = {tree: [] for tree in args.trees}
            for tree in args.trees:
                run_ms(argv_for(tree, case, empty), empty)
            for _ in range(args.pairs):
                for tree in args.trees:
                    times[tree].append(run_ms(argv_for(tree, case, empty), empty))
            for tree, runs in times.items():
                cpu, wall = [r[0] for r in runs], [r[1] for r in runs]
                print(f"{case:8} {tree:28} cpu min {min(cpu):5.0f} median {statistics.median(cpu):5.0f} | "
                      f"wall min {min(wall):5.0f} median {statistics.median(wall):5.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

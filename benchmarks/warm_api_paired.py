"""The warm API build of the 4.1 MB transcript in two checkouts, paired build by build.

    python benchmarks/warm_api_paired.py TREE_A TREE_B [--pairs N]

Each TREE is a checkout with its own .venv (e.g. this one and /work/wt-base, the commit before
issue 21). One worker process per tree (its own python, so its own ctxengine) copies the
transcript (../shared/corpus/sessions/aider-repo__chat-history.md; ``$CTXENGINE_SHARED`` for
another shared folder) into a project and builds it twice with a fresh cache folder. Then, N
times, both workers in turn (the order swapped every other time) append one round and build
("appended"), then build again ("unchanged"); each build is timed in CPU ms by the worker. A
load that comes and goes on a shared machine then falls on both alike, so the median of the
per-pair ratios A / B is steadier than two runs of benchmarks/warm_api.py one after the other.

``--fixed NODE,...``: TREE_A's worker computes those nodes once and gives their values to each
build as overrides (they do not run): what they cost a build, e.g. the nodes TREE_B lacks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(os.environ.get("CTXENGINE_SHARED") or Path(__file__).resolve().parents[2] / "shared")
KINDS = ("appended", "unchanged")


def serve_builds() -> None:
    """The worker: answer each line of stdin (a kind of build, or ``quit``) with the CPU ms of that build."""
    # imported here: the worker's own checkout, through its python (the parent process needs none)
    from warm_api import FIT, REQUEST, append_round, build_cpu_ms, warm_project

    from ctxengine import driver

    with tempfile.TemporaryDirectory() as tmp:
        project, history, cache = warm_project(tmp)
        names = [name for name in os.environ.get("CTXENGINE_FIXED_NODES", "").split(",") if name]
        fixed = driver.execute(names, project, FIT, REQUEST, cache_dir=cache) if names else None
        print("ready", flush=True)
        for step, line in enumerate(sys.stdin):
            if line.strip() == "appended":
                append_round(history, step)
            elif line.strip() != "unchanged":
                return
            print(f"{build_cpu_ms(project, cache, fixed):.3f}", flush=True)


def worker(tree: str, fixed: str = "") -> subprocess.Popen:
    """A worker process running this file with ``tree``'s python, ready to build (``fixed``: see --fixed)."""
    process = subprocess.Popen([os.path.join(tree, ".venv", "bin", "python"), os.path.abspath(__file__), "--worker"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tree,
                               env={**os.environ, "CTXENGINE_SHARED": str(SHARED), "CTXENGINE_FIXED_NODES": fixed})
    if process.stdout.readline().strip() != "ready":
        raise SystemExit(f"the worker of {tree} did not start")
    return process


def build_ms(process: subprocess.Popen, kind: str) -> float:
    """CPU ms of one build of ``kind`` by the worker ``process``."""
    process.stdin.write(kind + "\n")
    process.stdin.flush()
    return float(process.stdout.readline())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="two checkouts, each with its .venv")
    parser.add_argument("--pairs", type=int, default=40, help="builds of each kind per tree (default 40)")
    parser.add_argument("--fixed", default="", help="nodes TREE_A computes once and gives as overrides (comma-separated)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        serve_builds()
        return 0
    if len(args.trees) != 2:
        parser.error("give two checkouts")
    workers = [worker(args.trees[0], args.fixed), worker(args.trees[1])]
    times = {kind: ([], []) for kind in KINDS}
    for step in range(args.pairs):
        for kind in KINDS:
            for index in (0, 1) if step % 2 == 0 else (1, 0):
                times[kind][index].append(build_ms(workers[index], kind))
    for process in workers:
        process.communicate("quit\n")
    a, b = args.trees
    for kind, (first, second) in times.items():
        ratios = sorted(x / y for x, y in zip(first, second))
        print(f"{kind:9} median {statistics.median(first):6.1f} vs {statistics.median(second):6.1f} ms, "
              f"min {min(first):5.1f} vs {min(second):5.1f}; paired ratio {a} / {b}: median "
              f"{statistics.median(ratios):.3f} (q1 {ratios[len(ratios) // 4]:.3f}, q3 {ratios[3 * len(ratios) // 4]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

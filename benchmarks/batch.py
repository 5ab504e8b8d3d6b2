"""Batch over many projects: projects per second per executor, scaling, overhead, memory.

    python benchmarks/batch.py [--quick] [--projects N] [--dir DIR] [--skip-dask]

Generates N projects (1000; --quick: 100) in the article layout of examples/demo, each with its
own plan and a real git repository (git init + commit in one shell loop, then an uncommitted
edit so git status and diff have something to say), plus the GSD projects of
../shared/corpus/planning. Each measurement runs in a fresh process (``--child``):

1. projects/s per executor: local; processes with 1 and 2 workers; dask with 2 workers, through
   client.map (one driver per worker) and through Hamilton's DaskExecutor (benchmarks/batch_fanout.py,
   not one of the product's executors). "rate" leaves out
   the start (pool or cluster up, drivers built: the time to the first row).
2. speed-up from 1 to 2 worker processes (rates). Target >= 1.7x on 2 cores.
3. overhead per project: ``run_jobs`` (local) against a warm in-process ``driver.execute`` of
   the same projects (min of alternating passes). Target <= 1.2x.
4. peak memory (ru_maxrss) of a local batch writing a CSV: 1000 projects against 100. Target <= 1.1x.

The machine may be shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
DEMO = REPO / "examples" / "demo"
REQUEST = "Fix the login endpoint: a bad password must return 401"
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "bench",
           "GIT_AUTHOR_EMAIL": "bench@example.invalid", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.invalid"}


# ----------------------------------------------------------------------------- projects


def generate(root: Path, count: int) -> list[Path]:
    """``count`` article-layout projects under ``root`` (kept between runs: made once)."""
    projects = [root / f"p{i:04d}" for i in range(count)]
    marker = root / f".made-{count}"
    if marker.exists():
        return projects
    if root.exists():
        shutil.rmtree(root)
    started = time.perf_counter()
    for i, project in enumerate(projects):
        shutil.copytree(DEMO / ".planning", project / ".planning")
        plan = project / ".planning" / "plans" / "current" / "plan.md"
        plan.write_text(plan.read_text() + f"\n- Project {i}: check the rate limit of endpoint /v{i % 7}/login\n")
        (project / "src").mkdir()
        (project / "src" / "app.py").write_text(f"def login(user, password):\n    return {i % 3}\n")
    script = 'for d in "$@"; do cd "$d" && git init -q && git add -A && git commit -qm init || exit 1; done'
    subprocess.run(["bash", "-c", script, "bash", *map(str, projects)], check=True, env={**os.environ, **GIT_ENV})
    for i, project in enumerate(projects):  # an uncommitted change: git status and diff have something
        with open(project / "src" / "app.py", "a") as fh:
            fh.write(f"# TODO {i}: return 401 on a bad password\n")
    marker.touch()
    print(f"generated {count} projects with git repositories in {time.perf_counter() - started:.1f} s under {root}")
    return projects


def corpus_projects() -> list[Path]:
    root = SHARED / "corpus" / "planning"
    return sorted(p for p in root.iterdir() if (p / ".planning").is_dir()) if root.is_dir() else []


# ----------------------------------------------------------------------------- child processes


def child(args: argparse.Namespace) -> None:
    """One measurement in this fresh process; prints one JSON line (a hang dumps the stacks and exits)."""
    import faulthandler

    faulthandler.dump_traceback_later(1200, exit=True)
    from ctxengine.batch import Job, run_jobs

    projects = Path(args.list).read_text().split("\n")
    jobs = [Job(p, REQUEST) for p in projects if p]
    out: dict = {"rows": 0, "failed": 0}
    if args.child == "overhead":
        out.update(overhead(jobs))
    else:
        executor, workers = args.child, args.workers
        if executor == "dask-hamilton":  # the yardstick, not one of the product's executors
            from batch_fanout import hamilton_dask_rows

            rows = hamilton_dask_rows(jobs, workers or 2)  # generators: nothing runs before the clock starts
        else:
            rows = run_jobs(jobs, executor=executor, workers=workers)
        started = time.perf_counter()
        first = None
        if args.csv:
            from ctxengine.batch_io import open_rows, row_columns

            with open_rows(args.csv, row_columns(jobs)) as writer:
                for row in rows:
                    writer.write(row)
                    first = first or time.perf_counter()
            out.update(rows=writer.rows, failed=writer.failed)
        else:
            for row in rows:
                first = first or time.perf_counter()
                out["rows"] += 1
                out["failed"] += row["status"] != "ok"
        end = time.perf_counter()
        out.update(total_s=end - started, start_s=first - started,
                   rate=(out["rows"] - 1) / (end - first) if out["rows"] > 1 else 0.0)
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def overhead(jobs: list) -> dict:
    """Warm in-process builds against run_jobs (local) over the same jobs: min of 3 alternating passes."""
    from ctxengine import driver
    from ctxengine.batch import run_jobs

    jobs = jobs[:200]
    for job in jobs[:3]:
        driver.execute(["build_result"], job.project, {}, job.request)
    plain, batch = [], []
    for _ in range(3):
        started = time.perf_counter()
        for job in jobs:
            with driver.quiet_failures():
                driver.execute(["build_result"], job.project, {}, job.request)
        plain.append((time.perf_counter() - started) / len(jobs))
        started = time.perf_counter()
        for _ in run_jobs(jobs):
            pass
        batch.append((time.perf_counter() - started) / len(jobs))
    return {"plain_ms": min(plain) * 1e3, "batch_ms": min(batch) * 1e3, "jobs": len(jobs)}


def run_child(kind: str, listing: Path, workers: int | None = None, csv: Path | None = None) -> dict:
    argv = [sys.executable, __file__, "--child", kind, "--list", str(listing)]
    argv += ["--workers", str(workers)] if workers else []
    argv += ["--csv", str(csv)] if csv else []
    with tempfile.TemporaryDirectory(prefix="ctxengine-bench-cache-") as cache:  # every child starts cold:
        env = {**os.environ, **GIT_ENV, "CTXENGINE_CACHE_DIR": cache}  # a first batch run, in any order
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"child {kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 projects instead of 1000")
    parser.add_argument("--projects", type=int, default=None, help="how many projects to generate (default 1000)")
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "ctxengine-bench-batch"),
                        help="where the generated projects live (kept between runs)")
    parser.add_argument("--skip-dask", action="store_true", help="leave out the dask executors")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--list", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--csv", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    count = args.projects or (100 if args.quick else 1000)
    root = Path(args.dir)
    generated = generate(root / f"n{count}", count)
    projects = generated + corpus_projects()
    listing = root / f"jobs-{count}.txt"
    listing.write_text("\n".join(map(str, projects)) + "\n")
    print(f"{len(generated)} generated + {len(projects) - len(generated)} corpus projects; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at the start")

    print("\n1. projects per second (rate: after the first row; start: until the first row)")
    print(f"{'executor':<26} {'total s':>8} {'start s':>8} {'proj/s':>8} {'rate/s':>8} {'failed':>7}")
    runs = [("local", "local", None), ("processes, 1 worker", "processes", 1), ("processes, 2 workers", "processes", 2)]
    if not args.skip_dask:
        runs += [("dask client.map, 2", "dask", 2), ("dask via Hamilton, 2", "dask-hamilton", 2)]
    results = {}
    for name, executor, workers in runs:
        got = results[name] = run_child(executor, listing, workers)
        print(f"{name:<26} {got['total_s']:>8.1f} {got['start_s']:>8.1f} {got['rows'] / got['total_s']:>8.1f} "
              f"{got['rate']:>8.1f} {got['failed']:>7}  (load {os.getloadavg()[0]:.1f})")

    one, two = results["processes, 1 worker"]["rate"], results["processes, 2 workers"]["rate"]
    print(f"\n2. speed-up 1 -> 2 worker processes: {two / one:.2f}x (target >= 1.7x)"
          f"  {'ok' if two / one >= 1.7 else 'MISSED'} (load {os.getloadavg()[0]:.1f})")

    got = run_child("overhead", listing)
    ratio = got["batch_ms"] / got["plain_ms"]
    print(f"\n3. overhead per project over {got['jobs']} projects: run_jobs {got['batch_ms']:.1f} ms vs warm "
          f"driver.execute {got['plain_ms']:.1f} ms = {ratio:.2f}x (target <= 1.2x)  {'ok' if ratio <= 1.2 else 'MISSED'}")

    small = root / "jobs-small.txt"
    small.write_text("\n".join(map(str, generated[: max(1, count // 10)] + corpus_projects())) + "\n")
    with tempfile.TemporaryDirectory() as folder:
        few = run_child("local", small, csv=Path(folder) / "few.csv")
        many = run_child("local", listing, csv=Path(folder) / "many.csv")
    ratio = many["maxrss_mb"] / few["maxrss_mb"]
    print(f"\n4. peak memory, local batch writing a CSV: {many['rows']} projects {many['maxrss_mb']:.0f} MB vs "
          f"{few['rows']} projects {few['maxrss_mb']:.0f} MB = {ratio:.3f}x (target <= 1.1x)  {'ok' if ratio <= 1.1 else 'MISSED'}")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f} (the machine is shared)")


if __name__ == "__main__":
    main()

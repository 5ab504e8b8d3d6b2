"""The git section under load: many CLI builds of a healthy repository, several at a time.

    python benchmarks/git_reliability.py [--builds 200] [--parallel 4] [--fresh] [--no-cache] [--cli PATH]

Makes a real repository in a temporary folder (a few commits, a staged, an unstaged and an
untracked file), then runs ``ctxengine build <repo> --format json`` as separate processes,
``--parallel`` at a time, until ``--builds`` have run; ``--fresh`` gives each build its own new
repository (made just before it starts). Prints how many builds had the git section and every
distinct git warning with its count. Each build must have the git section: a missing one is a
defect (issue 23 item 5). Not a test: it takes minutes on two cores.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).with_name("ctxengine")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=Bench", "-c", "user.email=bench@example.com", *args], cwd=repo,
                   check=True, capture_output=True)


def make_repository(path: Path) -> Path:
    """A repository with three commits, a staged, an unstaged and an untracked change."""
    path.mkdir(parents=True)
    _git(path, "-c", "init.defaultBranch=main", "init", "-q")
    for n in range(3):
        for i in range(20):
            (path / f"file{i}.txt").write_text("".join(f"line {j} of commit {n}\n" for j in range(30)))
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", f"Commit {n}")
    (path / "file1.txt").write_text("changed\n")
    (path / "file2.txt").write_text("staged\n")
    _git(path, "add", "file2.txt")
    (path / "new.txt").write_text("untracked\n")
    return path


def one_build(cli: str, repo: Path, cache_dir: Path, no_cache: bool) -> tuple[bool, list[str]]:
    """(whether the git section is in the build, the git warnings it gave)."""
    command = [cli, "build", str(repo), "--format", "json", "--request", "Keep going."]
    command += ["--no-cache"] if no_cache else ["--cache-dir", str(cache_dir)]
    done = subprocess.run(command, capture_output=True, text=True)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        return False, [f"exit {done.returncode}: {done.stderr.strip()[:300]}"]
    keys = {section.get("key") for section in result.get("sections", [])}
    return "git" in keys, [w for w in result.get("warnings", []) if w.startswith("git:")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--fresh", action="store_true", help="a new repository for every build")
    parser.add_argument("--no-cache", action="store_true", help="build with --no-cache")
    parser.add_argument("--cli", default=str(CLI), help="the ctxengine command (default: this venv's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctx-gitrel-") as tmp:
        root = Path(tmp)
        shared = None if args.fresh else make_repository(root / "repo")

        def job(n: int) -> tuple[bool, list[str]]:
            repo = make_repository(root / f"repo{n}") if shared is None else shared
            return one_build(args.cli, repo, root / "cache", args.no_cache)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            results = list(pool.map(job, range(args.builds)))
        elapsed = time.perf_counter() - started
    with_git = sum(ok for ok, _ in results)
    warnings = collections.Counter(w.replace(tmp, "<tmp>") for _, ws in results for w in ws)
    print(f"{with_git}/{args.builds} builds had the git section "
          f"({args.parallel} at a time, {os.cpu_count()} cores, {elapsed:.0f} s)")
    for warning, count in warnings.most_common():
        print(f"  {count:4d} x {warning}")
    return 0 if with_git == args.builds else 1


if __name__ == "__main__":
    raise SystemExit(main())

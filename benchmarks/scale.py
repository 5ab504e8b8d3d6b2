"""Builds against inputs of growing size: time and peak memory should grow no faster than the
input (linear), and stop growing at a documented cap.

    python benchmarks/scale.py [--quick] [--cache] [--only rounds,transcript,jsonl,tree]

Four inputs, each built at four sizes through ``ctxengine.api.build_context`` (one fresh
process per build, so the memos start empty and the peak RSS is the build's own):

* ``rounds``: an aider ``.aider.chat.history.md`` of N tiny rounds (``#### q\\n\\na\\n\\n``), up to
  250,000; past ``sessions.MAX_ROUNDS`` (10,000) only the newest rounds are parsed, with one warning;
* ``transcript``: an aider transcript of N MB of ~2 KB rounds, up to 200 MB; past the state-file
  cap (64 MiB) only its newest part is read, past 10,000 rounds only the newest rounds parsed;
* ``jsonl``: a ``session.log`` of N one-character lines (``1``, each a bad line), up to 5
  million; past ``sessions.MAX_LOG_LINES`` (200,000) only the newest lines are read, and the
  first 20 line warnings are listed, the rest counted in one;
* ``tree``: a git repository of N empty files, up to 100,000, with ``state.includeFileTree``.

Columns: the size, the input's bytes, CPU seconds of the build and of the programs it ran (git;
the machine may be shared: CPU time is the steadier figure) and wall seconds, microseconds of CPU per unit, the peak RSS of the
build's process, and the size and CPU-time ratios against the smallest size (linear: the two
ratios are alike; capped: the time ratio stays flat), then the warnings of the largest build.
``--cache`` builds with the cache on (a fresh cache folder: a cold cached build) instead of
``cache=False``. ``--quick`` uses sizes 8 times smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TINY_ROUND = "#### q\n\na\n\n"
_BODY = ("The change updates the parser so that each line is read once. " * 30).strip()

#: Sizes below a cap (linear: time grows with the size) and far over it (flat).
SIZES = {
    "rounds": (2_500, 5_000, 10_000, 250_000),
    "transcript": (4, 8, 16, 200),  # MB; 16 MB is ~8,000 rounds
    "jsonl": (50_000, 100_000, 200_000, 5_000_000),
    "tree": (12_500, 25_000, 50_000, 100_000),
}
UNITS = {"rounds": "rounds", "transcript": "MB", "jsonl": "lines", "tree": "files"}


def write_rounds(project: Path, n: int) -> None:
    """An aider chat history of ``n`` tiny rounds in one session."""
    (project / ".aider.chat.history.md").write_text("# aider chat started at 2024-01-01 00:00:00\n\n" + TINY_ROUND * n)


def write_transcript(project: Path, megabytes: int) -> None:
    """An aider chat history of ``megabytes`` MB of ~2 KB rounds (a request, an answer, an edit, a commit)."""
    with open(project / ".aider.chat.history.md", "w", encoding="utf-8") as out:
        out.write("# aider chat started at 2024-01-01 00:00:00\n\n")
        size, i = 0, 0
        while size < megabytes << 20:
            i += 1
            chunk = (f"#### please fix bug {i} in src/mod_{i % 97}.py\n\n{_BODY}\n\n"
                     f"> Applied edit to src/mod_{i % 97}.py\n> Commit {i:07x}0 fix bug {i}\n\n")
            out.write(chunk)
            size += len(chunk)


def write_jsonl(project: Path, n: int) -> None:
    """A JSON Lines session log of ``n`` one-character lines."""
    folder = project / ".planning" / "sessions" / "current"
    folder.mkdir(parents=True)
    (folder / "session.log").write_text("1\n" * n)


def write_tree(project: Path, n: int) -> None:
    """A git repository of ``n`` empty files, 50 a folder, 1,000 a package."""
    for i in range(n):
        folder = project / f"pkg{i // 1000}" / f"mod{(i // 50) % 20}"
        if i % 50 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.py").touch()
    git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tree"]):
        subprocess.run(git + args, cwd=project, check=True)


WRITERS = {"rounds": write_rounds, "transcript": write_transcript, "jsonl": write_jsonl, "tree": write_tree}

#: What one fresh process runs: one build, its CPU and wall time, its peak RSS (JSON on stdout).
CHILD = r"""
import json, os, resource, sys, time
from ctxengine.api import build_context
project, cache_dir, tree = sys.argv[1], sys.argv[2] or None, sys.argv[3] == "1"
overrides = {"state.includeFileTree": True} if tree else {}
def cpu_seconds():  # this process's and its children's (git) CPU time
    return sum(os.times()[:4])
cpu, wall = cpu_seconds(), time.perf_counter()
result = build_context(project, "hello", cache=cache_dir is not None, cache_dir=cache_dir, overrides=overrides)
cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
print(json.dumps({"cpu": cpu, "wall": wall, "peak": peak, "warnings": list(result.warnings)}))
"""


def input_bytes(project: Path) -> int:
    """Bytes of the input files (the repository's own .git not counted)."""
    total = 0
    for folder, dirs, files in os.walk(project):
        dirs[:] = [d for d in dirs if d != ".git"]
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    return total


def measure(kind: str, size: int, cache: bool) -> dict:
    """One build of a fresh ``kind`` input of ``size`` units, in its own process."""
    with tempfile.TemporaryDirectory(prefix=f"ctxengine-scale-{kind}-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        WRITERS[kind](project, size)
        cache_dir = str(Path(tmp) / "cache") if cache else ""
        done = subprocess.run([sys.executable, "-c", CHILD, str(project), cache_dir, "1" if kind == "tree" else "0"],
                              capture_output=True, text=True, check=True, cwd=tmp)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row.update(kind=kind, size=size, bytes=input_bytes(project))
        return row


def table(rows: list[dict]) -> str:
    """The rows of one input as a table, ratios against its first (smallest) row."""
    first = rows[0]
    unit = UNITS[first["kind"]]
    lines = [f"{first['kind']} ({unit})",
             f"{'size':>11} {'input MB':>9} {'cpu s':>7} {'wall s':>7} {'us/unit':>9} {'peak MB':>8} "
             f"{'x size':>7} {'x cpu':>7}"]
    for row in rows:
        lines.append(f"{row['size']:>11,} {row['bytes'] / 1e6:>9.1f} {row['cpu']:>7.2f} {row['wall']:>7.2f} "
                     f"{row['cpu'] / row['size'] * 1e6:>9.1f} {row['peak'] / 2**20:>8.0f} "
                     f"{row['size'] / first['size']:>7.1f} {row['cpu'] / first['cpu']:>7.2f}")
    warnings = rows[-1]["warnings"]
    lines.extend(f"    warning: {w[:160]}" for w in warnings[:3])
    if len(warnings) > 3:
        lines.append(f"    ... {len(warnings) - 3} more warnings")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 8 times smaller")
    parser.add_argument("--cache", action="store_true", help="build with the cache on (a fresh cache folder)")
    parser.add_argument("--only", default=",".join(SIZES), help="inputs to build, comma separated")
    args = parser.parse_args(argv)
    for kind in args.only.split(","):
        sizes = [max(1, s // 8) for s in SIZES[kind]] if args.quick else SIZES[kind]
        rows = [measure(kind, size, args.cache) for size in sizes]
        print(table(rows), flush=True)
        print()


if __name__ == "__main__":
    main()

"""The CLI on a grown transcript in several checkouts, interleaved: CPU ms of fresh processes.

    python benchmarks/grown_trees.py TREE... [--pairs N]

Each TREE is a checkout with its own .venv (e.g. /work/wt-base, the commit before issue 21, and
this one). Each gets a project holding the 4.1 MB aider transcript
(../shared/corpus/sessions/aider-repo__chat-history.md; ``$CTXENGINE_SHARED`` for another shared
folder) and its own cache folder, built twice first (not counted). Then ``--pairs`` rounds: in
each, every tree (in turn, the order reversed every other round) gets one round appended to its
transcript and is built (``appended``), then built again (``unchanged``), then built with
``--no-cache`` (``no-cache``: the whole transcript read, parsed, counted and cut, as the first build
of an empty cache does, without the cache's writes). CPU is the child's user +
system time (``RUSAGE_CHILDREN``), steadier than wall time on a shared machine; start-up is not
subtracted (benchmarks/cli_trees.py gives it). Prints min and median per tree and kind of build.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(os.environ.get("CTXENGINE_SHARED") or Path(__file__).resolve().parents[2] / "shared")
TRANSCRIPT = SHARED / "corpus" / "sessions" / "aider-repo__chat-history.md"
REQUEST = "Continue with the task in progress and keep the tests green."
FIT = ["--set", "budget.maxTokens=125600", "--set", "budget.reserveTokens=25600"]


def build_cpu_ms(tree: str, project: Path, cache: Path, *options: str) -> float:
    """CPU ms of one fresh ``ctxengine build`` of ``project`` by ``tree``'s console script."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([os.path.join(tree, ".venv", "bin", "ctxengine"), "build", str(project), "--request", REQUEST,
                    "--cache-dir", str(cache), *FIT, *options], check=True, capture_output=True, cwd=project)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="checkouts, each with its .venv")
    parser.add_argument("--pairs", type=int, default=8, help="rounds of one appended, one unchanged and one --no-cache build per tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        places = {tree: (Path(tmp) / f"project{n}", Path(tmp) / f"cache{n}") for n, tree in enumerate(args.trees)}
        for tree, (project, cache) in places.items():
            project.mkdir()
            shutil.copyfile(TRANSCRIPT, project / ".aider.chat.history.md")
            for _ in range(2):
                build_cpu_ms(tree, project, cache)
        times = {tree: {"appended": [], "unchanged": [], "no-cache": []} for tree in args.trees}
        for step in range(args.pairs):
            for tree in args.trees if step % 2 == 0 else args.trees[::-1]:
                project, cache = places[tree]
                with open(project / ".aider.chat.history.md", "a", encoding="utf-8") as history:
                    history.write(f"\n#### next step {step}\n\nSure, here is change {step}.\n")
                times[tree]["appended"].append(build_cpu_ms(tree, project, cache))
                times[tree]["unchanged"].append(build_cpu_ms(tree, project, cache))
                times[tree]["no-cache"].append(build_cpu_ms(tree, project, cache, "--no-cache"))
    for tree, kinds in times.items():
        for kind, runs in kinds.items():
            print(f"{kind:9} {tree:28} cpu min {min(runs):5.0f} median {statistics.median(runs):5.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

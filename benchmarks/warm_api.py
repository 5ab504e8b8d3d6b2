"""A warm process's API builds of the 4.1 MB aider transcript: one round appended, then unchanged.

    python benchmarks/warm_api.py [--builds N]

The transcript (../shared/corpus/sessions/aider-repo__chat-history.md; ``$CTXENGINE_SHARED``
for another shared folder) is copied into a project
and built twice with the cache on (a fresh cache folder); then, N times, one round is appended
and the project built, then built again unchanged. Prints the median CPU ms of each kind of
build: the steadiest measure of benchmarks/cache.py's two "warm process" rows (run it in two
checkouts one after the other, several times, to compare them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ctxengine import driver

SHARED = Path(os.environ.get("CTXENGINE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TRANSCRIPT = SHARED / "corpus" / "sessions" / "aider-repo__chat-history.md"
FIT = {"budget.maxTokens": 125_600, "budget.reserveTokens": 25_600}
REQUEST = "Continue with the task in progress and keep the tests green."


def warm_project(tmp: str) -> tuple[Path, Path, str]:
    """(project, its transcript, cache folder) under ``tmp``: the transcript copied in and the
    project built twice with a fresh cache folder (a warm process)."""
    project, cache = Path(tmp) / "project", str(Path(tmp) / "cache")
    project.mkdir()
    history = project / ".aider.chat.history.md"
    shutil.copyfile(TRANSCRIPT, history)
    for _ in range(2):
        driver.execute(["build_result"], project, FIT, REQUEST, cache_dir=cache)
    return project, history, cache


def append_round(history: Path, n: int) -> None:
    """Append the ``n``-th round (a request and its answer) to the transcript."""
    with history.open("a", encoding="utf-8") as fh:
        fh.write(f"\n#### Rename the helper {n} to load_config and update its callers.\n\nI renamed it.\n")


def build_cpu_ms(project: Path, cache: str, fixed: dict | None = None) -> float:
    """CPU ms of one API build of ``project`` in this process (``fixed``: node values given as
    Hamilton overrides, so those nodes do not run)."""
    start = time.process_time()
    driver.execute(["build_result"], project, FIT, REQUEST, fixed, cache_dir=cache)
    return (time.process_time() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=9, help="appended and unchanged builds to time (default 9)")
    builds = parser.parse_args().builds
    with tempfile.TemporaryDirectory() as tmp:
        project, history, cache = warm_project(tmp)
        appended, unchanged = [], []
        for n in range(builds):
            append_round(history, n)
            for times in (appended, unchanged):
                times.append(build_cpu_ms(project, cache))
    print(f"warm API build, one round appended: {statistics.median(appended):.1f} ms CPU; "
          f"unchanged: {statistics.median(unchanged):.1f} ms CPU (medians of {builds})")


if __name__ == "__main__":
    main()

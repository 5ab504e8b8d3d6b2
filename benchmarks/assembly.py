"""Assembly speed: warm in-process builds (driver reused) against one tiktoken pass, and the cold CLI.

    python benchmarks/assembly.py [--repeat N]

For each project (the bundled demo and every project of ../shared/corpus/planning) it prints
the median warm build time, the time of one tiktoken pass over that project's final context,
and the overhead (build - tiktoken pass; target: within 30 ms). Then the cold
``ctxengine build`` of the demo as a fresh process (target: under 1 s).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from timing import median_seconds

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"



def warm_rows(projects: list[Path], repeat: int) -> list[tuple[str, int, float, float]]:
    """(project, tokens, warm build seconds, one tiktoken pass seconds) per project."""
    import ctxengine
    from ctxengine.nodes.lib.tokens import token_counter_for

    request = "Continue with the task in progress and keep the tests green."
    rows = []
    for project in projects:
        result = ctxengine.build_context(project, request)  # warm-up: driver built, encoding loaded
        counter = token_counter_for("cl100k_base")
        build = median_seconds(lambda: ctxengine.build_context(project, request), repeat)
        one_pass = median_seconds(lambda: counter.count(result.context), repeat)
        rows.append((project.name, result.budget.total_tokens, build, one_pass))
    return rows


def cold_cli_seconds(repeat: int) -> float:
    """Median wall time of ``ctxengine build`` on the demo in a fresh interpreter."""
    cmd = [sys.executable, "-m", "ctxengine.cli", "build", "--request", "Fix the login endpoint"]
    return median_seconds(lambda: subprocess.run(cmd, check=True, capture_output=True), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    projects = [REPO / "examples" / "demo"]
    planning = SHARED / "corpus" / "planning"
    if planning.is_dir():
        projects += sorted(p for p in planning.iterdir() if (p / ".planning").is_dir())

    print(f"{'project':<40} {'tokens':>7} {'build ms':>9} {'tiktoken ms':>12} {'overhead ms':>12} {'ratio':>6}")
    for name, tokens, build, one_pass in warm_rows(projects, args.repeat):
        overhead = (build - one_pass) * 1000
        flag = "" if overhead <= 30 else "  > 30 ms"
        print(f"{name:<40} {tokens:>7} {build*1000:>9.1f} {one_pass*1000:>12.1f} {overhead:>12.1f} "
              f"{build/one_pass if one_pass else float('inf'):>6.1f}{flag}")
    cold = cold_cli_seconds(max(3, args.repeat // 2))
    print(f"\ncold `ctxengine build` on the demo: {cold*1000:.0f} ms (target < 1000 ms)")


if __name__ == "__main__":
    main()

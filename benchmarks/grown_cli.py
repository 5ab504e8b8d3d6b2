"""A transcript grown by one round, through the CLI, against the CLI's fixed cost: paired runs.

    python benchmarks/grown_cli.py [--pairs N]

Each round is three fresh ``ctxengine build`` processes and a tiktoken pass: an empty folder with
its cache warm and the same request (every node a hit: interpreter, imports, driver, no
tokenizer), the empty folder with a new request (the fixed cost of a build that counts anything:
the tokenizer table is loaded and the request counted), then the 4.1 MB aider transcript of
../shared/corpus with one round appended, its cache warm; then one tiktoken pass over the
transcript in this process. The difference between the transcript's build and each empty-folder
build of its round is the transcript's own cost, shown as a ratio to the median pass (issue 10's
target: 0.15), against both baselines. CPU seconds of the children (the machine is shared; wall
time measures the neighbours).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from cache import TRANSCRIPT, _cli, _tiktoken_pass  # benchmarks/cache.py: the same child timing and pass

FLAGS = ["--request", "Continue with the task in progress.", "--max-tokens", "125600", "--reserve-tokens", "25600"]


def cli(*args: str) -> float:
    """CPU seconds of one ``ctxengine`` process."""
    return _cli(*args)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()
    text = TRANSCRIPT.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="ctxengine-grown-") as tmp:
        folder = Path(tmp)
        empty, project = folder / "empty", folder / "project"
        empty.mkdir()
        project.mkdir()
        history = project / ".aider.chat.history.md"
        shutil.copyfile(TRANSCRIPT, history)
        out = ["-o", str(folder / "out.txt")]

        def build_empty(request: str) -> float:
            return cli("build", str(empty), *FLAGS[2:], "--request", request, *out, "--cache-dir", str(folder / "c-empty"))

        build_empty(FLAGS[1])
        cli("build", str(project), *FLAGS, *out, "--cache-dir", str(folder / "c-project"))
        runs: dict[str, list[float]] = {name: [] for name in ROWS}
        for n in range(args.pairs):  # interleaved: the machine's speed drifts
            runs["hits"].append(build_empty(FLAGS[1]))
            runs["counted"].append(build_empty(f"{FLAGS[1]} ({n})"))
            with history.open("a", encoding="utf-8") as fh:
                fh.write(f"\n#### Rename helper {n} to load_config.\n\nRenamed it and updated the callers.\n")
            runs["grown"].append(cli("build", str(project), *FLAGS, *out, "--cache-dir", str(folder / "c-project")))
            runs["pass"].append(_tiktoken_pass(text, 1)[0])
    one_pass = statistics.median(runs["pass"])
    print(f"one tiktoken pass (median of {args.pairs}, between the builds): {one_pass * 1e3:.0f} ms CPU; "
          f"{args.pairs} rounds of builds")
    print(f"{'fresh ctxengine build':<58} {'min ms':>7} {'median ms':>10}")
    for name, label in ROWS.items():
        if name != "pass":
            print(f"{label:<58} {min(runs[name]) * 1e3:>7.0f} {statistics.median(runs[name]) * 1e3:>10.0f}")
    for fixed, what in (("counted", "tokenizer loaded"), ("hits", "no tokenizer")):
        own = [g - f for g, f in zip(runs["grown"], runs[fixed])]
        print(f"own cost against the empty folder, {what}: median of the pairs {statistics.median(own) * 1e3:.0f} ms "
              f"= {statistics.median(own) / one_pass:.2f} pass; min - min "
              f"{(min(runs['grown']) - min(runs[fixed])) * 1e3:.0f} ms (target <= 0.15 pass)")


#: What each round of builds runs, in order.
ROWS = {
    "hits": "empty folder, same request: every node a hit (no tokenizer)",
    "counted": "empty folder, a new request: tokenizer loaded, request counted",
    "grown": "the transcript grown by one round, cache warm",
    "pass": "one tiktoken pass over the transcript (in this process)",
}


if __name__ == "__main__":
    main()

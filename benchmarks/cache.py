"""The cache between runs: unchanged rebuilds, the 4.1 MB transcript through the CLI, memory.

    python benchmarks/cache.py [--repeat N] [--builds N] [--nodes] [--skip-cli] [--skip-memory]

1. Every project of ../shared/corpus/planning: the median unchanged cached rebuild against the
   median warm uncached build, in one process with the driver built (paired, interleaved runs:
   the machine is shared). Target: ratio <= 0.20.
2. ../shared/corpus/sessions/aider-repo__chat-history.md copied as a project's
   .aider.chat.history.md, fitted into 100K tokens (--max-tokens 125600 --reserve-tokens 25600)
   by ``ctxengine build`` in a fresh process: with an empty cache, then after one round is
   appended with the cache warm; as ratios to one tiktoken pass over the transcript (targets
   0.4 and 0.15). The CLI's start-up (``ctxengine --version``) is shown on its own line.
3. Memory: the resident size over --builds (1000) cached builds of the demo in one process
   (it should stay flat), and the cache folder's size against its cap.
--nodes: the measurement behind ctxengine.driver.CACHED_NODES: per node, its compute time in a
warm uncached run against the cost of a hit (lookup and unpickling), over the GSD corpus and
the transcript project.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
TRANSCRIPT = SHARED / "corpus" / "sessions" / "aider-repo__chat-history.md"
REQUEST = "Continue with the task in progress and keep the tests green."
FIT = {"budget.maxTokens": 125_600, "budget.reserveTokens": 25_600}  # 100,000 tokens available
ROUND = ("\n#### Rename the helper to load_config and update its callers.\n\n"
         "I renamed `read_config` to `load_config` in src/config.py and updated the three callers.\n")


def corpus_projects() -> list[Path]:
    root = SHARED / "corpus" / "planning"
    return sorted(p for p in root.iterdir() if (p / ".planning").is_dir()) if root.is_dir() else []


def paired(plain, cached, repeat: int) -> tuple[float, float, float]:
    """Medians of interleaved runs: (plain seconds, cached seconds, median ratio)."""
    a, b, ratios = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        plain()
        a.append(time.perf_counter() - start)
        start = time.perf_counter()
        cached()
        b.append(time.perf_counter() - start)
        ratios.append(b[-1] / a[-1])
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


def corpus_table(repeat: int, folder: Path) -> None:
    from ctxengine import driver

    print(f"1. unchanged cached rebuild vs warm uncached build (median of {repeat}, paired)")
    print(f"{'project':<42} {'plain ms':>9} {'cached ms':>10} {'ratio':>6} {'hits':>5}  target <= 0.20")
    ratios = []
    for project in corpus_projects():
        def plain():
            return driver.execute(["build_result"], project, {}, REQUEST, cache=False)

        def cached():
            return driver.execute(["build_result"], project, {}, REQUEST, cache_dir=folder / project.name)

        plain(), cached(), cached()  # warm: driver, encoding, cache filled
        a, b, ratio = paired(plain, cached, repeat)
        run = driver.last_cache_run()
        ratios.append(ratio)
        print(f"{project.name:<42} {a * 1e3:>9.1f} {b * 1e3:>10.1f} {ratio:>6.2f} {len(run.hits):>5}"
              f"  {'ok' if ratio <= 0.2 else 'MISSED'} ({len(run.misses)} misses, {len(run.recomputed)} recomputed)")
    if ratios:
        print(f"{'median':<42} {'':>9} {'':>10} {statistics.median(ratios):>6.2f}")


def _cli(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ctxengine.cli", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def transcript_table(repeat: int, folder: Path) -> None:
    from ctxengine.nodes.lib.tokens import token_counter_for

    text = TRANSCRIPT.read_text(encoding="utf-8")
    counter = token_counter_for("cl100k_base")
    tokens = counter.count(text)
    passes = []
    for _ in range(repeat):
        start = time.perf_counter()
        counter.count(text)
        passes.append(time.perf_counter() - start)
    one_pass = statistics.median(passes)
    project = folder / "transcript-project"
    project.mkdir()
    history = project / ".aider.chat.history.md"
    shutil.copyfile(TRANSCRIPT, history)
    history.chmod(0o644)
    cache_dir = folder / "transcript-cache"
    flags = [str(project), "--request", REQUEST, "--max-tokens", "125600", "--reserve-tokens", "25600",
             "-o", str(folder / "out.txt"), "--cache-dir", str(cache_dir)]
    startup = statistics.median(_cli("--version") for _ in range(repeat))
    cold, appended, unchanged, uncached = [], [], [], []
    for n in range(repeat):
        shutil.rmtree(cache_dir, ignore_errors=True)
        cold.append(_cli("build", *flags))
        with history.open("a", encoding="utf-8") as fh:
            fh.write(ROUND.replace("helper", f"helper {n}"))
        appended.append(_cli("build", *flags))
        unchanged.append(_cli("build", *flags))
        uncached.append(_cli("build", *flags, "--no-cache"))
    rows = [
        ("one tiktoken pass over the transcript (in process)", one_pass, None),
        ("CLI start-up alone (ctxengine --version)", startup, None),
        ("CLI build, empty cache", statistics.median(cold), 0.4),
        ("CLI build, one round appended, cache warm", statistics.median(appended), 0.15),
        ("CLI build, unchanged, cache warm", statistics.median(unchanged), None),
        ("CLI build --no-cache", statistics.median(uncached), None),
    ]
    print(f"\n2. the 4.1 MB transcript ({len(text):,} chars, {tokens:,} tokens) fitted into 100K through the CLI "
          f"(median of {repeat})")
    print(f"{'what':<52} {'ms':>8} {'ratio':>6} {'-start-up':>9}  target")
    for name, seconds, target in rows:
        less = "" if "CLI build" not in name else f"{(seconds - startup) / one_pass:>9.2f}"
        flag = "" if target is None else f"<= {target}  {'ok' if seconds / one_pass <= target else 'MISSED'}"
        print(f"{name:<52} {seconds * 1e3:>8.0f} {seconds / one_pass:>6.2f} {less:>9}  {flag}")


def memory_table(builds: int, folder: Path) -> None:
    from ctxengine import cache, driver

    demo = REPO / "examples" / "demo"
    cache_dir = folder / "memory-cache"
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> float:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * page / 1e6

    marks = sorted({1, 10, 100, builds // 4, builds // 2, builds})
    print(f"\n3. memory over {builds} cached builds of the demo in one process (requests alternate)")
    print(f"{'builds':>7} {'RSS MB':>8} {'cache MB':>9} {'s/build':>8}")
    start = time.perf_counter()
    for n in range(1, builds + 1):
        driver.execute(["build_result"], demo, {}, f"request {n % 2}", cache_dir=cache_dir)
        if n in marks:
            size = cache.stats(cache_dir)["bytes"] / 1e6
            print(f"{n:>7} {rss():>8.1f} {size:>9.2f} {(time.perf_counter() - start) / n:>8.3f}")
    print(f"cache folder cap (cache.maxBytes): {cache.DEFAULT_MAX_BYTES / 1e6:.0f} MB")


def node_table(folder: Path) -> None:
    """Per node: compute ms (warm, uncached) and hit ms (cached run, everything cached)."""
    from hamilton import driver as h_driver
    from hamilton.lifecycle import NodeExecutionHook

    from ctxengine import cache, driver

    class Timer(NodeExecutionHook):
        def __init__(self) -> None:
            self.times, self.starts = {}, {}

        def run_before_node_execution(self, *, node_name, **kwargs) -> None:
            self.starts[node_name] = time.perf_counter()

        def run_after_node_execution(self, *, node_name, **kwargs) -> None:
            self.times[node_name] = time.perf_counter() - self.starts[node_name]

    names = [n.name for n in driver.default_driver().graph.get_nodes() if not n.user_defined]
    loaders = {n.name for n in driver.default_driver().graph.get_nodes() if n.tags.get("loader")}
    project = folder / "transcript-nodes"
    project.mkdir(exist_ok=True)
    shutil.copyfile(TRANSCRIPT, project / ".aider.chat.history.md")
    runs = [(p, {}) for p in corpus_projects()] + [(project, FIT)]
    totals = {"plain": {}, "hit": {}}
    for index, (path, overrides) in enumerate(runs):
        inputs = {"project_dir": str(path), "overrides": overrides, "user_request": REQUEST}
        for label in ("plain", "hit"):
            timer = Timer()
            builder = h_driver.Builder().with_modules(*driver.NODE_MODULES).with_config(dict(driver._default_variants()))
            if label == "hit":
                builder = builder.with_adapters(cache.new_adapter(folder / f"nodes-{index}", set(names) - loaders))
            dr = builder.with_adapters(timer).build()
            dr.execute(["build_result"], inputs=inputs)
            best = {}
            for _ in range(3):
                timer.times = {}
                dr.execute(["build_result"], inputs=inputs)
                for name, seconds in timer.times.items():
                    best[name] = min(best.get(name, seconds), seconds)
            for name, seconds in best.items():
                totals[label].setdefault(name, []).append(seconds)
    print("\nnodes: compute vs hit, ms (max over the projects; cached: in ctxengine.driver.CACHED_NODES)")
    print(f"{'node':<34} {'compute':>8} {'hit':>8}  cached")
    for name in sorted(totals["plain"], key=lambda n: -max(totals["plain"][n])):
        if name in loaders:
            continue
        plain, hit = max(totals["plain"][name]), max(totals["hit"].get(name, [0]))
        if plain < 0.0005 and name not in driver.CACHED_NODES:
            continue
        print(f"{name:<34} {plain * 1e3:>8.2f} {hit * 1e3:>8.2f}  {'yes' if name in driver.CACHED_NODES else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--builds", type=int, default=1000)
    parser.add_argument("--nodes", action="store_true", help="also the per-node table behind CACHED_NODES")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxengine-cache-bench-") as tmp:
        folder = Path(tmp)
        corpus_table(args.repeat, folder)
        if not args.skip_cli and TRANSCRIPT.is_file():
            transcript_table(args.repeat, folder)
        if not args.skip_memory:
            memory_table(args.builds, folder)
        if args.nodes and TRANSCRIPT.is_file():
            node_table(folder)


if __name__ == "__main__":
    main()

"""The cache between runs: unchanged rebuilds, the 4.1 MB transcript through the CLI, memory.

    python benchmarks/cache.py [--repeat N] [--builds N] [--nodes] [--memo-only] [--skip-corpus] [--skip-cli]
                               [--skip-memory]

Times are CPU seconds (this process's, or the child's for the CLI): the machine is shared, and
wall time there measures the neighbours. Wall medians are printed beside them.
1. Every project of ../shared/corpus/planning: the median unchanged cached rebuild against the
   median warm uncached build, in one process with the driver built (paired, interleaved runs).
   Target: ratio <= 0.20.
2. ../shared/corpus/sessions/aider-repo__chat-history.md copied as a project's
   .aider.chat.history.md, fitted into 100K tokens (--max-tokens 125600 --reserve-tokens 25600)
   by ``ctxengine build`` in a fresh process: with an empty cache, then after one round is
   appended with the cache warm, unchanged, and --no-cache; then by the API in a warm process
   (unchanged, one round appended). Each as a ratio to one tiktoken pass over the transcript
   measured in the same run (targets 0.4, 0.15 and 0.3). A CLI row's target applies to its
   own cost: its time less the CLI's fixed cost, the same command on an empty folder with a
   new request each time (interpreter, imports, driver, tokenizer table: what any build that
   counts a text pays). Also shown: the own cost against the empty folder's build when every
   node is a hit (no tokenizer loaded), and ``ctxengine --version`` alone.
   langchain-core's trim_messages on the same transcript's messages (parsed, counted by
   tiktoken itself, as a LangChain user's counter does), run between the warm API builds, is
   the yardstick they are compared with (target: 10x faster); trim_messages counting with
   ctxengine's faster counter (bpe-openai) is shown too.
3. Memory: the resident size over --builds (1000) cached builds of the demo in one process
   (it should stay flat), and the cache folder's size against its cap.
--nodes: per node, its compute time in a warm uncached run against the cost of a hit (memory
layer off), over the GSD corpus and the transcript project.
--memo-only: whether per-node caching still pays now that the memo persists: the transcript's
build in a fresh process with Hamilton's cache against the memo alone (every node recomputed,
the memo's table read and written), unchanged, with a new request, one round appended.
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


def _clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def paired(plain, cached, repeat: int) -> tuple[float, float, float, float]:
    """Medians of interleaved runs: (plain CPU s, cached CPU s, CPU ratio, wall ratio)."""
    a, b, wall_a, wall_b = [], [], [], []
    for _ in range(repeat):
        for fn, cpu, wall in ((plain, a, wall_a), (cached, b, wall_b)):
            start = _clock()
            fn()
            end = _clock()
            cpu.append(end[0] - start[0])
            wall.append(end[1] - start[1])
    return (statistics.median(a), statistics.median(b), statistics.median(b) / statistics.median(a),
            statistics.median(wall_b) / statistics.median(wall_a))


def corpus_table(repeat: int, folder: Path) -> None:
    from ctxengine import driver

    print(f"1. unchanged cached rebuild vs warm uncached build (CPU, median of {repeat}, paired)")
    print(f"{'project':<42} {'plain ms':>9} {'cached ms':>10} {'ratio':>6} {'wall':>6} {'hits':>5}  target <= 0.20")
    ratios = []
    for project in corpus_projects():
        def plain():
            return driver.execute(["build_result"], project, {}, REQUEST, cache=False)

        def cached():
            return driver.execute(["build_result"], project, {}, REQUEST, cache_dir=folder / project.name)

        plain(), cached(), cached()  # warm: driver, encoding, cache filled
        a, b, ratio, wall = paired(plain, cached, repeat)
        run = driver.last_cache_run()
        ratios.append(ratio)
        print(f"{project.name:<42} {a * 1e3:>9.1f} {b * 1e3:>10.1f} {ratio:>6.2f} {wall:>6.2f} {len(run.hits):>5}"
              f"  {'ok' if ratio <= 0.2 else 'MISSED'} ({len(run.misses)} misses, {len(run.recomputed)} recomputed)")
    if ratios:
        print(f"{'median':<42} {'':>9} {'':>10} {statistics.median(ratios):>6.2f}")
    empty = folder / "empty-project"
    empty.mkdir(exist_ok=True)

    def empty_plain():
        return driver.execute(["build_result"], empty, {}, REQUEST, cache=False)

    def empty_cached():
        return driver.execute(["build_result"], empty, {}, REQUEST, cache_dir=folder / "empty-cache")

    empty_plain(), empty_cached(), empty_cached()
    a, b, _, _ = paired(empty_plain, empty_cached, repeat)
    nodes = len(driver.default_driver().list_available_variables())
    print(f"{'floor: an empty folder (no files to read)':<42} {a * 1e3:>9.1f} {b * 1e3:>10.1f}   "
          f"(Hamilton running {nodes} nodes: what a cached rebuild costs before any loader reads a file)")


def _cli(*args: str) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds) of one ``ctxengine`` command."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "ctxengine.cli", *args], check=True, capture_output=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def _tiktoken_pass(text: str, repeat: int) -> tuple[float, int]:
    """CPU seconds of one tiktoken pass over ``text`` (median), and its token count."""
    from ctxengine.nodes.lib.tokens import _encoding, token_counter_for

    encoding = _encoding(token_counter_for("cl100k_base").encoding_name)  # tiktoken itself, not bpe-openai
    passes = []
    for _ in range(repeat):
        start = time.process_time()
        tokens = len(encoding.encode_ordinary(text))
        passes.append(time.process_time() - start)
    return statistics.median(passes), tokens


def transcript_table(repeat: int, folder: Path) -> None:
    from ctxengine import driver

    text = TRANSCRIPT.read_text(encoding="utf-8")
    passes, tokens = [], _tiktoken_pass(text, 1)[1]
    project = folder / "transcript-project"
    project.mkdir()
    history = project / ".aider.chat.history.md"
    shutil.copyfile(TRANSCRIPT, history)
    history.chmod(0o644)
    cache_dir = folder / "transcript-cache"
    flags = [str(project), "--request", REQUEST, "--max-tokens", "125600", "--reserve-tokens", "25600",
             "-o", str(folder / "out.txt"), "--cache-dir", str(cache_dir)]
    startup = [_cli("--version") for _ in range(repeat)]
    empty = folder / "empty-project"
    empty.mkdir(exist_ok=True)

    def empty_flags(request: str) -> list[str]:
        return [str(empty), "--request", request, *flags[3:-2], "--cache-dir", str(folder / "empty-cache")]

    _cli("build", *empty_flags(REQUEST))  # its cache filled: what every build of a project pays before its own work
    hits, fixed = [], []
    rows: dict[str, list[tuple[float, float]]] = {}
    for n in range(repeat):  # interleaved with the builds it is subtracted from (the load drifts)
        hits.append(_cli("build", *empty_flags(REQUEST)))
        fixed.append(_cli("build", *empty_flags(f"{REQUEST} ({n})")))  # a new request: the tokenizer loads
        shutil.rmtree(cache_dir, ignore_errors=True)
        rows.setdefault("CLI build, empty cache", []).append(_cli("build", *flags))
        with history.open("a", encoding="utf-8") as fh:
            fh.write(ROUND.replace("helper", f"helper {n}"))
        rows.setdefault("CLI build, one round appended, cache warm", []).append(_cli("build", *flags))
        rows.setdefault("CLI build, unchanged, cache warm", []).append(_cli("build", *flags))
        rows.setdefault("CLI build --no-cache", []).append(_cli("build", *flags, "--no-cache"))
        passes.append(_tiktoken_pass(text, 1)[0])  # the yardstick, measured between the builds it divides

    def api() -> tuple[float, float]:
        start = _clock()
        driver.execute(["build_result"], project, FIT, REQUEST, cache_dir=cache_dir)
        end = _clock()
        return end[0] - start[0], end[1] - start[1]

    api(), api()  # a warm process: driver, tokenizer, memory layer
    trims = _trim_messages(history)
    for n in range(repeat):  # trim_messages interleaved with the builds it is compared with
        rows.setdefault("API build, unchanged, warm process", []).append(api())
        with history.open("a", encoding="utf-8") as fh:
            fh.write(ROUND.replace("helper", f"api helper {n}"))
        rows.setdefault("API build, one round appended, warm process", []).append(api())
        for label, trim in (trims or {}).items():
            rows.setdefault(label, []).append(trim())
        passes.append(_tiktoken_pass(text, 1)[0])
    one_pass = statistics.median(passes)
    targets = {"CLI build, empty cache": 0.4, "CLI build, one round appended, cache warm": 0.15,
               "API build, unchanged, warm process": 0.3, "API build, one round appended, warm process": 0.3}
    fixed_cpu, hits_cpu = statistics.median(c for c, _ in fixed), statistics.median(c for c, _ in hits)
    print(f"\n2. the 4.1 MB transcript ({len(text):,} chars, {tokens:,} tokens) fitted into 100K "
          f"(CPU, median of {repeat}); one tiktoken pass: {one_pass * 1e3:.0f} ms (median of {len(passes)}, "
          f"{min(passes) * 1e3:.0f}-{max(passes) * 1e3:.0f}, measured between the builds)")
    print("   ratio: to one pass; -fixed: less the CLI's fixed cost (a build of an empty folder with a new")
    print("   request: interpreter, imports, driver, tokenizer table, config), i.e. the transcript's own cost;")
    print("   -hits: less the same build when every node is a hit (no tokenizer loaded); targets on -fixed")
    print(f"{'what':<46} {'CPU ms':>7} {'wall ms':>8} {'ratio':>6} {'-fixed':>7} {'-hits':>6}  target")
    for name, runs in (("CLI start-up alone (ctxengine --version)", startup),
                       ("CLI fixed cost: empty folder, new request", fixed),
                       ("CLI empty folder, every node a hit", hits)):
        cpu = statistics.median(c for c, _ in runs)
        print(f"{name:<46} {cpu * 1e3:>7.0f} {statistics.median(w for _, w in runs) * 1e3:>8.0f} {cpu / one_pass:>6.2f}")
    for name, runs in rows.items():
        cpu, wall = statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs)
        cli = name.startswith("CLI")
        own = (cpu - fixed_cpu) / one_pass if cli else cpu / one_pass
        target = targets.get(name)
        flag = "" if target is None else f"<= {target}  {'ok' if own <= target else 'MISSED'}"
        own_text = f"{own:>7.2f} {(cpu - hits_cpu) / one_pass:>6.2f}" if cli else f"{'':>7} {'':>6}"
        print(f"{name:<46} {cpu * 1e3:>7.0f} {wall * 1e3:>8.0f} {cpu / one_pass:>6.2f} {own_text}  {flag}")
    yardstick = rows.get(TRIM_TIKTOKEN)
    if yardstick:
        trim_cpu = statistics.median(c for c, _ in yardstick)
        for name in ("API build, unchanged, warm process", "API build, one round appended, warm process"):
            cpu = statistics.median(c for c, _ in rows[name])
            print(f"trim_messages / {name}: {trim_cpu / cpu:.1f}x (target >= 10x)")


#: The yardstick: trim_messages counting with tiktoken, as a LangChain user's counter does.
TRIM_TIKTOKEN = "langchain trim_messages(last), tiktoken counts"
TRIM_BPE = "  the same, bpe-openai counts"


def _trim_messages(history: Path) -> dict | None:
    """Label -> a callable timing one run of langchain-core's trim_messages(strategy="last")
    fitting the transcript's messages, already parsed, into 100K tokens (the yardstick of
    benchmarks/truncation.py): (CPU s, wall s). Counted by tiktoken itself (the yardstick),
    and by ctxengine's counter (bpe-openai's, faster) for comparison. None without langchain-core."""
    try:
        from langchain_core.messages import trim_messages
    except ImportError:
        return None
    sys.path.insert(0, str(Path(__file__).parent))
    from truncation import AVAILABLE, TiktokenCounter, langchain_messages

    from ctxengine.nodes.lib.sessions import parse_session
    from ctxengine.nodes.lib.tokens import token_counter_for

    from ctxengine.driver import MEMO

    # parsed into the process's memo, as every parse went into the process's round memo before
    # the memo was a driver input: the warm process's builds find the transcript's rounds made
    messages = langchain_messages(parse_session(history.read_text(encoding="utf-8", errors="replace"),
                                                str(history), memo=MEMO).rounds)

    def timed(counter):
        def count(msgs) -> int:
            return sum(counter.count(m.content if isinstance(m.content, str) else str(m.content)) + 4 for m in msgs)

        def run() -> tuple[float, float]:
            start = _clock()
            trim_messages(messages, strategy="last", token_counter=count, max_tokens=AVAILABLE)
            end = _clock()
            return end[0] - start[0], end[1] - start[1]

        return run

    return {TRIM_TIKTOKEN: timed(TiktokenCounter()), TRIM_BPE: timed(token_counter_for("cl100k_base"))}


def memory_table(builds: int, folder: Path) -> None:
    from ctxengine import caching, driver

    demo = REPO / "examples" / "demo"
    cache_dir = folder / "memory-cache"
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> float:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * page / 1e6

    cap = 8 << 20
    marks = sorted({1, 10, 100, builds // 4, builds // 2, builds})
    print(f"\n3. memory over {builds} cached builds of the demo in one process (a new request each build: "
          f"new results every time; cache.maxBytes {cap >> 20} MB)")
    print(f"{'builds':>7} {'RSS MB':>8} {'folder MB':>10} {'memory layer MB':>16} {'s/build':>8}")
    start = time.perf_counter()
    for n in range(1, builds + 1):
        driver.execute(["build_result"], demo, {"cache.maxBytes": cap}, f"request {n}", cache_dir=cache_dir)
        if n in marks:
            size = caching.stats(Path(driver.cache_dir_for(demo, cache_dir)))["bytes"] / 1e6
            print(f"{n:>7} {rss():>8.1f} {size:>10.2f} {caching.MEMORY.currsize / 1e6:>16.2f} "
                  f"{(time.perf_counter() - start) / n:>8.3f}")
    print(f"folder cap {cap / 1e6:.1f} MB (default cache.maxBytes {caching.DEFAULT_MAX_BYTES / 1e6:.0f} MB); "
          f"memory layer cap {caching.MEMORY.maxsize / 1e6:.0f} MB")


def node_table(folder: Path) -> None:
    """Per node: compute ms (warm, uncached) and hit ms (cached run, memory layer off)."""
    from hamilton import driver as h_driver
    from hamilton.lifecycle import NodeExecutionHook

    from ctxengine import caching, driver

    class Timer(NodeExecutionHook):
        def __init__(self) -> None:
            self.times, self.starts = {}, {}

        def run_before_node_execution(self, *, node_name, **kwargs) -> None:
            self.starts[node_name] = time.perf_counter()

        def run_after_node_execution(self, *, node_name, **kwargs) -> None:
            self.times[node_name] = time.perf_counter() - self.starts[node_name]

    cached_nodes = driver.cached_nodes()
    project = folder / "transcript-nodes"
    project.mkdir(exist_ok=True)
    shutil.copyfile(TRANSCRIPT, project / ".aider.chat.history.md")
    runs = [(p, {}) for p in corpus_projects()] + [(project, FIT)]
    totals = {"plain": {}, "hit": {}}
    for index, (path, overrides) in enumerate(runs):
        inputs = {"project_dir": str(path), "overrides": overrides, "user_request": REQUEST}
        for label in ("plain", "hit"):
            timer = Timer()
            builder = h_driver.Builder().with_modules(*driver.NODE_MODULES)
            if label == "hit":
                builder = builder.with_adapters(caching.new_adapter(folder / f"nodes-{index}"))
            dr = builder.with_adapters(timer).build()
            dr.execute(["build_result"], inputs=inputs)
            if label == "hit":
                dr.cache.result_store.flush()
            best = {}
            for _ in range(3):
                timer.times = {}
                caching.MEMORY.clear()
                dr.execute(["build_result"], inputs=inputs)
                for name, seconds in timer.times.items():
                    best[name] = min(best.get(name, seconds), seconds)
            for name, seconds in best.items():
                totals[label].setdefault(name, []).append(seconds)
    print("\nnodes: compute vs hit from the file, ms (max over the projects; loaders always run)")
    print(f"{'node':<34} {'compute':>8} {'hit':>8}  cached")
    for name in sorted(totals["plain"], key=lambda n: -max(totals["plain"][n])):
        plain, hit = max(totals["plain"][name]), max(totals["hit"].get(name, [0]))
        if plain < 0.0005:
            continue
        print(f"{name:<34} {plain * 1e3:>8.2f} {hit * 1e3:>8.2f}  {'yes' if name in cached_nodes else 'loader'}")


#: One build in a fresh process (argv: mode, project, cache folder, request); prints its CPU ms.
#: ``memo-only``: the cached driver with every node recomputed: the memo's table is read and
#: written with the build, but no node's result is stored or served.
_ONE_BUILD = """
import os, sys, time
os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
mode, project, cache_dir, request = sys.argv[1:5]
from ctxengine import driver
from ctxengine.caching import adapter
if mode == "memo-only":
    init = adapter.CacheAdapter.__init__
    adapter.CacheAdapter.__init__ = lambda self, *a, **k: init(self, *a, **{**k, "default_behavior": "recompute"})
start = time.process_time()
driver.execute(["build_result"], project, {"budget.maxTokens": 125600, "budget.reserveTokens": 25600}, request,
               cache=True, cache_dir=cache_dir)
print((time.process_time() - start) * 1e3)
"""


def memo_only_table(repeat: int, folder: Path) -> None:
    """Whether per-node caching still pays now that the memo persists: the transcript's build in
    a fresh process (the build only: no interpreter or imports), with Hamilton's cache as it is
    against the memo alone, unchanged, with a new request, one round appended."""
    rows: dict[tuple[str, str], list[float]] = {}
    projects = {}
    for mode in ("cached", "memo-only"):
        project = folder / f"memo-only-{mode}"
        project.mkdir()
        shutil.copyfile(TRANSCRIPT, project / ".aider.chat.history.md")
        projects[mode] = project

    def build(mode: str, request: str = REQUEST) -> float:
        out = subprocess.run([sys.executable, "-c", _ONE_BUILD, mode, str(projects[mode]),
                              str(folder / f"memo-only-cache-{mode}"), request], check=True, capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])

    for mode in projects:
        build(mode)  # the cache and the memo's table filled
    for n in range(repeat):
        for mode in projects:  # interleaved: the load drifts
            rows.setdefault(("unchanged", mode), []).append(build(mode))
            rows.setdefault(("a new request", mode), []).append(build(mode, f"{REQUEST} ({n})"))
            with (projects[mode] / ".aider.chat.history.md").open("a", encoding="utf-8") as fh:
                fh.write(ROUND.replace("helper", f"helper {n}"))
            rows.setdefault(("one round appended", mode), []).append(build(mode))
    print(f"\n4. per-node caching once the memo persists: the transcript's build in a fresh process (CPU ms, median of {repeat})")
    print(f"{'what':<22} {'cached':>8} {'memo only':>10}")
    for what in ("unchanged", "a new request", "one round appended"):
        cached, memo = (statistics.median(rows[(what, mode)]) for mode in projects)
        print(f"{what:<22} {cached:>8.0f} {memo:>10.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--builds", type=int, default=1000)
    parser.add_argument("--nodes", action="store_true", help="also the per-node table: compute vs hit")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memo-only", action="store_true", help="also: per-node caching against the memo alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxengine-cache-bench-") as tmp:
        folder = Path(tmp)
        if not args.skip_corpus:
            corpus_table(args.repeat, folder)
        if not args.skip_cli and TRANSCRIPT.is_file():
            transcript_table(args.repeat, folder)
        if not args.skip_memory:
            memory_table(args.builds, folder)
        if args.nodes and TRANSCRIPT.is_file():
            node_table(folder)
        if args.memo_only and TRANSCRIPT.is_file():
            memo_only_table(args.repeat, folder)


if __name__ == "__main__":
    main()

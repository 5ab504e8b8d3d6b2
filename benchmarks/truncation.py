"""Truncation speed and scaling: the 4.1 MB aider transcript fitted into a 100K-token budget.

    /work/venv/bin/python benchmarks/truncation.py [--repeat N]

Speed. The transcript of ../shared/corpus/sessions/aider-repo__chat-history.md (about 1.18M
cl100k tokens) is parsed with ctxengine.nodes.lib.sessions and becomes the session history,
every round verbatim (a history section of the whole transcript). The truncation and quality
nodes (budget_report ... final_context, through a real Hamilton driver; the process-wide count
cache emptied before each run, and once more with it warm) fit it into
maxTokens - reserveTokens = 100,000 tokens. Their time is reported as a ratio to one tiktoken
pass over the whole transcript in the same process (tiktoken itself; target <= 0.3: count
exactly what is kept, estimate the rest), and against langchain-core's
``trim_messages(strategy="last", token_counter=<tiktoken counter>, max_tokens=100000)`` on the
same messages (target: 10x faster); trim_messages counting with ctxengine's own counter
(bpe-openai, faster than tiktoken) is shown too.

Scaling. The same pipeline on the first 10K, 100K and 1M tokens of the transcript: the time
per input token should stay flat (linear growth).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
TRANSCRIPT = SHARED / "corpus" / "sessions" / "aider-repo__chat-history.md"
AVAILABLE = 100_000
RESERVE = 25_600
OUTPUTS = ["final_context", "final_budget_report", "truncation_ledger", "truncation_summary", "budget_pools"]


def _median(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def parse_rounds(text: str):
    """The transcript's rounds (ctxengine.nodes.lib.sessions), with the parse time."""
    from ctxengine.nodes.lib import sessions as session

    start = time.perf_counter()
    history = session.parse_session(text, str(TRANSCRIPT), "aider")
    return history.rounds, time.perf_counter() - start


def history_section(rounds, location: str):
    """The session history as one section: every round verbatim."""
    from ctxengine.nodes.lib import sessions as session
    from ctxengine.nodes.types import Section, Source

    spans = [r.lines for r in rounds if r.lines]
    lines = (spans[0][0], spans[-1][1]) if spans else None
    return Section(
        key="history", title="Session History", kind="history", content=session.render_rounds(rounds),
        priority=70, pool="state", sources=(Source("file", location, lines),),
        data={"rounds": tuple(rounds), "verbatim_from": 0, "format": "aider"},
    )


def truncation_driver():
    """The shared ctxengine driver: the benchmark hands it the sections and times the nodes
    from the budget report on (budget, monitor, truncation, quality)."""
    from ctxengine.driver import default_driver

    return default_driver()


def prepared(dr, history, tmp: str, request: str, available: int = AVAILABLE) -> dict:
    """Inputs and the upstream values (sections, rendered context) computed once, so that the
    timing covers budget, truncation and quality only."""
    from ctxengine.nodes.types import Section, Source

    rules = Section("ref:builtin:gsd-rules", "GSD Rules", "rules", "Run the tests before you commit.\n" * 20, 95,
                    "system", (Source("builtin", "gsd-rules"),))
    inputs = {
        "project_dir": tmp, "user_request": request,
        "overrides": {"budget.maxTokens": available + RESERVE, "budget.reserveTokens": RESERVE},
    }
    given = {"reference_sections": [rules], "state_sections": [history], "disclosed_sections": []}
    upstream = dr.execute(["sections", "rendered_context", "context_config", "context_template", "mode_template"],
                          inputs=inputs, overrides=given)
    return {"inputs": inputs, "overrides": {**given, **upstream}}


def run_truncation(dr, setup: dict, cold: bool = True) -> dict:
    """The nodes once; ``cold``: with the process-wide count cache emptied first (as a fresh
    process would run them), else with the counts of the runs before (a long-lived process)."""
    # no memo input here: every count is made (NO_MEMO), cold or not
    return dr.execute(OUTPUTS, inputs=setup["inputs"], overrides=setup["overrides"])


def langchain_messages(rounds):
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}
    out = []
    for r in rounds:
        for m in r.messages:
            if m.role == "tool":
                out.append(HumanMessage(content=m.content))  # aider tool output: no call ids
            else:
                out.append(kinds.get(m.role, HumanMessage)(content=m.content))
    return out


class TiktokenCounter:
    """Counts with tiktoken itself (``encode_ordinary``), as a LangChain user's token counter
    does; ctxengine's TokenCounter counts with bpe-openai's faster Rust counter when installed."""

    def __init__(self, encoding_name: str = "cl100k_base") -> None:
        from ctxengine.nodes.lib.tokens import _encoding, token_counter_for

        self.encoding = _encoding(token_counter_for(encoding_name).encoding_name)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))


def langchain_seconds(rounds, counter, repeat: int) -> float | None:
    try:
        from langchain_core.messages import trim_messages
    except ImportError:
        return None
    messages = langchain_messages(rounds)

    def count(msgs) -> int:
        return sum(counter.count(m.content if isinstance(m.content, str) else str(m.content)) + 4 for m in msgs)

    seconds, _ = _median(lambda: trim_messages(messages, strategy="last", token_counter=count, max_tokens=AVAILABLE),
                         repeat)
    return seconds


def prefix_rounds(rounds, counter, tokens: int):
    """The first rounds of the transcript holding about ``tokens`` tokens (verbatim)."""
    from ctxengine.nodes.lib import sessions as session

    out, total = [], 0
    for r in rounds:
        if total >= tokens:
            break
        out.append(r)
        total += counter.estimate(session.render_round(r)) * 1.14  # ~3.5 chars per token here
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not TRANSCRIPT.is_file():
        sys.exit(f"no transcript at {TRANSCRIPT}")
    import tempfile

    from ctxengine.nodes.lib.tokens import token_counter_for

    text = TRANSCRIPT.read_text(encoding="utf-8")
    counter = token_counter_for("cl100k_base")  # ctxengine's (bpe-openai when installed)
    tiktoken_counter = TiktokenCounter()  # the yardstick's: one tiktoken pass, trim_messages' counts
    tokens = counter.count(text)  # warm-up (loads the encoding)
    tiktoken_counter.count(text)
    rounds, parse_seconds = parse_rounds(text)
    dr = truncation_driver()
    with tempfile.TemporaryDirectory() as tmp:
        history = history_section(rounds, str(TRANSCRIPT))
        setup = prepared(dr, history, tmp, "Continue with the refactor and keep the tests green.")
        result = run_truncation(dr, setup)  # warm-up
        # Paired, interleaved measurements: this machine is shared, so each ratio compares runs
        # made back to back, and the medians are reported.
        passes, fits, ratios = [], [], []
        for _ in range(args.repeat):
            one, _ = _median(lambda: tiktoken_counter.count(text), 1)
            fit, result = _median(lambda: run_truncation(dr, setup), 1)
            passes.append(one)
            fits.append(fit)
            ratios.append(fit / one)
        one_pass, fit, ratio = statistics.median(passes), statistics.median(fits), statistics.median(ratios)
        final = result["final_budget_report"]
        summary = result["truncation_summary"]
        print(f"transcript: {len(text):,} chars, {tokens:,} tokens (cl100k), {len(rounds):,} rounds; "
              f"parse {parse_seconds * 1000:.0f} ms (state stage, not timed below)")
        print(f"budget: {AVAILABLE:,} available; final {final.total_tokens:,} tokens (exact), "
              f"reason {summary['reason']}, target {summary['target']:,}, fit passes {summary['fit_passes']}\n")
        print(f"{'what':<52} {'ms':>9} {'ratio':>8} {'target':>8}")
        print(f"{'one tiktoken pass over the transcript':<52} {one_pass * 1000:>9.1f} {1.0:>8.2f}")
        flag = "ok" if ratio <= 0.3 else "MISSED"
        print(f"{'ctxengine budget+truncation+quality nodes':<52} {fit * 1000:>9.1f} {ratio:>8.2f} "
              f"{'<= 0.30':>8} {flag}")
        warm, _ = _median(lambda: run_truncation(dr, setup, cold=False), args.repeat)
        print(f"{'  the same, count cache warm (a long-lived process)':<52} {warm * 1000:>9.1f} {warm / one_pass:>8.2f}")
        lc_pairs = []
        for _ in range(max(1, args.repeat // 2)):
            lc = langchain_seconds(rounds, tiktoken_counter, 1)
            if lc is None:
                break
            fast = langchain_seconds(rounds, counter, 1)
            mine, _ = _median(lambda: run_truncation(dr, setup), 1)
            lc_pairs.append((lc, lc / mine, fast, fast / mine))
        if lc_pairs:
            lc, speedup = statistics.median(p[0] for p in lc_pairs), statistics.median(p[1] for p in lc_pairs)
            fast, fast_speedup = statistics.median(p[2] for p in lc_pairs), statistics.median(p[3] for p in lc_pairs)
            flag = "ok" if speedup >= 10 else "MISSED"
            print(f"{'langchain-core trim_messages(last, tiktoken)':<52} {lc * 1000:>9.1f} {lc / one_pass:>8.2f}")
            print(f"{'  ctxengine speed-up over trim_messages':<52} {'':>9} {speedup:>7.1f}x {'>= 10x':>8} {flag}")
            print(f"{'  trim_messages counting with bpe-openai instead':<52} {fast * 1000:>9.1f} "
                  f"{fast / one_pass:>8.2f}  (speed-up {fast_speedup:.1f}x)")
        else:
            print("langchain-core is not installed: comparison skipped")

        print(f"\nscaling (same nodes, first N tokens of the transcript, fitted into {AVAILABLE:,}):")
        print(f"{'input tokens':>13} {'rounds':>7} {'ms':>9} {'us/token':>9} {'final':>8}")
        for size in (10_000, 100_000, 1_000_000):
            part = prefix_rounds(rounds, counter, size)
            section = history_section(part, str(TRANSCRIPT))
            exact = counter.count(section.content)
            budget = min(AVAILABLE, max(2_000, exact // 10))
            setup = prepared(dr, section, tmp, "Continue.", budget)
            run_truncation(dr, setup)
            seconds, out = _median(lambda: run_truncation(dr, setup), args.repeat)
            print(f"{exact:>13,} {len(part):>7,} {seconds * 1000:>9.1f} {seconds / exact * 1e6:>9.3f} "
                  f"{out['final_budget_report'].total_tokens:>8,}")
        print("\n(each size is fitted into a tenth of itself, at most 100,000 tokens; linear growth keeps "
              "us/token flat)")


if __name__ == "__main__":
    main()

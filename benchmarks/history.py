"""Growing transcripts: parse + summarize the 4.1 MB aider transcript cold, then after one round
is appended, each as a ratio to one tiktoken pass over it.

    python benchmarks/history.py [--repeat N] [--path TRANSCRIPT]

cold: the process-wide round memo (nodes/lib/sessions/) is cleared, then the transcript is
parsed into rounds and every round summarized (``round_summaries``). append: the memo is warmed
with the transcript, one round is appended, and the grown transcript is parsed and summarized
again; only the new round should be parsed and summarized (the counts are printed). Each time is
the median of N runs; the tiktoken pass is cl100k_base over the whole transcript.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
TRANSCRIPT = SHARED / "corpus" / "sessions" / "aider-repo__chat-history.md"
APPENDED = ("\n#### Add a --version flag to the CLI\n\nI'll add the flag in `cli.py`.\n\n"
            "> Applied edit to cli.py\n> Commit 1a2b3c4 feat: add --version flag\n")


def _summaries(session, rounds):
    """Every round's summary line, through the memo when the code has one."""
    if hasattr(session, "round_summaries"):
        return session.round_summaries(rounds)
    return tuple(session.round_summary(r) for r in rounds)


def _clear(session) -> None:
    memo = getattr(session, "ROUND_MEMO", None)
    if memo is not None:
        memo.clear()


def _timed(fn, before, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(path: Path, repeat: int) -> dict:
    from ctxengine.nodes.lib import sessions as session
    from ctxengine.nodes.lib.tokens import token_counter_for

    text = path.read_text(encoding="utf-8", errors="replace")
    grown = text + APPENDED
    counter = token_counter_for("cl100k_base")
    counter.count(text)  # warm-up
    tiktoken = _timed(lambda: counter.count(text), lambda: None, repeat)

    def build(t):
        return _summaries(session, session.parse_session(t, str(path)).rounds)

    def warm():
        _clear(session)
        build(text)

    cold = _timed(lambda: build(text), lambda: _clear(session), repeat)
    append = _timed(lambda: build(grown), warm, repeat)
    memo = getattr(session, "ROUND_MEMO", None)
    counts = None
    if memo is not None:
        warm()
        parsed, summarized = memo.parsed, memo.summarized
        build(grown)
        counts = (memo.parsed - parsed, memo.summarized - summarized)
    return {"name": path.name, "bytes": len(text.encode("utf-8")),
            "rounds": len(session.parse_session(text, str(path)).rounds), "tiktoken": tiktoken,
            "cold": cold, "append": append, "counts": counts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--path", type=Path, default=TRANSCRIPT)
    args = parser.parse_args()
    if not args.path.exists():
        print(f"no transcript at {args.path}", file=sys.stderr)
        return 2
    r = measure(args.path, args.repeat)
    print(f"{r['name']}: {r['bytes'] / 1e6:.2f} MB, {r['rounds']} rounds; one tiktoken pass {r['tiktoken'] * 1000:.0f} ms")
    print(f"  cold   parse + summarize: {r['cold'] * 1000:7.1f} ms = {r['cold'] / r['tiktoken']:.3f} x tiktoken")
    print(f"  append parse + summarize: {r['append'] * 1000:7.1f} ms = {r['append'] / r['tiktoken']:.3f} x tiktoken")
    if r["counts"] is not None:
        print(f"  after the append: {r['counts'][0]} round(s) parsed, {r['counts'][1]} summarized")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Session history speed: parsing and compacting aider transcripts against one tiktoken pass.

    python benchmarks/state.py [--repeat N] [--keep K] [--check]

For every transcript in ../shared/corpus/sessions (the largest is aider's own 4.1 MB chat
history) it times, in this one process, parsing into rounds (``parse_session``), compacting
(``compact_history``: the last K rounds verbatim, older ones summarised) and one tiktoken
pass over the same text (``token_counter_for("cl100k_base").count``), each the median of N
runs after a warm-up. The ratio is (parse + compact) / tiktoken; the target is at most 0.5
for the 4.1 MB transcript. ``--check`` exits 1 when the largest transcript misses it.
``cold ms`` is a first build's share: parse and every round's summary line with the round
memo emptied before each run (no round parsed or summarised before).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from timing import median_seconds

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
TARGET = 0.5



def measure(path: Path, repeat: int, keep: int) -> dict:
    """Median seconds of parse, compact and one tiktoken pass over one transcript."""
    from ctxengine.nodes.lib import sessions as session
    from ctxengine.nodes.lib.tokens import token_counter_for

    text = path.read_text(encoding="utf-8", errors="replace")
    counter = token_counter_for("cl100k_base")
    history = session.parse_session(text, str(path))  # warm-up, and the rounds to compact
    compacted = session.compact_history(history.rounds, keep)
    tokens = counter.count(text)
    parse = median_seconds(lambda: session.parse_session(text, str(path)), repeat)
    compact = median_seconds(lambda: session.compact_history(history.rounds, keep), repeat)
    tiktoken = median_seconds(lambda: counter.count(text), repeat)

    def cold() -> None:
        session.round_summaries(session.parse_session(text, str(path)).rounds)

    cold_seconds = median_seconds(cold, repeat)
    return {
        "name": path.name,
        "bytes": len(text.encode("utf-8")),
        "tokens": tokens,
        "rounds": len(history.rounds),
        "sessions": history.sessions,
        "compacted_chars": len(compacted),
        "parse": parse,
        "compact": compact,
        "tiktoken": tiktoken,
        "cold": cold_seconds,
        "ratio": (parse + compact) / tiktoken if tiktoken else float("inf"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=int, default=5, help="rounds kept verbatim (state.maxHistoryRounds)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the largest transcript misses the target")
    args = parser.parse_args()
    folder = SHARED / "corpus" / "sessions"
    paths = sorted((p for p in folder.glob("*.md") if "LICENSE" not in p.name), key=lambda p: p.stat().st_size)
    if not paths:
        print(f"no transcripts in {folder}", file=sys.stderr)
        return 2
    rows = [measure(p, args.repeat, args.keep) for p in paths]
    header = (f"{'transcript':<55} {'MB':>5} {'tokens':>8} {'rounds':>6} {'parse ms':>9} {'compact ms':>10} "
              f"{'tiktoken ms':>11} {'ratio':>6} {'cold ms':>8}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['name']:<55} {r['bytes'] / 1e6:>5.2f} {r['tokens']:>8} {r['rounds']:>6} {r['parse'] * 1000:>9.1f} "
              f"{r['compact'] * 1000:>10.1f} {r['tiktoken'] * 1000:>11.1f} {r['ratio']:>6.2f} {r['cold'] * 1000:>8.1f}")
    largest = rows[-1]
    verdict = "meets" if largest["ratio"] <= TARGET else "MISSES"
    print(f"\n{largest['name']}: (parse + compact) / tiktoken = {largest['ratio']:.2f} "
          f"({verdict} the target of at most {TARGET}); {largest['rounds']} rounds in {largest['sessions']} sessions, "
          f"compacted to {largest['compacted_chars']} chars with the last {args.keep} rounds verbatim")
    return 1 if args.check and largest["ratio"] > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())

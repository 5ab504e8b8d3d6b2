"""The prompt prefix consecutive Session rounds share: what a provider's prompt cache can serve.

    python benchmarks/prefix.py [--rounds N] [--quiet-state]

The 30-round Session simulation of tests/test_session_api.py (maxTokens 8000, reserveTokens 1600,
monitor.thresholdRounds 2; round i asks 15 + 3i words and is answered in 50 + 10i) over a copy of
the bundled demo project made a git repository with one uncommitted change, git and environment
sections on (``--quiet-state`` turns both off, as the test does). Between rounds only the history
grows (the request is new too); a round in which the session folded older rounds into its
rolling summary is marked "fold", one truncation cut "truncated", one whose other sections
changed (a document the request disclosed, say) "sections". Per round: the context's tokens, its stable part
(``stable_prefix_tokens``), the tokens shared with the previous round's context
(``RoundRecord.shared_prefix_tokens``) as a share of the previous context (how much of the
prompt a cache holds is reused) and of this one (how much of this prompt it can serve: never
the round's new answer and request). The minimum share of the previous context over the rounds
where only the history grew is the figure of issue 13 (>= 90%).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "demo"
TARGET = 0.90
VOCAB = ("the login handler returns a token and rotates the refresh token while the database keeps each "
         "user session hashed with argon2 so the endpoint answers json errors with a status code and the "
         "test client checks every header body and rate limit attempt").split()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(words)) + "."


def demo_repository(root: Path) -> Path:
    """The demo's .planning (without its session log) in a git repository with one file changed."""
    shutil.copytree(DEMO / ".planning", root / ".planning")
    (root / ".planning" / "sessions" / "current" / "session.log").unlink()
    (root / "app.py").write_text("def login(user, password):\n    return check(user, password)\n", encoding="utf-8")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "demo"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=env)
    (root / "app.py").write_text("def login(user, password):\n    if not check(user, password):\n"
                                 "        raise Unauthorized(401)\n    return token(user)\n", encoding="utf-8")
    return root


def simulate(project: Path, rounds: int = 30, overrides: dict | None = None, threshold: int = 2):
    """The simulated session (Session, its per-round contexts)."""
    from ctxengine.session import Session

    rng = random.Random(20261101)
    session = Session(project, overrides={**(overrides or {}), "monitor.thresholdRounds": threshold},
                      max_tokens=8000, reserve_tokens=1600, seed_history=False)
    contexts = []
    for number in range(1, rounds + 1):
        contexts.append(session.next_context(f"Round {number}: {text(rng, 15 + 3 * number)}"))
        answer = text(rng, 50 + 10 * number)
        session.record(len(answer.split()) * 4 // 3, answer)
    return session, contexts


def others(result) -> tuple:
    """Every section but the history and the request, as (key, content): what must stay for
    "only the history grew"."""
    return tuple((s.key, s.content) for s in result.sections if s.kind not in ("history", "request"))


def table(session, results) -> tuple[list[str], dict]:
    """The per-round lines and, over the rounds where only the history grew, the minimum shared
    share of the previous context ("of prev": the part of the cached prompt the round reuses)
    and of this context ("of this": the part of this prompt a cache can serve)."""
    lines = [f"{'round':>5} {'tokens':>7} {'stable':>7} {'shared':>7} {'of prev':>8} {'of this':>8}  note"]
    grown: dict[str, list[float]] = {"prev": [], "this": []}
    for i, (record, result) in enumerate(zip(session.records, results)):
        shared = getattr(record, "shared_prefix_tokens", None)
        stable = getattr(result, "stable_prefix_tokens", None)
        folded_before = i > 0 and session.records[i - 1].folded > 0
        cut = bool(result.truncation.get("triggered"))
        moved = i > 0 and others(results[i - 1]) != others(result)
        note = ("fold " if folded_before else "") + ("truncated " if cut else "") + ("sections " if moved else "")
        of_prev = of_this = None
        if shared is not None and i > 0:
            of_prev, of_this = shared / session.records[i - 1].total_tokens, shared / record.total_tokens
            if not (folded_before or cut or moved):
                grown["prev"].append(of_prev)
                grown["this"].append(of_this)
        lines.append(f"{record.round:>5} {record.total_tokens:>7} {'-' if stable is None else stable:>7} "
                     f"{'-' if of_prev is None else shared:>7} {'-' if of_prev is None else f'{of_prev:.1%}':>8} "
                     f"{'-' if of_this is None else f'{of_this:.1%}':>8}  {note.strip()}")
    return lines, {key: (min(values) if values else None) for key, values in grown.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quiet-state", action="store_true", help="git and environment sections off")
    args = parser.parse_args(argv)
    overrides = {"state.includeGit": False, "state.includeEnvironment": False} if args.quiet_state else {}
    with tempfile.TemporaryDirectory(prefix="ctxengine-prefix-bench-") as tmp:
        session, results = simulate(demo_repository(Path(tmp)), args.rounds, overrides)
    lines, low = table(session, results)
    print(f"{args.rounds}-round session over the demo (maxTokens 8000, reserveTokens 1600, "
          f"monitor.thresholdRounds 2, git and environment {'off' if args.quiet_state else 'on'})")
    print("\n".join(lines))
    if low["prev"] is None:
        print("no round where only the history grew")
        return 1
    verdict = "meets" if low["prev"] >= TARGET else "misses"
    print(f"rounds where only the history grew: the shared prefix is at least {low['prev']:.1%} of the previous "
          f"context ({verdict} the target of {TARGET:.0%}) and at least {low['this']:.1%} of this one "
          "(the rest of this one: the last answer and the new request)")
    return 0 if low["prev"] >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

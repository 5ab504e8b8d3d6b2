"""ctxengine.Session: one context per round through the shared driver, the budget watched
across rounds, and older rounds folded into a rolling summary before a hard cut is forced.

The 30-round simulation prints its per-round utilisation table (``pytest -s``)."""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import random  # noqa: E402
import shutil  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from ctxengine import driver  # noqa: E402
from ctxengine.nodes import disclosure, monitor  # noqa: E402
from ctxengine.nodes.types import CtxEngineError  # noqa: E402
from ctxengine.session import Session  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"
QUIET = {"state.includeGit": False, "state.includeEnvironment": False}


@pytest.fixture(autouse=True)
def shared_driver(monkeypatch):
    """The shared driver with the monitor (and disclosure) stage, until driver.NODE_MODULES lists them."""
    extra = tuple(m for m in (disclosure, monitor) if m not in driver.NODE_MODULES)
    if not extra:
        yield
        return
    modules = tuple(driver.NODE_MODULES) + extra

    @lru_cache(maxsize=8)
    def driver_for(cached=False, swaps=()):
        return driver.build_driver(modules=modules, cached=cached, swaps=swaps)

    monkeypatch.setattr(driver, "driver_for", driver_for)
    yield


def fresh_demo(tmp_path: Path, keep_log: bool = False) -> Path:
    shutil.copytree(DEMO / ".planning", tmp_path / ".planning")
    if not keep_log:
        (tmp_path / ".planning" / "sessions" / "current" / "session.log").unlink()
    return tmp_path


def test_a_session_is_seeded_from_the_log_and_grows_by_recorded_rounds(tmp_path):
    session = Session(fresh_demo(tmp_path, keep_log=True), overrides=QUIET)
    # the demo's config keeps 3 rounds verbatim (state.maxHistoryRounds): round 1 of its log starts folded
    assert [r.index for r in session.rounds] == [2, 3, 4] and session.folded_rounds == (1,)
    assert session.summary.startswith("Rolling summary of earlier rounds:\n"
                                      "- Round 1 (lines 1-4): Create the users table with a unique email index.")
    assert session.summary.endswith("\n(1 round, 1-1)")  # the counts after the lines: a fold only appends
    first = session.next_context("Fix the 404 on a bad password")
    assert "# User Request\n\nFix the 404 on a bad password" in first.context
    assert "Run the tests." in first.context  # round 4 of the log, in the history
    assert "- Round 1 (lines 1-4): Create the users table" in first.context  # the summary rides along
    session.record(42, "Changed NotFound to Unauthorized in src/todo/api/auth.py.")
    assert [r.index for r in session.rounds] == [2, 3, 4, 5]
    assert session.rounds[-1].messages[1].usage == {"completion_tokens": 42}
    second = session.next_context("Now add the refresh endpoint")
    assert "Changed NotFound to Unauthorized" in second.context  # the recorded answer rides along
    assert "Fix the 404 on a bad password" in second.context  # as history now
    assert session.monitor.rounds == 4  # conversation rounds carried verbatim (round 1 is summary)
    assert session.records[0].response_tokens == 42


def test_the_driver_is_built_once_and_reused_across_rounds(tmp_path):
    session = Session(fresh_demo(tmp_path), overrides=QUIET)
    session.next_context("one")
    first = driver.default_driver()
    session.record(10, "ok")
    session.next_context("two")
    assert driver.default_driver() is first


def test_record_needs_a_round_and_a_token_count(tmp_path):
    session = Session(fresh_demo(tmp_path), overrides=QUIET, seed_history=False)
    with pytest.raises(CtxEngineError, match=r"call next_context\(request\) first"):
        session.record(10)
    session.next_context("one")
    with pytest.raises(CtxEngineError, match="response_tokens must be a non-negative int"):
        session.record(-1)


def test_the_rolling_summary_carries_over(tmp_path):
    # a threshold no projection stays above: every build folds all but the last round it carried
    session = Session(fresh_demo(tmp_path), overrides={**QUIET, "monitor.thresholdRounds": 10**6,
                                                        "monitor.keepRounds": 1})
    for number in range(1, 4):
        session.next_context(f"Request number {number}: edit src/module_{number}.py")
        session.record(20, f"Edited src/module_{number}.py as asked. Detail ZETA{number} stays verbatim only.")
    # round 1's build had no history, round 2's one round (nothing older to fold); round 3's folded round 1
    assert session.folded_rounds == (1,) and [r.index for r in session.rounds] == [2, 3]
    assert session.summary.startswith("Rolling summary of earlier rounds:\n- Round 1: Request number 1")
    result = session.next_context("Request number 4")
    assert "Rolling summary of earlier rounds:\n- Round 1" in result.context and "\n(1 round, 1-1)" in result.context
    assert "ZETA1" not in result.context  # round 1 is its summary line: the first sentence only
    assert "Edited src/module_1.py as asked" in result.context
    # the pipeline folds now what the projection calls for: round 2 becomes a summary line in
    # this very build, round 3 stays verbatim, and the ledger says why
    assert "ZETA2" not in result.context and "Edited src/module_2.py as asked" in result.context
    assert "ZETA3" in result.context
    folds = [e for e in result.ledger if e.step == "preventive_compaction"]
    assert folds and folds[0].action == "compacted" and "more rounds <= monitor.thresholdRounds" in folds[0].reason
    assert result.truncation["triggered"] and result.truncation["reason"] in ("preventive", "soft", "hard")
    assert session.folded_rounds == (1, 2) and [r.index for r in session.rounds] == [3]
    session.record(5, "done")
    after = session.next_context("Request number 5")
    assert "Rolling summary of earlier rounds:\n- Round 1" in after.context and "\n(2 rounds, 1-2)" in after.context
    assert "- Round 2: Request number 2: edit src/module_2.py" in after.context
    assert "ZETA2" not in after.context
    assert "ZETA3" not in after.context and "Edited src/module_3.py as asked" in after.context  # folded this build


# ----------------------------------------------------------------------------- the 30-round simulation

_VOCAB = ("the login handler returns a token and rotates the refresh token while the database keeps each "
          "user session hashed with argon2 so the endpoint answers json errors with a status code and the "
          "test client checks every header body and rate limit attempt").split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(words)) + "."


def simulate(project: Path, threshold: int, rounds: int = 30) -> Session:
    """A session whose rounds grow: round i asks 15 + 3i words and is answered in 50 + 10i."""
    rng = random.Random(20261101)
    session = Session(project, overrides={**QUIET, "monitor.thresholdRounds": threshold},
                      max_tokens=8000, reserve_tokens=1600, seed_history=False)
    for number in range(1, rounds + 1):
        session.next_context(f"Round {number}: {_text(rng, 15 + 3 * number)}")
        answer = _text(rng, 50 + 10 * number)
        session.record(len(answer.split()) * 4 // 3, answer)
    return session


def test_a_30_round_session_compacts_before_any_round_would_exceed_its_budget(tmp_path):
    # Without preventive compaction (a threshold no projection reaches), some round's
    # assembled context goes over the budget and truncation has to cut it.
    unwatched = simulate(fresh_demo(tmp_path / "a"), threshold=-1)
    over = [r.round for r in unwatched.records if r.initial_tokens > r.available_tokens]
    assert over, "the simulation must outgrow the budget when nothing is folded"
    first_over = over[0]
    assert not any(r.compaction["active"] for r in unwatched.records)

    watched = simulate(fresh_demo(tmp_path / "b"), threshold=2)
    print("\n30-round session, maxTokens 8000, reserveTokens 1600 (available 6400), monitor.thresholdRounds 2")
    print(watched.utilisation_table())
    print(f"without preventive compaction the assembled context first exceeds the budget in round {first_over}")
    compacted = [r.round for r in watched.records if r.compaction["active"]]
    assert compacted, "the monitor must call for compaction"
    print(f"preventive compaction first ran in round {compacted[0]} (rounds {compacted})")
    assert compacted[0] < first_over
    # every round of the watched session fits, before and after truncation: no hard cut is ever forced
    for record in watched.records:
        assert record.initial_tokens <= record.available_tokens, record
        assert not record.over_budget and record.total_tokens <= record.available_tokens
    # the first compaction happened while the context still fit, with the projection at the threshold
    first = watched.records[compacted[0] - 1]
    assert first.monitor["projected_rounds"] <= 2 and first.initial_tokens <= first.available_tokens
    assert "monitor.thresholdRounds 2" in first.compaction["reason"]
    # and the rolling summary holds every folded round, once, in order
    assert list(watched.folded_rounds) == sorted(set(watched.folded_rounds))
    assert len(watched.folded_rounds) + len(watched.rounds) == 30

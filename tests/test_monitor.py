"""The budget monitor nodes through the real Hamilton driver, on real session logs."""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import json  # noqa: E402
import math  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hamilton import driver  # noqa: E402

from ctxengine.nodes import budget, config, disclosure, monitor, references, render, state  # noqa: E402
from ctxengine.nodes import settings as settings_nodes  # noqa: E402
from ctxengine.nodes.lib import sessions as session_lib  # noqa: E402
from ctxengine.nodes.types import Message, Round  # noqa: E402

OUTPUTS = ["round_token_use", "budget_monitor", "preventive_compaction", "budget_report", "history_section",
           "token_counter", "session_history", "monitor_report"]
BASE = {"budget.maxTokens": 8000, "budget.reserveTokens": 1600, "state.includeGit": False,
        "state.includeEnvironment": False, "references.core": []}

_DRIVER = driver.Builder().with_modules(config, settings_nodes, references, state, disclosure, render, budget, monitor).build()


def run(project: Path, request: str = "Next step", **overrides) -> dict:
    settings = {**BASE, **{k.replace("__", "."): v for k, v in overrides.items()}}
    return _DRIVER.execute(OUTPUTS, inputs={"project_dir": str(project), "overrides": settings, "user_request": request})


def session_log(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / ".planning" / "sessions" / "current" / "session.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return tmp_path


def test_usage_fields_give_each_rounds_tokens(tmp_path):
    # rounds of 100, 200 and 400 tokens, all from usage fields (no text is counted)
    lines = []
    for number, (user, prompt, completion) in enumerate([(50, 30, 20), (120, 50, 30), (100, 200, 100)], 1):
        lines.append({"round": number, "role": "user", "content": f"request {number}", "usage": {"total_tokens": user}})
        lines.append({"round": number, "role": "assistant", "content": f"answer {number}",
                      "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})
    out = run(session_log(tmp_path, lines))
    uses = out["round_token_use"]
    assert [u.tokens for u in uses] == [100, 200, 400]
    assert {u.source for u in uses} == {"usage"}
    m = out["budget_monitor"]
    report, counter = out["budget_report"], out["token_counter"]
    # the base is measured like the budget report: exactly, or by its chars/4 estimate
    history = (counter.count if report.exact else counter.estimate)(out["history_section"].content)
    base = report.total_tokens - history
    # by hand: cumulative = base + 700; remaining = 6400 - cumulative; growth = 700 / 3
    assert (m.initial_budget, m.base_tokens, m.cumulative_used) == (6400, base, base + 700)
    assert (m.current_round_used, m.remaining) == (400, 6400 - base - 700)
    assert m.growth_per_round == pytest.approx(700 / 3)
    assert m.projected_rounds == math.floor((6400 - base - 700) / (700 / 3))


def test_without_usage_a_round_is_the_exact_count_of_its_rendered_text(tmp_path):
    out = run(Path(__file__).resolve().parents[1] / "examples" / "demo", state__maxHistoryRounds=10)
    rounds = out["session_history"].rounds
    counter = out["token_counter"]
    assert [u.tokens for u in out["round_token_use"]] == [counter.count(session_lib.render_round(r)) for r in rounds]
    assert {u.source for u in out["round_token_use"]} == {"measured"}
    m = out["budget_monitor"]
    assert m.rounds == 4 and m.current_round_used == out["round_token_use"][-1].tokens
    assert m.cumulative_used == m.base_tokens + sum(u.tokens for u in out["round_token_use"])


def test_rounds_the_state_stage_summarises_count_as_their_summary_line(tmp_path):
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo"
    out = run(demo, state__maxHistoryRounds=1, state__summaryBlock=1)
    rounds = out["session_history"].rounds
    counter = out["token_counter"]
    uses = out["round_token_use"]
    # summary lines are estimated (chars / 4): a long transcript has thousands of them
    expected = sum(counter.estimate(session_lib.round_summary(r)) for r in rounds[:3]) + uses[3].tokens
    assert out["budget_monitor"].history_tokens == expected
    assert expected < sum(u.tokens for u in uses)
    # the pace is still the rounds' full size: new rounds arrive verbatim
    assert out["budget_monitor"].growth_per_round == pytest.approx(sum(u.tokens for u in uses[1:]) / 3)


def test_preventive_compaction_follows_the_threshold(tmp_path):
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo"
    calm = run(demo)
    assert calm["preventive_compaction"]["active"] is False
    assert "> threshold 2" in calm["preventive_compaction"]["reason"]
    projected = calm["budget_monitor"].projected_rounds
    eager = run(demo, monitor__thresholdRounds=projected, monitor__keepRounds=2)["preventive_compaction"]
    assert eager["active"] is True and eager["keep_last"] in (1, 2) and eager["fold"] == 4 - eager["keep_last"]
    assert f"= {projected} more rounds <= monitor.thresholdRounds {projected}" in eager["reason"]
    report = run(demo)["monitor_report"]
    json.dumps(report)
    assert report["initial_budget"] == 6400 and report["preventive_compaction"]["active"] is False


def test_no_session_projects_nothing(tmp_path):
    (tmp_path / ".planning").mkdir()
    out = run(tmp_path)
    m = out["budget_monitor"]
    assert (m.rounds, m.history_tokens, m.projected_rounds, m.current_round_used) == (0, 0, None, 0)
    assert m.remaining == 6400 - out["budget_report"].total_tokens
    assert out["preventive_compaction"]["active"] is False


def test_preventive_compaction_folds_the_history_section_and_writes_the_ledger_entry():
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo"
    settings = {**BASE, "state.maxHistoryRounds": 10, "monitor.thresholdRounds": 10**6, "monitor.keepRounds": 1}
    out = _DRIVER.execute(["sections", "preventively_compacted_sections", "preventive_ledger", "preventive_compaction"],
                          inputs={"project_dir": str(demo), "overrides": settings, "user_request": "Next"})
    decision = out["preventive_compaction"]
    assert decision["active"] and decision["keep_last"] == 1
    before = {s.key: s for s in out["sections"]}
    after = {s.key: s for s in out["preventively_compacted_sections"]}
    assert list(before) == list(after)
    assert all(after[k] is before[k] for k in before if k != "history")  # only the history changes
    history = after["history"].content
    assert history.endswith("\n\n(4 rounds; the last 1 verbatim, 3 older ones folded into summary lines by "
                            "preventive compaction)")  # the counts in a trailer
    assert history.startswith("Earlier rounds, summarised:\n- Round 1") and "### Round 4" in history
    assert "### Round 3" not in history and after["history"].data["verbatim_from"] == 3
    [entry] = out["preventive_ledger"]
    assert (entry.section_key, entry.step, entry.action, entry.reason) == (
        "history", "preventive_compaction", "compacted", decision["reason"])
    assert entry.tokens_after < entry.tokens_before


def test_inactive_compaction_changes_nothing_and_a_rolling_summary_round_stays_verbatim():
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo"
    calm = _DRIVER.execute(["sections", "preventively_compacted_sections", "preventive_ledger"],
                           inputs={"project_dir": str(demo), "overrides": BASE, "user_request": "Next"})
    assert calm["preventively_compacted_sections"] == calm["sections"] and calm["preventive_ledger"] == []
    seeded = _DRIVER.execute(["session_history"], inputs={"project_dir": str(demo), "overrides": BASE,
                                                          "user_request": ""})["session_history"]
    summary = Round(0, (Message("system", "Rolling summary of earlier rounds (9 rounds, 1-9): ALPHA", 0),))
    history = replace(seeded, rounds=(summary, *seeded.rounds))
    settings = {**BASE, "state.maxHistoryRounds": 10, "monitor.thresholdRounds": 10**6, "monitor.keepRounds": 2}
    out = _DRIVER.execute(["preventively_compacted_sections"], overrides={"session_history": history},
                          inputs={"project_dir": str(demo), "overrides": settings, "user_request": "Next"})
    text = next(s for s in out["preventively_compacted_sections"] if s.kind == "history").content
    assert "[session] Rolling summary of earlier rounds (9 rounds, 1-9): ALPHA" in text
    # no kept count lifts a projection over 10**6, so the least (1) is kept
    assert "Earlier rounds, summarised:\n- Round 1" in text and "- Round 3" in text and "(no user request)" not in text
    assert text.index("ALPHA") < text.index("Earlier rounds") < text.index("### Round 4")

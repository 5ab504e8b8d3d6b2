"""The cache-friendly prompt order (issue 13): the stable part first and its exact tokens, the
history that only appends, the messages with their cache breakpoint, the prefix a Session
shares from round to round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import ctxengine  # noqa: E402
from ctxengine.nodes.lib import layout  # noqa: E402
from ctxengine.nodes.lib import sessions as session_lib  # noqa: E402
from ctxengine.nodes.lib.tokens import token_counter_for  # noqa: E402
from ctxengine.nodes.types import Section  # noqa: E402
from ctxengine.session import Session  # noqa: E402
from test_session_api import fresh_demo  # noqa: E402  (the demo's .planning copied)

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "demo"
COUNTER = token_counter_for("cl100k_base")  # the demo's model, gpt-4-turbo
LOG = DEMO / ".planning" / "sessions" / "current" / "session.log"


def demo_copy(root: Path, keep_log: bool = True) -> Path:
    return fresh_demo(root, keep_log)


def test_the_stable_part_comes_first_and_is_counted_exactly(tmp_path):
    result = ctxengine.build_context(demo_copy(tmp_path), "Make a bad password return 401")
    stable, volatile = result.context[:result.stable_chars], result.context[result.stable_chars:]
    for heading in ("# System Reference", "# Output Instructions", "# Reference Documents", "# Current Plan",
                    "# Environment"):
        assert heading in stable, heading
    assert "# Session History" not in stable and "# User Request" not in stable
    assert volatile.startswith("# Session History\n") and "# User Request\n\nMake a bad password return 401" in volatile
    # exact: the stable part ends at a line start, so its tokens and the rest's add up to the total
    assert result.stable_prefix_tokens == COUNTER.count(stable) > 0
    assert result.stable_prefix_tokens + COUNTER.count(volatile) == result.budget.total_tokens
    assert result.as_json()["stable_prefix_tokens"] == result.stable_prefix_tokens


def test_messages_carry_one_cache_breakpoint_at_the_end_of_the_stable_part(tmp_path):
    result = ctxengine.build_context(demo_copy(tmp_path), "Make a bad password return 401")
    system, user = result.messages()
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"] == [{"type": "text", "text": result.context[:result.stable_chars],
                                  "cache_control": {"type": "ephemeral"}}]
    assert user["content"] == [{"type": "text", "text": result.context[result.stable_chars:]}]
    assert "".join(b["text"] for m in (system, user) for b in m["content"]) == result.context
    json.dumps(result.messages())  # plain JSON


def test_documents_disclosed_for_the_request_follow_the_cache_break(tmp_path):
    result = ctxengine.build_context(demo_copy(tmp_path), "Add an index to the database schema")
    at = result.context.index("# Documents for This Request\n\n## Database schema")
    assert at >= result.stable_chars  # a trigger on the request: volatile
    assert result.context.index("## Coding standards") < result.stable_chars  # loaded for the mode: stable
    assert at < result.context.index("# Session History")


def test_a_template_without_the_cache_break_keeps_the_mode_head_stable():
    sections = [Section("plan", "Current Plan", "plan", "- [ ] task", 80, "plan"),
                Section("request", "User Request", "request", "go", 100, "request")]
    stable, volatile = layout.render_parts(sections, "{{{plan.content}}}\n\n{{{userRequest}}}", "HEAD\n\n{{{context}}}\n\nTAIL")
    assert (stable, volatile) == ("HEAD\n\n", "- [ ] task\n\ngo\n\nTAIL\n")
    marked = layout.render_parts(sections, "{{{plan.content}}}\n\n{{{cacheBreak}}}\n{{{userRequest}}}", "{{{context}}}")
    assert marked == ("- [ ] task\n\n", "go\n")
    assert layout.render_context(sections, "{{{plan.content}}}\n\n{{{cacheBreak}}}\n{{{userRequest}}}",
                                 "{{{context}}}") == "- [ ] task\n\ngo\n"


def test_a_new_round_appends_to_the_history_and_the_counts_trail(tmp_path):
    project = demo_copy(tmp_path)
    overrides = {"state.maxHistoryRounds": 1, "state.summaryBlock": 3}  # rounds 1-3 summarised together
    lines = LOG.read_text(encoding="utf-8")
    before = ctxengine.run_nodes(["history_section"], project, overrides=overrides)["history_section"]
    assert before.content.endswith("\n\n(4 rounds: 1-3 summarised, 4 verbatim)")
    extra = ('{"round": 5, "role": "user", "content": "Return 401 on a bad password."}\n'
             '{"round": 5, "role": "assistant", "content": "Done: the handler raises Unauthorized."}\n')
    (project / ".planning" / "sessions" / "current" / "session.log").write_text(lines + extra, encoding="utf-8")
    after = ctxengine.run_nodes(["history_section"], project, overrides=overrides)["history_section"]
    body = before.content.rsplit("\n\n", 1)[0]
    assert after.content.startswith(body + "\n\n### Round 5")  # only appended: the text before stays
    assert after.content.endswith("(5 rounds: 1-3 summarised, 4-5 verbatim)")


def test_older_rounds_are_summarised_in_fixed_blocks():
    starts = [session_lib.verbatim_start(n, 2, 4) for n in range(0, 15)]
    assert starts == [0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12]  # moves every 4th round
    assert all(n - s >= 2 for n, s in zip(range(0, 15), starts) if n >= 2)  # at least 2 verbatim
    assert [session_lib.verbatim_start(n, 2, 1) for n in (1, 2, 3, 9)] == [0, 0, 1, 7]
    assert layout.shared_prefix_length([1, 2, 3, 4], [1, 2, 9]) == 2 and layout.shared_prefix_length([], [1]) == 0


def test_a_session_shares_at_least_90_percent_of_its_previous_context_while_only_the_history_grows(tmp_path):
    session = Session(demo_copy(tmp_path, keep_log=False), max_tokens=16000, seed_history=False)
    for number in range(1, 7):
        session.next_context(f"Round {number}: tidy the wording of the handler's docstring, part {number}.")
        session.record(40, f"Reworded part {number} of the docstring; nothing else changed in round {number}.")
    records = session.records
    assert records[0].shared_prefix_tokens is None and records[0].stable_prefix_tokens > 0
    for previous, record in zip(records, records[1:]):
        assert record.folded == 0 and not record.over_budget
        assert record.stable_prefix_tokens <= record.shared_prefix_tokens <= record.total_tokens
        assert record.shared_prefix_tokens >= 0.9 * previous.total_tokens, (record.round, record.shared_prefix_tokens)


def test_cli_format_messages(tmp_path):
    project = demo_copy(tmp_path)
    done = subprocess.run([sys.executable, "-m", "ctxengine", "build", str(project), "--request", "Fix the login",
                           "--format", "messages"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert messages[1]["content"][0]["text"].rstrip().endswith("risky is said plainly.")
    assert "tokens" in done.stderr  # the budget line, as with --format text

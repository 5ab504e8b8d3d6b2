"""Cuts that keep the current task: priority decides the order of cuts across pools, a plan cut
down keeps its task list, and no cut ends inside a code line, an @ line or a table row.

A GSD-like project is written in tmp_path (STATE.md, a ROADMAP.md with ten finished phases, a
phase folder with a done, an in-progress and a pending PLAN, five research documents loaded as
references) and built with the real driver and real tiktoken counts."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import ctxengine
from ctxengine.nodes.lib import plan as P
from ctxengine.nodes.lib.summarize.fit import fit_tokens
from ctxengine.nodes.lib.summarize.plan import plan_summary
from ctxengine.nodes.lib import truncate as T
from ctxengine.nodes.lib.tokens import token_counter_for

from conftest import CORPUS_PLANNING, write_project, needs_shared

COUNTER = token_counter_for("cl100k_base")
MARKER = re.compile(r"^\[… .*\]$|^\s*⋮ \d+ lines? left out$")  # an elision note; a code block's gap marker

# ----------------------------------------------------------------------------- the GSD-like project

FINISHED = ["Scaffold", "Registry", "Transport", "Clips", "Tracks", "Devices", "Mixer", "Browser", "Automation",
            "Packaging"]
TASKS = [
    ("Task 1: Register the reconnect handler", "AbletonMCP_Remote_Script/registry.py, AbletonMCP_Remote_Script/__init__.py",
     "python -m pytest tests/test_registry.py -k reconnect -q",
     "The registry exposes reconnect() and the handler is listed in COMMANDS (RECONNECT-711)."),
    ("Task 2: Retry socket writes with backoff", "AbletonMCP_Remote_Script/transport.py",
     "python -m pytest tests/test_transport.py -q",
     "A dropped socket is retried 3 times with 0.2/0.4/0.8 s backoff (BACKOFF-3x)."),
    ("Task 3: Surface reconnect state in the MCP server", "MCP_Server/server.py, MCP_Server/status.py",
     "python -m pytest tests/test_server_status.py -q",
     "get_status reports connected/reconnecting/down with the last error (STATUS-42)."),
]

STATE = """# Project State

## Current Position

Phase: 11 of 12 (Remote script hardening)
Plan: 2 of 3
Status: In progress
Last activity: 2026-11-30 — finished 11-01 (heartbeat)
"""


def roadmap() -> str:
    out = ["# Roadmap: Ableton MCP", "", "## Phases", ""]
    out += [f"- [x] **Phase {n}: {name}** — the {name.lower()} layer (completed 2026-0{1 + n % 9}-1{n % 9})"
            for n, name in enumerate(FINISHED, start=1)]
    out += ["- [ ] **Phase 11: Remote script hardening** — reconnects, timeouts", "- [ ] **Phase 12: Live sets**", "",
            "## Phase Details", ""]
    for n, name in enumerate(FINISHED, start=1):
        out += [f"### Phase {n}: {name}", f"**Goal**: The {name.lower()} layer works end to end (ROADMAP-DONE-{n:02d}).",
                "**Success Criteria**:", f"  1. Every {name.lower()} command round-trips through the socket in 50 ms.",
                f"  2. Errors from the {name.lower()} layer name the command, the track and the clip index.",
                f"  3. The {name.lower()} commands are listed by get_capabilities with their arguments.",
                "", f"- [x] {n:02d}-01-PLAN.md -- the {name.lower()} work",
                f"- [x] {n:02d}-02-PLAN.md -- the {name.lower()} tests", ""]
    return "\n".join(out)


def gsd_plan(number: int, tasks) -> str:
    out = ["---", "phase: 11-remote-script-hardening", f"plan: {number:02d}", "type: execute", f"wave: {number}",
           "depends_on: []", "autonomous: true", "---", "", "<objective>",
           f"Make the remote script reconnect on its own after Live restarts (plan {number}).", "",
           "Purpose: a dropped socket no longer needs a manual restart of the MCP server.", "</objective>", "",
           "<execution_context>", "@/Users/dev/.claude/get-shit-done/workflows/execute-plan.md", "</execution_context>",
           "", "<context>", "@.planning/PROJECT.md", "@.planning/ROADMAP.md", "@.planning/STATE.md", "</context>", "",
           "<tasks>", ""]
    for name, files, verify, done in tasks:
        out += ['<task type="auto">', f"  <name>{name}</name>", f"  <files>{files}</files>", "  <action>",
                f"    Add the code for {name.split(': ')[1].lower()}. Keep the public API unchanged and log every",
                "    state change at INFO level so the Live log shows what happened.", "", "    ```python",
                "    from AbletonMCP_Remote_Script.registry import register, COMMANDS",
                '    @register("reconnect")', "    def reconnect(ctx):", "        return ctx.transport.reopen(timeout=2.0)",
                "    ```", "", "    | state | meaning |", "    |---|---|", "    | reconnecting | retrying with backoff |",
                "  </action>", f"  <verify>{verify}</verify>", f"  <done>{done}</done>", "</task>", ""]
    return "\n".join(out + ["</tasks>", ""])


def research(i: int, priority: int | None) -> str:
    front = f"---\ntitle: Research {i}\n" + (f"priority: {priority}\n" if priority is not None else "") + "---\n"
    body = [f"# Research note {i}: socket stacks", ""]
    for k in range(8):
        body += [f"## Finding {i}.{k}", "", f"Finding {i}.{k} compares asyncio, trio and raw sockets for the remote "
                 f"script (RESEARCH-{i}{k:02d}). The raw socket wins on latency but needs manual framing. " * 2, ""]
    return front + "\n".join(body)


def gsd_project(root: Path, research_priority: int | None = None) -> Path:
    phase = ".planning/phases/11-remote-script-hardening/"
    files = {
        ".planning/STATE.md": STATE,
        ".planning/ROADMAP.md": roadmap(),
        phase + "11-01-PLAN.md": gsd_plan(1, TASKS[:1]),
        phase + "11-01-SUMMARY.md": "# Phase 11 Plan 01: Heartbeat every 5 s keeps the socket warm\n",
        phase + "11-02-PLAN.md": gsd_plan(2, TASKS),
        phase + "11-03-PLAN.md": gsd_plan(3, [("Task 1: Timeouts on every command", "MCP_Server/server.py",
                                               "pytest -q", "Every command times out after 5 s.")]),
        ".planning/config.json": {"references": {"project": [f"research/R{i}.md" for i in range(1, 6)]}},
    }
    files.update({f".planning/research/R{i}.md": research(i, research_priority) for i in range(1, 6)})
    return write_project(root, files)


def build(root: Path, max_tokens: int, **overrides):
    return ctxengine.build_context(str(root), request="Continue plan 11-02",
                                   overrides={"budget.maxTokens": max_tokens, "budget.reserveTokens": max_tokens // 5,
                                              "state.includeGit": False, **overrides})


def _over(entry) -> int:
    """How far over the target the context was when ``entry`` was made (falls as the cut goes on)."""
    found = re.search(r"([\d,]+) tokens over the target", entry.reason)
    return int(found.group(1).replace(",", "")) if found else -1


def _acted(result, key_part: str) -> list:
    """The ledger entries (but refills) that reduced the sections whose key is or holds ``key_part``."""
    return [e for e in result.ledger if (e.section_key == key_part or "/" in key_part and key_part in e.section_key)
            and e.action != "kept" and "refilled" not in e.reason]


# ----------------------------------------------------------------------------- 1. priority decides the order


@pytest.mark.parametrize("max_tokens", [2500, 4000, 8000])
def test_the_current_plan_keeps_its_tasks_while_research_and_roadmap_go_first(tmp_path, max_tokens):
    result = build(gsd_project(tmp_path), max_tokens)
    assert result.budget.total_tokens <= result.budget.available_tokens
    plan = next(s for s in result.sections if s.key == "plan")
    for name, files, verify, done in TASKS:  # every task's title, files, verify and done line
        for line in (f"<name>{name}</name>", f"<files>{files}</files>", f"<verify>{verify}</verify>",
                     f"<done>{done}</done>"):
            assert line in plan.content and line in result.context
    research = _acted(result, "research/R")
    roadmap_cuts = _acted(result, "roadmap")  # the roadmap (finished phases) is a section of its own
    plan_cuts = _acted(result, "plan")
    for entry in plan_cuts:  # the plan only once everything of a lower priority had given
        assert all(_over(r) > _over(entry) for r in research + roadmap_cuts)
    assert "Position" in plan.content and "- [>] 11-02" in plan.content
    if max_tokens == 8000:  # everything fits (the roadmap may be compacted to the soft limit)
        assert not research and not plan_cuts
        return
    assert research and roadmap_cuts  # the research documents and the roadmap gave first
    if max_tokens == 2500:
        assert {e.section_key for e in research if e.action == "dropped"} == {
            f"ref:.planning/research/R{i}.md" for i in range(1, 6)}
        assert [e.action for e in plan_cuts] == ["summarized"]
        assert "@.planning/PROJECT.md" not in plan.content and "@register" not in plan.content  # context and code first
    else:  # 4000: research summarized, the roadmap cut, the current plan whole
        assert plan_cuts == [] and "@.planning/PROJECT.md" in plan.content


def test_a_priority_80_plan_waits_for_priority_70_documents_in_another_pool(tmp_path):
    # the plan pool is far over its share, the references pool (research at 70) far under: the
    # pools must not send the plan before the documents of a lower priority
    pools = {"budget.pools": {"system": 0.02, "references": 0.7, "plan": 0.01, "environment": 0.01, "history": 0.01,
                              "request": 0.02}}
    result = build(gsd_project(tmp_path, research_priority=70), 2000, **pools)
    assert result.pools["plan"]["debt"] > 0
    research = _acted(result, "research/R")
    plan_cuts = _acted(result, "plan")
    assert plan_cuts, "the plan had to give too"
    assert {e.section_key for e in research if e.action == "dropped"} == {
        f"ref:.planning/research/R{i}.md" for i in range(1, 6)}
    assert all(_over(r) > _over(p) for r in research for p in plan_cuts)
    assert all("priority 70" in e.reason for e in research) and "priority 80" in plan_cuts[0].reason


def test_within_one_priority_the_sections_share_the_cut(tmp_path):
    result = build(gsd_project(tmp_path), 4000)
    given: dict[str, int] = {}
    for e in _acted(result, "research/R"):
        given[e.section_key] = given.get(e.section_key, 0) + e.tokens_before - e.tokens_after
    assert len(given) == 5 and 0 < max(given.values()) <= 3 * min(given.values())  # none whole, none bled dry


# ----------------------------------------------------------------------------- 2. a plan cut down keeps its task list


def _skeleton(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n")
            if re.match(r"^\s*<(name|files|verify|done)>.*</\1>\s*$", line)]


@needs_shared
def test_a_real_gsd_plan_summary_keeps_every_task_skeleton_and_drops_context_and_code_first():
    plans = sorted(p for p in CORPUS_PLANNING.glob("*/.planning/phases/*/*-PLAN.md")
                   if "<verify>" in p.read_text(encoding="utf-8") and "```" in p.read_text(encoding="utf-8"))
    assert plans, "the shared corpus has GSD plans with <verify> blocks and code"
    for path in plans[:4]:
        text = path.read_text(encoding="utf-8")
        skeleton = _skeleton(text)
        full = COUNTER.count(text)
        budget = max(COUNTER.count("\n".join(skeleton)) * 2, full // 3)
        if budget >= full:
            continue
        out = plan_summary(text, budget, COUNTER)
        assert COUNTER.count(out) <= budget
        for line in skeleton:
            assert line in out, (path.name, line)
        assert not re.search(r"^\s*@\S", out, re.M), path.name  # @context lines went first
        assert out.count("```") % 2 == 0
        _assert_whole_lines(out, text, path.name)


ARTICLE = """# Plan: Auth rewrite

## Tasks
- [x] T1 Create the users table
  Done in migration 0003.
- [~] T2 Implement the login endpoint
  Files: src/auth/login.py
  Use argon2id; return 401 on a bad password, never 404.
  Verify: pytest tests/test_login.py -q
  Done: a bad password gets 401
  ```python
  def login(user, password): ...
  ```
- [/] T3 Add the refresh endpoint
  Files: src/auth/refresh.py
  Verify: pytest tests/test_refresh.py -q
- [ ] T4 Write the docs
  Prose about the docs that can go.
- [-] T5 Old idea
"""


def test_article_plan_summary_keeps_files_verify_done_of_the_tasks_in_progress():
    out = plan_summary(ARTICLE, 140, COUNTER)
    assert COUNTER.count(out) <= 140 < COUNTER.count(ARTICLE)
    for line in ("- [~] T2 Implement the login endpoint", "  Files: src/auth/login.py",
                 "  Verify: pytest tests/test_login.py -q", "  Done: a bad password gets 401",
                 "- [/] T3 Add the refresh endpoint", "  Verify: pytest tests/test_refresh.py -q"):
        assert line in out.split("\n")
    assert "def login" not in out and "Created the users" not in out and "migration 0003" not in out
    assert "Tasks: 1 done / 2 in progress / 1 pending / 1 cancelled" in out
    _assert_whole_lines(out, ARTICLE, "article plan")


def test_one_task_box_parser_for_the_plan_stage_and_the_summary():
    assert not hasattr(importlib.import_module("ctxengine.nodes.lib.summarize.plan"), "plan_tasks")  # the duplicate parser is gone
    statuses = {box.mark: box.status for box in P.task_boxes(ARTICLE.split("\n"))}
    assert statuses == {"x": "done", "~": "in_progress", "/": "in_progress", " ": "pending", "-": "cancelled"}
    parsed = P.parse_plan(ARTICLE, "plan.md")
    assert parsed.warnings == ()  # [~] and [/] are known boxes
    assert [t.status for t in parsed.tasks] == ["done", "in_progress", "in_progress", "pending", "cancelled"]
    assert parsed.counts == {"done": 1, "in_progress": 2, "pending": 1, "cancelled": 1}
    # the summary reads the same boxes the same way: its count line is the plan stage's
    assert P.count_line(parsed.counts) in plan_summary(ARTICLE, 60, COUNTER)
    odd = P.parse_plan("- [?] T9 odd box\n", "plan.md")
    assert odd.tasks[0].status == "pending" and "plan.md:1: unknown task box [?]" in odd.warnings[0]


# ----------------------------------------------------------------------------- 3. whole lines only


def _assert_whole_lines(out: str, source: str, what: str) -> None:
    """Every line of ``out`` is a whole line of ``source``, an elision marker, or (a summary of
    prose) whole sentences of a prose line; never part of a code line, an @ line or a table row."""
    lines = set(source.split("\n")) | {line.strip() for line in source.split("\n")}
    in_fence = False
    for line in out.split("\n"):
        fence = re.match(r"^\s*(`{3,}|~{3,})", line)
        if not line.strip() or MARKER.match(line) or line in lines or line.strip() in lines:
            in_fence = in_fence != bool(fence)
            continue
        assert not (in_fence or fence or re.match(r"^\s*(@\S|\|)", line)), (what, line)
        assert re.match(r"^(Tasks|Plans): \d+ done", line) or re.search(r"[.!?:)]$", line.rstrip()) \
            or re.match(r"^---$|^\w[\w ]*: ", line), (what, line)  # no prose line ends mid-sentence


@pytest.mark.parametrize("max_tokens", [2000, 2500])
def test_no_reduced_section_ends_inside_a_code_line_an_at_line_or_a_table_row(tmp_path, max_tokens):
    root = gsd_project(tmp_path)
    result = build(root, max_tokens)
    original = {s.key: s for s in ctxengine.run_nodes(["truncation_sections"], str(root), "Continue plan 11-02", overrides={
        "budget.maxTokens": max_tokens, "budget.reserveTokens": max_tokens // 5, "state.includeGit": False})[
        "truncation_sections"]}
    reduced = {e.section_key for e in result.ledger if e.action in ("summarized", "cut")}
    assert "plan" in reduced
    for section in result.sections:
        if section.key in reduced:
            _assert_whole_lines(section.content, original[section.key].content, section.key)


CODE_DOC = "\n".join(
    ["# Guide", "", "Intro sentence one. Intro sentence two is longer than the first one.", ""]
    + [f"@.planning/phases/0{i}/PLAN.md" for i in range(4)] + [""]
    + ["| col a | col b |", "|---|---|"] + [f"| row {i} value with several words | {i * 7} |" for i in range(12)] + [""]
    + ["```python"] + [f"from AbletonMCP_Remote_Script.registry import handler_{i}  # a long import line {i}"
                       for i in range(25)] + ["```", ""]
    + [f"Closing paragraph {i}. It has two sentences." for i in range(6)])


@pytest.mark.parametrize("shape", T.SHAPES)
def test_text_cuts_end_at_whole_lines_and_keep_fences_closed(shape):
    total = COUNTER.count(CODE_DOC)
    for keep in range(30, total, 23):
        cut = T.cut_text(CODE_DOC, keep, COUNTER, shape, T.Origin("guide.md", 1))
        assert cut.tokens <= keep or cut.text.startswith("[…")
        _assert_whole_lines(cut.text, CODE_DOC, f"{shape} {keep}")
        assert sum(1 for line in cut.text.split("\n") if line.startswith("```")) % 2 == 0, (shape, keep)


def test_a_first_line_too_long_for_the_budget_is_cut_at_a_sentence_or_not_at_all():
    prose = "The first sentence is short. " + "The second one goes on and on " * 20 + "until it ends."
    cut = T.cut_text(prose + "\nnext line", 30, COUNTER, "head")
    assert cut.text.startswith("The first sentence is short.\n[…")
    code = "from AbletonMCP_Remote_Script.registry import " + ", ".join(f"name_{i}" for i in range(60))
    cut = T.cut_text("```python\n" + code + "\n```\nnext", 30, COUNTER, "head")
    assert "AbletonMCP" not in cut.text and MARKER.match(cut.text.split("\n")[0])
    for text in ("@.planning/" + "x" * 400, "| " + " | ".join(f"cell {i}" for i in range(80)) + " |"):
        assert fit_tokens(text, 20, COUNTER) == ""  # a line kept whole or not at all
    fenced = "```python\n" + "\n".join(f"value_{i} = compute({i})" for i in range(80)) + "\n```"
    head = fit_tokens(fenced, 40, COUNTER)
    assert head.startswith("```python\nvalue_0") and head.endswith("\n```") and COUNTER.count(head) <= 40

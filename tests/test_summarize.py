"""Summarizers (nodes/lib/summarize/, nodes/summarize.py): budgets by exact tiktoken count,
markdown structure kept, key sentences, plan / diff / history summaries, the Hamilton variants."""

from __future__ import annotations

import os

os.environ["HAMILTON_AUTOLOAD_EXTENSIONS"] = "0"

import glob  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hamilton import driver  # noqa: E402

import ctxengine.nodes.summarize as summarize_nodes  # noqa: E402
from ctxengine.nodes.lib.summarize import BuiltinSummarizer, METHODS, Summarizer  # noqa: E402
from ctxengine.nodes.lib.summarize.diff import diff_summary  # noqa: E402
from ctxengine.nodes.lib.summarize.fit import fit_tokens  # noqa: E402
from ctxengine.nodes.lib.summarize.frontmatter import compact_frontmatter  # noqa: E402
from ctxengine.nodes.lib.summarize.markdown import extractive_summary, headings_summary, summarize_text  # noqa: E402
from ctxengine.nodes.lib.summarize.plan import plan_summary  # noqa: E402
from ctxengine.nodes.lib.summarize.scoring import fact_tokens, sentence_scores  # noqa: E402
from ctxengine.nodes.lib.markdown import headings  # noqa: E402
from ctxengine.nodes.lib.tokens import token_counter_for  # noqa: E402
from ctxengine.nodes.types import ConfigError, Section, Source  # noqa: E402

from conftest import CORPUS_PLANNING, needs_shared  # noqa: E402

COUNTER = token_counter_for("cl100k_base")


def count(text: str) -> int:
    return COUNTER.count(text)


def section(content: str, kind: str = "reference", **data) -> Section:
    return Section(
        key=f"ref:{kind}.md",
        title="Doc",
        kind=kind,
        content=content,
        priority=60,
        pool="references",
        sources=(Source("file", f"{kind}.md"),),
        data=data,
    )


DOC = """---
title: Storage design
status: draft
tags: [storage, cache, disk]
---
# Storage design

The storage layer keeps every record on local disk. It favours simple files over a database.

## Cache

The cache sits in front of the disk reader. It holds the hottest pages in memory.

It is what it is. We think this is quite nice overall. The cache writer lives in nodes/lib/cache.py and calls `CacheStore.flush_all` every 30 seconds. Things are generally fine here. The retry budget is set by max_retries in config/settings.yaml. Most people seem happy with it.

## Recovery

Recovery replays the journal after a crash. It never rewrites committed pages.

Honestly this is just how things go. People like it a lot. Overall it works well for everyone involved. Another sentence with little to say.

### Journal format

Each journal entry is one JSON line. Entries carry a sequence number.

More filler that does not matter at all. It goes on and on without saying much.
"""

OUTLINE_FIRST_PARAGRAPHS = [
    "The storage layer keeps every record on local disk. It favours simple files over a database.",
    "The cache sits in front of the disk reader. It holds the hottest pages in memory.",
    "Recovery replays the journal after a crash. It never rewrites committed pages.",
    "Each journal entry is one JSON line. Entries carry a sequence number.",
]
HEADINGS = ["# Storage design", "## Cache", "## Recovery", "### Journal format"]
FIRST_SENTENCES = [p.split(". ")[0] + "." for p in OUTLINE_FIRST_PARAGRAPHS]
SECOND_SENTENCES = [p.split(". ")[1] for p in OUTLINE_FIRST_PARAGRAPHS]
FRONTMATTER = "---\ntitle: Storage design\nstatus: draft\ntags: [storage, cache, disk]\n---"


def outline(parts_per_heading: list[str]) -> str:
    body = [FRONTMATTER]
    for heading, part in zip(HEADINGS, parts_per_heading):
        body.append(heading)
        if part:
            body.append(part)
    return "\n\n".join(body)


# ----------------------------------------------------------------------------- extractive


def test_text_that_fits_is_returned_unchanged():
    assert extractive_summary(DOC, count(DOC), COUNTER) == DOC
    assert headings_summary(DOC, count(DOC) + 10, COUNTER) == DOC


def test_extractive_keeps_frontmatter_headings_and_first_paragraphs():
    budget = count(outline(OUTLINE_FIRST_PARAGRAPHS)) + 4
    out = extractive_summary(DOC, budget, COUNTER)
    assert count(out) <= budget
    assert out.startswith(FRONTMATTER)
    for heading in HEADINGS:
        assert heading in out.split("\n")
    for paragraph in OUTLINE_FIRST_PARAGRAPHS:
        assert paragraph in out
    assert "It is what it is." not in out
    # headings stay in document order
    positions = [out.index(h + "\n") for h in HEADINGS]
    assert positions == sorted(positions)


def test_extractive_prefers_sentences_with_paths_and_identifiers_over_filler():
    key1 = "The cache writer lives in nodes/lib/cache.py and calls `CacheStore.flush_all` every 30 seconds."
    key2 = "The retry budget is set by max_retries in config/settings.yaml."
    budget = count(outline(OUTLINE_FIRST_PARAGRAPHS)) + count(key1) + count(key2) + 4
    out = extractive_summary(DOC, budget, COUNTER)
    assert count(out) <= budget
    assert key1 in out and key2 in out
    for filler in ("It is what it is.", "We think this is quite nice overall.", "People like it a lot.", "More filler"):
        assert filler not in out
    # chosen sentences keep their original order
    assert out.index(key1) < out.index(key2)


def test_sentence_scores_rank_identifiers_paths_and_numbers_above_filler():
    sentences = [
        "It is what it is.",
        "We think this is quite nice overall.",
        "The cache writer lives in nodes/lib/cache.py and calls `CacheStore.flush_all` every 30 seconds.",
        "Honestly this is just how things go.",
        "The retry budget is set by max_retries in config/settings.yaml.",
        "People like it a lot.",
    ]
    scores = sentence_scores(sentences)
    assert min(scores[2], scores[4]) > max(scores[0], scores[1], scores[3], scores[5])


def test_extractive_degrades_to_headings_and_first_sentences():
    budget = count(outline(FIRST_SENTENCES)) + 2
    out = extractive_summary(DOC, budget, COUNTER)
    assert count(out) <= budget
    for heading in HEADINGS:
        assert heading in out
    for first in FIRST_SENTENCES:
        assert first in out
    assert sum(second in out for second in SECOND_SENTENCES) < len(SECOND_SENTENCES)


def _bare_headings(text: str) -> list[str]:
    """Headings of a summary with no text under them before the next heading or the end."""
    blocks = [b for b in text.split("\n\n") if b.strip()]
    return [b for i, b in enumerate(blocks) if b.startswith("#")
            and (i + 1 == len(blocks) or blocks[i + 1].startswith("#"))
            and not (i + 1 < len(blocks) and blocks[i + 1].startswith("#" * (b.count("#", 0, b.index(" ")) + 1)))]


def test_extractive_budget_the_outline_would_fill_keeps_sentences_not_bare_headings():
    budget = count(outline(["", "", "", ""])) + 1
    out = extractive_summary(DOC, budget, COUNTER)
    assert count(out) <= budget
    assert "# Storage design" in out
    body = out.split("# Storage design", 1)[1]
    assert any(not line.startswith("#") and line.strip() for line in body.split("\n"))
    assert _bare_headings(body) == []


def test_extractive_tiny_budget_keeps_the_first_part_with_its_text():
    doc = "\n\n".join(f"# Part {i}\n\nBody text of part {i} with several words in it." for i in range(200))
    out = extractive_summary(doc, 30, COUNTER)
    assert count(out) <= 30
    assert out.startswith("# Part 0\n\nBody text of part 0")
    assert _bare_headings(out) == []


def test_extractive_tiny_budget_keeps_a_sentence_with_an_id_under_nested_headings():
    filler = "The worker pool handles the slow jobs for the {t} layer and logs once per batch."
    parts = []
    for i in range(8):
        sentences = [filler.format(t=f"module{i}x{k}") for k in range(4)]
        if i == 3:
            sentences.insert(2, "The schema version of `sessions` is TICKET-4821-a9f3c2; bump it with every migration.")
        parts.append(f"### Topic {i}\n\n" + " ".join(sentences))
    doc = "\n\n".join(parts)
    out = extractive_summary(doc, 48, COUNTER)
    assert count(out) <= 48
    assert "TICKET-4821-a9f3c2" in out
    assert out.startswith("### Topic 3\n\n")
    assert _bare_headings(out) == []


def test_extractive_sentence_with_an_id_in_a_first_paragraph_beats_the_rest_of_it():
    paragraph = ("The export layer owns the batches. It runs at night. It writes one file per batch. "
                 "The lock that serialises exports is named LOCK-77-3fa1b2 and lives in `src/export/lock.py`. "
                 "It retries twice.")
    doc = "# Export\n\n" + paragraph + "\n\n## Later\n\nSomething else happens here every day."
    budget = count("# Export\n\nThe export layer owns the batches. The lock that serialises exports is named "
                   "LOCK-77-3fa1b2 and lives in `src/export/lock.py`.\n\n## Later\n\nSomething else happens here "
                   "every day.") + 2
    out = extractive_summary(doc, budget, COUNTER)
    assert count(out) <= budget
    assert "LOCK-77-3fa1b2" in out
    assert "It retries twice." not in out


def test_sentence_scores_rank_a_fact_like_id_above_the_same_sentence_without_it():
    sentences = [
        "Changes to the export queue in `src/ledger/export.py` need a review quoting the usual ticket.",
        "Changes to the export queue in `src/ledger/export.py` need a review quoting ticket OPS-1432-7f3a9c.",
        "The filler sentence about nothing in particular stays here.",
    ]
    scores = sentence_scores(sentences)
    assert scores[1] > scores[0] + 0.4
    assert [fact_tokens(x) for x in sentences] == [0, 1, 0]
    assert fact_tokens("commit 3f9a2c1d and JIRA-204 and v1.2") == 2  # a hash and a ticket; not a bare version


def test_headings_variant_is_outline_with_first_sentences_only():
    out = headings_summary(DOC, count(DOC) - 1, COUNTER)
    assert out.startswith(FRONTMATTER)
    for heading in HEADINGS:
        assert heading in out
    for first in FIRST_SENTENCES:
        assert first in out
    for second in SECOND_SENTENCES:
        assert second not in out
    assert "CacheStore" not in out


def test_summaries_are_deterministic():
    for budget in (20, 60, 150):
        for fn in (extractive_summary, headings_summary):
            assert fn(DOC, budget, COUNTER) == fn(DOC, budget, COUNTER)
    summarizer = BuiltinSummarizer("extractive")
    assert summarizer.summarize(section(DOC), 80, COUNTER) == summarizer.summarize(section(DOC), 80, COUNTER)


@needs_shared
def test_budgets_hold_on_a_real_document_across_a_range():
    text = (CORPUS_PLANNING / "0xLeathery__helix-staking" / ".planning" / "ROADMAP.md").read_text(encoding="utf-8")
    total = count(text)
    for budget in (0, 1, 3, 10, 25, 60, 150, 400, 1000, 2500, total - 1):
        for method in METHODS:
            out = summarize_text(text, budget, COUNTER, method)
            assert count(out) <= budget, (method, budget)
            if budget >= 400:
                assert out.startswith("# Roadmap: HELIX")


@needs_shared
def test_big_budget_summary_uses_most_of_the_budget():
    text = (CORPUS_PLANNING / "0xLeathery__helix-staking" / ".planning" / "ROADMAP.md").read_text(encoding="utf-8")
    budget = count(text) // 2
    out = extractive_summary(text, budget, COUNTER)
    assert budget * 0.85 <= count(out) <= budget


def test_chinese_document_is_summarized_by_sentences():
    doc = (
        "# 架构\n\n系统由三个部分组成。第一部分负责读取文件！第二部分负责解析？第三部分负责输出。\n\n"
        "## 缓存\n\n缓存位于磁盘读取器之前。它在内存中保存最热的页面。\n\n"
        "其他内容没有那么重要。这里还有一些填充的文字。更多的填充文字在这里。\n"
    )
    budget = count("# 架构\n\n系统由三个部分组成。\n\n## 缓存\n\n缓存位于磁盘读取器之前。") + 2
    out = extractive_summary(doc, budget, COUNTER)
    assert count(out) <= budget
    assert "# 架构" in out and "## 缓存" in out
    assert "系统由三个部分组成。" in out and "缓存位于磁盘读取器之前。" in out
    assert "第三部分负责输出。" not in out


def test_tables_keep_their_header_row():
    doc = (
        "# Results\n\nThe table lists each run.\n\n| Run | Time | Result |\n|-----|------|--------|\n"
        + "\n".join(f"| run{i} | {i}.5s | ok |" for i in range(40))
        + "\n\n## Notes\n\nNothing else.\n"
    )
    out = extractive_summary(doc, 80, COUNTER)
    assert count(out) <= 80
    assert "| Run | Time | Result |\n|-----|------|--------|" in out
    assert "| run0 | 0.5s | ok |" in out


@needs_shared
def test_real_long_markdown_at_a_quarter_keeps_every_heading():
    paths = [
        CORPUS_PLANNING / "0xLeathery__helix-staking" / ".planning" / "ROADMAP.md",
        CORPUS_PLANNING / "0xCUB3__wBlock" / ".planning" / "research" / "PITFALLS.md",
        CORPUS_PLANNING / "0xCUB3__wBlock" / ".planning" / "research" / "ARCHITECTURE.md",
        next(iter(sorted((CORPUS_PLANNING / "ai-dynamo__nixl" / ".planning" / "phases").glob("34-*/34-RESEARCH.md")))),
    ]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        budget = count(text) // 4
        out = extractive_summary(text, budget, COUNTER)
        assert count(out) <= budget, path
        kept = {(level, title) for level, title, _ in headings(out)}
        for level, title, _ in headings(text):
            assert (level, title) in kept, (path.name, title)


@needs_shared
def test_500_kb_document_is_summarized_fast():
    parts, size = [], 0
    for name in sorted(glob.glob(str(CORPUS_PLANNING / "*" / ".planning" / "**" / "*.md"), recursive=True)):
        text = Path(name).read_text(encoding="utf-8")
        parts.append(text)
        size += len(text.encode("utf-8"))
        if size > 500_000:
            break
    doc = "\n\n".join(parts)
    assert len(doc.encode("utf-8")) > 500_000
    count("warm up the encoder")
    for budget in (500, 4000, 30000):  # speed is measured by benchmarks, not asserted here
        out = extractive_summary(doc, budget, COUNTER)
        assert count(out) <= budget


def test_frontmatter_is_compacted():
    raw = "title: A very long plan\nmust_haves:\n  truths:\n" + "".join(f"    - truth number {i}\n" for i in range(20))
    raw += "description: " + "word " * 100 + "\n"
    out = compact_frontmatter(raw)
    import yaml

    data = yaml.safe_load(out.strip("-\n"))
    assert data["title"] == "A very long plan"
    assert len(data["must_haves"]["truths"]) <= 9
    assert len(data["description"]) <= 160
    assert len(out) < len(raw) / 2


# ----------------------------------------------------------------------------- plan

PLAN = """# Plan: Auth rewrite

Goal: replace the session-cookie login with JWT tokens across the API.

## Tasks
- [x] T1 Create the users table
  Done in migration 0003; indexes on email.
- [x] T1b Seed the admin account
- [>] T2 Implement the login endpoint
  Use argon2id; return 401 on a bad password, never 404.
  Rate-limit by IP.
- [ ] T3 Write integration tests
  Cover lockout and refresh.
- [-] T4 Old idea nobody wants
- [ ] T5 Update the API docs
"""


def test_plan_summary_keeps_in_progress_task_and_count_drops_done():
    skeleton = plan_summary(PLAN, 70, COUNTER)  # every open task's line before any detail
    assert count(skeleton) <= 70
    for name in ("T2 Implement the login endpoint", "T3 Write integration tests", "T5 Update the API docs"):
        assert name in skeleton
    assert "argon2id" not in skeleton
    out = plan_summary(PLAN, 95, COUNTER)  # then the in-progress task's detail, before done tasks
    assert count(out) <= 95
    assert "- [>] T2 Implement the login endpoint" in out
    assert "Use argon2id; return 401 on a bad password, never 404." in out
    assert "Tasks: 2 done / 1 in progress / 2 pending / 1 cancelled" in out
    for gone in ("T1 Create the users table", "migration 0003", "Seed the admin", "Old idea"):
        assert gone not in out


def test_plan_summary_adds_pending_tasks_when_there_is_room():
    out = plan_summary(PLAN, count(PLAN) - 5, COUNTER)
    assert count(out) <= count(PLAN) - 5
    assert "- [ ] T3 Write integration tests" in out
    assert "- [ ] T5 Update the API docs" in out
    assert "T1 Create the users table" not in out
    small = plan_summary(PLAN, 45, COUNTER)
    assert "T2 Implement the login endpoint" in small
    assert "T5 Update the API docs" not in small


def test_plan_summary_reuses_the_plan_sections_count_line():
    content = PLAN.replace("# Plan: Auth rewrite\n", "# Plan: Auth rewrite\n\nTasks: 2 done / 1 in progress / 2 pending / 1 cancelled\n")
    out = BuiltinSummarizer().summarize(section(content, kind="plan", layout="article"), 80, COUNTER)
    assert count(out) <= 80
    assert out.count("Tasks: 2 done") == 1
    assert "T2 Implement the login endpoint" in out


def test_plan_without_tasks_falls_back_to_the_markdown_summary():
    assert plan_summary(DOC, 60, COUNTER) == extractive_summary(DOC, 60, COUNTER)
    assert plan_summary(DOC, 60, COUNTER, method="headings") == headings_summary(DOC, 60, COUNTER)


# ----------------------------------------------------------------------------- diff and history


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_diff_summary_of_a_real_git_diff_lists_files_with_counts(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "app.py").write_text("a\nb\nc\n")
    (tmp_path / "old.md").write_text("gone\n")
    (tmp_path / "keep.txt").write_text("x\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "init")
    (tmp_path / "app.py").write_text("a\nB\nc\nd\ne\n")
    (tmp_path / "new_module.py").write_text("def f():\n    return 1\n")
    (tmp_path / "old.md").unlink()
    _git(tmp_path, "add", "-A")
    diff = _git(tmp_path, "diff", "--cached")
    out = diff_summary(diff, 60, COUNTER)
    assert count(out) <= 60
    lines = out.split("\n")
    assert "3 files changed, +5/-2" in lines
    assert "M app.py +3/-1" in lines
    assert "A new_module.py +2/-0" in lines
    assert "D old.md +0/-1" in lines
    assert "def f()" not in out


def test_diff_summary_uses_section_data_files_and_keeps_the_branch_line():
    content = "Branch: main at abc1234\nRecent commits:\n  abc1234 fix\n" + "diff --git a/x b/x\n+" * 200
    files = (("src/a.py", 10, 2, "modified"), ("docs/b.md", 3, 0, "added"), ("img.png", None, None, "modified"), ("tmp.txt", None, None, "untracked"))
    out = BuiltinSummarizer("headings").summarize(section(content, kind="git", files=files), 60, COUNTER)
    assert count(out) <= 60
    assert out.startswith("Branch: main at abc1234")
    assert "M src/a.py +10/-2" in out
    assert "A docs/b.md +3/-0" in out
    assert "B img.png (binary)" in out
    assert "? tmp.txt (untracked)" in out


def test_diff_summary_reports_files_it_could_not_list():
    diff = "".join(f"diff --git a/f{i}.py b/f{i}.py\n@@ -1 +1 @@\n-old\n+new\n" for i in range(100))
    out = diff_summary(diff, 40, COUNTER)
    assert count(out) <= 40
    assert out.startswith("100 files changed, +100/-100")
    assert "M f0.py +1/-1" in out
    assert "more files (+" in out


def test_history_fallback_keeps_the_last_lines():
    log = "\n".join(f"round {i}: user asked for change {i}" for i in range(300))
    out = BuiltinSummarizer().summarize(section(log, kind="history"), 50, COUNTER)
    assert count(out) <= 50
    assert out.endswith("round 299: user asked for change 299")
    assert "earlier lines not shown" in out.split("\n")[0]
    assert "round 0:" not in out


def test_fit_tokens_cuts_to_the_exact_budget():
    text = "word " * 5000
    for budget in (1, 7, 100, 999):
        out = fit_tokens(text, budget, COUNTER)
        assert 0 < count(out) <= budget
        assert text.startswith(out)


# ----------------------------------------------------------------------------- the summarizer node


def _summarizer(method: str):
    """The summarizer node's value for a configuration naming ``method`` (a run-time choice)."""
    from ctxengine.api import bundled_example
    from ctxengine.nodes import config as config_nodes, settings as settings_nodes

    dr = driver.Builder().with_modules(config_nodes, settings_nodes, summarize_nodes).build()
    inputs = {"project_dir": str(bundled_example()), "overrides": {"truncation.summarizer": method}}
    return dr.execute(["summarizer"], inputs=inputs)["summarizer"]


@pytest.mark.parametrize("method", ["extractive", "headings"])
def test_the_configuration_selects_the_summarizer(method):
    summarizer = _summarizer(method)
    assert summarizer.method == method and isinstance(summarizer, Summarizer)
    expected = summarize_text(DOC, 60, COUNTER, method)
    assert summarizer.summarize(section(DOC), 60, COUNTER) == expected


def test_the_two_summarizers_differ_on_the_same_section():
    extractive, outline_only = _summarizer("extractive"), _summarizer("headings")
    budget = count(DOC) - 5
    assert "CacheStore" in extractive.summarize(section(DOC), budget, COUNTER)
    assert "CacheStore" not in outline_only.summarize(section(DOC), budget, COUNTER)


def test_summarize_nodes_are_tagged():
    dr = driver.Builder().with_modules(summarize_nodes).build()
    tags = {v.name: v.tags for v in dr.list_available_variables()}
    assert tags["summarizer"]["stage"] == "summarize"


def test_project_driver_gives_a_summarizer_object():
    from ctxengine.driver import build_driver

    overrides = {"truncation.summarizer": "headings"}
    value = build_driver().execute(["summarizer"], inputs={"project_dir": "/", "overrides": overrides,
                                                           "user_request": ""})["summarizer"]
    assert isinstance(value, BuiltinSummarizer) and value.method == "headings"

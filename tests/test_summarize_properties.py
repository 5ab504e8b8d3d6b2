"""Properties of the summarizers on generated markdown (hypothesis): every summary fits its
budget by exact tiktoken count, and the same input always gives the same output."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.nodes.lib.summarize import BuiltinSummarizer, METHODS
from ctxengine.nodes.lib.summarize.diff import diff_file_stats, diff_summary
from ctxengine.nodes.lib.summarize.markdown import summarize_text
from ctxengine.nodes.lib.sentences import split_sentences
from ctxengine.nodes.lib.tokens import token_counter_for
from ctxengine.nodes.types import Section

COUNTER = token_counter_for("cl100k_base")
# CTXENGINE_HYPOTHESIS_EXAMPLES=2000 for a longer hunt
SETTINGS = settings(
    max_examples=int(os.environ.get("CTXENGINE_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

EN_WORDS = st.sampled_from(
    "the cache parser writes reads every record disk token budget section plan driver node "
    "nodes/lib/cache.py CacheStore `flush_all` max_retries 1.2.3 e.g. i.e. 3.14 foo.py "
    "Dr. etc. https://example.com/a.md 42 — (see) \"quoted\"".split()
)
ZH_WORDS = st.sampled_from(["系统", "缓存", "读取", "文件", "解析", "错误", "令牌", "预算", "计划"])
EN_SENTENCE = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(EN_WORDS, min_size=1, max_size=14),
    st.sampled_from([".", "!", "?", "", "..."]),
)
ZH_SENTENCE = st.builds(
    lambda words, end: "".join(words) + end,
    st.lists(ZH_WORDS, min_size=1, max_size=10),
    st.sampled_from(["。", "！", "？", "；", "．", ""]),
)
SENTENCE = st.one_of(EN_SENTENCE, ZH_SENTENCE)
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=6).map(" ".join)
WRAPPED = st.lists(SENTENCE, min_size=2, max_size=6).map("\n".join)
LIST_BLOCK = st.lists(st.tuples(st.sampled_from(["- ", "* ", "1. ", "  - ", "- [ ] ", "- [x] "]), SENTENCE), min_size=1, max_size=6).map(
    lambda items: "\n".join(marker + text for marker, text in items)
)
TABLE = st.lists(st.lists(EN_WORDS, min_size=3, max_size=3), min_size=1, max_size=6).map(
    lambda rows: "| a | b | c |\n|---|---|---|\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows)
)
CODE = st.lists(EN_WORDS, min_size=1, max_size=30).map(lambda ws: "```python\n" + "\n".join(ws) + "\n```")
HEADING = st.builds(
    lambda level, words: "#" * level + " " + " ".join(words),
    st.integers(1, 4),
    st.lists(st.one_of(EN_WORDS, ZH_WORDS), min_size=1, max_size=5),
)
BLOCK = st.one_of(HEADING, PARAGRAPH, WRAPPED, LIST_BLOCK, TABLE, CODE, st.just("---"))
FRONTMATTER = st.one_of(
    st.just(""),
    st.builds(
        lambda title, tags: f"---\ntitle: {title}\ntags: [{', '.join(tags)}]\n---\n",
        st.sampled_from(["Plan", "架构", "Storage: design"]),
        st.lists(st.sampled_from(["a", "b", "cache", "缓存"]), max_size=12),
    ),
    st.just("---\n: not: valid: yaml\n---\n"),
)
MARKDOWN = st.builds(lambda fm, blocks: fm + "\n\n".join(blocks), FRONTMATTER, st.lists(BLOCK, min_size=0, max_size=25))
BUDGET = st.integers(min_value=0, max_value=400)


@SETTINGS
@given(MARKDOWN, BUDGET, st.sampled_from(METHODS))
def test_markdown_summaries_fit_and_are_deterministic(text, budget, method):
    out = summarize_text(text, budget, COUNTER, method)
    assert COUNTER.count(out) <= budget
    assert summarize_text(text, budget, COUNTER, method) == out


TASK = st.builds(
    lambda indent, box, title, detail: f"{indent}- [{box}] {title}" + "".join(f"\n{indent}  {d}" for d in detail),
    st.sampled_from(["", "", "  "]),
    st.sampled_from(["x", ">", " ", "-"]),
    EN_SENTENCE,
    st.lists(SENTENCE, max_size=3),
)
PLAN = st.builds(
    lambda title, prose, tasks: f"# {title}\n\n{prose}\n\n## Tasks\n" + "\n".join(tasks) + "\n",
    st.sampled_from(["Plan: auth", "计划"]),
    PARAGRAPH,
    st.lists(TASK, min_size=0, max_size=12),
)


@SETTINGS
@given(PLAN, BUDGET)
def test_plan_summaries_fit_and_are_deterministic(text, budget):
    section = Section("plan", "Current Plan", "plan", text, 80, "state")
    out = BuiltinSummarizer().summarize(section, budget, COUNTER)
    assert COUNTER.count(out) <= budget
    assert BuiltinSummarizer().summarize(section, budget, COUNTER) == out
    in_progress = [line for line in text.split("\n") if line.startswith("- [>] ")]
    if in_progress and budget >= COUNTER.count(text):
        assert in_progress[0] in out


FILE_DIFF = st.builds(
    lambda name, plus, minus: f"diff --git a/{name} b/{name}\nindex 1..2 100644\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n"
    + "".join(f"-old {i}\n" for i in range(minus))
    + "".join(f"+new {i}\n" for i in range(plus)),
    st.sampled_from(["a.py", "src/lib/b.ts", "docs/c.md", "测试.txt"]),
    st.integers(0, 30),
    st.integers(0, 30),
)


@SETTINGS
@given(st.lists(FILE_DIFF, min_size=1, max_size=15).map("".join), BUDGET)
def test_diff_summaries_fit_and_count_lines(diff, budget):
    out = diff_summary(diff, budget, COUNTER)
    assert COUNTER.count(out) <= budget
    assert diff_summary(diff, budget, COUNTER) == out
    _, stats = diff_file_stats(diff)
    assert sum(s[1] for s in stats) == sum(1 for line in diff.split("\n") if line.startswith("+new "))
    assert sum(s[2] for s in stats) == sum(1 for line in diff.split("\n") if line.startswith("-old "))


@SETTINGS
@given(st.lists(st.one_of(SENTENCE, st.just("")), max_size=80).map("\n".join), BUDGET, st.sampled_from(["history", "tree", "environment"]))
def test_line_summaries_fit(text, budget, kind):
    section = Section(kind, kind, kind, text, 60, "state")
    out = BuiltinSummarizer("headings").summarize(section, budget, COUNTER)
    assert COUNTER.count(out) <= budget
    assert BuiltinSummarizer("headings").summarize(section, budget, COUNTER) == out


@SETTINGS
@given(st.lists(SENTENCE, max_size=12).map(" ".join))
def test_sentences_cover_the_text(text):
    sentences = split_sentences(text)
    assert "".join("".join(s.split()) for s in sentences) == "".join(text.split())
    assert all(s == s.strip() and s for s in sentences)

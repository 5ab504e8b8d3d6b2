"""Fuzzing the parsers with hypothesis: for any input, a parser returns normally or raises a
CtxEngineError subclass (never a traceback), within a time bound per example.

Inputs are built from pieces that look like each format (template tags, ``---`` fences and
YAML lines, JSON objects with the session keys, ``####`` and ``>`` lines, task boxes, STATE
fields, roadmap milestones, disclosure rule mappings), mixed with bare text and the
pathological pieces seen in bug reports (deep nesting, empty ``####``).

CI runs a fixed set (``derandomize``, FUZZ_EXAMPLES examples per target, 150 by default);
``CTXENGINE_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz.py`` explores more, with fresh random
examples. ``--hypothesis-show-statistics`` prints the examples run per target.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.nodes.lib import digest, disclosure, markdown, plan, template
from ctxengine.nodes.lib import sessions as session
from ctxengine.nodes.lib.sessions import aider as session_aider
from ctxengine.nodes.lib.sessions import summary as session_summary
from ctxengine.nodes.lib.textio import clean as textio_clean
from ctxengine.nodes.lib import gsd
from ctxengine.nodes.types import CtxEngineError, TemplateError

GSD_PARSE_STATE = gsd.parse_state
GSD_NARROW_ROADMAP = gsd.narrow_roadmap

_LOCAL = os.environ.get("CTXENGINE_FUZZ_EXAMPLES")
FUZZ_EXAMPLES = int(_LOCAL) if _LOCAL else 150
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    derandomize=not _LOCAL,  # CI: the same examples every run; locally: new ones each time
    deadline=timedelta(milliseconds=1500),  # per example, on a shared 2-core machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

RUN = Counter()  # examples run per target


@pytest.fixture(scope="module", autouse=True)
def _examples_run():
    yield
    print("\nfuzz examples run: " + ", ".join(f"{k} {v}" for k, v in sorted(RUN.items())) + f" (total {sum(RUN.values())})")


def _lines(pieces, max_size: int = 30):
    """Text made of lines drawn from ``pieces`` (and some free text), joined by newlines."""
    free = st.text(alphabet=string.printable + "é世🌍\u00a0\u2028", max_size=12)
    return st.lists(st.one_of(pieces, free), max_size=max_size).map("\n".join)


def _ours_only(call):
    """Run ``call``: it returns, or raises a CtxEngineError subclass (anything else fails)."""
    try:
        return call()
    except CtxEngineError:
        return None


# ----------------------------------------------------------------------------- template

NAMES = ["a", "b", "c", "a.b", "b.c", "."]
_name = st.sampled_from(NAMES)
_TAG_FRAGMENTS = st.one_of(
    _name.map(lambda n: "{{%s}}" % n),
    _name.map(lambda n: "{{{%s}}}" % n),
    _name.map(lambda n: "{{& %s}}" % n),
    st.tuples(st.sampled_from("#^?/"), _name).map(lambda t: "{{%s%s}}" % t),
    st.sampled_from(["{{! note }}", "{{!\nmulti\n}}", "{{> part}}", "{{=<% %>=}}", "{{", "}}", "{{{", "}}}",
                     "{{}}", "{{a b}}", "{{#}}", "{{/}}", "\n", "  \n", "\r\n", "{", "}", "text", " x ", "\t"]),
    st.integers(1, 300).map(lambda k: "{{#a}}" * k),
    st.integers(1, 300).map(lambda k: "{{/a}}" * k),
)
_soup = st.lists(_TAG_FRAGMENTS, max_size=25).map("".join)


def _section(children):
    return st.tuples(st.sampled_from("#^?"), _name, st.booleans(), children).map(
        lambda t: ("{{%s%s}}%s%s%s{{/%s}}" % (t[0], t[1], "\n" if t[2] else "", t[3], "\n" if t[2] else "", t[1])))


_leaf = st.one_of(st.text(alphabet="ab \n.#", max_size=6),
                  _name.map(lambda n: "{{%s}}" % n), _name.map(lambda n: "{{{%s}}}" % n), st.just("{{! c }}"))
_well_formed = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, min_size=2, max_size=4).map("".join), _section(inner)), max_leaves=12)

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(alphabet="xy<&\"\n", max_size=4))
_data = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)),
    max_leaves=12)
_context = st.dictionaries(st.sampled_from(["a", "b", "c"]), _data, max_size=3)


@FUZZ
@given(text=st.one_of(_soup, _well_formed), data=_context, escape=st.sampled_from(template.ESCAPES),
       squeeze=st.booleans())
def test_template_any_text_renders_or_raises_a_template_error(text, data, escape, squeeze):
    RUN["template"] += 1
    try:
        out = template.render(text, data, escape=escape, name="fuzz.md", squeeze=squeeze)
    except TemplateError as exc:
        assert str(exc).startswith("template 'fuzz.md'")
        return
    assert isinstance(out, str)


@FUZZ
@given(text=_well_formed, data=_context)
def test_template_well_formed_templates_always_render(text, data):
    RUN["template-well-formed"] += 1
    assert isinstance(template.render(text, data, name="ok.md"), str)


# ----------------------------------------------------------------------------- frontmatter

_YAML_LINES = st.one_of(
    st.sampled_from([
        "title: Login", "priority: 80", "deprecated: true", "tags: [a, b", "tags: [a, b]", "- item", "  - nested",
        "  key: value", "a: {b: c}", "a: 2021-13-45", "a: 2024-01-01", "a: !!int 0x_", "a: !!float x",
        "a: !!binary x", "a: !!python/object:os.system x", "? [a]", ": b", "&x a: 1", "b: *x", "c: *missing",
        "text: |", "  block", "'unterminated", '"\\x"', "a:\tb", "\t- tab", "key", ":", "---", "...", "%YAML 1.1",
        "a: 1e999999", "a: .nan", "{a: [", "a: @b", "a: `b`", "!!set {a, b}", "<<: *x", "a: ~", "null: null",
    ]),
    st.integers(1, 3000).map(lambda k: "a: " + "[" * k),
    st.integers(1, 3000).map(lambda k: "a: " + "[" * k + "]" * k),
)
_FRONTMATTER_TEXT = st.tuples(
    st.sampled_from(["---", "--- ", "---\r", "", "----"]), _lines(_YAML_LINES, 12),
    st.sampled_from(["---", "...", "--- ", "", "---x"]),
    _lines(st.sampled_from(["# Title", "## Sub", "```", "~~~", "text", "#### x", "#no", "  # indented"]), 10),
).map("\n".join)


@FUZZ
@given(text=_FRONTMATTER_TEXT)
def test_frontmatter_parses_or_raises_a_frontmatter_error(text):
    RUN["frontmatter"] += 1
    raw, body, start = markdown.frontmatter_block(text)
    assert start >= 1 and isinstance(body, str)
    try:
        meta, body, start = markdown.split_frontmatter(text)
    except markdown.FrontmatterError as exc:
        assert isinstance(exc, CtxEngineError) and (exc.line is None or exc.line >= 1)
    else:
        assert isinstance(meta, dict) and start >= 1
    markdown.headings(text)
    markdown.nest_under_title(text, "Title", 2)
    markdown.demote_headings(text, 3)


@pytest.mark.parametrize("text", ["---\na: 2021-13-45\n---\n", "---\na: !!int 0x_\n---\nbody", "---\na: !!float x\n---\n",
                                  "---\na: " + "[" * 5000 + "\n---\n"])
def test_frontmatter_values_yaml_cannot_construct_are_frontmatter_errors(text):
    with pytest.raises(markdown.FrontmatterError) as err:
        markdown.split_frontmatter(text)
    assert isinstance(err.value, CtxEngineError) and err.value.line >= 2


# ----------------------------------------------------------------------------- session logs

_json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8)
_call = st.one_of(
    st.fixed_dictionaries({}, optional={"id": st.one_of(st.text(max_size=3), st.integers(), _json_value),
                                        "name": _json_value, "arguments": _json_value, "input": _json_value,
                                        "function": st.one_of(_json_value, st.fixed_dictionaries(
                                            {}, optional={"name": _json_value, "arguments": _json_value}))}),
    _json_value)
_message = st.fixed_dictionaries({}, optional={
    "role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "bot", ""]), _json_value),
    "content": st.one_of(st.text(max_size=40), st.lists(st.one_of(
        st.text(max_size=8), st.fixed_dictionaries({}, optional={"text": _json_value, "content": _json_value}),
        _json_value), max_size=3), _json_value),
    "round": st.one_of(st.integers(0, 4), st.text(max_size=2), _json_value),
    "tool_calls": st.one_of(st.lists(_call, max_size=3), _json_value),
    "call_id": st.one_of(st.sampled_from(["c1", "c2", "L1.1"]), _json_value),
    "tool_call_id": _json_value,
    "usage": _json_value,
})
_JSONL_LINES = st.one_of(
    _message.map(json.dumps),
    _json_value.map(json.dumps),
    st.sampled_from(["", "  ", "{", "}", "[", "null", '"x"', "{'role': 'user'}", '{"role": "user", "content": "hi"',
                     "NaN", '{"role":"user","content":1e400}', "\x00", "\ufeff{}", "#### not json"]),
    st.integers(1, 3000).map(lambda k: '{"role": "user", "content": ' + "[" * k + "]" * k + "}"),
    st.integers(1, 3000).map(lambda k: "{" + '"a":{' * k + "}" * (k + 1)),
    st.integers(1, 5000).map(lambda k: "[" * k),
    st.integers(4300, 5000).map(lambda k: '{"role": "user", "round": ' + "9" * k + "}"),
)


def _check_history(history, path):
    for warning in history.warnings:
        assert warning.startswith(path + ":"), warning  # each warning names the file (and line)
    assert [r.index for r in history.rounds] == list(range(1, len(history.rounds) + 1))
    for r in history.rounds:
        assert r.messages
        if r.lines is not None:
            assert 1 <= r.lines[0] <= r.lines[1] <= max(history.total_lines, 1)
    rounds = history.rounds
    session.compact_history(rounds, 2)
    for r in rounds[:5]:
        session.round_summary(r)


@FUZZ
@given(text=_lines(_JSONL_LINES, 12))
def test_session_jsonl_parses_any_log(text):
    RUN["session-jsonl"] += 1
    path = "/p/session.log"
    _check_history(session.parse_session(text, path, session.JSONL), path)


_AIDER_LINES = st.one_of(
    st.sampled_from([
        "# aider chat started at 2025-01-01 10:00:00", "####", "#### ", "#### Fix the login", "####\t", "#### /add a.py  ",
        "> ", ">", "> Applied edit to app/core.py", "> Commit abc1234 fix: thing", "> 3 passed in 0.1s",
        ">>>>>>> REPLACE", "<<<<<<< SEARCH", "=======", "```python", "```", "", "  ", "\r", "Sure, editing it.",
        "##### five", "### three", "#####", "# aider chat started at", "> FAILED tests/test_x.py::test_y",
    ]),
    st.integers(1, 200).map(lambda k: "\n".join(["####"] * k)),
)


@FUZZ
@given(text=_lines(_AIDER_LINES, 25), trailing=st.sampled_from(["", "\n", "\n\n"]))
def test_session_aider_parses_any_transcript(text, trailing):
    RUN["session-aider"] += 1
    path = "/p/.aider.chat.history.md"
    history = session.parse_session(text + trailing, path)
    assert history.format == session.AIDER
    _check_history(history, path)


@FUZZ
@given(head=_lines(_AIDER_LINES, 20), tail=_lines(_AIDER_LINES, 8), more=_lines(_AIDER_LINES, 4))
def test_an_aider_transcript_parsed_as_it_grows_equals_its_parse_from_nothing(head, tail, more):
    RUN["session-aider-grown"] += 1
    path = "/p/grown.aider.chat.history.md"
    texts = [head + "\n", head + "\n" + tail, head + "\n" + tail + "\n" + more]
    from ctxengine.nodes.lib.memo import Memo

    memo = Memo()
    grown = [session.parse_session(text, path, memo=memo) for text in texts]  # each parse goes on from the one before
    fresh = [session.parse_session(text, path) for text in texts]
    assert grown == fresh


@FUZZ
@given(text=st.one_of(_lines(_JSONL_LINES, 6), _lines(_AIDER_LINES, 10)), name=st.sampled_from(
    ["session.log", "history.md", "x.aider.chat.history.md", "log"]))
def test_session_format_detection_and_parse_never_crash(text, name):
    RUN["session-detect"] += 1
    _check_history(session.parse_session(text, name), name)


# ----------------------------------------------------------------------------- article plan (report only)

_PLAN_LINES = st.one_of(
    st.sampled_from(["# Plan", "## Tasks", "- [x] T1: done", "- [ ] T2 pending", "- [>] T3 going", "- [-] T4 dropped",
                     "- [?] odd", "* [X] caps", "1. [x] numbered", "2) [ ] paren", "  - [x] sub", "\t- [ ] tab sub",
                     "    detail line", "```", "~~~", "---", "...", "title: x", "", "  ", "- [", "- []", "- [ ]"]),
    st.tuples(st.integers(0, 12), st.sampled_from("x >-?")).map(lambda t: " " * t[0] + f"- [{t[1]}] task"),
)


@FUZZ
@given(text=_lines(_PLAN_LINES, 30))
def test_plan_parse_plan_never_crashes(text):
    RUN["plan"] += 1
    parsed = _ours_only(lambda: plan.parse_plan(text, "/p/plan.md"))
    if parsed is not None:
        assert all(w.startswith("/p/plan.md:") for w in parsed.warnings)


# ----------------------------------------------------------------------------- GSD STATE / ROADMAP (report only)

_STATE_LINES = st.one_of(
    st.sampled_from([
        "---", "milestone: v1.2", "status: executing", "progress: {total: 4, done: [", "gsd_state_version: 1.0",
        "# Project State", "## Current Position", "Phase: 3 of 5 (Auth)", "Phase: 02.1 of 5", "Plan: 2 of 4",
        "Plan: 0 of 0", "Status: In progress", "Last activity: 2025-01-01", "Progress: [####------] 40%",
        "Milestone: v1.1", "**Current focus:** login", "## Blockers/Concerns", "## Pending Todos", "None", "- item",
        "## Session Continuity", "Next action: run", "## Next Steps", "### Decisions", "```", "Phase:", "Plan: x of y",
        "Phase: 99999999999999999999 of 1", "Phase: 1.2.3.4.5 of 2", "##", "#", "####### seven", "", "  ",
    ]),
)
_ROADMAP_LINES = st.one_of(
    st.sampled_from([
        "# Roadmap", "## Milestones", "<details>", "<summary>v1.0 MVP (Phases 1-4) - SHIPPED</summary>", "</details>",
        "<summary>", "</summary>", "## v1.1 Auth (Phases 5-8)", "### v1.2 Next", "## Phases", "### Phase 5: Login",
        "### Phase 5.1: Hotfix", "- [x] **Phase 5: Login** - done", "- [ ] Phase 6: Logout", "Phases 32-36",
        "Phases 9 to 7", "| Phase | Milestone | Plans | Status |", "|---|---|---|---|", "| 5. Login | v1.1 | 2/2 | Done |",
        "| 1. Old | v1.0 | 1/1 | Done |", "|", "```", "", "v1.1", "**Milestone v1.1**", "Phase 99999999999999999999",
    ]),
)


@FUZZ
@given(text=_lines(_STATE_LINES, 30))
def test_gsd_parse_state_never_crashes(text):
    RUN["gsd-state"] += 1
    _ours_only(lambda: GSD_PARSE_STATE(text, "/p/.planning/STATE.md"))


@FUZZ
@given(text=_lines(_ROADMAP_LINES, 30), milestone=st.one_of(
    st.none(), st.sampled_from(["v1.0", "v1.1", "1.1", "v1.2", "", "v", "v1.1.1.1"]), st.text(max_size=6)))
def test_gsd_narrow_roadmap_never_crashes(text, milestone):
    RUN["gsd-roadmap"] += 1
    _ours_only(lambda: GSD_NARROW_ROADMAP(text, milestone))


# ----------------------------------------------------------------------------- disclosure rules (report only)

_rule_value = st.deferred(lambda: st.one_of(
    _json_value, st.lists(st.sampled_from(["docs/*.md", "", "  ", "**/api/**", "[", "a"]), max_size=3),
    st.sampled_from(disclosure.PHASES + disclosure.SIGNALS + disclosure.PICKS), _rule_map))
_rule_map = st.dictionaries(
    st.sampled_from(["name", "load", "keywords", "paths", "in", "required", "optional", "glob", "pick",
                     "modes", "triggers", "phases", "state"] + list(disclosure.PHASES) + ["dev", "research"]),
    st.deferred(lambda: _rule_value), max_size=4)
_rules = st.one_of(_json_value, st.fixed_dictionaries({}, optional={
    "state": _rule_value,
    "modes": st.one_of(st.dictionaries(st.sampled_from(["dev", "review", "1"]), st.one_of(
        st.lists(st.one_of(_rule_map, st.text(max_size=4), _json_value), max_size=3), _rule_value), max_size=2),
        _rule_value),
    "triggers": st.one_of(st.lists(st.one_of(_rule_map, _json_value), max_size=3), _rule_value),
    "phases": st.one_of(st.dictionaries(st.one_of(st.sampled_from(disclosure.PHASES), st.text(max_size=3)),
                                        st.one_of(_rule_map, _rule_value), max_size=3), _rule_value),
}))


@settings(FUZZ)
@given(data=_rules)
def test_disclosure_parse_rules_validates_or_raises_a_config_error(data):
    RUN["disclosure"] += 1
    _ours_only(lambda: disclosure.parse_rules(data, "/p/.planning/disclosure.yaml"))
    if isinstance(data, dict):  # a project's rules file laid over the bundled ones
        _ours_only(lambda: disclosure.parse_rules(disclosure.merge_rules({"modes": {}}, data), "/p/r.yaml"))


# ----------------------------------------------------------------------------- configuration

from ctxengine.nodes import config as config_nodes  # noqa: E402

_DEFAULTS = config_nodes.defaults()


def _dotted(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        out += _dotted(value, name + ".") if isinstance(value, dict) else [name]
    return out


_KEYS = st.sampled_from(_dotted(_DEFAULTS) + ["budget", "budget.pools", "trust", "unknownKey", "budget.maxTokenz"])
_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.floats(allow_nan=True, allow_infinity=True),
              st.text(max_size=30), st.sampled_from(["auto", "none", "~/x", "../..", "1e309", "nan"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _nest(dotted: str, value):
    for part in reversed(dotted.split(".")):
        value = {part: value}
    return value


@settings(FUZZ)
@given(overrides=st.dictionaries(_KEYS, _VALUE, max_size=4), project=st.dictionaries(_KEYS, _VALUE, max_size=3))
def test_the_configuration_resolves_or_raises_a_config_error(overrides, project):
    RUN["config"] += 1
    project_layer: dict = {}
    for key, value in project.items():
        project_layer.update(_nest(key, value))  # a config.json as parsed JSON (top-level keys replace)
    _ours_only(lambda: config_nodes.resolved_config("/p", config_nodes.defaults(), project_layer, overrides))


# ----------------------------------------------------------------------------- fast paths equal the old algorithms

# The aider event reader as it was before its fast path (91c5d8b): per-event line counting and
# prefixes substituted on a copy of each run with a newline in front.
_OLD_USER_PREFIX, _OLD_TOOL_PREFIX = re.compile(r"\n####[ \t]?"), re.compile(r"\n> ?")


def _old_aider_events(text: str, begin: int, end: int, first_line: int) -> list:
    pos_line = [begin, first_line]

    def line_of(pos: int) -> int:
        p, n = pos_line
        n += text.count("\n", p, pos)
        pos_line[0], pos_line[1] = pos, n
        return n

    events: list = []

    def assistant(start: int, stop: int) -> None:
        found = re.compile(r"\S").search(text, start, stop)
        if found is None:
            return
        line_start = text.rfind("\n", start, found.start()) + 1 or start
        body = text[line_start:stop].rstrip()
        first = line_of(line_start)
        events.append(("assistant", body, first, first + body.count("\n")))

    def run(kind: str, block: str, start: int, blank_gap: bool, gap_newlines: int) -> None:
        first = line_of(start)
        last = first + block.count("\n")
        if kind in ("user", "tool"):
            prefix = _OLD_USER_PREFIX if kind == "user" else _OLD_TOOL_PREFIX
            body = prefix.sub("\n", "\n" + block)[1:].replace("  \n", "\n").rstrip()
        else:
            body = block[2:].rstrip()
        if kind == "tool" and blank_gap and events and events[-1][0] == "tool":
            _, before, start_line, _ = events[-1]
            events[-1] = ("tool", before + "\n" * gap_newlines + body, start_line, last)
        else:
            events.append((kind, body, first, last))

    previous_end = begin
    opening = session_aider._AIDER_FIRST.match(text, begin, end)
    if opening:
        run(opening.lastgroup, opening.group(opening.lastgroup), begin, False, 0)
        previous_end = opening.end()
    for match in session_aider._AIDER_RUNS.finditer(text, previous_end, end):
        start = match.start()
        blank_gap = re.compile(r"\S").search(text, previous_end, start) is None
        if not blank_gap:
            assistant(previous_end, start)
        kind = match.lastgroup
        run(kind, match.group(kind), start + 1, blank_gap, text.count("\n", previous_end, start + 1))
        previous_end = match.end()
    assistant(previous_end, end)
    return events


@FUZZ
@given(text=_lines(_AIDER_LINES, 25), cut=st.integers(0, 30), spaces=st.booleans())
def test_aider_events_fast_path_equals_the_old_reader(text, cut, spaces):
    RUN["aider-events-old-new"] += 1
    if spaces:
        text = text.replace("\n", "  \n")  # aider's markdown line breaks
    assert session_aider._aider_events(text, 0, len(text), 1) == _old_aider_events(text, 0, len(text), 1)
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    begin = starts[min(cut, len(starts) - 1)]
    end = max(begin, text.rfind("\n", begin))  # a stretch as parse_aider cuts them: from a line start to a newline
    line = text.count("\n", 0, begin) + 1
    assert session_aider._aider_events(text, begin, end, line) == _old_aider_events(text, begin, end, line)


_OLD_EXTENSION = re.compile(r"\.(?:" + session_summary._EXT + r")(?![\w-])")
_OLD_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_PROSE = _lines(st.sampled_from([
    "see src/app.py and .github/x.yml", "a.py.md", "x.pyi y.pyx z.json5 w.jsonl", ".py", "file.c-d", "v.ts_x",
    "Certainly! Done. Next.", "Sure. ok. Yes!", "", "  ", "\t", "\u2028 x", "a.b.c", "https://x.io/a.md", "...x.md",
]), 60)


def _old_first_line(text: str) -> str:
    for line in text.split("\n", 50):
        if line.strip():
            return line.strip()
    return ""


def _old_first_sentence(text: str) -> str:
    sentences = _OLD_SENTENCE_END.split(_old_first_line(text))
    for sentence in sentences:
        if sentence.strip(" !.,").lower() not in session_summary._FILLER:
            return sentence
    return sentences[-1] if sentences else ""


@FUZZ
@given(text=_PROSE, blank=st.integers(0, 60))
def test_summary_fast_paths_equal_the_old_ones(text, blank):
    RUN["summary-old-new"] += 1
    assert [m.span() for m in session_summary._EXTENSION.finditer(text)] == [m.span() for m in _OLD_EXTENSION.finditer(text)]
    padded = "\n" * blank + text  # past 50 blank lines the old reader took the rest whole
    for sample in (text, padded, " \n" * blank + text):
        assert session_summary._first_line(sample) == _old_first_line(sample)
        assert session_summary._first_sentence(sample) == _old_first_sentence(sample)


@FUZZ
@given(data=st.lists(st.sampled_from([b"a", b"\x1b", b"[31m", b"]0;t", b"\x07", b"\\", b"P", b"X", b"\n", b"\xc2\x85",
                                      b"\xff", b"\xed\xa0\x80", b"\r\n", b"\xe4\xb8\x96", b"\x01"]), max_size=40).map(b"".join))
def test_escape_removal_and_the_grown_text_digest_equal_the_old_ways(data):
    RUN["clean-old-new"] += 1
    assert textio_clean._without_escapes(data) == textio_clean._ANSI_BYTES.subn(b"", data)
    plain = textio_clean.loaded_text(data, "/p/x", crlf=True)
    textio_clean.GROWN.min_bytes, kept = 0, textio_clean.GROWN.min_bytes
    try:
        grown = textio_clean.loaded_text(data, "/p/x", crlf=True, grown="/p/fuzz-grown-key")
    finally:
        textio_clean.GROWN.min_bytes = kept
    assert (grown.text, grown.removed) == (plain.text, plain.removed)
    # the digest given with the text (hashed from the cleaned bytes when they decoded strictly) is its UTF-8's
    assert grown.digest == hashlib.sha256(grown.text.encode("utf-8", "surrogatepass")).digest()[:16]

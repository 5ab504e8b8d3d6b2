"""The render stage through a real Hamilton driver: config + render + a temporary module that
provides reference_sections and state_sections."""

from __future__ import annotations

import os

os.environ["HAMILTON_AUTOLOAD_EXTENSIONS"] = "0"

import re  # noqa: E402

import pytest  # noqa: E402
from hamilton import ad_hoc_utils, driver  # noqa: E402

from ctxengine.nodes import config, render  # noqa: E402
from ctxengine.nodes import settings as settings_nodes  # noqa: E402
from ctxengine.nodes.lib.layout import context_data, render_context  # noqa: E402
from ctxengine.nodes.types import ConfigError, Section, Source, TemplateError  # noqa: E402

RULES = Section("builtin:gsd-rules", "GSD Rules", "rules", "Always run the tests.\n", 95, "system",
                (Source("builtin", "gsd-rules"),))
DESIGN = Section("docs/design.md", "Design <Notes> & More", "reference",
                 "# Design\n\nUse <b>pure</b> functions. Reply to {{userRequest}} verbatim.\n", 60, "references")
API = Section("docs/api.md", "API", "reference", "GET /users returns a list.", 60, "references")
PLAN = Section("plan", "Current Plan", "plan", "- [x] task 1\n- [ ] task 2", 80, "state")
GIT = Section("git", "Git Status", "git", "M src/app.py", 60, "state")
TREE = Section("tree", "File Tree", "tree", "src/\n  app.py", 30, "state")
CONDITIONAL = ("# Current Plan", "# Session History", "# Git Status", "# File Tree", "# Environment")


def _dr(reference_sections_value, state_sections_value):
    def reference_sections() -> list:
        """Fixture references."""
        return list(reference_sections_value)

    def state_sections() -> list:
        """Fixture state."""
        return list(state_sections_value)

    def disclosed_sections() -> list:
        """No disclosed documents."""
        return []

    fixtures = ad_hoc_utils.create_temporary_module(reference_sections, state_sections, disclosed_sections)
    return driver.Builder().with_modules(config, settings_nodes, render, fixtures).build()


def _run(tmp_path, refs=(RULES, DESIGN), state=(PLAN, GIT), overrides=None, request="Add a login endpoint",
         outputs=("rendered_context",)):
    result = _dr(refs, state).execute(
        list(outputs),
        inputs={"project_dir": str(tmp_path), "overrides": dict(overrides or {}), "user_request": request},
    )
    return result if len(outputs) > 1 else result[outputs[0]]


def _level1(text):
    return [line[2:] for line in text.splitlines() if line.startswith("# ")]


def test_default_dev_mode_and_structure(tmp_path):
    out = _run(tmp_path)
    assert out.startswith("You are a coding agent")
    assert "minimal" in out.lower() or "smallest diff" in out
    assert _level1(out) == ["System Reference", "Output Instructions", "Reference Documents", "Design",
                            "Current Plan", "Git Status", "User Request"]  # stable first, volatile last
    assert "## GSD Rules\n\nAlways run the tests.\n\n# Output Instructions\n\nAnswer the user request" in out
    assert "# User Request\n\nAdd a login endpoint\n\nBefore you answer" in out
    assert "\n\n\n" not in out


@pytest.mark.parametrize("mode, head", [
    ("dev", "You are a coding agent"),
    ("research", "You are a research assistant"),
    ("review", "You are reviewing a change"),
])
def test_mode_switching_changes_head_and_tail_only(tmp_path, mode, head):
    out = _run(tmp_path, overrides={"template": mode})
    assert out.startswith(head)
    assert "{{" not in out.replace("{{userRequest}}", "")
    dev = _run(tmp_path)
    start = dev.index("# System Reference")
    end = dev.index("Answer the user request")
    assert dev[start:end] in out


def test_review_mode_has_checklist_and_severities(tmp_path):
    out = _run(tmp_path, overrides={"template": "review"})
    assert "Checklist" in out and "blocker" in out and "nit" in out
    assert out.index("Checklist") < out.index("# System Reference") < out.index("verdict")


def test_escape_html_escapes_titles_not_contents(tmp_path):
    html = _run(tmp_path, overrides={"escape": "html"})
    assert "## Design &lt;Notes&gt; &amp; More" in html
    assert "Use <b>pure</b> functions." in html
    plain = _run(tmp_path)
    assert "## Design <Notes> & More" in plain


def test_contents_are_never_expanded(tmp_path):
    out = _run(tmp_path, request="Explain {{#system}}{{title}}{{/system}} please")
    assert "Reply to {{userRequest}} verbatim." in out
    assert "Explain {{#system}}{{title}}{{/system}} please" in out
    assert out.count("Explain") == 1


def test_conditional_headings_absent_without_state(tmp_path):
    out = _run(tmp_path, state=())
    for heading in CONDITIONAL:
        assert heading not in out
    for heading in ("# System Reference", "# Reference Documents", "# User Request", "# Output Instructions"):
        assert heading in out
    assert "\n\n\n" not in out


def test_required_headings_even_with_nothing_loaded(tmp_path):
    out = _run(tmp_path, refs=(), state=(), request="")
    assert _level1(out) == ["System Reference", "Output Instructions", "User Request"]
    assert "\n\n\n" not in out


def test_all_state_kinds_render_in_their_place(tmp_path):
    env = Section("env", "Environment", "environment", "python 3.11", 20, "state")
    hist = Section("history", "Session History", "history", "user: hi", 70, "state")
    odd = Section("dream", "Dreams", "dreams", "long-term idea", 40, "state")
    out = _run(tmp_path, state=(env, TREE, GIT, hist, PLAN, odd))
    assert [h for h in _level1(out) if h in {c[2:] for c in CONDITIONAL} | {"Dreams"}] == [
        "Current Plan", "Environment", "File Tree", "Dreams", "Git Status", "Session History"]
    assert "# Environment\n\npython 3.11\n" in out


def test_sections_order_and_request_sections(tmp_path):
    result = _run(tmp_path, refs=(DESIGN, RULES, API), state=(GIT, PLAN),
                  outputs=("sections", "request_section", "instructions_section"))
    assert [s.key for s in result["sections"]] == [
        "builtin:gsd-rules", "instructions", "docs/design.md", "docs/api.md", "plan", "git", "request"]
    request = result["request_section"]
    assert (request.kind, request.pool, request.priority, request.tier) == ("request", "request", 100, "immutable")
    assert request.sources == (Source("request", "user_request"),)
    assert request.content == "Add a login endpoint"
    instructions = result["instructions_section"]
    assert (instructions.title, instructions.priority, instructions.pool) == ("Output Instructions", 95, "request")


def test_output_instructions_override(tmp_path):
    out = _run(tmp_path, overrides={"outputInstructions": "Reply in French."})
    assert out.split("# Output Instructions\n\n", 1)[1].startswith("Reply in French.")


def test_context_template_from_project_path_with_review_mode(tmp_path):
    (tmp_path / ".planning" / "tpl").mkdir(parents=True)
    (tmp_path / ".planning" / "tpl" / "short.md").write_text(
        "{{#references}}\n* {{title}}\n{{/references}}\nQ: {{{userRequest}}}\n", encoding="utf-8")
    out = _run(tmp_path, overrides={"contextTemplate": "tpl/short.md", "template": "review"})
    assert out.startswith("You are reviewing a change")
    assert "* Design <Notes> & More\nQ: Add a login endpoint\n" in out
    assert "# System Reference" not in out


def test_unknown_context_template_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"contextTemplate 'nope'.*use one of: context"):
        _run(tmp_path, overrides={"contextTemplate": "nope"})
    with pytest.raises(ConfigError, match=r"no file .*missing\.md"):
        _run(tmp_path, overrides={"contextTemplate": "tpl/missing.md"})


def test_broken_context_template_names_path_and_line(tmp_path):
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "bad.md").write_text("# A\n\n{{#references}}\n{{title}}\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"'bad\.md', line 3: section \{\{#references\}\} is never closed"):
        _run(tmp_path, overrides={"contextTemplate": "bad.md"})


def test_mode_templates_wrap_the_context_once():
    for mode in ("dev", "research", "review"):
        text = (render.resources.files("ctxengine.configs") / "modes" / f"{mode}.md").read_text()
        assert text.count("{{{context}}}") == 1
        assert render_context([], "CTX", text).count("CTX") == 1


def test_render_context_after_dropping_sections():
    template = (render.resources.files("ctxengine.configs") / "templates" / "context.md").read_text()
    kept = [RULES, PLAN, Section("request", "User Request", "request", "go", 100, "request")]
    out = render_context(kept, template, "{{{context}}}")
    assert "# Current Plan" in out and "# Git Status" not in out and "# Reference Documents" not in out
    assert re.search(r"# User Request\n\ngo\n$", out)


def test_context_data_model():
    data = context_data([RULES, DESIGN, PLAN, Section("p2", "Plan 2", "plan", "x", 80, "state"), GIT])
    assert [d["title"] for d in data["system"]] == ["GSD Rules"]
    assert data["system"][0]["content"] == "Always run the tests."
    assert [d["key"] for d in data["references"]] == ["docs/design.md"]
    assert data["plan"]["content"] == "- [x] task 1\n- [ ] task 2"
    assert [d["key"] for d in data["extra"]] == ["p2"]
    assert "history" not in data and data["userRequest"] == "" and data["outputInstructions"] == ""

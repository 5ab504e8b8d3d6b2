"""The template engine: the Mustache spec (interpolation, sections, inverted, comments) in html
mode, plus one-pass rendering, conditionals, escaping modes, blank-line squeezing and errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import needs_shared
from ctxengine.nodes.lib.template import compile_template, render
from ctxengine.nodes.types import TemplateError

SHARED = Path(os.environ.get("CTXENGINE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SPEC_DIR = SHARED / "suites" / "mustache_spec"
SPEC_FILES = ("interpolation", "sections", "inverted", "comments")


def _spec_cases():
    cases = []
    for stem in SPEC_FILES:
        path = SPEC_DIR / f"{stem}.json"
        if not path.is_file():
            cases.append(pytest.param(None, id=f"{stem}-missing", marks=pytest.mark.skip(f"no {path}")))
            continue
        for test in json.loads(path.read_text(encoding="utf-8"))["tests"]:
            cases.append(pytest.param(test, id=f"{stem}: {test['name']}"))
    return cases


@pytest.mark.parametrize("case", _spec_cases())
def test_mustache_spec(case):
    assert render(case["template"], case["data"], escape="html", name=case["name"]) == case["expected"]


@needs_shared
def test_spec_files_hold_all_cases():
    counts = {stem: len(json.loads((SPEC_DIR / f"{stem}.json").read_text())["tests"]) for stem in SPEC_FILES}
    assert counts == {"interpolation": 42, "sections": 34, "inverted": 22, "comments": 12}


# ----------------------------------------------------------------------------- one pass


def test_substituted_text_is_never_expanded():
    data = {"doc": "see {{secret}} and {{#x}}loop{{/x}}", "secret": "LEAK", "x": [1, 2]}
    assert render("{{doc}}|{{{doc}}}", data) == "see {{secret}} and {{#x}}loop{{/x}}|see {{secret}} and {{#x}}loop{{/x}}"


def test_value_with_unclosed_tag_does_not_raise():
    assert render("[{{{v}}}]", {"v": "{{#open"}) == "[{{#open]"


# ----------------------------------------------------------------------------- {{?key}}


@pytest.mark.parametrize("data", [{"k": ""}, {"k": []}, {}, {"k": None}, {"k": False}, {"k": {}}])
def test_conditional_skips_empty_and_missing(data):
    assert render("a{{?k}}[shown]{{/k}}b", data) == "ab"


@pytest.mark.parametrize("value", ["text", ["x"], {"a": 1}, True, 3])
def test_conditional_renders_when_present(value):
    assert render("a{{?k}}[shown]{{/k}}b", {"k": value}) == "a[shown]b"


def test_conditional_renders_once_and_does_not_push():
    data = {"k": [{"name": "inner"}, {"name": "inner2"}], "name": "outer"}
    assert render("{{?k}}{{name}};{{/k}}", data) == "outer;"
    assert render("{{#k}}{{name}};{{/k}}", data) == "inner;inner2;"


def test_conditional_dotted_and_standalone():
    template = "top\n{{?plan.content}}\n# Plan\n{{{plan.content}}}\n{{/plan.content}}\nend\n"
    assert render(template, {"plan": {"content": "do it"}}) == "top\n# Plan\ndo it\nend\n"
    assert render(template, {"plan": {"content": ""}}) == "top\nend\n"
    assert render(template, {}) == "top\nend\n"


# ----------------------------------------------------------------------------- escaping


def test_escape_none_leaves_everything_raw():
    data = {"v": "<b> & \"q\" 'a'"}
    assert render("{{v}}|{{{v}}}|{{& v}}", data) == "<b> & \"q\" 'a'|<b> & \"q\" 'a'|<b> & \"q\" 'a'"


def test_escape_html_only_double_mustache():
    data = {"v": "<b> & \"q\" 'a'"}
    assert render("{{v}}|{{{v}}}|{{& v}}", data, escape="html") == (
        "&lt;b&gt; &amp; &quot;q&quot; 'a'|<b> & \"q\" 'a'|<b> & \"q\" 'a'"
    )


def test_unknown_escape_mode_is_rejected():
    with pytest.raises(ValueError, match="escape"):
        render("x", {}, escape="xml")


# ----------------------------------------------------------------------------- squeeze


def test_squeeze_limits_template_blank_lines_but_keeps_values():
    template = "A\n\n{{?x}}\nX\n\n{{/x}}\n\n\n{{{body}}}\n\n\nB\n"
    body = "line1\n\n\n\nline2"
    out = render(template, {"body": body}, squeeze=True)
    assert out == "A\n\nline1\n\n\n\nline2\n\nB\n"
    assert render(template, {"body": body}) == "A\n\n\n\nline1\n\n\n\nline2\n\n\nB\n"


# ----------------------------------------------------------------------------- errors


def test_unclosed_section_names_template_and_line():
    with pytest.raises(TemplateError) as err:
        render("one\ntwo {{#items}}\nthree\n", {}, name="ctx.md")
    message = str(err.value)
    assert "'ctx.md'" in message and "line 2" in message and "{{#items}}" in message


def test_mismatched_close_tag_names_both_lines():
    with pytest.raises(TemplateError) as err:
        render("{{#a}}\n{{?b}}\nx\n{{/a}}\n", {}, name="mode.md")
    message = str(err.value)
    assert "'mode.md', line 4" in message
    assert "{{/a}} does not match {{?b}} opened on line 2" in message


def test_stray_close_tag():
    with pytest.raises(TemplateError, match=r"line 3: closing tag \{\{/x\}\} has no open section"):
        render("a\nb\n{{/x}}", {}, name="t")


def test_unterminated_tag():
    with pytest.raises(TemplateError, match=r"'t', line 2: '\{\{' is never closed"):
        render("ok\n{{name\n", {}, name="t")


@pytest.mark.parametrize("template", ["{{> part}}", "{{=<% %>=}}", "{{}}", "{{a b}}"])
def test_unsupported_or_bad_tags(template):
    with pytest.raises(TemplateError, match="'t', line 1"):
        render(template, {}, name="t")


def test_sections_nested_past_the_limit_name_template_and_line():
    deep = "intro\n" + "{{#a}}" * 5000 + "x" + "{{/a}}" * 5000
    with pytest.raises(TemplateError, match=r"'deep.md', line 2: sections nested more than 100 deep"):
        render(deep, {"a": True}, name="deep.md")
    limit = "{{#a}}" * 100 + "x" + "{{/a}}" * 100
    assert render(limit, {"a": True}) == "x"  # up to the limit renders


def test_list_sections_nested_in_each_other_stop_with_a_template_error(monkeypatch):
    from ctxengine.nodes.lib import template as template_lib

    monkeypatch.setattr(template_lib, "MAX_REPEATS", 10_000)  # the same guard, reached sooner
    template = "{{#a}}" * 25 + "x" + "{{/a}}" * 25  # 2**25 passes over a two-item list
    with pytest.raises(TemplateError, match=r"'t': sections repeat more than"):
        render(template, {"a": [1, 2]}, name="t")
    assert render("{{#a}}{{#a}}x{{/a}}{{/a}}", {"a": [1, 2]}) == "xxxx"


def test_compiled_templates_are_cached():
    text = "cached {{x}}"
    assert compile_template(text, "c") is compile_template(text, "c")


def test_large_context_renders_whole():
    big = "x" * 1_000_000
    docs = [{"title": f"doc {i}", "content": big[: 100_000]} for i in range(10)]
    template = "{{#docs}}\n## {{title}}\n\n{{{content}}}\n\n{{/docs}}\n"
    out = render(template, {"docs": docs}, squeeze=True)
    assert len(out) > 1_000_000 and out.count("## doc ") == 10

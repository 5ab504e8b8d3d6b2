"""The quality stage through the real driver: the required headings, cross-reference mending
after truncation (immutable sections untouched), and the exact fit of the final prompt."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxengine.nodes.lib import truncate as T
from ctxengine.nodes.types import CtxEngineError, Section, Source, TemplateError
from test_truncation import COUNTER, PLAN, RULES, _doc, arch, history_section, old_guide, run


def test_required_headings_are_checked(tmp_path):
    found = run(tmp_path, (RULES,), (PLAN,), available=10_000, outputs=("structure_check", "final_context"))
    assert found["structure_check"] == {"System Reference": True, "User Request": True, "Output Instructions": True}


def test_a_template_without_a_required_heading_is_an_error(tmp_path):
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "short.md").write_text(
        "# System Reference\n\n{{#system}}{{{content}}}{{/system}}\n\n# User Request\n\n{{{userRequest}}}\n")
    with pytest.raises(TemplateError) as err:
        run(tmp_path, (RULES,), (PLAN,), available=10_000, outputs=("final_context",), contextTemplate="short.md")
    assert "'Output Instructions'" in str(err.value) and "short.md" in str(err.value)
    assert isinstance(err.value, CtxEngineError) and err.value.exit_code == 2


def test_required_sections_are_configurable(tmp_path):
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "short.md").write_text("# User Request\n\n{{{userRequest}}}\n")
    out = run(tmp_path, (RULES,), (), available=10_000, outputs=("structure_check", "final_context"),
              contextTemplate="short.md", **{"truncation.requiredSections": ["User Request"]})
    assert out["structure_check"] == {"User Request": True}  # only the configured heading is required
    assert "# Output Instructions" not in out["final_context"]


def _referring(key: str, priority: int = 80) -> Section:
    text = ("# Notes\n\nThe login flow is described in the Old Guide; see Old Guide for the legacy tokens.\n\n"
            + _doc("Notes", 2))
    return Section(key, "Notes", "reference", text, priority, "references",
                   (Source("file", f".planning/{key}.md", (1, 20)),))


def test_references_to_dropped_sections_are_mended(tmp_path):
    old = old_guide(30)
    notes = _referring("notes")
    rules = Section("ref:builtin:gsd-rules", "GSD Rules", "rules", "Rules: see Old Guide for history.\n", 95, "system")
    refs = (rules, notes, old)
    result = run(tmp_path, refs, (), available=700)
    final = {s.key: s for s in result.sections}
    assert old.key not in final  # the deprecated guide did not fit
    mended = final["notes"].content
    assert "see Old Guide (not included; full text in .planning/references/old.md)" in mended
    assert final[rules.key].content == rules.content  # immutable: only reported
    assert any("immutable section left unchanged" in w for w in result.warnings)
    assert result.truncation["cross_references"]
    assert result.budget.total_tokens == COUNTER.count(result.context) <= 700


def test_the_final_count_is_exact_and_within_the_budget(tmp_path):
    refs = (RULES, arch(60), old_guide(20))
    state = (PLAN, history_section(80, keep=80))
    for available in (900, 1500, 4000):
        result = run(tmp_path, refs, state, available=available)
        assert result.budget.exact is True
        assert result.budget.total_tokens == COUNTER.count(result.context) <= available


def test_an_exact_count_over_the_budget_is_cut_further(tmp_path):
    # Force the case the calibration loop is there for: a trigger that said "fits" for a
    # context that does not (an estimate gone wrong); the exact count finds it and cuts.
    refs, state = (RULES, arch(60)), (PLAN,)
    upstream = run(tmp_path, refs, state, available=1500, outputs=("truncation_trigger", "rendered_context"))
    wrong = replace(upstream["truncation_trigger"], triggered=False, reason=None, target=1500, initial_tokens=100,
                    initial_exact=False)
    from test_truncation import _driver

    out = _driver().execute(["fitted_context", "truncation_summary"], inputs={
        "project_dir": str(tmp_path), "overrides": {"model": "gpt-4-turbo", "budget.maxTokens": 2500,
                                                    "budget.reserveTokens": 1000},
        "user_request": "Add the login endpoint", "fixture_references": list(refs), "fixture_state": list(state)},
        overrides={"truncation_trigger": wrong})
    fitted = out["fitted_context"]
    assert fitted.late_trigger == "hard" and fitted.passes >= 2
    assert fitted.tokens == COUNTER.count(fitted.text) <= 1500
    assert out["truncation_summary"]["reason"] == "hard" and out["truncation_summary"]["triggered"]
    assert {e.step for e in fitted.state.ledger} == {T.step_named("exact_fit").name}

"""End to end through the shared driver: the demo and every real GSD project of the corpus."""

from __future__ import annotations

import pytest

import ctxengine
from ctxengine import driver
from conftest import DEMO, corpus_projects


def test_demo_builds_with_every_stage():
    result = ctxengine.build_context(DEMO, "Make a bad password return 401")
    kinds = {section.kind for section in result.sections}
    assert {"rules", "reference", "plan", "history", "request", "instructions"} <= kinds
    assert result.context.index("# System Reference") < result.context.index("# User Request")
    assert result.context.index("# User Request") < result.context.index("# Output Instructions")
    assert result.budget.total_tokens <= result.budget.available_tokens
    assert result.budget.available_tokens == 16000 - 3200


def test_the_driver_is_built_once_and_reused():
    ctxengine.build_context(DEMO, "one")
    first = driver.default_driver()
    ctxengine.build_context(DEMO, "two", mode="review")
    assert driver.default_driver() is first


def test_same_input_same_output():
    a = ctxengine.build_context(DEMO, "Same request")
    b = ctxengine.build_context(DEMO, "Same request")
    assert a.context == b.context and a.as_json() == b.as_json()


@pytest.mark.parametrize("project", corpus_projects(), ids=lambda p: p.name)
def test_every_corpus_project_builds(project):
    result = ctxengine.build_context(project, "Continue with the current phase")
    assert result.budget.total_tokens <= result.budget.available_tokens
    assert "# User Request" in result.context
    assert any(section.kind == "plan" for section in result.sections)

"""End to end through the shared driver: the demo and every real GSD project of the corpus."""

from __future__ import annotations

import pytest

import ctxengine
from ctxengine import driver
from conftest import DEMO, corpus_projects

QUIET = {"state.includeGit": False, "state.includeEnvironment": False}  # no machine or repo state in the output


def test_demo_builds_with_every_stage():
    result = ctxengine.build_context(DEMO, "Make a bad password return 401")
    kinds = {section.kind for section in result.sections}
    assert {"rules", "reference", "plan", "history", "request", "instructions"} <= kinds
    assert result.context.index("# System Reference") < result.context.index("# User Request")
    # stable first (rules, instructions, references, plan), volatile last (history, request)
    assert result.context.index("# Output Instructions") < result.context.index("# Current Plan")
    assert result.context.index("# Session History") < result.context.index("# User Request")
    assert result.budget.total_tokens <= result.budget.available_tokens
    assert result.budget.available_tokens == 16000 - 3200


def test_the_driver_is_built_once_and_reused(monkeypatch):
    builds = []
    real = driver.build_driver
    monkeypatch.setattr(driver, "build_driver", lambda *a, **k: builds.append(a) or real(*a, **k))
    driver.driver_for.cache_clear()
    ctxengine.build_context(DEMO, "one", overrides=QUIET)
    ctxengine.build_context(DEMO, "two", mode="review", overrides=QUIET)
    ctxengine.build_context(DEMO, "three", max_tokens=9000, overrides=QUIET)
    assert len(builds) == 1  # the CLI, the API and batch all reuse it


def test_same_input_same_output():
    a = ctxengine.build_context(DEMO, "Same request", overrides=QUIET)
    b = ctxengine.build_context(DEMO, "Same request", overrides=QUIET)
    assert a.context == b.context and a.as_json() == b.as_json()


@pytest.mark.parametrize("project", corpus_projects(), ids=lambda p: p.name)
def test_every_corpus_project_builds(project):
    result = ctxengine.build_context(project, "Continue with the current phase")
    assert result.budget.total_tokens <= result.budget.available_tokens
    assert "# User Request" in result.context
    assert any(section.kind == "plan" for section in result.sections)


def test_lineage_follows_each_section_from_its_sources_to_the_output():
    out = ctxengine.run_nodes(["build_result", "context_lineage"], DEMO, "Fix the login endpoint",
                              max_tokens=2200, reserve_tokens=400)
    graph, result = out["context_lineage"], out["build_result"]
    final = {s.key for s in result.sections}
    dropped = [e.section_key for e in result.ledger if e.action == "dropped"]
    assert dropped, "the budget is small enough that something is dropped"
    import networkx as nx

    for key in dropped:
        assert nx.has_path(graph, f"section:{key}", "output:dropped")
        assert not nx.has_path(graph, f"section:{key}", "output:final_context")
    for key in final:
        assert nx.has_path(graph, f"section:{key}", "output:final_context")
    rules = next(s for s in result.sections if s.kind == "rules")
    source = rules.sources[0]
    assert graph.has_edge(f"source:{source.location}", f"section:{rules.key}")


def test_build_draws_the_lineage_on_request(tmp_path):
    from test_cli import run_cli

    target = tmp_path / "lineage.dot"
    done = run_cli("build", "--request", "x", "--lineage", str(target))
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert "digraph lineage" in text and "final context" in text and "Project rules" in text


def test_the_summarizer_variant_follows_the_configuration():
    args = dict(max_tokens=1700, reserve_tokens=400)  # the priority-70 architecture document is summarized
    extractive = ctxengine.build_context(DEMO, "Fix the login endpoint", **args)
    headings = ctxengine.build_context(DEMO, "Fix the login endpoint", overrides={"truncation.summarizer": "headings"},
                                       **args)
    summarized = [e.section_key for e in extractive.ledger if e.action == "summarized"]
    assert summarized, "the budget is tight enough that something is summarized"
    assert extractive.context != headings.context
    assert headings.budget.total_tokens <= headings.budget.available_tokens

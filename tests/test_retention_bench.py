"""Smoke test of benchmarks/retention.py: its core on one tiny generated project, through the
real driver and real tiktoken. Checks the benchmark's invariants (every output within its
budget, ctxengine keeps every immutable fact, the generator is deterministic and plants every
fact where the untruncated context shows it), not its scores."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import pytest  # noqa: E402

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "retention.py"


def _load():
    spec = importlib.util.spec_from_file_location("retention_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


R = _load()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    project = R.make_project(tmp_path_factory.mktemp("tiny"), 5, "tiny")
    full, outcomes = R.evaluate(project, fractions=(0.25, 0.5))
    return project, full, outcomes


def test_generator_is_deterministic_and_plants_every_kind(tmp_path):
    a = R.make_project(tmp_path / "a", 7, "tiny")
    b = R.make_project(tmp_path / "b", 7, "tiny")
    files_a = sorted(p.relative_to(a.path) for p in a.path.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b.path) for p in b.path.rglob("*") if p.is_file())
    for rel in files_a:
        assert (a.path / rel).read_bytes() == (b.path / rel).read_bytes()
    assert a.request == b.request and [f.token for f in a.facts] == [f.token for f in b.facts]
    assert len({f.token for f in a.facts}) == len(a.facts)
    kinds = {f.token.split("-")[1] for f in a.facts}
    assert {"rules", "request", "instructions", "plan", "history", "ref70", "ref40", "dep"} <= kinds
    assert {f.token.split("-")[1] for f in a.facts if f.immutable} == {"rules", "request", "instructions"}
    assert R.make_project(tmp_path / "c", 8, "tiny").facts[0].token != a.facts[0].token


def test_every_planted_fact_is_in_the_untruncated_context(tiny):
    project, full, _ = tiny
    assert all(f.token in full.result.context for f in project.facts)
    assert full.tokens == R.counter().count(full.result.context)
    assert full.render(full.result.sections) == full.result.context  # baselines re-render the same prompt


def test_every_output_is_within_budget_and_ctxengine_keeps_the_immutable_facts(tiny):
    project, full, outcomes = tiny
    assert {o.method for o in outcomes} == set(R.METHODS)
    assert len(outcomes) == 2 * len(R.METHODS)
    for o in outcomes:
        assert o.available == int(o.fraction * full.tokens)
        assert o.error is None, o.error
        assert 0 < o.tokens <= o.available, (o.method, o.fraction, o.tokens, o.available)
        assert 0.0 <= o.score <= 1.0
    for o in (x for x in outcomes if x.method == "ctxengine"):
        assert o.immutable_kept, [f.token for f in o.lost if f.immutable]
        assert o.result.budget.total_tokens == o.tokens  # ctxengine's own count is the exact count
        assert o.result.budget.available_tokens == o.available
        assert o.score < 1.0  # it really had to cut


def test_baselines_do_what_they_say(tiny):
    project, full, outcomes = tiny
    text = full.result.context
    n = int(0.25 * full.tokens)
    counter = R.counter()
    head, tail = R.baseline_head(full, n), R.baseline_tail(full, n)
    assert text.startswith(head) and text.endswith(tail)
    assert counter.count(head) <= n and counter.count(tail) <= n and counter.count(head) >= n - 2
    dropped = R.baseline_drop_sections(full, n)
    assert all(f.token in dropped for f in project.facts if f.immutable)  # drops from the lowest priority up
    trimmed = R.baseline_langchain(full, int(0.75 * full.tokens))
    history = [f for f in project.facts if f.section == "history"]
    kept = [f for f in history if f.token in trimmed]
    assert kept and len(kept) < len(history)
    assert history[-1] in kept  # trim_messages(strategy="last") keeps the newest messages


def test_score_counts_weights_of_the_facts_present(tiny):
    project, _, _ = tiny
    some = project.facts[:3]
    kept, total, immutable_kept, lost = R.score_text(" ".join(f.token for f in some), project.facts)
    assert kept == pytest.approx(sum(f.weight for f in some))
    assert total == pytest.approx(sum(f.weight for f in project.facts))
    assert len(lost) == len(project.facts) - 3
    assert immutable_kept == all(f in some for f in project.facts if f.immutable)

"""The lineage diagram: every ledger entry drawn (no self-loops), mends on the ledger and drawn,
dropped and summarized sections marked. Asserted on the DOT text."""

from __future__ import annotations

import re

import pytest

import ctxengine
from ctxengine.nodes.lib.crossref import mends_by_section
from ctxengine.nodes.report import context_lineage
from ctxengine.nodes.types import LedgerEntry, Section, Source
from ctxengine.viz.lineage import lineage_digraph
from conftest import DEMO


def _edges(dot_source: str) -> list[tuple[str, str]]:
    return re.findall(r"^\s*(n\d+) -> (n\d+)", dot_source, re.M)


def _entry_nodes(dot_source: str) -> list[str]:
    """The DOT node lines of ledger entries (their label starts with the step)."""
    return re.findall(r'^\s*n\d+ \[label="(\w+)\\n(\w+) (\d+)->(\d+)"', dot_source, re.M)


@pytest.fixture(scope="module")
def demo():
    out = ctxengine.run_nodes(["build_result", "context_lineage"], DEMO, "Fix the login endpoint",
                              max_tokens=2200, reserve_tokens=400)
    return out["build_result"], out["context_lineage"], lineage_digraph(out["context_lineage"]).source


def test_one_node_per_ledger_entry_and_no_self_loops(demo):
    result, _, source = demo
    edges = _edges(source)
    assert edges and all(tail != head for tail, head in edges)
    drawn = _entry_nodes(source)
    assert sorted(drawn) == sorted((e.step, e.action, str(e.tokens_before), str(e.tokens_after)) for e in result.ledger)


def test_the_same_step_twice_is_two_nodes():
    """Two entries of one step (exact_fit cutting twice) were one node with a self-loop, and the
    second cut (1019 -> 833) was hidden."""
    source = Source("file", "docs/big.md", (1, 90))
    big = Section("ref:docs/big.md", "Big", "reference", "x" * 100, 60, "references", (source,))
    ledger = [LedgerEntry(big.key, "exact_fit", "cut", 1200, 1019, "cut: over the target"),
              LedgerEntry(big.key, "exact_fit", "cut", 1019, 833, "cut: still over the target")]
    dot = lineage_digraph(context_lineage([big], ledger, [big.with_content("x" * 50)])).source
    assert ("exact_fit", "cut", "1200", "1019") in _entry_nodes(dot)
    assert ("exact_fit", "cut", "1019", "833") in _entry_nodes(dot)
    assert all(tail != head for tail, head in _edges(dot))
    assert "[cut]" in dot


def test_mends_are_on_the_ledger_and_drawn(demo):
    result, graph, source = demo
    mends = [e for e in result.ledger if e.action == "mended"]
    assert mends and all(e.step == "crossref_mending" and e.reason.startswith("cross-reference mended:") for e in mends)
    assert len(mends) == len(mends_by_section(result.truncation["cross_references"], [e.section_key for e in result.ledger]))
    for entry in mends:  # the last entry of the mended section ends at its final tokens
        last = [e for e in result.ledger if e.section_key == entry.section_key][-1]
        assert last.action == "mended" and last.tokens_after == result.section_tokens[entry.section_key]
    assert "crossref_mending" in source and "shape=component" in source
    refers = [(t, h) for t, h, a in graph.edges(data=True) if a.get("kind") == "refers"]
    assert refers and 'label="refers to"' in source and "style=dashed" in source


def test_dropped_and_summarized_sections_are_marked(demo):
    result, graph, source = demo
    fates = {name.split(":", 1)[1]: a["fate"] for name, a in graph.nodes(data=True) if a.get("kind") == "section"}
    dropped = {e.section_key for e in result.ledger if e.action == "dropped"}
    assert dropped and {k for k, f in fates.items() if f == "dropped"} == dropped
    assert "summarized" in fates.values()
    assert source.count("\\n[dropped]") == len(dropped) and "\\n[summarized]" in source
    assert 'style="filled,dashed"' in source


def test_a_title_that_looks_like_graphviz_html_stays_text():
    hostile = Section("ref:x.md", "<b>bold</b> <img src=x onerror=alert(1)>", "reference", "text", 60,
                      "references", (Source("file", "x.md", None),))
    dot = lineage_digraph(context_lineage([hostile], [], [hostile])).source
    assert 'label="<b>bold</b>' in dot and "label=<" not in dot  # a quoted string, not an HTML label


def test_mends_by_section_takes_the_longest_key_and_leaves_immutable_notes_out():
    notes = ["ref:a.md: pointed 'see b' at b.md", "ref:a.md.bak: marked 'see c' as cut",
             "rules: immutable section left unchanged; it refers to dropped 'B' ('see b')"]
    assert mends_by_section(notes, ["ref:a.md", "ref:a.md.bak", "rules"]) == {
        "ref:a.md": ["pointed 'see b' at b.md"], "ref:a.md.bak": ["marked 'see c' as cut"]}

"""The DAG diagram: laid out by stage left to right, one cluster per stage, width bounded;
``dag --stage`` draws one stage with its inputs from other stages greyed. Asserted on the DOT text."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from ctxengine.cli import main
from ctxengine.driver import default_driver
from ctxengine.nodes.types import CtxEngineError
from ctxengine.viz.dag import GREY, STAGES, dag_digraph


@pytest.fixture(scope="module")
def driver():
    return default_driver()


def _clusters(source: str) -> dict[str, set[str]]:
    """Cluster name -> the node names declared inside it (columns included)."""
    out, current, depth = {}, None, 0
    for line in source.splitlines():
        match = re.match(r"\s*subgraph (\w+) \{", line)
        if match:
            depth += 1
            if match.group(1).startswith("cluster_"):
                current = match.group(1)[len("cluster_"):]
                out[current], depth = set(), 1
            continue
        if line.strip() == "}" and current is not None:
            depth -= 1
            if depth == 0:
                current = None
            continue
        node = re.match(r"\s*(\w+)(?: \[|$)", line)
        if current is not None and node and node.group(1) not in ("graph", "node", "edge", "rank"):
            out[current].add(node.group(1))
    return out


def _edges(source: str) -> list[tuple[str, str, str]]:
    return re.findall(r"^\s*(\w+) -> (\w+)( \[style=invis[^\]]*\])?", source, re.M)


def test_one_cluster_per_stage_left_to_right(driver):
    source = dag_digraph(driver).source
    nodes = {n.name: n for n in driver.list_available_variables()}
    assert "rankdir=LR" in source
    clusters = _clusters(source)
    stages = {n.tags.get("stage") for n in nodes.values() if not n.is_external_input}
    assert set(clusters) == stages | {"inputs"}
    assert [s for s in STAGES if s in clusters] == list(clusters)  # written in pipeline order
    for name, node in nodes.items():
        where = [stage for stage, members in clusters.items() if name in members]
        assert where == (["inputs"] if node.is_external_input else [node.tags["stage"]]), name
    drawn = [(t, h) for t, h, invisible in _edges(source) if not invisible]
    assert all(tail != head for tail, head in drawn)
    expected = {(d, name) for name, n in nodes.items() for d in (*n.required_dependencies, *n.optional_dependencies)}
    assert set(drawn) == expected and len(drawn) == len(expected)
    chain = [(t, h) for t, h, invisible in _edges(source) if invisible]  # the stage order, as invisible edges
    firsts = [next(s for s, m in clusters.items() if t in m) for t, _ in chain]
    assert [STAGES.index(s) for s in firsts] == sorted(STAGES.index(s) for s in firsts)


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' is not installed (.ci/run installs it)")
def test_the_width_is_bounded(driver, tmp_path):
    """It was 8,142 pt wide: one long chain of 40 nodes from left to right."""
    (tmp_path / "dag.dot").write_text(dag_digraph(driver).source, encoding="utf-8")
    plain = subprocess.run(["dot", "-Tplain", str(tmp_path / "dag.dot")], capture_output=True, text=True, timeout=60)
    _, _, width, height = plain.stdout.splitlines()[0].split()[:4]
    assert float(width) * 72 <= 2500, f"{float(width) * 72:.0f} pt wide"
    assert float(height) * 72 <= 3000


def test_one_stage_with_its_inputs_greyed(driver):
    source = dag_digraph(driver, "truncation").source
    nodes = {n.name: n for n in driver.list_available_variables()}
    own = {name for name, n in nodes.items() if n.tags.get("stage") == "truncation"}
    clusters = _clusters(source)
    assert set(clusters) == {"truncation"} and clusters["truncation"] == own
    inputs = {d for name in own for d in (*nodes[name].required_dependencies, *nodes[name].optional_dependencies)} - own
    greyed = set(re.findall(rf'^\s*(\w+) \[[^\]]*fillcolor="{GREY}"', source, re.M))
    assert inputs and greyed == inputs and "budget_report" in greyed and "crossref_mending" not in source
    assert "style=\"rounded,filled,dashed\"" in source


def test_dag_stage_from_the_command_line(tmp_path, capsys):
    target = tmp_path / "truncation.dot"
    assert main(["dag", "--stage", "truncation", "-o", str(target)]) == 0
    assert "subgraph cluster_truncation" in target.read_text() and "cluster_state" not in target.read_text()
    assert main(["dag", "--stage", "nonsense", "-o", str(tmp_path / "x.dot")]) == 2
    err = capsys.readouterr().err
    assert "--stage 'nonsense'" in err and "truncation" in err and not (tmp_path / "x.dot").exists()
    with pytest.raises(CtxEngineError, match="choose one of: inputs, config"):
        dag_digraph(default_driver(), "nonsense")

"""The steps dag_digraph (viz/dag.py) is made of, one table each: the stage asked for checked, the
nodes shown and greyed, the members of each column, the invisible column-order edges and the
dependency edges drawn."""

from __future__ import annotations

import re

import graphviz
import pytest

from ctxengine.nodes.types import CtxEngineError
from ctxengine.viz import dag as D


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


STAGE_OF = {"project_dir": "inputs", "config": "config", "git_state": "state", "plan_state": "state"}
DEPS = {"project_dir": [], "config": ["project_dir"], "git_state": ["config", "project_dir"],
        "plan_state": ["git_state", "ghost"]}


def edges(dot: graphviz.Digraph) -> list[str]:
    return [line.strip() for line in dot.body if "->" in line]


@pytest.mark.parametrize("stage, error", [
    case("every stage", None, None),
    case("a stage some node has", "state", None),
    case("the inputs", "inputs", None),
    case("a stage no node has, naming those there are in pipeline order", "render",
         "dag --stage 'render': no node has this stage; choose one of: inputs, config, state"),
    case("a made-up stage", "nonsense",
         "dag --stage 'nonsense': no node has this stage; choose one of: inputs, config, state"),
])
def test_check_stage(stage, error):
    if error is None:
        assert D._check_stage(stage, STAGE_OF) is None
    else:
        with pytest.raises(CtxEngineError, match=re.escape(error)):
            D._check_stage(stage, STAGE_OF)


@pytest.mark.parametrize("stage, shown, greyed", [
    case("every stage: all shown, none greyed", None, set(STAGE_OF), set()),
    case("one stage greys what it reads from others, not what is unknown", "state",
         {"git_state", "plan_state"}, {"config", "project_dir"}),
    case("a stage reading nothing else", "inputs", {"project_dir"}, set()),
    case("config reads an input", "config", {"config"}, {"project_dir"}),
])
def test_shown_and_greyed(stage, shown, greyed):
    assert D._shown(STAGE_OF, stage) == shown
    assert D._greyed(shown, DEPS, stage) == greyed


@pytest.mark.parametrize("members, columns, expected", [
    case("one column keeps the order", ["a", "b"], {"a": 0, "b": 0}, {0: ["a", "b"]}),
    case("two columns", ["a", "b", "c"], {"a": 1, "b": 0, "c": 1}, {1: ["a", "c"], 0: ["b"]}),
    case("no members", [], {}, {}),
])
def test_by_column(members, columns, expected):
    assert D._by_column(members, columns) == expected


@pytest.mark.parametrize("heads, expected", [
    case("first of each column, sorted by (stage place, column)",
         {(2, 0): ["c", "d"], (0, 0): ["a"], (0, 1): ["b"]},
         ["a -> b [style=invis weight=0]", "b -> c [style=invis weight=0]"]),
    case("a single column: no edge", {(0, 0): ["a", "b"]}, []),
])
def test_draw_column_order(heads, expected):
    dot = graphviz.Digraph()
    D._draw_column_order(dot, heads)
    assert edges(dot) == expected


@pytest.mark.parametrize("shown, greyed, expected", [
    case("every stage: edges from drawn nodes only, never from an unknown name", set(STAGE_OF), set(),
         ["project_dir -> config", "config -> git_state", "project_dir -> git_state", "git_state -> plan_state"]),
    case("one stage: edges from greyed nodes too", {"git_state", "plan_state"}, {"config", "project_dir"},
         ["config -> git_state", "project_dir -> git_state", "git_state -> plan_state"]),
    case("a dependency neither shown nor greyed draws no edge", {"config"}, set(), []),
])
def test_draw_dependencies(shown, greyed, expected):
    dot = graphviz.Digraph()
    D._draw_dependencies(dot, shown, greyed, DEPS)
    assert edges(dot) == expected

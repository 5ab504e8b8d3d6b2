"""Lazy packages: the truncation and summary code loads when something is cut, and the lazy
tables of nodes/lib/truncate and nodes/lib/summarize give exactly what eager imports gave."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

LIB = REPO / "nodes" / "lib"
TRUNCATE = ("measure", "pools", "units", "textcut", "history_fit", "strategy", "engine", "summaries")


def _defined(path: Path) -> list[str]:
    """The public names a module defines at its top level (what ``from module import *`` exports of its own)."""
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names += [e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target])
                          if isinstance(e, ast.Name)]
    return [name for name in names if not name.startswith("_")]


def test_every_name_of_the_truncate_modules_is_reached_through_the_package():
    from ctxengine.nodes.lib import truncate as T

    for sub in TRUNCATE:
        module = importlib.import_module(f"ctxengine.nodes.lib.truncate.{sub}")
        for name in _defined(LIB / "truncate" / f"{sub}.py"):
            assert getattr(T, name) is getattr(module, name), f"truncate.{name} (from {sub})"
            assert name in dir(T)  # kept on the package once found
    assert (T._Forms, T._id_spans, T._with_change) == (
        importlib.import_module("ctxengine.nodes.lib.truncate.history_fit")._Forms,
        importlib.import_module("ctxengine.nodes.lib.truncate.summaries")._id_spans,
        importlib.import_module("ctxengine.nodes.lib.truncate.engine")._with_change)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        T.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        T._private_elsewhere  # noqa: B018


def test_the_summarize_package_gives_its_names_from_the_modules_that_define_them():
    from ctxengine.nodes.lib import summarize as S

    assert set(S.__all__) <= set(dir(S))
    for name in S.__all__:
        value = getattr(S, name)
        home = [p.stem for p in (LIB / "summarize").glob("*.py") if name in _defined(p)]
        assert len(home) == 1, (name, home)
        assert value is getattr(importlib.import_module(f"ctxengine.nodes.lib.summarize.{home[0]}"), name)
    namespace = {}
    exec("from ctxengine.nodes.lib.summarize import *", namespace)  # noqa: S102
    assert set(S.__all__) <= set(namespace)


_LOADED = """
import json, sys, ctxengine, ctxengine.driver
def loaded():
    return sorted(m.rsplit(".lib.", 1)[1] for m in sys.modules if ".lib.summarize." in m or ".lib.truncate." in m)
ctxengine.driver.default_driver()
graph = loaded()
fits = ctxengine.build_context(None, "Fix the login endpoint", cache=False)
after_fit = loaded()
cut = ctxengine.build_context(None, "Fix the login endpoint", cache=False, overrides={"budget.maxTokens": 1500})
print(json.dumps([graph, after_fit, loaded(), fits.budget.total_tokens, sorted({e.action for e in cut.ledger})]))
"""


def test_the_summary_code_loads_only_when_a_build_cuts_something():
    done = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    graph, after_fit, after_cut, tokens, actions = json.loads(done.stdout.strip().splitlines()[-1])
    summaries = {"summarize.markdown", "summarize.document", "summarize.fit", "summarize.plan", "summarize.diff"}
    assert not summaries & set(graph) and not summaries & set(after_fit), (graph, after_fit)
    assert "truncate.engine" in graph and "summarize.protocol" in graph  # what the node annotations need
    assert tokens > 0 and "summarized" in actions and summaries <= set(after_cut)

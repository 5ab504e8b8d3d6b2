"""The package nodes/lib/truncate gives every name of its modules; nodes/lib/summarize gives its
interface and dispatch, whose summaries load on first use (tests/test_coldstart.py).

(Both loaded their modules lazily until issue 21: a build that cuts nothing was spared 6-8 ms of
CPU, under the 10 ms a start-up optimisation must save to stay. The summaries grew, and loading
them on the first summary saves more than that again: docs/CONTRIBUTING-NODES.md.)"""

from __future__ import annotations

import ast
import importlib
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
            assert name in dir(T)
    assert (T._Forms, T._id_spans, T._with_change) == (
        importlib.import_module("ctxengine.nodes.lib.truncate.history_fit")._Forms,
        importlib.import_module("ctxengine.nodes.lib.truncate.summaries")._id_spans,
        importlib.import_module("ctxengine.nodes.lib.truncate.engine")._with_change)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        T.no_such_name  # noqa: B018


def test_the_summarize_package_gives_the_interface_and_the_dispatch_from_the_modules_that_define_them():
    from ctxengine.nodes.lib import summarize as S

    homes = {"protocol": {"METHODS", "Summarizer"},
             "dispatch": {"BuiltinSummarizer", "as_summarizer", "summarize_section"}}
    assert set(S.__all__) == set().union(*homes.values())
    for home, names in homes.items():
        module = importlib.import_module(f"ctxengine.nodes.lib.summarize.{home}")
        assert all(getattr(S, name) is getattr(module, name) for name in names)
        assert set(names) <= set(_defined(LIB / "summarize" / f"{home}.py"))

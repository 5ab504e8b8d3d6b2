"""Node swaps: one's own functions replace nodes of the same name (API, Session, CLI), checked
against the graph; the summarizer is chosen at run time, so every build runs the graph once."""

from __future__ import annotations

import functools
import json
import shutil
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from hamilton.lifecycle import api as lifecycle

import ctxengine
from ctxengine import driver
from ctxengine.nodes.lib.summarize import BuiltinSummarizer, Summarizer
from ctxengine.nodes.lib.truncate import BuiltinStrategy, Strategy
from ctxengine.nodes.types import CtxEngineError
from conftest import DEMO

QUIET = {"state.includeGit": False, "state.includeEnvironment": False}
TIGHT = dict(max_tokens=1600, reserve_tokens=400, overrides=QUIET)  # the demo's references get summarized
REQUEST = "Fix the login endpoint"

FIRST_LINES = '''
from ctxengine.nodes.lib.summarize import Summarizer


class FirstLines:
    """Keeps a section's first lines (and says so)."""

    def summarize(self, section, max_tokens, counter):
        lines = ["FIRST-LINES"]
        for line in section.content.splitlines():
            if counter.count("\\n".join([*lines, line])) > max_tokens:
                break
            lines.append(line)
        return "\\n".join(lines)


def summarizer() -> Summarizer:
    """My summarizer."""
    return FirstLines()
'''


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def summarized_text(result) -> list[str]:
    keys = {e.section_key for e in result.ledger if e.action == "summarized"}
    return [s.content for s in result.sections if s.key in keys]


# ----------------------------------------------------------------------------- swapping


def test_a_summarizer_file_replaces_the_node_and_leaves_the_default_alone(tmp_path):
    path = write(tmp_path, "my_nodes.py", FIRST_LINES)
    mine = ctxengine.build_context(DEMO, REQUEST, nodes=[path], **TIGHT)
    builtin = ctxengine.build_context(DEMO, REQUEST, **TIGHT)
    assert summarized_text(mine) and all(text.startswith("FIRST-LINES") for text in summarized_text(mine))
    assert summarized_text(builtin) and not any("FIRST-LINES" in text for text in summarized_text(builtin))
    assert mine.budget.total_tokens <= mine.budget.available_tokens


def test_a_function_or_a_module_swaps_the_same_way(tmp_path):
    calls = []

    class Outline:
        def summarize(self, section, max_tokens, counter):
            calls.append(section.key)
            return "\n".join(line for line in section.content.splitlines() if line.startswith("#"))

    def summarizer() -> Summarizer:
        return Outline()

    by_function = ctxengine.run_nodes(["build_result"], DEMO, REQUEST, nodes=[summarizer], **TIGHT)["build_result"]
    assert calls and set(calls) <= {e.section_key for e in by_function.ledger}
    module = driver.load_swap_file(write(tmp_path, "my_nodes.py", FIRST_LINES))
    by_module = ctxengine.build_context(DEMO, REQUEST, nodes=[module], **TIGHT)
    assert all(text.startswith("FIRST-LINES") for text in summarized_text(by_module))


def test_a_strategy_of_ones_own_cuts_the_middle_sections(tmp_path):
    path = write(tmp_path, "strategy.py", '''
        from dataclasses import dataclass

        from ctxengine.nodes.lib.summarize import Summarizer
        from ctxengine.nodes.lib.truncate import BuiltinStrategy, Reduced, Strategy, is_history


        @dataclass(frozen=True)
        class FirstParagraph(BuiltinStrategy):
            def cut(self, section, keep, counter, tokens, estimated, pristine):
                text = section.content.split("\\n\\n")[0]
                if is_history(section) or counter.count(text) > keep:
                    return super().cut(section, keep, counter, tokens, estimated, pristine)
                return Reduced(text, counter.count(text), "cut", note="first paragraph kept")


        def middle_strategy(summarizer: Summarizer) -> Strategy:
            return FirstParagraph("middle", None)  # no summary first: cut at once
        ''')
    result = ctxengine.build_context(DEMO, REQUEST, nodes=[path], **TIGHT)
    assert any(e.action == "cut" and e.reason.endswith("(first paragraph kept)") for e in result.ledger)
    assert not any(e.action == "summarized" for e in result.ledger if e.section_key.startswith("ref:"))


def test_the_driver_is_built_once_per_swap_set_and_a_changed_file_reloads(tmp_path):
    path = write(tmp_path, "my_nodes.py", FIRST_LINES)
    first = driver.swap_modules([path])
    assert driver.swap_modules([path]) == first  # same file, same module: the same cached driver
    before = driver.driver_for.cache_info()
    ctxengine.build_context(DEMO, REQUEST, nodes=[path], **TIGHT)
    ctxengine.build_context(DEMO, "again", nodes=[path], **TIGHT)
    after = driver.driver_for.cache_info()
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 1
    Path(path).write_text(FIRST_LINES.replace("FIRST-LINES", "EDITED-LINES") + "\n# edited\n", encoding="utf-8")
    assert driver.swap_modules([path]) != first
    edited = ctxengine.build_context(DEMO, REQUEST, nodes=[path], **TIGHT)
    assert all(text.startswith("EDITED-LINES") for text in summarized_text(edited))


def test_a_session_swaps_for_every_round(tmp_path):
    shutil.copytree(DEMO / ".planning", tmp_path / "demo" / ".planning")
    session = ctxengine.Session(tmp_path / "demo", nodes=[write(tmp_path, "my_nodes.py", FIRST_LINES)],
                                max_tokens=1600, reserve_tokens=400, overrides=QUIET)
    for request in ("Fix the login endpoint", "Now the logout"):
        result = session.next_context(request)
        assert all(text.startswith("FIRST-LINES") for text in summarized_text(result))
        session.record(20, "done")


# ----------------------------------------------------------------------------- checks


@pytest.mark.parametrize("source, expected", [
    ("def sumarizer() -> str:\n    return 'x'\n",
     r"'sumarizer' \(.*bad.py:1\): there is no node 'sumarizer' to replace; closest: summarizer"),
    ("def summarizer() -> str:\n    return 'x'\n",
     r"'summarizer' \(.*bad.py:1\): it returns str, but node 'summarizer' returns Summarizer .*lacks: summarize"),
    ("from ctxengine.nodes.lib.summarize import Summarizer\n"
     "def summarizer(context_confg: dict) -> Summarizer:\n    return None\n",
     r"parameter 'context_confg' names no node of the dataflow; closest: context_config"),
    ("from ctxengine.nodes.lib.summarize import Summarizer\n"
     "def summarizer(context_config: str) -> Summarizer:\n    return None\n",
     r"parameter 'context_config' is annotated str, but node 'context_config' returns dict"),
    ("def project_dir() -> str:\n    return '/'\n", r"there is no node 'project_dir' to replace"),
    ("x = 1\nimport no_such_module_here\n", r"bad.py:2': importing it failed: ModuleNotFoundError"),
    ("def summarizer(:\n", r"bad.py:1': importing it failed: SyntaxError"),
])
def test_a_swap_that_does_not_fit_is_an_error_naming_the_function(tmp_path, source, expected):
    path = write(tmp_path, "bad.py", source)
    with pytest.raises(CtxEngineError, match=expected):
        ctxengine.build_context(DEMO, REQUEST, nodes=[path], overrides=QUIET)


class NoCut:
    """A strategy without cut and reduce_history."""

    name = "middle"
    summarizer = None

    def summarize(self, section, keep, counter):
        return None


def test_a_strategy_lacking_a_method_is_refused(tmp_path):
    def middle_strategy() -> NoCut:
        return NoCut()

    with pytest.raises(CtxEngineError, match=r"'middle_strategy' .* returns Strategy .*NoCut lacks: cut, reduce_history"):
        ctxengine.build_context(DEMO, REQUEST, nodes=[middle_strategy], overrides=QUIET)


def test_bad_swap_arguments_are_errors(tmp_path):
    with pytest.raises(CtxEngineError, match="not a module, a function or a path"):
        ctxengine.build_context(DEMO, REQUEST, nodes=[42])
    with pytest.raises(CtxEngineError, match=r"missing.py': No such file"):
        ctxengine.build_context(DEMO, REQUEST, nodes=[str(tmp_path / "missing.py")])
    with pytest.raises(CtxEngineError, match="not a .py file"):
        ctxengine.build_context(DEMO, REQUEST, nodes=[write(tmp_path, "nodes.txt", "")])


def test_the_builtins_satisfy_the_protocols():
    assert isinstance(BuiltinSummarizer(), Summarizer) and isinstance(BuiltinStrategy("tail"), Strategy)
    assert issubclass(BuiltinStrategy, Strategy) and not issubclass(BuiltinSummarizer, Strategy)


# ----------------------------------------------------------------------------- one run per build


class _Executions(lifecycle.NodeExecutionHook):
    """Counts the executions of every node (a real Hamilton lifecycle adapter)."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.loaders: set[str] = set()

    def run_before_node_execution(self, *, node_name, node_tags, **kwargs):
        self.counts[node_name] += 1
        if "loader" in node_tags:
            self.loaders.add(node_name)

    def run_after_node_execution(self, **kwargs):
        pass


def test_a_project_choosing_the_headings_summarizer_runs_each_loader_once(tmp_path, monkeypatch):
    shutil.copytree(DEMO / ".planning", tmp_path / ".planning")
    config_file = tmp_path / ".planning" / "config.json"
    settings = json.loads(config_file.read_text(encoding="utf-8"))
    settings["truncation"] = {"summarizer": "headings"}
    config_file.write_text(json.dumps(settings), encoding="utf-8")
    executions = _Executions()
    monkeypatch.setattr(driver, "build_driver", functools.partial(driver.build_driver, adapters=[executions]))
    driver.driver_for.cache_clear()
    try:
        result = ctxengine.build_context(tmp_path, REQUEST, max_tokens=1700, reserve_tokens=400)
    finally:
        monkeypatch.undo()
        driver.driver_for.cache_clear()
    assert summarized_text(result)
    assert {"project_config", "git_snapshot", "gsd_planning", "project_layout"} <= executions.loaders
    assert {name: executions.counts[name] for name in executions.loaders} == {name: 1 for name in executions.loaders}
    assert executions.counts["summarizer"] == 1 and max(executions.counts.values()) == 1


# ----------------------------------------------------------------------------- the CLI


def test_build_takes_module_files(tmp_path):
    from test_cli import run_cli

    path = write(tmp_path, "my_nodes.py", FIRST_LINES)
    done = run_cli("build", "--request", REQUEST, "--max-tokens", "1700", "--reserve-tokens", "400",
                   "--set", "state.includeGit=false", "--module", path, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "FIRST-LINES" in json.loads(done.stdout)["context"]


def test_a_module_that_does_not_fit_is_exit_2_with_one_line(tmp_path, capsys):
    from ctxengine.cli import main

    code = main(["build", "--request", "x", "--module", write(tmp_path, "bad.py", "def sumarizer() -> str:\n    return ''\n")])
    err = capsys.readouterr().err
    assert code == 2 and "closest: summarizer" in err and len(err.splitlines()) == 1

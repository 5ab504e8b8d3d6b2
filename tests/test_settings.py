"""Settings nodes per stage: a changed key changes only the settings of the stages that read it,
settings are frozen, hashable and picklable, and no stage node takes the whole configuration."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path

import pytest
from hamilton.caching.fingerprinting import hash_value

import ctxengine
from ctxengine import caching, driver
from ctxengine.nodes import settings as settings_nodes
from ctxengine.nodes.config import defaults
from ctxengine.nodes.lib.settings import FrozenMap, frozen

SETTINGS = ("trust_settings", "budget_settings", "truncation_settings", "quality_settings", "monitor_settings",
            "reference_settings", "disclosure_settings", "state_settings", "render_settings", "code_settings")
NODES = Path(ctxengine.__file__).resolve().parent / "nodes"


def settings_of(project: Path, overrides: dict | None = None) -> dict:
    return ctxengine.run_nodes(list(SETTINGS), project, overrides=overrides or {})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("project")


@pytest.fixture(scope="module")
def baseline(project) -> dict:
    return settings_of(project)


def test_every_settings_node_is_in_the_graph():
    graph = driver.default_driver().graph.nodes
    assert set(SETTINGS) <= set(graph)
    assert {graph[name].tags.get("stage") for name in SETTINGS} == {"config"}


@pytest.mark.parametrize("key, value, changed", [
    ("template", "review", {"quality_settings", "disclosure_settings", "render_settings"}),
    ("contextTemplate", "gsd.md", {"quality_settings", "render_settings"}),
    ("outputInstructions", "Answer in one line.", {"render_settings"}),
    ("priorities.request", 99, {"render_settings"}),
    ("truncation.keepRecentRounds", 2, {"truncation_settings"}),
    ("truncation.minKeepTokens", 64, {"truncation_settings", "quality_settings"}),
    ("budget.softLimit", 0.7, {"truncation_settings"}),
    ("budget.maxTokens", 64000, {"budget_settings"}),
    ("monitor.keepRounds", 5, {"monitor_settings"}),
    ("references.maxDepth", 3, {"reference_settings"}),
    ("disclosure.maxFileBytes", 1000, {"disclosure_settings"}),
    ("state.gitLogCount", 0, {"state_settings"}),
    ("priorities.tree", 10, {"state_settings"}),
    ("trust.maxRedirects", 1, {"trust_settings"}),
])
def test_a_changed_key_changes_only_the_settings_that_read_it(project, baseline, key, value, changed):
    after = settings_of(project, {key: value})
    differ = {name for name in SETTINGS if after[name] != baseline[name]}
    assert differ == changed
    for name in set(SETTINGS) - changed:  # equal values, so equal cache keys for their readers
        assert hash_value(after[name]) == hash_value(baseline[name])
        assert caching.fingerprint(after[name]) == caching.fingerprint(baseline[name])
    for name in changed:
        assert hash_value(after[name]) != hash_value(baseline[name])
        assert caching.fingerprint(after[name]) != caching.fingerprint(baseline[name])


def test_a_template_key_leaves_truncation_settings_equal_and_a_truncation_key_leaves_render_settings(project,
                                                                                                      baseline):
    templated = settings_of(project, {"template": "research", "contextTemplate": "gsd.md"})
    assert templated["truncation_settings"] == baseline["truncation_settings"]
    assert hash(templated["truncation_settings"]) == hash(baseline["truncation_settings"])
    assert templated["render_settings"] != baseline["render_settings"]
    cut = settings_of(project, {"truncation.strategy": "head", "budget.pools.history": 0.1})
    assert cut["render_settings"] == baseline["render_settings"]
    assert cut["truncation_settings"] != baseline["truncation_settings"]
    assert cut["truncation_settings"].strategy == "head" and cut["truncation_settings"].pools["history"] == 0.1


def test_settings_are_frozen_hashable_picklable_and_fingerprinted_through_their_dict(baseline):
    for name, value in baseline.items():
        assert dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen, name
        assert not hasattr(type(value), "__slots__") and value.__dict__, name  # Hamilton hashes __dict__
        copy = pickle.loads(pickle.dumps(value))
        assert copy == value and hash(copy) == hash(value), name
        assert hash_value(copy) == hash_value(value), name
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)


def test_nested_values_are_tuples_and_read_only_mappings(baseline):
    state = baseline["state_settings"]
    assert isinstance(state.switches, FrozenMap) and isinstance(state.allowed_paths, tuple)
    assert isinstance(baseline["reference_settings"].groups["core"], tuple)
    with pytest.raises(TypeError):
        state.priorities["tree"] = 1  # type: ignore[index]
    nested = frozen({"a": [1, {"b": [2]}]})
    assert nested == {"a": (1, {"b": (2,)})} and hash(nested) == hash(frozen({"a": [1, {"b": [2]}]}))
    assert pickle.loads(pickle.dumps(nested)) == nested


def test_a_missing_key_is_a_bug_not_a_silent_default():
    config = defaults()
    del config["truncation"]["minKeepTokens"]
    with pytest.raises(KeyError, match="minKeepTokens"):
        settings_nodes.truncation_settings(config)


def test_no_stage_node_takes_the_whole_configuration():
    """Only the config and settings modules take ``context_config``; every other stage takes
    the settings of its stage (or a scalar), so a changed key reruns only its readers."""
    takers = []
    for path in sorted(NODES.glob("*.py")):
        if path.name in ("config.py", "settings.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in node.args.args + node.args.kwonlyargs]
                if "context_config" in names:
                    takers.append(f"{path.name}:{node.lineno} {node.name}")
    assert takers == []
    readers = {n.name for n in driver.default_driver().graph.nodes.values()
               if "context_config" in {d.name for d in n.dependencies}}
    assert readers <= {"context_config", *SETTINGS}, readers

"""Stage 1: defaults, then .planning/config.json, then overrides, with provenance."""

from __future__ import annotations

import pytest

from ctxengine import ConfigError, explain_config
from ctxengine.driver import execute
from ctxengine.cli import parse_override


def _config(project_dir, overrides=None):
    out = execute(["context_config", "config_provenance", "config_warnings"], project_dir, overrides)
    return out["context_config"], out["config_provenance"], out["config_warnings"]


def test_defaults_apply_without_a_config_file(tmp_path):
    config, provenance, warnings = _config(tmp_path)
    assert config["budget"]["maxTokens"] == 128000
    assert config["state"]["maxHistoryRounds"] == 5
    assert provenance["budget.maxTokens"].startswith("defaults")
    assert warnings == ()


def test_project_file_then_overrides_win_in_order(project):
    root = project({".planning/config.json": {"budget": {"maxTokens": 64000}, "template": "review"}})
    config, provenance, _ = _config(root, {"budget.maxTokens": 32000})
    assert config["budget"]["maxTokens"] == 32000
    assert provenance["budget.maxTokens"].startswith("override")
    assert config["template"] == "review"
    assert provenance["template"].endswith(".planning/config.json")
    # untouched siblings keep their defaults and their origin
    assert config["budget"]["reserveTokens"] == "auto"
    assert provenance["budget.reserveTokens"].startswith("defaults")


def test_nested_override_dict_and_dotted_keys_are_equivalent(tmp_path):
    a, _, _ = _config(tmp_path, {"budget": {"softLimit": 0.5}})
    b, _, _ = _config(tmp_path, {"budget.softLimit": 0.5})
    assert a == b and a["budget"]["softLimit"] == 0.5


def test_gsd_keys_are_honoured_and_foreign_keys_ignored(project):
    root = project({".planning/config.json": {
        "mode": "yolo", "depth": "quick", "workflow": {"research": True},
        "context_window": 200000, "context": "research",
    }})
    config, provenance, warnings = _config(root)
    assert config["budget"]["maxTokens"] == 200000
    assert "context_window" in provenance["budget.maxTokens"]
    assert config["template"] == "research"
    assert "mode" not in config and warnings == ()


def test_near_miss_key_warns_with_suggestion_and_file(project):
    root = project({".planning/config.json": {"budget": {"maxToken": 1000}, "refrences": {}}})
    config, _, warnings = _config(root)
    assert config["budget"]["maxTokens"] == 128000
    text = "\n".join(warnings)
    assert "'budget.maxToken'" in text and "'budget.maxTokens'" in text
    assert "'references'" in text
    assert "config.json" in text


def test_unknown_key_far_from_any_known_is_silently_ignored(project):
    root = project({".planning/config.json": {"my_tool_setting": 3}})
    _, _, warnings = _config(root)
    assert warnings == ()


@pytest.mark.parametrize(
    "data, key",
    [
        ({"budget": {"maxTokens": "lots"}}, "budget.maxTokens"),
        ({"state": {"includeGit": "yes"}}, "state.includeGit"),
        ({"references": {"core": "rules.md"}}, "references.core"),
        ({"budget": 5}, "budget"),
    ],
)
def test_wrong_type_is_an_error_naming_file_and_key(project, data, key):
    root = project({".planning/config.json": data})
    with pytest.raises(ConfigError) as err:
        _config(root)
    assert f"'{key}'" in str(err.value)
    assert "config.json" in str(err.value)


def test_invalid_json_names_line_and_column(project):
    root = project({".planning/config.json": '{\n  "budget": {\n    "maxTokens": 100,\n  }\n}'})
    with pytest.raises(ConfigError, match=r"config\.json:4:\d+"):
        _config(root)


def test_range_checks_name_the_origin(tmp_path):
    with pytest.raises(ConfigError, match="reserveTokens"):
        _config(tmp_path, {"budget.reserveTokens": 200000})
    with pytest.raises(ConfigError, match="'template' is 'debug'"):
        _config(tmp_path, {"template": "debug"})


def test_parse_override_reads_yaml_scalars():
    assert parse_override("budget.maxTokens=32000") == ("budget.maxTokens", 32000)
    assert parse_override("state.includeGit=false") == ("state.includeGit", False)
    assert parse_override("template=review") == ("template", "review")
    with pytest.raises(ConfigError, match="dotted.key=value"):
        parse_override("budget.maxTokens")


def test_explain_lists_every_leaf_with_origin(project):
    root = project({".planning/config.json": {"model": "gpt-4"}})
    rows, _ = explain_config(root, {"budget.softLimit": 0.9})
    by_key = {key: (value, origin) for key, value, origin in rows}
    assert by_key["model"][0] == "gpt-4" and by_key["model"][1].endswith("config.json")
    assert by_key["budget.softLimit"][0] == 0.9 and by_key["budget.softLimit"][1].startswith("override")
    assert by_key["budget.pools.buffer"][1].startswith("defaults")

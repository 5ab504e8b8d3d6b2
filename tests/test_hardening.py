"""Hostile and odd input: clear errors that name the file or key, never a traceback."""

from __future__ import annotations

import pytest

import ctxengine
from ctxengine import ConfigError, CtxEngineError
from ctxengine.driver import default_driver, execute
from conftest import DEMO, write_project
from test_cli import run_cli


def test_a_config_json_that_is_not_utf8_names_the_file(tmp_path):
    (tmp_path / ".planning").mkdir()
    (tmp_path / ".planning" / "config.json").write_bytes(b'{"model": "caf\xe9"}')
    done = run_cli("build", str(tmp_path))
    assert done.returncode == 2 and "config.json" in done.stderr and "UTF-8" in done.stderr
    assert "Traceback" not in done.stderr


def test_output_into_a_missing_folder_is_a_clear_error(tmp_path):
    done = run_cli("build", "--request", "x", "-o", str(tmp_path / "no" / "such" / "out.txt"))
    assert done.returncode == 2 and "cannot write" in done.stderr and "Traceback" not in done.stderr


def test_a_project_path_that_is_a_file_is_refused_by_the_api(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("not a project")
    with pytest.raises(CtxEngineError, match="not a folder"):
        ctxengine.build_context(target, "x")


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"truncation.strategies.history": "sideways"}, "truncation.strategies.history"),
        ({"budget.exactBand": [2]}, "budget.exactBand"),
        ({"budget.exactBand": [2, 1]}, "budget.exactBand"),
        ({"priorities.plan": 500}, "priorities.plan"),
        ({"state.sessionFormat": "xml"}, "state.sessionFormat"),
        ({"disclosure.phase": "deploy"}, "disclosure.phase"),
    ],
)
def test_bad_values_are_config_errors_naming_the_key(tmp_path, overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        execute(["context_config"], tmp_path, overrides)


def test_the_model_window_caps_the_budget_with_a_warning():
    result = ctxengine.build_context(DEMO, "x", overrides={"model": "gpt-4", "budget.maxTokens": 128000,
                                                           "budget.reserveTokens": 1000})
    assert result.budget.available_tokens == 8192 - 1000
    assert any("larger than model 'gpt-4'" in w for w in result.warnings)


def test_a_reserve_larger_than_the_window_is_a_config_error():
    with pytest.raises(ConfigError, match="budget.reserveTokens"):
        ctxengine.build_context(DEMO, "x", overrides={"model": "gpt-4", "budget.reserveTokens": 9000})


def test_the_driver_needs_only_the_documented_inputs():
    """The three a caller gives, and the process's memo, which driver.execute supplies."""
    from ctxengine.driver import DRIVER_INPUTS

    required = {v.name for v in default_driver().list_available_variables() if v.is_external_input}
    assert required == {"project_dir", "overrides", "user_request", "memo"} == set(DRIVER_INPUTS)


def test_every_node_carries_a_stage_tag():
    untagged = [v.name for v in default_driver().list_available_variables()
                if not v.is_external_input and "stage" not in v.tags]
    assert untagged == []


def test_an_unknown_model_names_the_file_it_came_from(project):
    root = project({".planning/config.json": {"model": "gpt-17"}})
    with pytest.raises(ConfigError, match=r"config\.json: key 'model' is 'gpt-17'.*gpt-4o"):
        execute(["context_config"], root)


def test_a_binary_plan_file_is_an_error_naming_it(tmp_path):
    plan = tmp_path / ".planning" / "plans" / "current" / "plan.md"
    plan.parent.mkdir(parents=True)
    plan.write_bytes(b"# Plan\n\x00\x01\x02 binary junk")
    with pytest.raises(CtxEngineError, match=r"plan\.md is binary"):
        ctxengine.build_context(tmp_path, "x")

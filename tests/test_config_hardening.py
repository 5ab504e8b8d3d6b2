"""Configuration you can trust: a range for every number, NaN refused, safe parsers, short
messages, the user's layer (and trust.* only from the user), and an answer reserve that scales."""

from __future__ import annotations

import json
import math
import time
import tracemalloc

import pytest

import ctxengine
from ctxengine import ConfigError, explain_config
from ctxengine.driver import execute
from ctxengine.nodes import config as cfg
from ctxengine.nodes.lib.trust_paths import absolute_trust_paths
from ctxengine.nodes.lib.quote import quoted
from ctxengine.nodes.lib.reserve import effective_reserve
from ctxengine.nodes.lib.tokens import model_presets
from ctxengine.nodes.lib.yamlio import YAMLError, load_yaml, nesting_depth
from conftest import corpus_projects, write_project, needs_shared
from test_cli import run_cli

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def _config(project_dir, overrides=None):
    out = execute(["context_config", "config_provenance", "config_warnings"], project_dir, overrides)
    return out["context_config"], out["config_provenance"], out["config_warnings"]


# ----------------------------------------------------------------------------- the range table


def _numeric_keys() -> list[str]:
    """Every numeric key of configs/defaults.yaml (a list's items as key.<index>), and the keys
    whose default is a word standing for a number (budget.reserveTokens: auto)."""
    return [key for key, _ in cfg._numeric_leaves(cfg.defaults())] + list(cfg._ALTERNATIVES)


def test_every_numeric_default_has_a_range_and_every_range_a_default():
    keys = _numeric_keys()
    assert len(keys) > 40
    missing = [key for key in keys if cfg._range_for(key) is None]
    assert missing == [], f"add these keys to nodes/config.py RANGES: {missing}"
    for pattern in cfg.RANGES:
        assert any(key == pattern or (pattern.endswith(".*") and key.startswith(pattern[:-1])) for key in keys), pattern
    for key in keys:  # the defaults lie in their own ranges
        value = cfg._lookup(cfg.defaults(), key.rpartition(".")[0] if key.startswith("budget.exactBand.") else key)
        values = [v for v in (value if isinstance(value, list) else [value]) if cfg._is_number(v)]
        assert all(cfg._range_for(key).admits(v) for v in values), key


def _bad_values(key: str) -> list[tuple[str, object]]:
    rule = cfg._range_for(key)
    bad = [("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("negative", min(-1, rule.low - 1))]
    if rule.above or rule.low > 0:
        bad.append(("zero", 0))
    bad.append(("too-large", rule.high * 2 + 1 if rule.whole else rule.high + 0.5))
    if rule.whole:
        bad.append(("fraction", rule.low + 1.5))
    return bad


CASES = [(key, label, value) for key in _numeric_keys() for label, value in _bad_values(key)]


@pytest.mark.parametrize("key, label, value", CASES, ids=[f"{k}={label}" for k, label, _ in CASES])
def test_every_numeric_key_refuses_bad_numbers_through_the_api(tmp_path, key, label, value):
    if key.startswith("budget.exactBand."):
        index = int(key.rpartition(".")[2])
        band = [0.5, 1.5]
        band[index] = value
        overrides, shown = {"budget.exactBand": band}, "budget.exactBand"
    else:
        overrides, shown = {key: value}, key
    with pytest.raises(ConfigError) as err:
        ctxengine.run_nodes(["context_config"], tmp_path, overrides=overrides)
    message = str(err.value)
    assert f"'{shown}'" in message and "--set" in message and len(message) < 400


def test_whole_numbers_written_as_floats_become_ints(tmp_path):
    config, _, _ = _config(tmp_path, {"budget.maxTokens": 32000.0, "state.gitTimeout": 2.5})
    assert config["budget"]["maxTokens"] == 32000 and isinstance(config["budget"]["maxTokens"], int)
    assert config["state"]["gitTimeout"] == 2.5


def test_pool_shares_must_sum_to_at_most_one(tmp_path):
    with pytest.raises(ConfigError, match=r"budget\.pools.*sum to 1\.3"):
        _config(tmp_path, {"budget.pools.system": 0.5})
    config, _, _ = _config(tmp_path, {"budget.pools": {"system": 0.1, "buffer": 0.1}})
    assert config["budget"]["pools"]["system"] == 0.1


@pytest.mark.parametrize("setting, key", [
    ("budget.maxTokens=.nan", "budget.maxTokens"),
    ("budget.softLimit=.inf", "budget.softLimit"),
    ("truncation.maxFitPasses=0", "truncation.maxFitPasses"),
    ("budget.pools.system=-0.1", "budget.pools.system"),
    ("references.maxFileBytes=2147483648", "references.maxFileBytes"),
    ("trust.buildDeadline=0", "trust.buildDeadline"),
])
def test_bad_numbers_exit_2_through_the_cli(setting, key):
    done = run_cli("build", "--request", "x", "--set", setting)
    assert done.returncode == 2, done.stderr
    assert f"'{key}'" in done.stderr and "--set" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("text, key", [
    ('{"budget": {"maxTokens": NaN}}', "budget.maxTokens"),
    ('{"budget": {"softLimit": Infinity}}', "budget.softLimit"),
    ('{"priorities": {"plan": -Infinity}}', "priorities.plan"),
    ('{"budget": {"pools": {"plan": -0.2}}}', "budget.pools.plan"),
])
def test_nan_and_infinity_in_config_json_exit_2_naming_file_and_key(tmp_path, text, key):
    write_project(tmp_path, {".planning/config.json": text})
    done = run_cli("build", str(tmp_path), "--request", "x")
    assert done.returncode == 2, done.stderr
    assert "config.json" in done.stderr and f"'{key}'" in done.stderr and "Traceback" not in done.stderr


# ----------------------------------------------------------------------------- parsers and messages


def test_a_deeply_nested_config_json_exits_2_naming_the_file(tmp_path):
    for depth in (40, 1000, 100_000):
        write_project(tmp_path, {".planning/config.json": '{"a":' * depth + "1" + "}" * depth})
        done = run_cli("config", str(tmp_path))
        assert done.returncode == 2, done.stderr[-2000:]
        assert "config.json" in done.stderr and "nested deeper" in done.stderr and "Traceback" not in done.stderr


def test_deeply_nested_overrides_are_refused(tmp_path):
    deep: dict = {"x": 1}
    for _ in range(2000):
        deep = {"budget": deep}
    with pytest.raises(ConfigError, match="nest deeper"):
        ctxengine.run_nodes(["context_config"], tmp_path, overrides=deep)
    with pytest.raises(ConfigError, match="nest deeper"):
        explain_config(tmp_path, deep)
    with pytest.raises(ConfigError, match="nest deeper"):  # the node checks too, below Python's limit
        _config(tmp_path, {"budget": deep_at(40)})


def deep_at(depth: int) -> dict:
    out: dict = {}
    for _ in range(depth):
        out = {"k": out}
    return out


def test_a_yaml_alias_bomb_in_disclosure_rules_is_a_short_error_naming_the_file(tmp_path):
    write_project(tmp_path, {".planning/config.json": {"disclosure": {"rules": "rules.yaml"}},
                             ".planning/rules.yaml": BOMB})
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as err:
            ctxengine.build_context(tmp_path, "x")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert "rules.yaml" in message and "alias" in message and len(message) < 400
    assert peak < 50 << 20 and time.perf_counter() - started < 10
    done = run_cli("build", str(tmp_path), "--request", "x")
    assert done.returncode == 2 and "rules.yaml" in done.stderr and len(done.stderr) < 1000


def test_yaml_limits():
    assert load_yaml("x: &x {k: 1}\ny: *x\nz: R&D *bold*") == {"x": {"k": 1}, "y": {"k": 1}, "z": "R&D *bold*"}
    with pytest.raises(YAMLError, match="aliases"):
        load_yaml("a: &a 1\nb: [" + ", ".join(["*a"] * 300) + "]")
    with pytest.raises(YAMLError, match="expanded"):
        load_yaml(BOMB)
    with pytest.raises(YAMLError, match="recursive"):
        load_yaml("a: &a [1, *a]")
    with pytest.raises(YAMLError, match="characters"):
        load_yaml("x: " + "y" * (2 << 20))
    for depth in (65, 1000, 100_000):
        with pytest.raises(YAMLError):
            load_yaml("[" * depth + "]" * depth)
    assert load_yaml("[" * 60 + "]" * 60) is not None
    assert nesting_depth({"a": [1, {"b": []}]}) == 4 and nesting_depth(5) == 0


def test_a_huge_value_is_cut_in_error_messages(tmp_path):
    huge = "x" * 468_000
    for overrides in ({"template": huge}, {"budget.maxTokens": huge}, {"trust.allowedHosts": huge},
                      {"budget.exactBand": [huge, 1]}, {"state.layout": [huge]}):
        with pytest.raises(ConfigError) as err:
            _config(tmp_path, overrides)
        assert len(str(err.value)) < 1000 and "468,0" in str(err.value)
    write_project(tmp_path, {".planning/config.json": {"model": "m" * 100_000}})
    done = run_cli("build", str(tmp_path), "--request", "x")
    assert done.returncode == 2 and "'model'" in done.stderr and "100,002 characters" in done.stderr
    assert len(done.stderr) < 1000
    assert quoted("short") == "'short'" and len(quoted("y" * 10_000)) < 350


# ----------------------------------------------------------------------------- the user layer


def _user_file(tmp_path, text: str, name: str = "config.yaml"):
    path = tmp_path / "home" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_user_layer_sits_between_defaults_and_the_project(tmp_path, monkeypatch):
    user = _user_file(tmp_path, "budget:\n  maxTokens: 50000\n  softLimit: 0.7\ntemplate: research\n")
    monkeypatch.setenv("CTXENGINE_CONFIG", str(user))
    root = write_project(tmp_path / "proj", {".planning/config.json": {"template": "review"}})
    config, provenance, warnings = _config(root, {"budget.softLimit": 0.6})
    assert config["budget"]["maxTokens"] == 50000 and provenance["budget.maxTokens"] == f"{user} (user config)"
    assert config["template"] == "review" and provenance["template"].endswith("config.json")
    assert config["budget"]["softLimit"] == 0.6 and provenance["budget.softLimit"].startswith("override")
    assert provenance["budget.reserveShare"].startswith("defaults") and warnings == ()
    rows, _ = explain_config(root)
    assert ("budget.maxTokens", 50000, f"{user} (user config)") in rows
    done = run_cli("config", str(root), "--explain")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("budget.maxTokens "))
    assert "50000" in line and str(user) in line and "user config" in line


def test_user_file_found_under_xdg_config_home_yaml_or_json(tmp_path, monkeypatch):
    monkeypatch.delenv("CTXENGINE_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    config, _, _ = _config(tmp_path)
    assert config["budget"]["maxTokens"] == 128000  # no file: fine
    path = tmp_path / "xdg" / "ctxengine" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"state": {"gitLogCount": 7}}')
    config, provenance, _ = _config(tmp_path)
    assert config["state"]["gitLogCount"] == 7 and str(path) in provenance["state.gitLogCount"]
    (path.parent / "config.yaml").write_text("state: {gitLogCount: 9}\n")
    assert _config(tmp_path)[0]["state"]["gitLogCount"] == 9  # config.yaml first


@pytest.mark.parametrize("text, expected", [
    ("budget: [1, 2\n", "not valid YAML"),
    ("- a\n- b\n", "top level"),
    ("budget:\n  maxTokens: .nan\n", "budget.maxTokens"),
    ("state:\n  gitTimeout: yes\n", "state.gitTimeout"),
    (BOMB, "alias"),
])
def test_a_bad_user_file_exits_2_naming_it(tmp_path, monkeypatch, text, expected):
    user = _user_file(tmp_path, text)
    monkeypatch.setenv("CTXENGINE_CONFIG", str(user))
    done = run_cli("build", "--request", "x")
    assert done.returncode == 2, done.stderr
    assert str(user) in done.stderr and expected in done.stderr and "Traceback" not in done.stderr


# ----------------------------------------------------------------------------- trust.* only from the user


def test_trust_keys_in_the_project_are_ignored_with_a_warning(tmp_path):
    outside = str(tmp_path / "outside")
    root = write_project(tmp_path / "proj", {".planning/config.json": {
        "trust": {"allowedPaths": [outside], "allowPrivateUrls": True}, "trust.maxRedirects": 10}})
    config, provenance, warnings = _config(root)
    assert config["trust"]["allowedPaths"] == [] and config["trust"]["allowPrivateUrls"] is False
    assert config["trust"]["maxRedirects"] == 3 and provenance["trust.allowedPaths"].startswith("defaults")
    assert len(warnings) == 3
    warning = next(w for w in warnings if w.startswith("trust.allowedPaths"))
    assert "config.json is ignored: a project cannot widen what ctxengine reads" in warning
    assert "~/.config/ctxengine/config.yaml" in warning and "--set" in warning
    done = run_cli("build", str(root), "--request", "x")
    assert done.returncode == 0 and "trust.allowPrivateUrls in" in done.stderr


def test_trust_keys_from_the_user_file_and_set_are_honoured_and_made_absolute(tmp_path, monkeypatch):
    user = _user_file(tmp_path, "trust:\n  allowedPaths: [~/shared-rules, rules, /abs/x]\n"
                                "  allowPrivateUrls: true\n  maxRedirects: 5\n")
    monkeypatch.setenv("CTXENGINE_CONFIG", str(user))
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    config, provenance, warnings = _config(tmp_path)
    assert config["trust"]["allowedPaths"] == [str(tmp_path / "h" / "shared-rules"), str(user.parent / "rules"),
                                               "/abs/x"]
    assert config["trust"]["allowPrivateUrls"] is True and config["trust"]["maxRedirects"] == 5
    assert "user config" in provenance["trust.allowedPaths"] and warnings == ()
    monkeypatch.chdir(tmp_path / "home")
    config, provenance, _ = _config(tmp_path, {"trust.allowedPaths": "docs/../more"})
    assert config["trust"]["allowedPaths"] == [str(tmp_path / "home" / "more")]
    assert provenance["trust.allowedPaths"].startswith("override")
    with pytest.raises(ConfigError, match="trust.allowedPaths' must be a list of strings"):
        _config(tmp_path, {"trust.allowedPaths": ["ok", 3]})
    done = run_cli("config", "--set", "trust.allowedPaths=[a]", "--format", "json", cwd=tmp_path)
    row = next(row for row in json.loads(done.stdout) if row["key"] == "trust.allowedPaths")
    assert row["value"] == [str(tmp_path / "a")] and row["origin"] == "override (--set)"


# ----------------------------------------------------------------------------- the answer reserve


def test_effective_reserve():
    gpt4o = model_presets()["gpt-4o"]
    assert gpt4o["maxOutputTokens"] == 16384
    assert all(p.get("maxOutputTokens", 0) > 0 for p in model_presets().values())
    auto = {"maxTokens": 32000, "reserveTokens": "auto", "reserveShare": 0.2}
    assert effective_reserve(auto, gpt4o) == 6400
    assert effective_reserve({**auto, "maxTokens": 128000}, gpt4o) == 16384  # capped by the model
    assert effective_reserve({**auto, "reserveTokens": None, "maxTokens": 100000}, {"window": 8192}) == 1638
    assert effective_reserve({**auto, "reserveTokens": 1000}, gpt4o) == 1000
    assert effective_reserve({**auto, "reserveShare": 0}, gpt4o) == 0


@pytest.mark.parametrize("budget", [4000, 8000])
@needs_shared
def test_small_budgets_build_on_the_demo_and_a_corpus_project(tmp_path, budget):
    out = tmp_path / "out.json"
    done = run_cli("build", "--max-tokens", str(budget), "--request", "Fix the login endpoint",
                   "--format", "json", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["budget"]["available_tokens"] == budget - budget // 5
    assert data["budget"]["total_tokens"] <= data["budget"]["available_tokens"]
    assert data["pools"]["reserve"]["share"] == budget // 5
    corpus = corpus_projects()[0]
    result = ctxengine.build_context(corpus, "What is next?", max_tokens=budget)
    assert result.budget.available_tokens == budget - budget // 5
    assert result.budget.total_tokens <= result.budget.available_tokens


def test_the_default_reserve_is_capped_by_the_models_output_limit(tmp_path):
    report = ctxengine.run_nodes(["available_tokens", "reserve_tokens"], tmp_path)
    assert report == {"available_tokens": 128000 - 16384, "reserve_tokens": 16384}
    report = ctxengine.run_nodes(["available_tokens"], tmp_path, overrides={"model": "gpt-4"})
    assert report["available_tokens"] == 8192 - 1638  # the window is the budget


def test_an_explicit_reserve_at_or_above_the_budget_is_an_error(tmp_path):
    for reserve in (8000, 9000):
        with pytest.raises(ConfigError, match="budget.reserveTokens"):
            ctxengine.run_nodes(["available_tokens"], tmp_path, max_tokens=8000, reserve_tokens=reserve)
    done = run_cli("build", "--max-tokens", "8000", "--reserve-tokens", "8000", "--request", "x")
    assert done.returncode == 2 and "budget.reserveTokens" in done.stderr
    assert ctxengine.run_nodes(["available_tokens"], tmp_path, max_tokens=8000,
                               reserve_tokens=1000)["available_tokens"] == 7000
    with pytest.raises(ConfigError, match="budget.reserveTokens"):
        ctxengine.run_nodes(["available_tokens"], tmp_path, reserve_tokens="lots")


def test_a_session_with_32000_tokens_leaves_25600(tmp_path):
    root = write_project(tmp_path, {".planning/plans/current/plan.md": "# Plan\n\n- [ ] step one\n"})
    session = ctxengine.Session(root, max_tokens=32000, seed_history=False)
    result = session.next_context("Add a login endpoint")
    assert result.budget.available_tokens == 25600
    assert session.records[-1].available_tokens == 25600


# ----------------------------------------------------------------------------- no working folder or HOME in the graph


def test_the_same_overrides_from_two_folders_and_two_homes_read_what_each_allows(tmp_path, monkeypatch):
    """A relative or ~ path in trust.allowedPaths is resolved where the overrides enter, so the
    cached configuration stage never serves one folder's (or one HOME's) allowance to another."""
    import ctxengine

    folders = {name: tmp_path / name for name in ("cwd-a", "cwd-b", "home-a", "home-b")}
    for name, folder in folders.items():
        (folder / "rules").mkdir(parents=True)
        (folder / "rules" / "r.md").write_text(f"# Rules\nFROM-{name.upper()}\n")
    lines = "".join(f"@{folder / 'rules' / 'r.md'}\n" for folder in folders.values())
    project = write_project(tmp_path / "proj", {".planning/config.json": {"references": {"core": ["main.md"]}},
                                                ".planning/main.md": f"# Main\n{lines}"})
    quiet = {"state.includeGit": False, "state.includeEnvironment": False}
    cache = tmp_path / "shared-cache"

    def seen(allowed: str, cached: bool) -> set[str]:
        context = ctxengine.build_context(str(project), "x", cache=cached, cache_dir=cache if cached else None,
                                          overrides={**quiet, "trust.allowedPaths": allowed}).context
        return {name for name in folders if f"FROM-{name.upper()}" in context}

    for cwd in ("cwd-a", "cwd-b"):
        monkeypatch.chdir(folders[cwd])
        assert seen("rules", True) == seen("rules", False) == {cwd}
    monkeypatch.chdir(tmp_path)
    for home in ("home-a", "home-b"):
        monkeypatch.setenv("HOME", str(folders[home]))
        assert seen("~/rules", True) == seen("~/rules", False) == {home}


def test_the_configuration_stage_refuses_a_relative_trust_path_it_was_handed():
    with pytest.raises(ConfigError, match=r"trust.allowedPaths entry 'rules' is not an absolute path"):
        cfg.resolved_config("/p", cfg.defaults(), {}, {"trust": {"allowedPaths": ["rules"]}})
    assert absolute_trust_paths({"trust": {"allowedPaths": "~/x"}, "trust.allowedPaths": ["y", 3]}, "/b", "/h") \
        == {"trust": {"allowedPaths": ["/h/x"]}, "trust.allowedPaths": ["/b/y", 3]}

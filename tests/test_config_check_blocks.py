"""The steps of checking and layering configuration keys (nodes/config.py ``_check`` and
``resolved_config``), one table each, messages word for word: a near-miss key's warning, the
errors of a value of the right type (an object's keys, a string list, NaN), a wrong type, one
layer entry (ignored, warned, refused or set), and the provenance recorded."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes import config as C  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402

D = C._bundled_defaults()


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def said(result):
    return str(result) if isinstance(result, ConfigError) else result


@pytest.mark.parametrize("dotted, expected", [
    case("a near miss in a group", "budget.maxToken",
         "o: unknown key 'budget.maxToken' is ignored; did you mean 'budget.maxTokens'?"),
    case("a near miss at the top", "mdoel", "o: unknown key 'mdoel' is ignored; did you mean 'model'?"),
    case("nothing close", "budget.zzz", None),
    case("under a value, not a group", "model.name", None),
    case("under an unknown group", "nosuch.key", None),
])
def test_near_miss_warning(dotted, expected):
    assert C._near_miss_warning(D, dotted, "o") == expected


@pytest.mark.parametrize("dotted, value, expected", [
    case("an object's keys all fine", "budget", {"maxTokens": 9000}, None),
    case("the first error of an object's keys", "budget", {"maxTokens": "x", "softLimit": "y"},
         "o: key 'budget.maxTokens' must be an integer (like the default 128000), got a string 'x'"),
    case("a near miss among them is no error", "budget", {"maxTokn": 1}, None),
    case("a string list with a number", "trust.allowedHosts", ["a", 3],
         "o: key 'trust.allowedHosts' must be a list of strings, got an integer 3 in it"),
    case("NaN", "budget.softLimit", float("nan"), "o: key 'budget.softLimit' is nan; NaN and infinity are not allowed, "
         "give a finite number"),
])
def test_fitting_value_error(dotted, value, expected):
    assert said(C._fitting_value_error(D, dotted, C._lookup(D, dotted), value, "o")) == expected


@pytest.mark.parametrize("dotted, value, expected", [
    case("a wrong type", "state.includeGit", "yes",
         "o: key 'state.includeGit' must be a boolean (like the default True), got a string 'yes'"),
    case("a key with words besides numbers", "budget.reserveTokens", "lots",
         "o: key 'budget.reserveTokens' must be a number or 'auto' or None (like the default 'auto'), got a string "
         "'lots'"),
])
def test_type_error(dotted, value, expected):
    assert str(C._type_error(dotted, C._lookup(D, dotted), value, "o")) == expected


@pytest.mark.parametrize("dotted, value, users, expected", [
    case("a known key", "model", "gpt-4o", True, ("gpt-4o", None)),
    case("trust.* from a project: ignored, warned", "trust.allowedHosts", ["x.org"], False,
         (C._MISSING, "trust.allowedHosts in o is ignored: a project cannot widen what ctxengine reads; set it in "
                      "~/.config/ctxengine/config.yaml or with --set")),
    case("a near miss: warned", "mdoel", "x", True,
         (C._MISSING, "o: unknown key 'mdoel' is ignored; did you mean 'model'?")),
    case("an unknown key: ignored quietly", "someTool.flag", 1, False, (C._MISSING, None)),
    case("the user's single allowed path becomes a list", "trust.allowedPaths", "/abs/x/", True, (["/abs/x"], None)),
])
def test_layer_entry(dotted, value, users, expected):
    assert C._layer_entry(D, dotted, value, "o", users) == expected


@pytest.mark.parametrize("dotted, value, users, error", [
    case("a wrong type", "state.includeGit", "yes", True,
         "o: key 'state.includeGit' must be a boolean (like the default True), got a string 'yes'"),
    case("a relative allowed path", "trust.allowedPaths", ["rel"], True,
         "o: trust.allowedPaths entry 'rel' is not an absolute path; pass overrides through ctxengine's API or CLI "
         "(they resolve it) or give an absolute path"),
])
def test_layer_entry_refuses(dotted, value, users, error):
    with pytest.raises(ConfigError) as raised:
        C._layer_entry(D, dotted, value, "o", users)
    assert str(raised.value) == error


@pytest.mark.parametrize("dotted, value, expected", [
    case("a leaf", "budget.maxTokens", 9000, {"budget.maxTokens": "L", "budget.softLimit": "d", "budget.pools.plan": "d",
                                              "model": "d"}),
    case("an object: every leaf it sets, the group's others forgotten", "budget",
         {"maxTokens": 1, "pools": {"plan": 0.1}},
         {"budget.maxTokens": "L", "budget.pools.plan": "L", "model": "d"}),
])
def test_set_provenance(dotted, value, expected):
    provenance = {"budget.maxTokens": "d", "budget.softLimit": "d", "budget.pools.plan": "d", "model": "d"}
    C._set_provenance(provenance, dotted, value, "L")
    assert provenance == expected


@pytest.mark.parametrize("origin, how, expected", [
    case("plain", "o.json", None, "o.json"),
    case("a GSD alias", "o.json", "GSD key 'context'", "o.json (GSD key 'context')"),
])
def test_label(origin, how, expected):
    assert C._label(origin, how) == expected


def test_shallow_overrides_refuses_deep_nesting():
    deep: dict = {}
    node = deep
    for _ in range(C.MAX_DEPTH + 2):
        node = node.setdefault("k", {})
    with pytest.raises(ConfigError, match="nest deeper than 32 levels; pass dotted keys"):
        C._shallow_overrides(deep)
    assert C._shallow_overrides({"budget.maxTokens": 1}) == {"budget.maxTokens": 1}

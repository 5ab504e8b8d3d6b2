"""The checks _check_ranges (nodes/config.py) is made of, one table each, with their messages word
for word: a number outside its range or not finite, a reserve not below the budget, a pool share
that is no number, pools summing over 1, a key set to a choice it does not offer, an unknown model,
an unknown truncation strategy, a malformed exactBand; then the order they run in."""

from __future__ import annotations

import copy
import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes import config as C  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402

D = C.DEFAULTS_ORIGIN
PROVENANCE = {"budget.reserveTokens": "u.yaml (user config)", "budget.maxTokens": D, "budget.pools.plan": "--set",
              "budget": "u.yaml (user config)", "model": "p/.planning/config.json"}


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def values_with(**changes) -> dict:
    """The bundled defaults with dotted keys (spelled with __ for .) changed."""
    values = copy.deepcopy(C._bundled_defaults())
    for key, value in changes.items():
        C._assign(values, key.replace("__", "."), value)
    return values


def message(error: ConfigError | None) -> str | None:
    return None if error is None else str(error)


@pytest.mark.parametrize("key, value, expected", [
    case("in range", "budget.maxTokens", 1000, None),
    case("whole number given as a float is in range", "budget.maxTokens", 1000.0, None),
    case("below its low end", "budget.maxTokens", 0,
         "o: key 'budget.maxTokens' is 0; it must be a whole number from 1 to 10,000,000"),
    case("not whole", "state.gitLogCount", 2.5,
         "o: key 'state.gitLogCount' is 2.5; it must be a whole number from 0 to 1,000"),
    case("an excluded low end", "budget.softLimit", 0,
         "o: key 'budget.softLimit' is 0; it must be a number above 0 and at most 1"),
    case("a pattern's range (priorities.*)", "priorities.new", 101,
         "o: key 'priorities.new' is 101; it must be a number from 0 to 100"),
    case("NaN in a range", "code.share", float("nan"), "o: key 'code.share' is nan; it must be a number from 0 to 0.9"),
    case("a band item is named by the band", "budget.exactBand.1", 0,
         "o: key 'budget.exactBand' is 0; it must be a number above 0 and at most 1,000"),
    case("no range: any finite number", "someTool.limit", -5, None),
    case("no range: infinity refused", "someTool.limit", float("inf"),
         "o: key 'someTool.limit' is inf; NaN and infinity are not allowed"),
])
def test_number_error(key, value, expected):
    assert message(C._number_error(key, value, C._range_for(key), "o")) == expected


@pytest.mark.parametrize("reserve, max_tokens, expected", [
    case("auto", "auto", 1000, None),
    case("null is auto", None, 1000, None),
    case("below", 999, 1000, None),
    case("equal", 1000, 1000,
         "u.yaml (user config): key 'budget.reserveTokens' (1000) must be smaller than budget.maxTokens (1000, from "
         f"{D}); lower it, or set it to auto (budget.reserveShare of the budget)"),
    case("above", 5000, 1000,
         "u.yaml (user config): key 'budget.reserveTokens' (5000) must be smaller than budget.maxTokens (1000, from "
         f"{D}); lower it, or set it to auto (budget.reserveShare of the budget)"),
])
def test_reserve_error(reserve, max_tokens, expected):
    values = values_with(budget__reserveTokens=reserve, budget__maxTokens=max_tokens)
    assert message(C._reserve_error(values, PROVENANCE)) == expected


@pytest.mark.parametrize("pools, type_error, sum_error", [
    case("the defaults", None, None, None),
    case("none at all", {}, None, None),
    case("exactly 1 (rounding allowed)", {"plan": 0.5, "history": 0.5 + 1e-10}, None, None),
    case("over 1: every pool's origin (history's from its parent), sorted", {"plan": 0.9, "history": 0.2}, None,
         "--set; u.yaml (user config): keys 'budget.pools.*' are shares of budget.maxTokens and sum to 1.1; "
         "lower them so they sum to at most 1"),
    case("a string share", {"plan": "half"}, "--set: key 'budget.pools.plan' is 'half'; a pool's share is a number "
         "from 0 to 1", "skip"),
    case("a boolean share, of a pool the defaults lack (origin from its parent)", {"extra": True},
         "u.yaml (user config): key 'budget.pools.extra' is True; a pool's share is a number from 0 to 1", "skip"),
])
def test_pool_errors(pools, type_error, sum_error):
    values = values_with()
    if pools is not None:
        values["budget"]["pools"] = pools
    assert message(C._pool_type_error(values, PROVENANCE)) == type_error
    if sum_error != "skip":
        assert message(C._pool_sum_error(values, PROVENANCE)) == sum_error


@pytest.mark.parametrize("changes, expected", [
    case("the defaults", {}, None),
    case("a choice offered", {"escape": "html"}, None),
    case("the first wrong key, naming the choices (no empty one)", {"disclosure__phase": "build", "escape": "x"},
         f"{D}: key 'escape' is 'x'; use one of none, html"),
    case("an empty choice is not listed", {"disclosure__phase": "build"},
         f"{D}: key 'disclosure.phase' is 'build'; use one of auto, execute, research, plan, verify, repair, discuss"),
])
def test_choice_error(changes, expected):
    assert message(C._choice_error(values_with(**changes), PROVENANCE)) == expected


def test_model_error():
    assert C._model_error(values_with(), PROVENANCE) is None
    error = message(C._model_error(values_with(model="gpt-nine"), PROVENANCE))
    assert error.startswith("p/.planning/config.json: key 'model' is 'gpt-nine', which configs/models.yaml does not "
                            "know; use one of ") and "gpt-4o" in error


@pytest.mark.parametrize("strategies, expected", [
    case("the defaults", {"history": "tail", "deprecated": "head", "default": "middle"}, None),
    case("a kind of its own", {"mine": "head"}, None),
    case("auto is no strategy here", {"history": "auto"},
         f"{D}: key 'truncation.strategies.history' is 'auto'; use one of tail, head, middle"),
])
def test_strategy_error(strategies, expected):
    values = values_with()
    values["truncation"]["strategies"] = strategies
    assert message(C._strategy_error(values, PROVENANCE)) == expected


BAND = f"{D}: key 'budget.exactBand' must be two numbers [low, high] with low <= high, like [0.5, 1.5]; got "


@pytest.mark.parametrize("band, expected", [
    case("the default", [0.5, 1.5], None),
    case("equal ends", [1, 1], None),
    case("reversed", [1.5, 0.5], BAND + "[1.5, 0.5]"),
    case("one number", [0.5], BAND + "[0.5]"),
    case("a boolean is no number", [True, 2], BAND + "[True, 2]"),
    case("a tuple is no list", (0.5, 1.5), BAND + "(0.5, 1.5)"),
    case("missing", None, BAND + "None"),
])
def test_band_error(band, expected):
    values = values_with()
    values["budget"]["exactBand"] = band
    assert message(C._band_error(values, PROVENANCE)) == expected


@pytest.mark.parametrize("changes, expected_start", [
    case("a range before everything else", {"budget__maxTokens": 0.5, "model": "x"},
         "defaults (configs/defaults.yaml): key 'budget.maxTokens' is 0.5"),
    case("the reserve before the pools",
         {"budget__reserveTokens": 10 ** 6, "budget__maxTokens": 1000, "budget__pools__plan": 0.95},
         "u.yaml (user config): key 'budget.reserveTokens'"),
    case("choices before the model", {"template": "y", "model": "x"}, f"{D}: key 'template' is 'y'"),
    case("the model before the strategies", {"model": "x", "truncation__strategies__history": "x"},
         "p/.planning/config.json: key 'model'"),
])
def test_check_ranges_raises_the_first_problem_in_order(changes, expected_start):
    with pytest.raises(ConfigError) as raised:
        C._check_ranges(values_with(**changes), {**{k: D for k in C._leaf_keys(C._bundled_defaults())}, **PROVENANCE})
    assert str(raised.value).startswith(expected_start)


def test_check_ranges_makes_whole_number_keys_ints():
    values = values_with(budget__maxTokens=64000.0, state__gitLogCount=2.0)
    C._check_ranges(values, {k: D for k in C._leaf_keys(values)})
    assert (values["budget"]["maxTokens"], values["state"]["gitLogCount"]) == (64000, 2)
    assert type(values["budget"]["maxTokens"]) is int and type(values["budget"]["softLimit"]) is float

"""The small functions the disclosure rules, the request's names and the decisions are made of,
one table each: input -> expected (a value, or the ConfigError text that names the key to fix).

parse_rules reads as _mode_rules, _trigger_rule and _phase_entries; resolve_named as
_files_named and _ambiguity; a decision as _selected_by (_on_demand, the request, _trigger) and
_left_out (_unfired, _watched). These tests pin each step, so a change to one shows which moved."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.disclosure import decisions as D  # noqa: E402
from ctxengine.nodes.lib.disclosure import request as Q  # noqa: E402
from ctxengine.nodes.lib.disclosure import rules as R  # noqa: E402
from ctxengine.nodes.lib.disclosure.signals import Signals  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


# ---------------------------------------------------------------------------------------------
# rules.py: one block of the rules file each

@pytest.mark.parametrize("entries, expected", [
    case("a glob is its own name and load", ["research/**"], (R.ModeRule("research/**", ("research/**",)),)),
    case("name and load", [{"name": "api", "load": ["a.md", "b/*.md"]}], (R.ModeRule("api", ("a.md", "b/*.md")),)),
    case("a load string is a list of one", [{"load": "a.md"}], (R.ModeRule("a.md", ("a.md",)),)),
    case("none is no rules", None, ()),
])
def test_mode_rules(entries, expected):
    assert R._mode_rules(entries, "F: key 'modes.dev'") == expected


@pytest.mark.parametrize("entries, message", [
    case("not a list", {"load": "x"}, "F: key 'modes.dev' must be a list of {name, load} rules, got {'load': 'x'}"),
    case("an entry not a mapping", [3], "F: key 'modes.dev'[0] must be a mapping with name and load"),
    case("no load", [{"name": "x"}], "F: key 'modes.dev'[0] needs a 'load' list of globs"),
    case("an empty glob", [{"load": [" "]}], "F: key 'modes.dev'[0].load must be a list of non-empty strings"),
])
def test_mode_rules_errors_name_the_key(entries, message):
    with pytest.raises(ConfigError) as error:
        R._mode_rules(entries, "F: key 'modes.dev'")
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("entry, expected", [
    case("keywords, all signals", {"name": "t", "load": ["a.md"], "keywords": ["api"]},
         R.TriggerRule("t", ("a.md",), ("api",), (), ("plan", "diff", "request"))),
    case("paths only, named by its index", {"load": "a.md", "paths": "src/**"},
         R.TriggerRule("trigger 2", ("a.md",), (), ("src/**",), ("plan", "diff", "request"))),
    case("in: some signals", {"name": "t", "load": ["a.md"], "keywords": ["x"], "in": ["request"]},
         R.TriggerRule("t", ("a.md",), ("x",), (), ("request",))),
])
def test_trigger_rule(entry, expected):
    assert R._trigger_rule(entry, 2, "F: key 'triggers[2]'") == expected


@pytest.mark.parametrize("entry, message", [
    case("not a mapping", "a.md", "F: key 'triggers[2]' must be a mapping with name, keywords or paths, and load"),
    case("nothing to fire on", {"load": ["a.md"]}, "F: key 'triggers[2]' needs 'load' globs and 'keywords' or 'paths'"),
    case("no load", {"keywords": ["x"]}, "F: key 'triggers[2]' needs 'load' globs"),
    case("an unknown signal", {"load": ["a.md"], "keywords": ["x"], "in": ["plan", "mail"]},
         "F: key 'triggers[2]'.in has 'mail'; use any of plan, diff, request"),
])
def test_trigger_rule_errors_name_the_key(entry, message):
    with pytest.raises(ConfigError) as error:
        R._trigger_rule(entry, 2, "F: key 'triggers[2]'")
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("spec, expected", [
    case("required then optional", {"optional": ["b.md"], "required": ["a.md"]},
         (R.PhaseEntry("a.md", True), R.PhaseEntry("b.md", False))),
    case("a glob with a pick", {"required": [{"glob": " {phase}/*-PLAN.md ", "pick": "open"}]},
         (R.PhaseEntry("{phase}/*-PLAN.md", True, "open"),)),
    case("empty", {}, ()),
])
def test_phase_entries(spec, expected):
    assert R._phase_entries("execute", spec, "F: key 'phases.execute'") == expected


@pytest.mark.parametrize("phase, spec, message", [
    case("an unknown phase", "deploy", {}, "F: key 'phases.deploy': unknown phase 'deploy'; GSD phases are execute,"),
    case("not a mapping", "plan", ["a.md"], "F: key 'phases.plan' must be a mapping with 'required' and 'optional'"),
    case("no glob", "plan", {"optional": [{"pick": "last"}]},
         "F: key 'phases.plan'.optional[0] must be a glob or {glob, pick}"),
    case("an unknown pick", "plan", {"required": [{"glob": "a", "pick": "best"}]},
         "F: key 'phases.plan'.required[0].pick is 'best'; use one of all, first, last, open"),
])
def test_phase_entries_errors_name_the_key(phase, spec, message):
    with pytest.raises(ConfigError) as error:
        R._phase_entries(phase, spec, f"F: key 'phases.{phase}'")
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("mine, theirs, expected", [
    case("same name replaced in place, new added after",
         [{"name": "a", "v": 1}, {"name": "b", "v": 1}], [{"name": "c"}, {"name": "a", "v": 2}],
         [{"name": "a", "v": 2}, {"name": "b", "v": 1}, {"name": "c"}]),
    case("not a list: as it is (parse_rules names it)", [{"name": "a"}], {"name": "a"}, {"name": "a"}),
    case("a non-mapping entry is kept by its repr", [], ["x.md"], ["x.md"]),
])
def test_merged_triggers(mine, theirs, expected):
    assert R._merged_triggers(mine, theirs) == expected


# ---------------------------------------------------------------------------------------------
# request.py: the files a name of the request names

LISTING = ["PLAN.md", "phases/01/PLAN.md", "phases/01/plan.md", "phases/02/NOTES.md", "a/NOTES.md", "x/FIX-PLAN.md"]


@pytest.mark.parametrize("wanted, expected", [
    case("the one at the top wins", "PLAN.md", ["PLAN.md"]),
    case("case ignored when one matches", "fix-plan.md", ["x/FIX-PLAN.md"]),
    case("a path ending", "01/PLAN.md", ["phases/01/PLAN.md"]),
    case("several by case: the same spelling", "phases/01/plan.md", ["phases/01/plan.md"]),
    case("ambiguous: all of them", "NOTES.md", ["phases/02/NOTES.md", "a/NOTES.md"]),
    case("ambiguous, no spelling matches: all of them", "01/Plan.md", ["phases/01/PLAN.md", "phases/01/plan.md"]),
    case("none", "MISSING.md", []),
])
def test_files_named(wanted, expected):
    assert Q._files_named(wanted, [(path, path.lower()) for path in LISTING]) == expected


def test_ambiguity_lists_five_in_natural_order_and_names_a_path():
    found = [f"phases/{n}/PLAN.md" for n in (10, 2, 1, 3, 4, 5)]
    assert Q._ambiguity("PLAN.md", found) == (
        "the request names 'PLAN.md', which matches several files (.planning/phases/1/PLAN.md, "
        ".planning/phases/2/PLAN.md, .planning/phases/3/PLAN.md, .planning/phases/4/PLAN.md, "
        ".planning/phases/5/PLAN.md); none loaded: name it by its path (e.g. .planning/phases/1/PLAN.md)")


# ---------------------------------------------------------------------------------------------
# decide.py: which rule selects a document, and why one stays out

RULES = R.parse_rules({
    "modes": {"dev": [{"name": "api docs", "load": ["research/**"]}], "review": ["review/*.md"]},
    "triggers": [{"name": "tests", "load": ["notes/**"], "keywords": ["test"], "paths": ["spec/**"]}],
}, "R")
FM = D._Frontmatter


@pytest.mark.parametrize("path, fm, mode, phase, phase_files, signals, named, expected", [
    case("the phase's rules first", "research/A.md", FM(modes=("dev",)), "dev", "plan",
         {"research/A.md": "phase plan: x"}, Signals(), {}, (2, "phase plan: x")),
    case("frontmatter phases", "A.md", FM(phases=("plan",), modes=("dev",)), "dev", "plan", {}, Signals(), {},
         (2, "frontmatter phases: [plan]")),
    case("frontmatter phases without a phase: the mode", "A.md", FM(phases=("plan",), modes=("dev",)), "dev", None,
         {}, Signals(), {}, (2, "frontmatter modes: [dev]")),
    case("a mode rule", "research/A.md", FM(), "dev", None, {}, Signals(), {},
         (2, "R modes.dev 'api docs' (research/**)")),
    case("named in the request", "A.md", FM(), "dev", None, {}, Signals(), {"A.md": "A.md"}, (3, D.NAMED)),
    case("a trigger's keyword", "notes/n.md", FM(), "dev", None, {}, Signals(request="add tests"), {},
         (3, "R trigger 'tests': 'test' in the request (notes/**)")),
    case("a trigger's path", "notes/n.md", FM(), "dev", None, {}, Signals(changed_files=("spec/s.py",)), {},
         (3, "R trigger 'tests': the diff touches spec/s.py (spec/**) (notes/**)")),
    case("frontmatter paths", "A.md", FM(paths=("src/*.py",)), "dev", None, {}, Signals(changed_files=("src/a.py",)),
         {}, (3, "frontmatter paths: the diff touches src/a.py (src/*.py)")),
    case("outside .planning/: only the request", "../docs/D.md", FM(modes=("dev",)), "dev", None, {},
         Signals(request="test"), {}, None),
    case("outside .planning/, named", "../docs/D.md", FM(), "dev", None, {}, Signals(), {"../docs/D.md": "x"},
         (3, D.NAMED)),
    case("nothing", "A.md", FM(), "dev", None, {}, Signals(request="nothing"), {}, None),
])
def test_selected_by(path, fm, mode, phase, phase_files, signals, named, expected):
    doc = D.Candidate(path, "T", "")
    assert D._selected_by(doc, fm, RULES, mode, phase, phase_files, signals, named) == expected


@pytest.mark.parametrize("path, fm, problem, expected", [
    case("for another mode", "review/r.md", FM(), None, (2, "for mode review only; the current mode is dev")),
    case("frontmatter modes and another mode, once each", "review/r.md", FM(modes=("review", "research")), None,
         (2, "for mode review, research only; the current mode is dev")),
    case("for a phase", "A.md", FM(phases=("verify",)), None,
         (2, "for phase verify only; the current phase is none (--phase)")),
    case("a trigger that did not fire, and frontmatter", "notes/n.md", FM(triggers=("api",), paths=("src/**",)), None,
         (3, "trigger 'tests' (keywords test; paths spec/**) did not fire; frontmatter triggers (api) not in the "
             "plan, diff or request; frontmatter paths (src/**) match no changed file")),
    case("unreadable", "A.md", FM(), "binary file", (3, "binary file")),
    case("no rule", "A.md", FM(), None,
         (3, "no mode, phase or trigger rule names it (add frontmatter modes/triggers/paths)")),
])
def test_left_out(path, fm, problem, expected):
    decision = D._left_out(D.Candidate(path, "T", "", problem=problem), RULES, "dev", None, fm)
    assert (decision.layer, decision.reason, decision.loaded) == (*expected, False)


@pytest.mark.parametrize("selected, problem, already, expected", [
    case("selected, read", (2, "rule"), None, {}, (2, True, "rule", "ref:.planning/A.md", None)),
    case("selected, unreadable", (3, "rule"), "too large", {}, (3, False, None, None, None)),
    case("held by another stage, no rule", None, None, {".planning/A.md": ("plan", "the plan")},
         (1, True, "the plan", "plan", "the plan")),
    case("held by another stage and selected", (2, "rule"), None, {".planning/A.md": ("plan", "the plan")},
         (2, True, "rule; already loaded by the plan", "plan", "the plan")),
])
def test_selected_decision(selected, problem, already, expected):
    decision = D._selected_decision(".planning/A.md", problem, selected, already)
    assert (decision.layer, decision.loaded, decision.rule, decision.section, decision.loaded_by_other) == expected


def test_selected_decision_is_none_when_nothing_selects_or_holds_it():
    assert D._selected_decision(".planning/A.md", None, None, {}) is None

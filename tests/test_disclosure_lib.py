"""Pure helpers of progressive disclosure: globs, keywords, @doc, rules, GSD phase folders."""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from importlib import resources  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from ctxengine.nodes.lib import disclosure as lib  # noqa: E402
from ctxengine.nodes.lib.disclosure import Candidate, Signals  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402


def bundled_rules() -> lib.DisclosureRules:
    text = resources.files("ctxengine.configs").joinpath("disclosure.yaml").read_text(encoding="utf-8")
    return lib.parse_rules(yaml.safe_load(text), "configs/disclosure.yaml")


# ----------------------------------------------------------------------------- globs and keywords


@pytest.mark.parametrize(
    "pattern, path, anywhere, expected",
    [
        ("testing-guidelines.md", "testing-guidelines.md", False, True),  # no "/": the top of .planning/
        ("testing-guidelines.md", "references/testing-guidelines.md", False, False),  # not in another folder
        ("architecture.md", "research/ARCHITECTURE.md", False, False),
        ("**/ARCHITECTURE.md", "research/ARCHITECTURE.md", False, True),  # unless the glob says so
        ("**/ARCHITECTURE.md", "ARCHITECTURE.md", False, True),
        ("research/ARCHITECTURE.md", "research/architecture.md", False, True),
        ("testing-guidelines.md", "references/testing-guidelines.md", True, True),  # changed files: any depth
        ("references/*.md", "references/a.md", False, True),
        ("references/*.md", "references/deep/a.md", False, False),  # * stays in one folder
        ("references/**/*.md", "references/deep/er/a.md", False, True),
        ("references/**/*.md", "references/a.md", False, True),  # **/ spans zero folders too
        ("tests/**", "tests/api/test_auth.py", True, True),
        ("tests/**", "src/tests.py", True, False),
        ("test_*.py", "tests/api/test_auth.py", True, True),
        ("test_*.py", "tests/api/test_auth.py", False, False),
        ("test_*.py", "tests/api/auth_test.py", True, False),
        ("*_test.py", "pkg/auth_test.py", True, True),
        ("codebase/CONVENTIONS.md", "codebase/conventions.md", False, True),  # case-insensitive
        ("phases/08.1-x/*-PLAN.md", "phases/08.1-x/08.1-01-PLAN.md", False, True),
        ("phases/08.1-x/*-PLAN.md", "phases/0801-x/08.1-01-PLAN.md", False, False),  # "." is literal
        ("file?.md", "file1.md", False, True),
        ("file[0-9].md", "file7.md", False, True),
    ],
)
def test_glob_dialect(pattern, path, anywhere, expected):
    assert lib.glob_match(pattern, path, anywhere) is expected


def test_changed_file_globs_match_a_name_at_any_depth():
    assert lib.path_hit(["conftest.py"], ["src/a.py", "tests/unit/conftest.py"]) == ("conftest.py", "tests/unit/conftest.py")


def test_a_keyword_matches_the_start_of_a_word_only():
    assert lib.keyword_in("test", "Write integration tests")
    assert lib.keyword_in("test", "testing the login")
    assert not lib.keyword_in("test", "a contest of latest ideas")
    assert lib.keyword_in("database", "Migrate the DATABASE")
    assert lib.keyword_in("data model", "the data-model is fixed")  # words joined by space, - or _
    assert not lib.keyword_in("", "anything")


def test_keyword_hit_reports_the_keyword_and_the_signal_in_search_order():
    signals = Signals(request="fix the schema", plan="add a migration", diff="", changed_files=("db/schema.sql",))
    assert lib.keyword_hit(["schema", "migration"], signals, ["plan", "diff", "request"]) == ("migration", "plan")
    assert lib.keyword_hit(["schema"], signals, ["diff"]) == ("schema", "diff")  # the changed path
    assert lib.keyword_hit(["index"], signals, ["plan", "diff", "request"]) is None


def test_path_hit_names_the_glob_and_the_changed_file():
    assert lib.path_hit(["docs/**", "tests/**"], ["src/a.py", "tests/test_a.py"]) == ("tests/**", "tests/test_a.py")
    assert lib.path_hit(["tests/**"], ["src/a.py"]) is None


def test_request_names_finds_file_names_and_paths_but_not_urls_or_fenced_code():
    request = ("Close the gaps in FIX-PLAN.md, see `RETROSPECTIVE.md` and .planning/v1.0-MILESTONE-AUDIT.md. "
               "Also ./phases/04-x/04-UAT.md; not https://x.org/docs/NOTES.md nor @doc guide.md, e.g. v1.0 "
               "or mail a@b.com, FIX-PLAN.md again.\n```\nTraceback in TRACE.md\n```\nthen CHANGES.txt")
    assert lib.request_names(request) == (
        "FIX-PLAN.md", "RETROSPECTIVE.md", ".planning/v1.0-MILESTONE-AUDIT.md", "phases/04-x/04-UAT.md",
        "e.g", "CHANGES.txt")  # "e.g" names no file, so it loads nothing
    assert lib.request_names("") == ()


LISTING = ["STATE.md", "FIX-PLAN.md", "v1.0-MILESTONE-AUDIT.md", "phases/01-a/FIX-PLAN.md",
           "phases/04-x/04-UAT.md", "milestones/v1.0-ROADMAP.md", "a/PLAN.md", "b/PLAN.md", "notes/Readme.md",
           "notes/README.md"]


def test_resolve_named_prefers_the_top_of_planning_and_warns_when_ambiguous():
    named = lib.resolve_named(["FIX-PLAN.md", "state.md", ".planning/v1.0-MILESTONE-AUDIT.md", "04-UAT.md",
                               "04-x/04-UAT.md", "PLAN.md", "README.md", "src/app.py"], LISTING)
    assert dict(named.files) == {
        "FIX-PLAN.md": "FIX-PLAN.md",  # the top one over phases/01-a/FIX-PLAN.md
        "STATE.md": "state.md",  # case ignored
        "v1.0-MILESTONE-AUDIT.md": ".planning/v1.0-MILESTONE-AUDIT.md",
        "phases/04-x/04-UAT.md": "04-UAT.md",
        "notes/README.md": "README.md",  # the same case wins over notes/Readme.md
    }
    assert named.warnings == ("the request names 'PLAN.md', which matches several files (.planning/a/PLAN.md, "
                              ".planning/b/PLAN.md); none loaded: name it by its path (e.g. .planning/a/PLAN.md)",)


def test_plan_signal_text_drops_the_roadmap_and_adds_the_phase_context():
    plan = ("## Position (.planning/STATE.md)\nPhase 2\n\n## Roadmap, milestone v1 (.planning/ROADMAP.md)\n"
            "### Phase 9: database migration\n\n## Phase 2 plans (.planning/phases/02-ui/)\n- 02-01 Buttons\n")
    text = lib.plan_signal_text(plan, ["Decision: keep the API stable"])
    assert "database" not in text and "Phase 2" in text and "02-01 Buttons" in text
    assert text.endswith("Decision: keep the API stable")
    assert lib.plan_signal_text("", []) == ""


def test_request_urls_finds_every_at_doc_once_without_trailing_punctuation():
    request = "Use @doc https://x.org/a.md, and @doc http://y.org/b.md. Again @doc https://x.org/a.md; mail a@doc.org"
    assert lib.request_urls(request) == ["https://x.org/a.md", "http://y.org/b.md"]
    assert lib.request_urls("no docs here") == []


# ----------------------------------------------------------------------------- rules


def test_the_bundled_rules_parse_and_cover_every_mode_and_gsd_phase():
    rules = bundled_rules()
    assert set(rules.modes) == {"dev", "review", "research"}
    assert set(rules.phases) == set(lib.PHASES) == {"execute", "research", "plan", "verify", "repair", "discuss"}
    assert {t.name for t in rules.triggers} >= {"database", "tests"}
    repair = {e.glob: e for e in rules.phases["repair"]}
    assert repair["{phase}/*-PLAN.md"].pick == "open" and not repair["{phase}/*-PLAN.md"].required


# GSD's PHASE_FILE_MANIFEST (gsd-build/get-shit-done sdk/src/context-engine.ts): file -> required
GSD_MANIFEST = {
    "execute": {"STATE.md": True, "config.json": False},
    "research": {"STATE.md": True, "ROADMAP.md": True, "CONTEXT.md": True, "REQUIREMENTS.md": False},
    "plan": {"STATE.md": True, "ROADMAP.md": True, "CONTEXT.md": True, "RESEARCH.md": False, "REQUIREMENTS.md": False},
    "verify": {"STATE.md": True, "ROADMAP.md": True, "REQUIREMENTS.md": False, "PLAN.md": False, "SUMMARY.md": False},
    "repair": {"STATE.md": True, "config.json": False, "PLAN.md": False},
    "discuss": {"STATE.md": True, "ROADMAP.md": False, "CONTEXT.md": False},
}
# where we load more than GSD (each with a comment in configs/disclosure.yaml saying why)
EXTRA = {"execute": {"CONTEXT.md"}, "verify": {"VERIFICATION.md", "UAT.md", "VALIDATION.md"},
         "discuss": {"DISCUSSION-LOG.md"}}


@pytest.mark.parametrize("phase", lib.PHASES)
def test_the_bundled_phase_manifests_are_gsds(phase):
    ours = {e.glob.replace("{phase}/*-", ""): e.required for e in bundled_rules().phases[phase]}
    gsd = GSD_MANIFEST[phase]
    assert {name: ours[name] for name in gsd} == gsd
    assert set(ours) - set(gsd) == EXTRA.get(phase, set())
    assert all(not ours[name] for name in EXTRA.get(phase, ()))  # extras are optional
    assert "PROJECT.md" not in ours


@pytest.mark.parametrize(
    "data, message",
    [
        ({"modes": {"dev": "coding.md"}}, r"x\.yaml: key 'modes\.dev' must be a list"),
        ({"triggers": [{"name": "t", "load": ["a.md"]}]}, r"x\.yaml: key 'triggers\[0\]' needs 'load' globs and"),
        ({"triggers": [{"keywords": ["a"], "load": ["a.md"], "in": ["diff", "code"]}]}, r"triggers\[0\]'\.in has 'code'"),
        ({"phases": {"deploy": {"required": ["STATE.md"]}}}, r"unknown phase 'deploy'; GSD phases are execute"),
        ({"phases": {"repair": {"optional": [{"glob": "x", "pick": "middle"}]}}}, r"phases\.repair'\.optional\[0\]\.pick"),
        ({"state": [""]}, r"key 'state' must be a list of non-empty strings"),
    ],
)
def test_bad_rules_are_config_errors_that_name_the_file_and_key(data, message):
    with pytest.raises(ConfigError, match=message):
        lib.parse_rules(data, "x.yaml")


def test_a_project_rules_file_replaces_per_mode_and_per_trigger_name():
    base = {"modes": {"dev": ["a.md"], "review": ["r.md"]},
            "triggers": [{"name": "db", "keywords": ["sql"], "load": ["db.md"]}],
            "state": ["STATE.md"]}
    over = {"modes": {"dev": ["b.md"]},
            "triggers": [{"name": "db", "keywords": ["orm"], "load": ["db.md"]},
                         {"name": "ui", "keywords": ["css"], "load": ["ui.md"]}]}
    merged = lib.merge_rules(base, over)
    assert merged["modes"] == {"dev": ["b.md"], "review": ["r.md"]}
    assert [(t["name"], t["keywords"]) for t in merged["triggers"]] == [("db", ["orm"]), ("ui", ["css"])]
    assert merged["state"] == ["STATE.md"]


# ----------------------------------------------------------------------------- GSD phase folders

FILES = [
    "STATE.md",
    "phases/08-launch/08-01-PLAN.md",
    "phases/08-launch/08-01-SUMMARY.md",
    "phases/08.1-hardening/08.1-01-PLAN.md",
    "phases/08.1-hardening/08.1-02-PLAN.md",
    "phases/08.1-hardening/08.1-01-SUMMARY.md",
    "phases/08.1-hardening/08.1-10-SUMMARY.md",
    "phases/08.1-hardening/08.1-02-SUMMARY.md",
    "phases/09-docs/09-RESEARCH.md",
]


# (the current phase folder is the GSD position: tests/test_gsd_position.py)


def test_phase_selection_picks_the_last_summary_in_natural_order_and_warns_for_missing_required():
    rules = lib.parse_rules({"phases": {"repair": {
        "required": ["STATE.md", {"glob": "{phase}/*-SUMMARY.md", "pick": "last"}, "{phase}/*-VERIFICATION.md"],
        "optional": ["{phase}/*-UAT.md"]}}}, "r.yaml")
    chosen = lib.phase_selection(rules, "repair", FILES, "phases/08.1-hardening", "STATE.md names phase 8.1")
    assert list(chosen.files) == ["STATE.md", "phases/08.1-hardening/08.1-10-SUMMARY.md"]  # 10 after 02
    assert chosen.warnings == (
        ".planning/phases/08.1-hardening/*-VERIFICATION.md: required for phase 'repair' (r.yaml) but no file matches",)
    opened = lib.parse_rules({"phases": {"repair": {"optional": [{"glob": "{phase}/*-PLAN.md", "pick": "open"}]}}}, "r")
    under_way = FILES + ["phases/08.1-hardening/08.1-03-PLAN.md", "phases/08.1-hardening/08.1-04-PLAN.md"]
    assert list(lib.phase_selection(opened, "repair", under_way, "phases/08.1-hardening", "").files) == [
        "phases/08.1-hardening/08.1-03-PLAN.md"]  # the first plan with no SUMMARY
    assert list(lib.phase_selection(opened, "repair", FILES, "phases/08.1-hardening", "").files) == [
        "phases/08.1-hardening/08.1-02-PLAN.md"]  # all done: the last plan
    none = lib.phase_selection(rules, "repair", ["STATE.md"], None, "no phases/NN-name folder under .planning/")
    assert list(none.files) == ["STATE.md"]
    assert len(none.warnings) == 2 and all("no current phase folder" in w for w in none.warnings)


def test_generic_candidates_leave_out_state_and_non_markdown():
    files = ["STATE.md", "config.json", "references/db.md", "dreams/ideas.md", "phases/01-a/01-01-PLAN.md",
             "plans/current/plan.md", "sessions/current/session.log", "research/STACK.md", "v1.0-MILESTONE-AUDIT.md"]
    assert lib.generic_candidates(files, bundled_rules()) == ["dreams/ideas.md", "references/db.md", "research/STACK.md"]


# ----------------------------------------------------------------------------- decisions


def doc(path: str, **metadata) -> Candidate:
    return Candidate(path, path, f"# {path}\n", metadata, (1, 1), 10)


def test_decide_gives_layer_rule_and_reason_and_never_loads_twice():
    rules = bundled_rules()
    candidates = [
        doc("references/coding-standards.md", modes=["dev"]),
        doc("references/review-checklist.md", modes=["review"]),
        doc("references/database-schema.md", triggers=["database"]),
        doc("references/architecture.md"),
        doc("misc/loose.md"),
        doc("phases/01-a/01-01-PLAN.md"),
    ]
    signals = Signals(plan="Move the database to Postgres")
    already = {".planning/references/architecture.md": ("ref:.planning/references/architecture.md", "references.project")}
    rows, warnings = lib.decide(candidates, rules, "dev", "execute",
                                {"phases/01-a/01-01-PLAN.md": "phase execute: {phase}/*-PLAN.md (required)"},
                                signals, already)
    by = {r.document: r for r in rows}
    assert (by[".planning/references/coding-standards.md"].layer, by[".planning/references/coding-standards.md"].rule) \
        == (2, "frontmatter modes: [dev]")
    review = by[".planning/references/review-checklist.md"]
    assert (review.layer, review.loaded, review.reason) == (2, False, "for mode review only; the current mode is dev")
    db = by[".planning/references/database-schema.md"]
    assert (db.layer, db.loaded) == (3, True) and "'database' in the plan" in db.rule
    arch = by[".planning/references/architecture.md"]
    assert arch.loaded and arch.loaded_by_other == "references.project" and arch.layer == 1
    assert arch.section == "ref:.planning/references/architecture.md"
    loose = by[".planning/misc/loose.md"]
    assert (loose.layer, loose.loaded) == (3, False) and loose.reason.startswith("no mode, phase or trigger rule")
    plan = by[".planning/phases/01-a/01-01-PLAN.md"]
    assert (plan.layer, plan.loaded, plan.rule) == (2, True, "phase execute: {phase}/*-PLAN.md (required)")
    assert warnings == []


def test_bad_frontmatter_lists_are_warnings_naming_the_file():
    rows, warnings = lib.decide([doc("a.md", modes={"dev": 1})], bundled_rules(), "dev", None, {}, Signals(), {})
    assert warnings == [".planning/a.md: frontmatter modes {'dev': 1} is not a list of strings; ignored"]
    assert rows[0].loaded is False


def test_a_document_too_large_is_reported_with_its_rule_and_the_problem():
    big = Candidate("references/coding-standards.md", "x", "", {}, None, 999, "it is 999 bytes, over disclosure.maxFileBytes (10)")
    rows, _ = lib.decide([big], bundled_rules(), "dev", None, {}, Signals(), {})
    assert rows[0].loaded is False
    assert "modes.dev 'coding standards'" in rows[0].reason and "over disclosure.maxFileBytes" in rows[0].reason


def test_project_documents_and_resolving_them_outside_planning():
    from ctxengine.nodes.lib.disclosure import display_of, project_documents, resolve_named

    names = ("docs/DESIGN.md", "README.md", "../x.md", ".planning/A.md", "src/app.py", ".git/x.md", "a//b.md")
    assert project_documents(names) == ("docs/DESIGN.md", "README.md")
    found = resolve_named(("README.md", "docs/DESIGN.md", "STATE.md"), ["README.md", "STATE.md"], ["docs/DESIGN.md"])
    assert dict(found.files) == {"README.md": "README.md", "../docs/DESIGN.md": "docs/DESIGN.md", "STATE.md": "STATE.md"}
    assert display_of("../docs/DESIGN.md") == "docs/DESIGN.md" and display_of("STATE.md") == ".planning/STATE.md"

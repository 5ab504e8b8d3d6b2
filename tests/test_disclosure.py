"""Progressive disclosure through the real Hamilton driver: modes, triggers, @doc URLs, GSD
phases on the real corpus projects, and the disclosure plan of the JSON output."""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import http.server  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hamilton import driver  # noqa: E402

from conftest import local_http_server  # noqa: E402

from ctxengine.nodes import config, disclosure, references, state  # noqa: E402
from ctxengine.nodes import settings as settings_nodes  # noqa: E402
from ctxengine.nodes.lib import disclosure as lib  # noqa: E402
from ctxengine.nodes.types import ConfigError, Source  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpus" / "planning"
DEMO = REPO / "examples" / "demo"
OUTPUTS = ["disclosure_plan", "disclosed_sections", "disclosure_warnings"]
QUIET = {"state.includeGit": False, "state.includeEnvironment": False}

_DRIVER = driver.Builder().with_modules(config, settings_nodes, references, state, disclosure).build()


def run(project: Path, request: str = "", **overrides) -> dict:
    settings = {**QUIET, **{k.replace("__", "."): v for k, v in overrides.items()}}
    out = _DRIVER.execute(OUTPUTS, inputs={"project_dir": str(project), "overrides": settings, "user_request": request})
    json.dumps(out["disclosure_plan"])  # the plan goes into the JSON output as it is
    return out


def rows(out: dict) -> dict[str, dict]:
    return {row["document"]: row for row in out["disclosure_plan"]}


def keys(out: dict) -> list[str]:
    return [s.key for s in out["disclosed_sections"]]


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def demo_copy(tmp_path: Path, plan: str = "# Plan: Docs\n\n## Tasks\n- [>] T1 Write the README\n") -> Path:
    """The bundled demo's .planning/ with a neutral plan and no session log."""
    shutil.copytree(DEMO / ".planning", tmp_path / ".planning")
    (tmp_path / ".planning" / "sessions" / "current" / "session.log").unlink()
    (tmp_path / ".planning" / "plans" / "current" / "plan.md").write_text(plan, encoding="utf-8")
    return tmp_path


REF = ".planning/references/"


def corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if (p / ".planning").is_dir()) if CORPUS.is_dir() else []


# ----------------------------------------------------------------------------- layer 2: modes


@pytest.mark.parametrize(
    "mode, loaded, rule",
    [
        ("dev", REF + "coding-standards.md", "frontmatter modes: [dev]"),
        ("review", REF + "review-checklist.md", "frontmatter modes: [review]"),
        ("research", ".planning/dreams/ideas.md", "configs/disclosure.yaml modes.research 'sources and notes' (dreams/**/*.md)"),
    ],
)
def test_each_mode_loads_its_documents_and_only_those(tmp_path, mode, loaded, rule):
    out = run(demo_copy(tmp_path), "Tidy the README", template=mode)
    plan = rows(out)
    assert plan[loaded] | {} == {"document": loaded, "layer": 2, "loaded": True, "rule": rule,
                                 "section": f"ref:{loaded}", "kind": "file"}
    assert f"ref:{loaded}" in keys(out)
    others = {REF + "coding-standards.md", REF + "review-checklist.md", ".planning/dreams/ideas.md"} - {loaded}
    for other in others:
        assert plan[other]["loaded"] is False and plan[other]["layer"] == 2
        assert plan[other]["reason"].endswith(f"only; the current mode is {mode}")
        assert f"ref:{other}" not in keys(out)


def test_a_mode_rule_in_config_loads_a_document_without_frontmatter(tmp_path):
    project = write(demo_copy(tmp_path), {".planning/codebase/CONVENTIONS.md": "# Conventions\n\nSnake case.\n"})
    dev = rows(run(project, "x", template="dev"))[".planning/codebase/CONVENTIONS.md"]
    assert dev["loaded"] and dev["layer"] == 2
    assert dev["rule"] == "configs/disclosure.yaml modes.dev 'coding standards' (codebase/CONVENTIONS.md)"
    review = rows(run(project, "x", template="review"))[".planning/codebase/CONVENTIONS.md"]
    assert review == review | {"loaded": False, "layer": 2, "reason": "for mode dev only; the current mode is review"}


# ----------------------------------------------------------------------------- layer 3: triggers


def test_a_plan_that_mentions_a_database_loads_the_schema(tmp_path):
    quiet = rows(run(demo_copy(tmp_path), "Tidy the README"))[REF + "database-schema.md"]
    assert quiet["loaded"] is False and quiet["layer"] == 3
    assert "trigger 'database' (keywords database, migration, schema, sql) did not fire" in quiet["reason"]
    project = demo_copy(tmp_path / "b", "# Plan\n\n## Tasks\n- [>] T1 Add an index to the database\n")
    out = run(project, "Tidy the README")
    row = rows(out)[REF + "database-schema.md"]
    assert row["loaded"] and row["layer"] == 3
    assert row["rule"] == ("configs/disclosure.yaml trigger 'database': 'database' in the plan "
                           "(references/database-schema.md)")
    section = next(s for s in out["disclosed_sections"] if s.key == f"ref:{REF}database-schema.md")
    assert (section.kind, section.pool, section.priority, section.title) == ("reference", "references", 55, "Database schema")
    assert section.sources == (Source("file", REF + "database-schema.md", (6, 19)),)
    # the title heading is shown by the template, not repeated in the content
    assert section.content.startswith("| table | column |") and "triggers:" not in section.content


def _git(repo: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_DATE="2026-01-02T03:04:05Z", GIT_COMMITTER_DATE="2026-01-02T03:04:05Z")
    subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)


def _repo_with_change(project: Path, changed: str) -> Path:
    _git(project, "-c", "init.defaultBranch=main", "init", "-q")
    _git(project, "config", "user.name", "Test User")
    _git(project, "config", "user.email", "test@example.com")
    _git(project, "config", "commit.gpgsign", "false")
    write(project, {changed: "def one():\n    return 1\n", "src/app.py": "x = 1\n"})
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "init")
    write(project, {changed: "def one():\n    return 2\n"})
    return project


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_diff_that_touches_tests_loads_the_testing_guidelines(tmp_path):
    project = _repo_with_change(demo_copy(tmp_path), "tests/api/test_auth.py")
    out = run(project, "Tidy the README", state__includeGit=True)
    row = rows(out)[REF + "testing-guidelines.md"]
    assert row["loaded"] and row["layer"] == 3
    assert row["rule"] == ("configs/disclosure.yaml trigger 'tests': the diff touches tests/api/test_auth.py "
                           "(tests/**) (references/testing-guidelines.md)")
    untouched = _repo_with_change(demo_copy(tmp_path / "b"), "src/helpers.py")
    assert rows(run(untouched, "Tidy the README", state__includeGit=True))[REF + "testing-guidelines.md"]["loaded"] is False


def test_a_request_keyword_from_frontmatter_triggers_loads_the_document(tmp_path):
    project = write(demo_copy(tmp_path), {".planning/references/payments.md":
                                          "---\ntriggers: [refund, chargeback]\n---\n# Payments\n\nRefunds are async.\n"})
    out = run(project, "Handle a chargeback from the bank")
    row = rows(out)[REF + "payments.md"]
    assert row["loaded"] and row["layer"] == 3 and row["rule"] == "frontmatter triggers: 'chargeback' in the request"
    assert rows(run(project, "Tidy the README"))[REF + "payments.md"]["reason"] == (
        "frontmatter triggers (refund, chargeback) not in the plan, diff or request")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_frontmatter_paths_match_changed_file_globs(tmp_path):
    project = write(demo_copy(tmp_path), {".planning/references/payments.md":
                                          "---\npaths: [\"src/payments/**\"]\n---\n# Payments\n"})
    project = _repo_with_change(project, "src/payments/refund.py")
    row = rows(run(project, "x", state__includeGit=True))[REF + "payments.md"]
    assert row["loaded"] and row["rule"] == "frontmatter paths: the diff touches src/payments/refund.py (src/payments/**)"


# ----------------------------------------------------------------------------- triggers read the current work

ROADMAP_OF_KEYWORDS = """# Roadmap

## Milestone v1.0

### Phase 1: Buttons
The toolbar buttons.

### Phase 2: Database
Schema migration, SQL indexes, the API endpoint and route, security and password hashing,
tests with pytest and coverage, an architecture refactor, dependency upgrades.
"""

TOP_DOCS = {
    ".planning/database-schema.md": "# Schema\n",
    ".planning/security.md": "# Security\n",
    ".planning/testing.md": "# Testing\n",
    ".planning/architecture.md": "# Architecture\n",
    ".planning/api-conventions.md": "# API\n",
    ".planning/codebase/STACK.md": "# Stack\n",
}


def gsd_project(root: Path, plan: str, context: str | None = None) -> Path:
    files = {
        ".planning/STATE.md": "# State\n\n## Current Position\n\nPhase: 1 of 2 (Buttons)\nPlan: 1 of 1\n",
        ".planning/ROADMAP.md": ROADMAP_OF_KEYWORDS,
        ".planning/phases/01-buttons/01-01-PLAN.md": plan,
        **TOP_DOCS,
    }
    if context is not None:
        files[".planning/phases/01-buttons/01-CONTEXT.md"] = context
    return write(root, files)


def test_a_roadmap_full_of_keywords_fires_no_trigger_when_the_plan_has_none(tmp_path):
    project = gsd_project(tmp_path, "# Plan 01-01: Buttons\n\n## Tasks\n- Draw the toolbar buttons\n")
    out = run(project, "Carry on")
    plan = rows(out)
    for doc in TOP_DOCS:
        assert plan[doc]["loaded"] is False and "did not fire" in plan[doc]["reason"], plan[doc]
    assert keys(out) == []
    # the same project, with a plan that does speak of the database
    fired = run(gsd_project(tmp_path / "b", "# Plan 01-01\n\n## Tasks\n- Add a database column\n"), "Carry on")
    assert rows(fired)[".planning/database-schema.md"]["rule"] == (
        "configs/disclosure.yaml trigger 'database': 'database' in the plan (database-schema.md)")
    assert keys(fired) == ["ref:.planning/database-schema.md"]


def test_the_phase_context_is_part_of_the_current_work(tmp_path):
    project = gsd_project(tmp_path, "# Plan 01-01\n\n- Draw the buttons\n",
                          "# Phase 1 context\n\nDecision: the login button hides the password field.\n")
    out = run(project, "Carry on", disclosure__phase="execute")
    row = rows(out)[".planning/security.md"]
    assert row["rule"] == "configs/disclosure.yaml trigger 'security': 'login' in the plan (security.md)"
    assert rows(out)[".planning/phases/01-buttons/01-CONTEXT.md"]["rule"].startswith(
        "phase execute: {phase}/*-CONTEXT.md (optional")
    # without a phase the CONTEXT is not loaded, and is no signal
    assert rows(run(project, "Carry on", disclosure__phase=""))[".planning/security.md"]["loaded"] is False
    # the default, auto, executes the pending plan: the CONTEXT loads and is a signal
    assert rows(run(project, "Carry on"))[".planning/security.md"]["loaded"] is True


def test_the_architecture_rule_does_not_load_research_architecture(tmp_path):
    project = write(tmp_path, {
        ".planning/research/ARCHITECTURE.md": "# Research: architecture\n\nLong survey.\n",
        ".planning/codebase/ARCHITECTURE.md": "# Codebase architecture\n",
        ".planning/notes/architecture.md": "# Old notes\n",
    })
    out = run(project, "Refactor the module architecture")
    plan = rows(out)
    assert plan[".planning/codebase/ARCHITECTURE.md"]["rule"] == (
        "configs/disclosure.yaml trigger 'architecture': 'architecture' in the request (codebase/ARCHITECTURE.md)")
    assert plan[".planning/research/ARCHITECTURE.md"] | {} == {
        "document": ".planning/research/ARCHITECTURE.md", "layer": 2, "loaded": False,
        "reason": "for mode research only; the current mode is dev", "section": None, "kind": "file"}
    assert plan[".planning/notes/architecture.md"]["loaded"] is False
    assert keys(out) == ["ref:.planning/codebase/ARCHITECTURE.md"]


# ----------------------------------------------------------------------------- documents named in the request


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
@pytest.mark.parametrize("project, request_text, document", [
    ("ai-dynamo__nixl", "What did RETROSPECTIVE.md conclude?", ".planning/RETROSPECTIVE.md"),
    ("0xLeathery__helix-staking", "Close the gaps of .planning/v1.0-MILESTONE-AUDIT.md", ".planning/v1.0-MILESTONE-AUDIT.md"),
    ("0xLeathery__helix-staking", "Redo `ARITHMETIC-FIX-PLAN.md`.",
     ".planning/phases/03.3-post-audit-security-hardening/ARITHMETIC-FIX-PLAN.md"),
    ("ai-dynamo__nixl", "see milestones/v1.1-MILESTONE-AUDIT.md", ".planning/milestones/v1.1-MILESTONE-AUDIT.md"),
])
def test_a_state_document_named_in_the_request_loads(project, request_text, document):
    assert document not in rows(run(CORPUS / project, "Carry on"))  # a state file: not a candidate unless named
    out = run(CORPUS / project, request_text)
    assert rows(out)[document] == {"document": document, "layer": 3, "loaded": True, "rule": "named in the request",
                                   "section": f"ref:{document}", "kind": "file"}
    section = next(s for s in out["disclosed_sections"] if s.key == f"ref:{document}")
    assert section.sources[0].location == document and section.content.strip()


def test_named_documents_top_first_ambiguity_size_cap_urls_and_links(tmp_path):
    outside = write(tmp_path / "outside", {"SECRET.md": "# Secret\n"})
    project = write(tmp_path / "p", {
        ".planning/FIX-PLAN.md": "# Fix plan\n\n- Fix the toolbar\n",
        ".planning/phases/01-a/FIX-PLAN.md": "# Old fix plan\n",
        ".planning/a/NOTES.md": "# A\n",
        ".planning/b/NOTES.md": "# B\n",
        ".planning/BIG.md": "# Big\n\n" + "word " * 400,
    })
    (project / ".planning" / "SECRET.md").symlink_to(outside / "SECRET.md")
    out = run(project, "Follow FIX-PLAN.md, NOTES.md and BIG.md, not https://example.org/docs/NOTES.md; SECRET.md too",
              disclosure__maxFileBytes=1000)
    plan = rows(out)
    assert plan[".planning/FIX-PLAN.md"]["rule"] == "named in the request"
    assert ".planning/phases/01-a/FIX-PLAN.md" not in plan  # a state file, and not the one named
    assert plan[".planning/a/NOTES.md"]["loaded"] is False and plan[".planning/b/NOTES.md"]["loaded"] is False
    assert ("the request names 'NOTES.md', which matches several files (.planning/a/NOTES.md, .planning/b/NOTES.md); "
            "none loaded: name it by its path (e.g. .planning/a/NOTES.md)") in out["disclosure_warnings"]
    big = plan[".planning/BIG.md"]
    assert big["loaded"] is False and big["reason"].startswith("named in the request selected it, but ")
    assert any(w.startswith(".planning/BIG.md: named in the request selected it, but") and "maxFileBytes" in w
               for w in out["disclosure_warnings"])
    assert plan[".planning/SECRET.md"]["loaded"] is False
    assert any(w.startswith(".planning/SECRET.md: the request names it ('SECRET.md'), but it is not a regular file "
                            "inside the project") for w in out["disclosure_warnings"])
    assert keys(out) == ["ref:.planning/FIX-PLAN.md"]
    # by path: the one in the phase folder
    by_path = run(project, "Compare with phases/01-a/FIX-PLAN.md")
    assert rows(by_path)[".planning/phases/01-a/FIX-PLAN.md"]["rule"] == "named in the request"
    # a name inside a URL or a fenced block names nothing
    quiet = run(project, "Read https://example.org/FIX-PLAN.md\n```\nFIX-PLAN.md\n```\n")
    assert rows(quiet)[".planning/FIX-PLAN.md"]["loaded"] is False and keys(quiet) == []


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path == "/guide.md":
            body = b"---\ntitle: Remote guide\npriority: 72\n---\n# Guide\n\nUse feature flags.\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/markdown; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/huge.md":
            body = b"x" * 4096
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404, "Not Found")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    """A real http.server on 127.0.0.1, no proxies in the way."""
    with local_http_server(_Handler) as url:
        yield url


def test_at_doc_in_the_request_fetches_the_url(tmp_path, server):
    out = run(demo_copy(tmp_path), f"Ship it behind a flag, see @doc {server}/guide.md#flags and @doc {server}/nope.md",
              trust__allowPrivateUrls=True)  # the server is on 127.0.0.1, refused by default
    plan = rows(out)
    url = f"{server}/guide.md"
    assert plan[url] == {"document": url, "layer": 3, "loaded": True, "rule": "request @doc",
                         "section": f"ref:{url}", "kind": "url"}
    section = next(s for s in out["disclosed_sections"] if s.key == f"ref:{url}")
    assert (section.title, section.priority, section.content) == ("Remote guide", 72, "### Guide\n\nUse feature flags.\n")
    assert section.sources == (Source("url", url, (5, 7)),)
    missing = plan[f"{server}/nope.md"]
    assert missing["loaded"] is False
    assert missing["reason"] == f"request @doc: {server}/nope.md answered HTTP 404 Not Found"
    assert f"{server}/nope.md: request @doc: {server}/nope.md answered HTTP 404 Not Found" in out["disclosure_warnings"]


def test_at_doc_respects_the_size_cap_and_refuses_other_schemes(tmp_path, server):
    out = run(demo_copy(tmp_path), f"@doc {server}/huge.md and @doc file:///etc/passwd", references__urlMaxBytes=1000,
              trust__allowPrivateUrls=True)
    plan = rows(out)
    assert plan[f"{server}/huge.md"]["reason"] == (f"request @doc: {server}/huge.md is 4096 bytes, over "
                                                   "references.urlMaxBytes (1000); not loaded (raise "
                                                   "references.urlMaxBytes to read it)")
    assert plan["file:///etc/passwd"]["reason"] == ("request @doc: file:///etc/passwd: only http:// and https:// "
                                                    "URLs are fetched")
    assert not [k for k in keys(out) if k.startswith("ref:http") or k.startswith("ref:file")]


# ----------------------------------------------------------------------------- layer 1, dedup, plan rows


def test_the_plan_lists_core_rows_first_and_every_row_has_a_rule_or_a_reason(tmp_path):
    out = run(demo_copy(tmp_path), "Tidy the README")
    plan = out["disclosure_plan"]
    assert [(r["document"], r["kind"]) for r in plan[:6]] == [
        (".planning/gsd-rules.md", "rules"),
        (REF + "security.md", "rules"),  # pulled in by an @ line of the core rules
        (REF + "architecture.md", "reference"),
        (REF + "api-conventions.md", "reference"),
        (".planning/plans/current/plan.md", "plan"),
        ("user_request", "request"),
    ]
    assert plan[1]["rule"] == "core rules: an @ line in .planning/gsd-rules.md"
    for row in plan:
        assert row["layer"] in (1, 2, 3) and isinstance(row["loaded"], bool)
        assert ("rule" in row) == row["loaded"] and ("reason" in row) != row["loaded"]
    assert len({r["document"] for r in plan}) == len(plan)  # one row per document


def test_a_configured_reference_is_never_loaded_twice(tmp_path):
    project = demo_copy(tmp_path)
    path = project / ".planning" / "references" / "architecture.md"
    path.write_text(path.read_text().replace("priority: 70\n", "priority: 70\nmodes: [dev]\n"))
    out = run(project, "x")
    assert f"ref:{REF}architecture.md" not in keys(out)
    row = rows(out)[REF + "architecture.md"]
    assert row["rule"] == "configured reference: references.project" and row["also"] == "frontmatter modes: [dev]"


def test_a_project_rules_file_adds_a_trigger(tmp_path):
    project = write(demo_copy(tmp_path), {
        ".planning/disclosure.yaml": "triggers:\n  - name: flags\n    keywords: [flag]\n    load: [\"flags.md\"]\n",
        ".planning/flags.md": "# Flags\n",
    })
    out = run(project, "Put it behind a flag", disclosure__rules="disclosure.yaml")
    assert rows(out)[".planning/flags.md"]["rule"] == (
        "configs/disclosure.yaml + .planning/disclosure.yaml trigger 'flags': 'flag' in the request (flags.md)")
    with pytest.raises(ConfigError, match=r"key 'disclosure\.rules' is 'nope\.yaml', but there is no file"):
        run(project, "x", disclosure__rules="nope.yaml")


def test_the_rules_are_parsed_once_per_content_of_the_two_files(tmp_path):
    """disclosure_rules keeps its parse in the memo (kind ``disclosure-rules``) by the content of
    the bundled file and the project's: a second build parses nothing, an edited rules file is
    parsed again and its new trigger holds."""
    from ctxengine.nodes.lib.memo import Memo

    project = write(demo_copy(tmp_path), {
        ".planning/disclosure.yaml": "triggers:\n  - name: flags\n    keywords: [flag]\n    load: [\"flags.md\"]\n",
        ".planning/flags.md": "# Flags\n",
        ".planning/toggles.md": "# Toggles\n",
    })
    memo = Memo()

    def rules(**overrides):
        settings = {**QUIET, "disclosure.rules": "disclosure.yaml", **overrides}
        return _DRIVER.execute(["disclosure_rules"], inputs={"project_dir": str(project), "overrides": settings,
                                                              "user_request": "", "memo": memo})["disclosure_rules"]

    first = rules()
    assert memo.made["disclosure-rules"] == 1
    assert rules() is first and memo.made["disclosure-rules"] == 1
    assert rules(**{"disclosure.rules": ""}).source == "configs/disclosure.yaml"  # the bundled rules alone
    assert memo.made["disclosure-rules"] == 2
    (project / ".planning" / "disclosure.yaml").write_text(
        "triggers:\n  - name: flags\n    keywords: [flag]\n    load: [\"toggles.md\"]\n", encoding="utf-8")
    edited = rules()
    assert memo.made["disclosure-rules"] == 3
    assert [t for t in edited.triggers if t.name == "flags"] != [t for t in first.triggers if t.name == "flags"]


def test_a_document_over_the_size_cap_stays_out_with_the_reason(tmp_path):
    row = rows(run(demo_copy(tmp_path), "x", disclosure__maxFileBytes=100))[REF + "coding-standards.md"]
    assert row["loaded"] is False
    # too large to read, so its frontmatter is unknown; the config's mode rule still names it
    assert row["reason"].startswith("configs/disclosure.yaml modes.dev 'coding standards' "
                                    "(references/coding-standards.md) "
                                    "selected it, but ")
    assert row["reason"].endswith("coding-standards.md is 301 bytes, over disclosure.maxFileBytes (100); not loaded")


# ----------------------------------------------------------------------------- GSD phases


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
@pytest.mark.parametrize("phase", lib.PHASES)
@pytest.mark.parametrize("project", corpus(), ids=lambda p: p.name)
def test_every_gsd_phase_on_every_corpus_project(project, phase):
    out = run(project, "Continue with the current phase", disclosure__phase=phase)
    rules = lib.parse_rules(__import__("yaml").safe_load(
        (REPO / "configs" / "disclosure.yaml").read_text()), "configs/disclosure.yaml")
    planning = project / ".planning"
    phase_rows = [r for r in out["disclosure_plan"]
                  if r.get("rule", "").startswith(f"phase {phase}:") or r.get("also", "").startswith(f"phase {phase}:")]
    # every file a phase rule loaded exists, and is in the context exactly once
    for row in phase_rows:
        assert (project / row["document"]).is_file()
        assert row["loaded"] and row["section"] is not None
        if row["section"].startswith("ref:"):
            assert keys(out).count(row["section"]) == 1
    # a required glob with no file is a warning naming the glob; a required plain file that
    # exists is loaded
    for entry in (e for e in rules.phases[phase] if e.required):
        if "{phase}" in entry.glob:
            continue
        if (planning / entry.glob).is_file():
            assert f".planning/{entry.glob}" in {r["document"] for r in phase_rows}
        else:
            assert f".planning/{entry.glob}: required for phase {phase!r} (configs/disclosure.yaml) but no file matches" \
                in out["disclosure_warnings"]
    # a "required" warning only when no file matches where GSD expects it
    listing = [f.relative_to(planning).as_posix() for f in planning.rglob("*") if f.is_file()]
    for warning in out["disclosure_warnings"]:
        assert "required for phase" in warning, warning
        pattern = warning.split(": required for phase")[0].removeprefix(".planning/")
        assert not [f for f in listing if lib.glob_match(pattern, f)], warning
    # no state file loads unless a phase rule named it
    for row in out["disclosure_plan"]:
        if row["loaded"] and row["section"] == f"ref:{row['document']}" and row["kind"] == "file":
            rel = row["document"].removeprefix(".planning/")
            assert lib.first_match(rules.state, rel) is None or row["rule"].startswith(f"phase {phase}:")


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
def test_execute_loads_state_and_config_not_the_plans_again():
    """GSD's execute manifest: STATE.md (in the plan section) and config.json; the plans are
    in the plan section, so no PLAN file loads again; the phase's CONTEXT is optional."""
    out = run(CORPUS / "ahmetb__kubectl-fields", "Continue", disclosure__phase="execute")
    plan = rows(out)
    assert plan[".planning/STATE.md"]["kind"] == "plan" and plan[".planning/STATE.md"]["also"].startswith(
        "phase execute: STATE.md (required)")
    assert plan[".planning/config.json"]["rule"] == "phase execute: config.json (optional)"
    folder = ".planning/phases/04-extended-features/"
    assert plan[folder + "04-CONTEXT.md"]["rule"].startswith("phase execute: {phase}/*-CONTEXT.md (optional")
    assert not [k for k in keys(out) if k.endswith("-PLAN.md") or k.endswith("-SUMMARY.md")]
    assert out["disclosure_warnings"] == ()
    helix = run(CORPUS / "0xLeathery__helix-staking", "Continue", disclosure__phase="execute")
    assert keys(helix) == ["ref:.planning/config.json"] and helix["disclosure_warnings"] == ()


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
def test_the_roadmap_of_a_phase_manifest_is_not_loaded_twice():
    """GSD's plan manifest names ROADMAP.md; the roadmap section already carries it (narrowed to
    the current milestone), so disclosure marks it as loaded there instead of a second copy."""
    out = run(CORPUS / "ahmetb__kubectl-fields", "Plan the phase", disclosure__phase="plan")
    roadmap = rows(out)[".planning/ROADMAP.md"]
    assert roadmap["section"] == "roadmap" and roadmap["rule"].endswith("already loaded by the roadmap section")
    assert "ref:.planning/ROADMAP.md" not in keys(out)


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
def test_repair_on_helix_loads_the_open_plan_of_the_gsd_position():
    # STATE.md says phase 8.1 is complete and 08.2 already holds plans: the position (shared
    # with the plan section) is phase 8.2, and repair loads its plan under way
    out = run(CORPUS / "0xLeathery__helix-staking", "Continue", disclosure__phase="repair")
    folder = ".planning/phases/08.2-operational-hardening/"
    plans = [r["document"] for r in out["disclosure_plan"] if r["loaded"] and r["document"].endswith("-PLAN.md")]
    assert plans and all(p.startswith(folder) for p in plans)


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
def test_verify_and_repair_on_kubectl_fields():
    project = CORPUS / "ahmetb__kubectl-fields"
    folder = ".planning/phases/04-extended-features/"
    verify = rows(run(project, "Check the phase", disclosure__phase="verify"))
    for name in ("04-01-PLAN.md", "04-01-SUMMARY.md", "04-VERIFICATION.md", "04-UAT.md"):
        assert verify[folder + name]["loaded"] and verify[folder + name]["layer"] == 2
    assert verify[".planning/ROADMAP.md"]["loaded"]
    repair = run(project, "Fix the gaps", disclosure__phase="repair")
    loaded = {r["document"] for r in repair["disclosure_plan"] if r["loaded"] and r["document"].startswith(folder)}
    assert loaded == {folder + "04-01-PLAN.md"}  # GSD repairs by running the plan again
    research = rows(run(project, "Research", disclosure__phase="research"))
    assert research[folder + "04-CONTEXT.md"]["rule"].startswith("phase research: {phase}/*-CONTEXT.md (required")
    assert research[".planning/research/PITFALLS.md"]["loaded"] is False  # not every research file


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
@pytest.mark.parametrize("project", corpus(), ids=lambda p: p.name)
def test_plan_and_discuss_load_the_phase_context_and_research_not_project_or_every_research_file(project):
    for phase in ("plan", "discuss"):
        out = run(project, "Continue", disclosure__phase=phase)
        assert not [w for w in out["disclosure_warnings"] if "PROJECT.md" in w]
        loaded = [r["document"] for r in out["disclosure_plan"] if r["loaded"]]
        assert ".planning/PROJECT.md" not in loaded
        assert not [d for d in loaded if d.startswith(".planning/research/")]
        for row in out["disclosure_plan"]:
            if row["document"].endswith(("-CONTEXT.md", "-RESEARCH.md")) and row["loaded"]:
                assert row["rule"].startswith(f"phase {phase}: {{phase}}/*-")


@pytest.mark.skipif(not corpus(), reason="the corpus is not available")
def test_a_missing_required_file_is_a_warning_not_an_error():
    out = run(CORPUS / "0xCUB3__wBlock", "Plan it", disclosure__phase="plan")
    # GSD requires the phase's CONTEXT to plan; wBlock's phase 12 has none
    assert out["disclosure_warnings"] == (".planning/phases/12-homebrew-cask/*-CONTEXT.md: required for phase "
                                          "'plan' (configs/disclosure.yaml) but no file matches",)
    assert rows(out)[".planning/phases/12-homebrew-cask/12-RESEARCH.md"]["loaded"]


def test_no_phase_loads_no_state_file_and_a_bad_phase_is_a_config_error(tmp_path):
    project = write(tmp_path, {".planning/STATE.md": "Phase: 1 of 1\n", ".planning/ROADMAP.md": "# Roadmap\n",
                               ".planning/phases/01-a/01-01-PLAN.md": "# Plan\n"})
    out = run(project, "x", disclosure__phase="")
    assert not [r for r in out["disclosure_plan"] if r["kind"] == "file"]
    with pytest.raises(ConfigError, match=r"key 'disclosure\.phase' is 'deploy'; use one of auto, execute, research"):
        run(project, "x", disclosure__phase="deploy")


def test_a_project_reached_through_a_symlink_names_and_dedups_the_same_documents(tmp_path):
    real = demo_copy(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    project = real / ".planning" / "references" / "architecture.md"
    project.write_text(project.read_text().replace("priority: 70\n", "priority: 70\nmodes: [dev]\n"))
    out = run(link, "x")
    plan = rows(out)
    assert plan[".planning/plans/current/plan.md"]["kind"] == "plan"
    assert plan[REF + "architecture.md"]["rule"] == "configured reference: references.project"
    assert keys(out) == [f"ref:{REF}coding-standards.md"]


def test_the_rules_file_is_read_under_the_trust_rules(tmp_path):
    outside = write(tmp_path / "outside", {"rules.yaml": "triggers: []\n"})
    project = write(demo_copy(tmp_path / "p"), {".planning/big.yaml": "# " + "x" * (1 << 20) + "\n"})
    (project / ".planning" / "linked.yaml").symlink_to(outside / "rules.yaml")
    (project / ".planning" / "folder.yaml").mkdir()
    cases = {
        str(outside / "rules.yaml"): "outside the project; not read (add",
        "linked.yaml": "resolves to",
        "folder.yaml": "is a directory, not a regular file",
        "big.yaml": "over the rules file cap (1048576 bytes)",
        "/dev/zero": "outside the project",
    }
    for named, needle in cases.items():
        with pytest.raises(ConfigError) as caught:
            run(project, "x", disclosure__rules=named)
        message = str(caught.value)
        assert message.startswith("key 'disclosure.rules' (") and needle in message, message
    # an allowed folder makes the outside file readable
    out = run(project, "x", disclosure__rules=str(outside / "rules.yaml"), trust__allowedPaths=[str(outside)])
    assert "disclosure_plan" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_as_the_rules_file_is_an_error_not_a_hang(tmp_path):
    project = demo_copy(tmp_path)
    os.mkfifo(project / ".planning" / "rules.yaml")
    with pytest.raises(ConfigError, match=r"rules.yaml is a FIFO, not a regular file"):
        run(project, "x", disclosure__rules="rules.yaml")


def test_documents_named_outside_planning_load_within_the_cap_and_the_project(tmp_path):
    outside = write(tmp_path / "outside", {"SECRET.md": "# Secret\nSECRET-7f3a\n"})
    project = write(demo_copy(tmp_path / "p"), {
        "docs/DESIGN.md": "# Design\n\nThe cache is keyed by path.\n",
        "README.md": "# Read me\n\nRun make.\n",
        "docs/deep/NOTES.md": "# Deep notes\n",  # a bare name is looked for at the top level only
        "docs/BIG.md": "# Big\n\n" + "word " * 400,
        "src/app.py": "print('code')\n",  # not a document
    })
    (project / "docs" / "LEAK.md").symlink_to(outside / "SECRET.md")
    out = run(project, "Follow docs/DESIGN.md and README.md; see NOTES.md, docs/BIG.md, docs/LEAK.md, src/app.py, "
                       "../outside/SECRET.md", disclosure__maxFileBytes=1000)
    plan = rows(out)
    for document in ("docs/DESIGN.md", "README.md"):
        assert plan[document] == {"document": document, "layer": 3, "loaded": True, "rule": "named in the request",
                                  "section": f"ref:{document}", "kind": "file"}
    assert {"ref:README.md", "ref:docs/DESIGN.md"} <= set(keys(out))
    assert not [k for k in keys(out) if k.startswith(("ref:docs/BIG", "ref:docs/LEAK", "ref:src/"))]
    design = next(s for s in out["disclosed_sections"] if s.key == "ref:docs/DESIGN.md")
    assert "keyed by path" in design.content and design.sources[0].location == "docs/DESIGN.md"
    assert "docs/deep/NOTES.md" not in plan and "src/app.py" not in plan
    assert plan["docs/BIG.md"]["loaded"] is False and "disclosure.maxFileBytes" in plan["docs/BIG.md"]["reason"]
    assert any(w.startswith("docs/LEAK.md: the request names it ('docs/LEAK.md'), but it is not a regular file "
                            "inside the project") for w in out["disclosure_warnings"])
    assert not any("SECRET-7f3a" in s.content for s in out["disclosed_sections"])
    # a project without .planning/ loads a named document too; an unnamed one stays out
    bare = write(tmp_path / "bare", {"README.md": "# Bare\n", "docs/DESIGN.md": "# D\n"})
    assert keys(run(bare, "Read README.md")) == ["ref:README.md"]
    assert keys(run(bare, "Carry on")) == []

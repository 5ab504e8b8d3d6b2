"""Project rules (issue 19 item 11): the project's own agent instructions (CLAUDE.md, AGENTS.md
and the nested forms Claude Code and Codex read at the root) load as immutable rules under the
trust rules; the bundled GSD rules load only for a project that keeps a GSD (or article) plan.

Real tmp projects through the real Hamilton driver (``build_context``, ``explain_config``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from ctxengine import build_context  # noqa: E402
from ctxengine.api import explain_config  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402

GSD_RULES = "ref:builtin:gsd-rules"
QUIET = {"state.includeGit": False, "state.includeEnvironment": False, "trust.claudeProjects": False}


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def build(root: Path, **overrides):
    return build_context(str(root), "Add a login endpoint", overrides={**QUIET, **overrides}, cache=False)


def rules_of(result) -> list[tuple[str, str, str]]:
    """(key, tier, first content line) of each rules section, in prompt order."""
    return [(s.key, s.tier, s.content.strip().splitlines()[-1]) for s in result.sections if s.kind == "rules"]


GSD_STATE = "# Project State\n\nPhase: 1 of 2 (Storage)\nPlan: 1 of 1\nStatus: Ready to execute\n"


def test_a_project_without_gsd_gets_its_claude_md_and_agents_md_and_not_the_gsd_rules(tmp_path):
    root = write(tmp_path / "app", {"CLAUDE.md": "# Claude rules\nUse tabs, never spaces.\n",
                                    "AGENTS.md": "# Agent rules\nRun make test before you commit.\n",
                                    "src/app.py": "print('hi')\n"})
    result = build(root)
    assert rules_of(result) == [("ref:CLAUDE.md", "immutable", "Use tabs, never spaces."),
                                ("ref:AGENTS.md", "immutable", "Run make test before you commit.")]
    assert GSD_RULES not in {s.key for s in result.sections}
    assert "Read the current position first" not in result.context
    assert "Use tabs, never spaces." in result.context and "Run make test" in result.context
    rules = {row["document"]: row["rule"] for row in result.disclosure if row.get("kind") == "rules"}
    assert rules == {"CLAUDE.md": "project rules: CLAUDE.md at the project root (references.projectRules; "
                                  "Claude Code reads it)",
                     "AGENTS.md": "project rules: AGENTS.md at the project root (references.projectRules; "
                                  "Codex reads it)"}
    assert result.warnings == ()


def test_a_gsd_project_gets_its_claude_md_first_and_the_gsd_rules(tmp_path):
    root = write(tmp_path / "gsd", {"CLAUDE.md": "# House rules\nNo new dependencies.\n",
                                    ".planning/STATE.md": GSD_STATE,
                                    ".planning/ROADMAP.md": "# Roadmap\n\n- [ ] Phase 1: Storage\n"})
    result = build(root)
    keys = [key for key, _, _ in rules_of(result)]
    assert keys == ["ref:CLAUDE.md", GSD_RULES]
    assert all(tier == "immutable" for _, tier, _ in rules_of(result))
    assert result.context.index("No new dependencies.") < result.context.index("Read the current position first")


def test_the_article_layout_keeps_the_gsd_rules_and_the_setting_overrides_auto(tmp_path):
    article = write(tmp_path / "article", {".planning/plans/current/plan.md": "# Plan\n\n- [ ] Task one\n"})
    assert GSD_RULES in {s.key for s in build(article).sections}
    assert GSD_RULES not in {s.key for s in build(article, **{"references.gsdRules": "never"}).sections}
    plain = write(tmp_path / "plain", {"README.md": "# x\n"})
    assert GSD_RULES in {s.key for s in build(plain, **{"references.gsdRules": "always"}).sections}
    with pytest.raises(ConfigError, match=r"references.gsdRules.*auto, always, never"):
        build(plain, **{"references.gsdRules": "sometimes"})


def test_a_claude_md_symlinked_outside_the_project_is_refused_with_a_warning(tmp_path):
    secret = write(tmp_path / "elsewhere", {"secret.md": "# Secret\nTOKEN=hunter2\n"}) / "secret.md"
    root = write(tmp_path / "proj", {"AGENTS.md": "# Agents\nBe brief.\n"})
    (root / "CLAUDE.md").symlink_to(secret)
    result = build(root)
    assert [key for key, _, _ in rules_of(result)] == ["ref:AGENTS.md"]
    assert "hunter2" not in result.context
    refused = [w for w in result.warnings if w.startswith("references.projectRules[0] 'CLAUDE.md':")]
    assert len(refused) == 1 and "outside the project" in refused[0], result.warnings


def test_codex_override_shadows_agents_md_a_second_name_of_one_file_is_read_once_empty_is_skipped(tmp_path):
    root = write(tmp_path / "proj", {"CLAUDE.md": "# Shared rules\nOne rule.\n",
                                     "AGENTS.override.md": "# Override\nThe override wins.\n",
                                     "AGENTS.md": "# Plain agents\nShadowed.\n",
                                     "CLAUDE.local.md": ""})
    (root / ".claude").mkdir()
    (root / ".claude" / "CLAUDE.md").symlink_to(root / "CLAUDE.md")  # the same file under a second name
    result = build(root)
    assert [key for key, _, _ in rules_of(result)] == ["ref:CLAUDE.md", "ref:AGENTS.override.md"]
    assert "Shadowed." not in result.context and result.context.count("One rule.") == 1
    assert result.warnings == ()
    rows = {key: (value, why) for key, value, why in explain_config(str(root), QUIET)[0] if key.startswith("rules: ")}
    assert rows["rules: CLAUDE.md"][0] == "found"
    assert rows["rules: .claude/CLAUDE.md"] == ("skipped (same)", "the same file as CLAUDE.md; read once")
    assert rows["rules: CLAUDE.local.md"] == ("skipped (empty)", "CLAUDE.local.md is empty")
    assert rows["rules: AGENTS.md"][0] == "skipped (shadowed)"
    assert rows["rules: builtin:gsd-rules"][0] == "skipped"
    assert "not a GSD project" in rows["rules: builtin:gsd-rules"][1]


def test_an_oversized_rules_file_is_a_warning_not_a_failed_build(tmp_path):
    root = write(tmp_path / "proj", {"CLAUDE.md": "# Big\n" + "word " * 400 + "\n"})
    result = build(root, **{"references.projectRulesMaxBytes": 1000})
    assert rules_of(result) == []
    assert any(w.startswith("references.projectRules[0] 'CLAUDE.md':") and "references.projectRulesMaxBytes" in w
               for w in result.warnings), result.warnings


def test_project_rules_names_must_stay_inside_the_project(tmp_path):
    root = write(tmp_path / "proj", {"CLAUDE.md": "# R\nx\n"})
    with pytest.raises(ConfigError, match=r"references.projectRules\[0\].*inside the project"):
        build(root, **{"references.projectRules": ["../other/CLAUDE.md"]})
    assert rules_of(build(root, **{"references.projectRules": []})) == []

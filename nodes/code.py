"""Stage "code": the code the work is about, as two sections of the ``code`` pool.

* **Named files** (kind ``code``, ``priorities.code``): the files the current task, the plan,
  the request and the diff name, read from the working tree under the trust rules (inside the
  project, regular files, ``code.maxFileBytes``; a name leading outside is a warning), in full
  where they fit the pool, else as outlines with line numbers and ``⋮`` (the current task's files
  shrink last).
* **Repo map** (kind ``codemap``, ``priorities.codemap``): definitions and references of every
  source file git lists (.gitignore holds), from tree-sitter (nodes/lib/code/tags.py), ranked by
  a personalised PageRank from the named files and identifiers (rank.py), the pool's rest filled
  with outlines of the best-ranked files (fit.py).

Which parts run follows the work (``code.files`` / ``code.map`` per phase, or per mode template
when there is no phase): by default both for execute, repair and dev, the named files alone for
research; ``code.enabled: false`` turns the stage off. The pool's share is ``code.share`` of the
available tokens (nodes/settings.py ``truncation_settings``); the stage fits itself to that share,
and the truncation steps treat both sections like any summarizable section after that.

Loaders (the file list, the file texts) recompute every build and hand their content on; tags
are keyed by each file's content (tags.py ``file_tags``), so a warm build parses only what changed,
and carry the file's names as packed keys from which the ranking joins the graph in numpy
(rank.py). With Hamilton's cache, one changed file reruns ``code_tags`` (memo lookups),
``code_ranking``, ``code_sections`` and ``code_warnings``; ``code_names`` and the pool are served.
"""

import os
from dataclasses import replace
from typing import Any, Optional

from hamilton.function_modifiers import cache, tag

from .lib import filetree as _filetree
from .lib.code import fit as _fit
from .lib.code.files import CodeFiles, code_files_of, real_path
from .lib.code import names as _names
from .lib.code import rank as _rank
from .lib.code import tags as _tags
from .lib.code.settings import CodeParts, CodeSettings, code_parts_for
from .lib.git import GitSnapshot
from .lib.layout import POOL_OF_KIND
from .lib.memo import NO_MEMO, Memo
from .lib.settings import RenderSettings, StateSettings
from .lib.textio import TextUnavailable, Trust, read_local_text, without_widening_hints
from .lib.truncate import CachedCounter
from .types import Section, Source

STAGE = "code"
#: The planning folder is the plan stage's (plan, roadmap, research, summaries): never code.
PLANNING_FOLDER = ".planning/"


@tag(stage=STAGE)
def code_parts(code_settings: CodeSettings, disclosure_phase: Optional[str], render_settings: RenderSettings) -> CodeParts:
    """Which parts of the code stage run (named files, repo map) for the phase, else the mode."""
    return code_parts_for(code_settings, disclosure_phase, render_settings.template)


@tag(stage=STAGE, loader="git")
@cache(behavior="recompute")
def code_listing(project_dir: str, code_parts: CodeParts, state_settings: StateSettings,
                 git_snapshot: GitSnapshot, file_listing: _filetree.FileListing) -> _filetree.FileListing:
    """The project's files as git lists them (``git ls-files``, .gitignore holds; a walk outside a
    repository) but the planning folder's, which the plan sections show; nothing when the code
    stage is off. The file tree's listing when it is on (one ``git ls-files`` a build), else the
    same listing made here; the filter drivers ``git_snapshot`` switched off in the same
    repository are reused (no second ``git config`` in the build)."""
    if not code_parts.any:
        return _filetree.FileListing(project_dir, "off")
    listing = file_listing if file_listing.method != "off" else _filetree.list_files(
        project_dir, timeout=state_settings.git_timeout, snapshot=git_snapshot)
    return replace(listing, paths=tuple(p for p in listing.paths if not p.startswith(PLANNING_FOLDER)))


@tag(stage=STAGE)
def code_names(code_listing: _filetree.FileListing, code_parts: CodeParts, user_request: str, plan_files: dict,
               plan_state: Any, gsd_position: Any, git_state: Any, project_dir: str) -> _names.CodeNames:
    """The files and identifiers the work names: the current task (an article plan's in-progress
    task, a GSD plan's first task), the request, the diff, the rest of the plan (a GSD plan's
    ``files_modified`` and ``<files>`` included)."""
    if not code_parts.any:
        return _names.CodeNames()
    plan_path, task_lines = _current_plan(plan_files, plan_state, gsd_position)
    task = _names.current_task_text(plan_files, task_lines, plan_path)
    plan_text = plan_files.get(plan_path or "", "") + "\n" + (getattr(plan_state, "content", "") or "")
    diff = "\n".join(entry[0] for entry in getattr(git_state, "files", ()) or ())
    texts = [("task", task), ("request", user_request), ("diff", diff), ("plan", plan_text)]
    return _names.named_code(texts, code_listing.paths, os.path.realpath(project_dir), (task, user_request))


def _current_plan(plan_files: dict, plan_state: Any, gsd_position: Any) -> tuple[str | None, tuple[int, int] | None]:
    """The current plan file's key in ``plan_files`` and, for an article plan, its in-progress
    (else first pending) task's lines."""
    data = getattr(plan_state, "data", None) or {}
    if data.get("layout") == "article":
        path = next((p for p in plan_files if p.endswith("plan.md")), None)
        tasks = data.get("tasks") or ()
        current = next((t for t in tasks if t.get("status") == "in_progress"), None) or \
            next((t for t in tasks if t.get("status") == "pending"), None)
        return path, tuple(current["lines"]) if current else None
    plan_id = getattr(gsd_position, "plan", None)
    if plan_id:
        return next((p for p in plan_files if p.endswith(f"/{plan_id}-PLAN.md")), None), None
    return None, None


@tag(stage=STAGE, loader="file")
@cache(behavior="recompute")
def code_files(project_dir: str, code_listing: _filetree.FileListing, code_names: _names.CodeNames,
               code_parts: CodeParts, code_settings: CodeSettings) -> CodeFiles:
    """The texts the stage needs: the named files, and with the map every listed file tree-sitter
    can read (at most ``code.maxFiles``), each read under the trust rules (inside the project by
    its real path, a regular file, at most ``code.maxFileBytes``, not binary). A named file left
    out is a warning; a map file left out is listed in ``skipped`` with the reason."""
    if not code_parts.any:
        return CodeFiles()
    trust = Trust(root=os.path.realpath(project_dir))
    named = [f.path for f in code_names.files] if code_parts.files else []
    mapped = [p for p in code_listing.paths if _tags.language_of(p)] if code_parts.map else []
    texts: dict[str, str] = {}
    digests: dict[str, bytes] = {}
    skipped: list[tuple[str, str]] = []
    warnings: list[str] = list(code_names.warnings)
    limit = code_settings.max_files
    if len(mapped) > limit:
        warnings.append(f"code map: {len(mapped)} source files, over code.maxFiles ({limit}); the first {limit} are mapped")
        mapped = mapped[:limit]
    wanted = list(dict.fromkeys(named + mapped))
    real_folders: dict[str, str] = {}  # this build's: each folder's real path, resolved once
    for path in wanted:
        try:
            full = os.path.join(project_dir, path)
            loaded = read_local_text(full, trust, code_settings.max_file_bytes, "code.maxFileBytes", path, crlf=True,
                                     real=real_path(full, real_folders))
        except TextUnavailable as exc:  # Refused (outside, not regular) included
            reason = without_widening_hints(str(exc))  # code is read from the project alone
            skipped.append((path, reason))
            if path in named:
                warnings.append(f"code: {reason}; left out of the named files")
            continue
        texts[path] = loaded.text
        digests[path] = _tags.tags_digest(_tags.language_of(path), loaded.text)
    return code_files_of(texts, digests, tuple(skipped), tuple(warnings))


@tag(stage=STAGE)
@cache(behavior="recompute")  # the memo holds each file's tags: a pickle of them all would cost more than the lookups
def code_tags(code_files: CodeFiles, memo: Memo = NO_MEMO) -> _tags.CodeTags:
    """Each read file's definitions and references (relative path -> FileTags), tree-sitter tags
    kept in the ``memo`` by the file's content digest, so only changed files are parsed again (a
    file with syntax errors keeps what was recovered; one that fails leaves the others mapped)."""
    grammars = _tags.Grammars()
    tags = {path: _tags.file_tags(path, text, grammars, memo, code_files.digests.get(path))
            for path, text in code_files.texts.items()}
    return _tags.CodeTags(tags, code_files.digest)


@tag(stage=STAGE)
def code_ranking(code_tags: _tags.CodeTags, code_names: _names.CodeNames, code_parts: CodeParts) -> _rank.Ranking:
    """The mapped files by personalised PageRank from the named files and identifiers."""
    if not code_parts.map:
        return _rank.Ranking()
    named = {f.path: f.origin for f in code_names.files}
    return _rank.ranked_files(code_tags, named, code_names.identifiers)


@tag(stage=STAGE)
def code_pool_tokens(pool_share_tokens: dict) -> int:
    """The tokens of the ``code`` pool's share (``code.share`` of the available tokens)."""
    return int(pool_share_tokens.get("code", 0))


@tag(stage=STAGE)
def code_sections(code_files: CodeFiles, code_tags: _tags.CodeTags, code_names: _names.CodeNames, code_ranking: _rank.Ranking,
                  code_pool_tokens: int, exact_counter: CachedCounter, code_settings: CodeSettings,
                  code_parts: CodeParts) -> list:
    """The "Code: Named Files" section (kind code) and the "Repo Map" section (kind codemap),
    fitted to the code pool together: the named files first, in all but the map's floor
    (``code.mapMinShare`` of the pool, or what the map would use if less) when the map runs; the map in what is left. Each file
    shown is a source with the line range it shows. Counted through ``exact_counter`` (its counts
    kept in the memo): this node reruns whenever a file changes, and the outlines of the files
    that did not change are not counted again."""
    out: list[Section] = []
    count = exact_counter.count
    budget = code_pool_tokens
    ranked = list(code_ranking.paths)  # empty when the map is off (code_ranking)
    skip = frozenset(f.path for f in code_names.files)
    whole = _fit.fit_map(ranked, code_files.texts, code_tags, budget, count, skip) if ranked else _fit.Fitted()
    if code_parts.files and code_names.files:
        floor = _fit.map_floor(budget, code_settings.map_min_share, whole.tokens)
        named = _fit.fit_named(code_names.files, code_files.texts, code_tags, budget - floor, count)
        if named.shown:
            origin = {f.path: f.origin for f in code_names.files}
            out.append(_section("code", "Code: Named Files", named.shown, code_settings.files_priority,
                                {"files": tuple({"path": s.path, "level": s.level, "origin": origin[s.path]}
                                                for s in named.shown)}))
            budget -= named.tokens
    if ranked:  # the map with the whole pool, when what the named files left still holds all of it
        fitted = whole if whole.tokens <= budget else _fit.fit_map(ranked, code_files.texts, code_tags, budget, count, skip)
        if fitted.shown:
            out.append(_section("codemap", "Repo Map", fitted.shown, code_settings.map_priority,
                                {"files": tuple({"path": s.path, "level": s.level} for s in fitted.shown),
                                 "mapped": len(code_tags), "edges": code_ranking.edges}))
    return out


def _section(kind: str, title: str, shown: tuple, priority: int, data: dict) -> Section:
    return Section(
        key=kind,
        title=title,
        kind=kind,
        content="\n\n".join(s.text for s in shown),
        priority=priority,
        pool=POOL_OF_KIND[kind],
        sources=tuple(Source("file", s.path, s.lines) for s in shown),
        data=data,
    )


@tag(stage=STAGE)
def code_warnings(code_files: CodeFiles, code_tags: _tags.CodeTags, code_listing: _filetree.FileListing) -> tuple:
    """The code stage's warnings: named files outside the project or left out (with why), the
    file list's problems, and named or mapped files tree-sitter could only partly read."""
    partial = [f"code: {path}: {t.error}" for path, t in sorted(code_tags.items()) if t.error]
    return tuple(code_listing.warnings) + tuple(code_files.warnings) + tuple(partial[:5]) + (
        (f"code: ... and {len(partial) - 5} more files with tree-sitter errors",) if len(partial) > 5 else ())

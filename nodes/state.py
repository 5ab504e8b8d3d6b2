"""Stage 3, project state: plan, session history, git, file tree and environment as sections.

Loader nodes at the leaves read files and run git (tagged ``loader="file"|"git"``) and hand
their CONTENT downstream; the nodes after them are pure, so a cache keyed on inputs stays
right. Each part obeys its ``state.include*`` switch: a switched-off loader reads nothing and
its section is None. Every section lists its sources (file and line range where it has one).

Layouts (DESIGN.md, "Project layouts read"): the article's ``.planning/plans/current/plan.md``
and ``.planning/sessions/current/session.log``; real GSD ``.planning/`` folders (STATE.md,
ROADMAP.md, phases/); aider's ``.aider.chat.history.md``.
"""

import os
import platform
import subprocess
from dataclasses import replace
from importlib import resources

from hamilton.function_modifiers import cache, extract_fields, tag

from .lib.quote import quoted
from .lib import filetree as _filetree
from .lib import git as _git
from .lib import gsd as _gsd
from .lib import plan as _plan
from .lib import sessions as _session
from .lib.sessions import claude_code as _claude
from .lib.layout import POOL_OF_KIND
from .lib.memo import NO_MEMO, Memo
from .lib.settings import StateSettings, trust_at
from .lib.digest import text_digest
from .lib.textio import Refused, TextUnavailable, Trust, read_local_text, trusted_path
from .lib.textio.clean import LoadedText
from .lib.programs import executable_path, program_answer, safe_search_path
from .types import ConfigError, CtxEngineError, Section, Source
from ..version import __version__

STAGE = "state"
POOL = POOL_OF_KIND  # the budget pool of each section kind (nodes/lib/layout.py)

_ARTICLE_PLAN = os.path.join(".planning", "plans", "current", "plan.md")
_JSONL_SESSION = os.path.join(".planning", "sessions", "current", "session.log")
_AIDER_NAMES = (".aider.chat.history.md", os.path.join(".planning", ".aider.chat.history.md"))


def _on(state_settings: StateSettings, kind: str) -> bool:
    return state_settings.switches[kind]


def _priority(state_settings: StateSettings, kind: str) -> int:
    return state_settings.priorities[kind]


_MAX_STATE_FILE_BYTES = 64 << 20  # a session transcript can be large; anything past this is not a state file


class _Reader:
    """Reads plan and session files under the trust rules, keeping the warnings it owes."""

    def __init__(self, project_dir: str, trust_settings: Trust):
        self.project_dir, self.warnings = project_dir, []
        self.trust = trust_at(trust_settings, project_dir)
        self.cwds: tuple[str, ...] = ()  # a transcript found in Claude Code's folder: the project's folders

    def __call__(self, path: str) -> str | None:
        """A plan file's text, or None (a warning kept)."""
        loaded = _loaded(path, self.trust, self.warnings, False, self._shown(path))
        return None if loaded is None else loaded.text

    def transcript(self, path: str, trust: Trust | None = None,
                   shown: str | None = None) -> _session.SessionText | None:
        """A session file's text and digest (only the newest part of one over the cap; read as a
        file that grows, so a transcript that only grew reads its new bytes only), or None (a
        warning kept). ``trust``: other trust rules than the project's (a Claude Code folder)."""
        loaded = _loaded(path, trust or self.trust, self.warnings, True, shown or self._shown(path))
        if loaded is None:
            return None
        return _session.SessionText(loaded.text, loaded.digest or text_digest(loaded.text), loaded.grew_from)

    def _shown(self, path: str) -> str:
        shown = os.path.relpath(path, self.project_dir)
        return path if shown.startswith("..") else shown


def _loaded(path: str, trust: Trust, warnings: list[str], keep_tail: bool = False,
            shown: str | None = None) -> LoadedText | None:
    """A plan or session file read (cleaned, CRLF as LF), or None with a warning when the trust
    rules refuse it (outside the project, not a regular file); a binary or (without
    ``keep_tail``: only the newest part of a session log is kept) oversized one is an error
    naming it."""
    try:
        loaded = read_local_text(path, trust, _MAX_STATE_FILE_BYTES, "the state file cap (64 MiB)", shown, keep_tail,
                                 crlf=True, grows=keep_tail)
    except Refused as exc:
        warnings.append(f"{exc}; left out of the plan and history")
        return None
    except TextUnavailable as exc:
        if not os.path.exists(path):  # a broken symlink or a symlink loop
            warnings.append(f"{exc}; left out of the plan and history")
            return None
        raise CtxEngineError(f"{exc}; a plan or session file must be text") from None
    warnings.extend(loaded.notes(shown or path, "the state file cap (64 MiB)"))
    return loaded


def _choice(value: str, key: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"key 'state.{key}' is {quoted(value)}; use one of {', '.join(allowed)}")
    return value


# ----------------------------------------------------------------------------- layout and plan


@tag(stage=STAGE, loader="file")
@cache(behavior="recompute")
def project_layout(project_dir: str, state_settings: StateSettings) -> str:
    """The planning layout: ``article`` or ``gsd``. With ``state.layout: auto``, article when
    .planning/plans/current/plan.md exists, gsd when .planning/STATE.md, ROADMAP.md or
    workstreams/ (GSD workstreams) exists, else article."""
    layout = _choice(state_settings.layout, "layout", ("auto", "article", "gsd"))
    if layout != "auto":
        return layout
    planning = os.path.join(project_dir, ".planning")
    if os.path.lexists(os.path.join(project_dir, _ARTICLE_PLAN)):  # a FIFO or folder there: a warning later
        return "article"
    if any(os.path.lexists(os.path.join(planning, name)) for name in ("STATE.md", "ROADMAP.md", "workstreams")):
        return "gsd"
    return "article"


@tag(stage=STAGE, loader="file")
@cache(behavior="recompute")
def gsd_planning(project_dir: str, trust_settings: Trust) -> _gsd.GsdFiles:
    """What the GSD position is read from: STATE.md and ROADMAP.md (text, when present and
    readable under the trust rules) and the names of the files in each phase folder
    (phases/NN-name, milestones/*-phases/NN-name); with GSD workstreams
    (.planning/workstreams/<name>/), the files of the workstream ``_gsd.workstream_files`` picks."""
    planning = os.path.join(project_dir, ".planning")
    read = _Reader(project_dir, trust_settings)  # refusals reach the warnings through plan_reads
    top = _planning_files(planning, planning, read)
    streams = os.path.join(planning, "workstreams")
    workstreams = {}
    if os.path.isdir(streams) and trusted_path(streams, read.trust):
        for name in sorted(os.listdir(streams)):
            base = os.path.join(streams, name)
            if os.path.isdir(base) and trusted_path(base, read.trust):
                workstreams[name] = _planning_files(planning, base, read)
    pointer = os.path.join(planning, "active-workstream")
    active = read(pointer) if workstreams and os.path.lexists(pointer) else None
    files = replace(top, workstreams=workstreams, active_workstream=active)
    return replace(_gsd.workstream_files(files), warnings=tuple(read.warnings))


def _planning_files(planning: str, base: str, read) -> _gsd.GsdFiles:
    """STATE.md, ROADMAP.md and the phase folders under ``base`` (.planning/ or a workstream's
    folder), folders relative to ``planning``."""
    texts = {}
    for name in ("STATE.md", "ROADMAP.md"):
        path = os.path.join(base, name)
        texts[name] = read(path) if os.path.lexists(path) else None
    folders = {}
    for folder in _phase_dirs(base):
        if not trusted_path(folder, read.trust):
            continue
        rel = os.path.relpath(folder, planning).replace(os.sep, "/")
        folders[rel] = tuple(sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))))
    state_path = os.path.relpath(os.path.join(base, "STATE.md"), os.path.dirname(planning)).replace(os.sep, "/")
    return _gsd.GsdFiles(texts["STATE.md"], texts["ROADMAP.md"], folders, state_path=state_path)


@tag(stage=STAGE)
def gsd_position(gsd_planning: _gsd.GsdFiles, project_layout: str, state_settings: StateSettings) -> _gsd.GsdPosition:
    """ONE reading of where a GSD project stands (milestone, phase, phase folder, next plan), with
    its evidence, its source (pinned | frontmatter | body | files) and the warnings where STATE.md
    and the files disagree; the state and disclosure stages both use it. ``state.gsdPhase`` pins
    the phase. An article-layout project without STATE.md or phase folders has none."""
    pinned = state_settings.gsd_phase
    if project_layout != "gsd" and not pinned and not gsd_planning.folders:
        return _gsd.GsdPosition()
    return _gsd.position_of(gsd_planning, pinned)


@tag(stage=STAGE, loader="file", target_=...)
@cache(behavior="recompute")
@extract_fields({"plan_files": dict, "plan_read_warnings": tuple})
def plan_reads(project_dir: str, project_layout: str, state_settings: StateSettings, trust_settings: Trust,
               gsd_planning: _gsd.GsdFiles, gsd_position: _gsd.GsdPosition) -> dict:
    """The plan files' contents (``plan_files``), path -> text ({} when switched off or absent),
    and the warnings of reading them under the trust rules (``plan_read_warnings``). Article:
    plan.md. GSD: STATE.md and ROADMAP.md (as gsd_planning read them) and the PLAN/SUMMARY files
    of the position's phase folder (the folder itself is the key ending in "/", its value the
    folder's file names)."""
    read = _Reader(project_dir, trust_settings)
    files = _plan_files(project_dir, project_layout, state_settings, gsd_planning, gsd_position, read)
    warnings = tuple(gsd_planning.warnings) if project_layout == "gsd" and _on(state_settings, "plan") else ()
    return {"plan_files": {path: text for path, text in files.items() if text is not None},
            "plan_read_warnings": warnings + tuple(read.warnings)}


def _plan_files(project_dir: str, project_layout: str, state_settings: StateSettings, gsd_planning: _gsd.GsdFiles,
                gsd_position: _gsd.GsdPosition, _read) -> dict[str, str | None]:
    if not _on(state_settings, "plan"):
        return {}
    out: dict[str, str | None] = {}
    if project_layout == "article":
        path = os.path.join(project_dir, _ARTICLE_PLAN)
        if os.path.lexists(path):  # not a regular file: the reader's warning names it
            out[path] = _read(path)
        return out
    planning = os.path.join(project_dir, ".planning")
    for name, text in (("STATE.md", gsd_planning.state_text), ("ROADMAP.md", gsd_planning.roadmap_text)):
        out[os.path.join(planning, name)] = text  # read once, by gsd_planning
    if gsd_position.folder is None:
        return out
    folder = os.path.join(planning, *gsd_position.folder.split("/"))
    if not os.path.isdir(folder) or not trusted_path(folder, _read.trust):
        return out
    names = sorted(os.listdir(folder))
    out[folder + "/"] = "\n".join(names)
    for name in names:
        if _gsd.is_phase_file(name):
            out[f"{folder}/{name}"] = _read(os.path.join(folder, name))
    return out


def _phase_dirs(planning: str) -> list[str]:
    found = []
    phases = os.path.join(planning, "phases")
    if os.path.isdir(phases):
        found.extend(os.path.join(phases, d) for d in sorted(os.listdir(phases)))
    milestones = os.path.join(planning, "milestones")
    if os.path.isdir(milestones):
        for archive in sorted(os.listdir(milestones)):
            full = os.path.join(milestones, archive)
            if archive.endswith("-phases") and os.path.isdir(full):
                found.extend(os.path.join(full, d) for d in sorted(os.listdir(full)))
    return [d for d in found if os.path.isdir(d) and _gsd.dir_phase_key(os.path.basename(d)) is not None]


@tag(stage=STAGE)
def plan_state(
    plan_files: dict[str, str], project_layout: str, project_dir: str, state_settings: StateSettings,
    gsd_position: _gsd.GsdPosition,
) -> _plan.PlanView:
    """The plan as the context shows it. Article: in-progress and pending tasks in full,
    completed ones cut to their first line, a count line. GSD: the position, STATE.md's blocks
    and the current phase's plans (done ones as their SUMMARY's one-liner, the next in full)."""
    if not _on(state_settings, "plan"):
        return _plan.PlanView(project_layout, False)
    explicit = state_settings.layout != "auto"
    if project_layout == "article":
        path = os.path.join(project_dir, _ARTICLE_PLAN)
        if path not in plan_files:
            warnings = (f"{path}: not found; no plan section (state.layout is article)",) if explicit else ()
            return _plan.PlanView("article", False, warnings=warnings)
        return _plan.article_view(plan_files[path], path)
    detail = _choice(state_settings.gsd_pending_plans, "gsdPendingPlans", ("outline", "full"))
    return _gsd.gsd_view(plan_files, os.path.join(project_dir, ".planning"), project_dir, gsd_position, detail)


@tag(stage=STAGE)
def plan_section(plan_state: _plan.PlanView, state_settings: StateSettings) -> Section | None:
    """The "Current Plan" section (kind plan, priority ``priorities.plan``), or None."""
    return _view_section(plan_state, "plan", "Current Plan", state_settings, position=plan_state.position)


@tag(stage=STAGE)
def roadmap_state(
    plan_files: dict[str, str], project_layout: str, project_dir: str, gsd_position: _gsd.GsdPosition
) -> _plan.PlanView:
    """GSD: ROADMAP.md narrowed to the current milestone, finished phases cut to their heading."""
    if project_layout != "gsd":
        return _plan.PlanView(project_layout, False)
    return _gsd.roadmap_view(plan_files, os.path.join(project_dir, ".planning"), project_dir, gsd_position)


@tag(stage=STAGE)
def roadmap_section(roadmap_state: _plan.PlanView, state_settings: StateSettings) -> Section | None:
    """The "Roadmap" section (kind roadmap, priority ``priorities.roadmap``: below the plan, so
    truncation cuts the roadmap before the current plan), or None."""
    return _view_section(roadmap_state, "roadmap", "Roadmap", state_settings)


def _view_section(view: _plan.PlanView, kind: str, title: str, state_settings: StateSettings,
                  **data) -> Section | None:
    """A plan view as the section of its kind (key = kind), or None when plans are off or absent."""
    if not _on(state_settings, "plan") or not view.found:
        return None
    return Section(key=kind, title=title, kind=kind, content=view.content,
                   priority=_priority(state_settings, kind), pool=POOL[kind],
                   sources=view.sources, data={**view.data, **data})


# ----------------------------------------------------------------------------- session history


@tag(stage=STAGE, loader="file", target_=...)
@cache(behavior="recompute")
@extract_fields({"session_files": dict, "session_read_warnings": tuple, "session_cwds": tuple})
def session_reads(project_dir: str, state_settings: StateSettings, trust_settings: Trust) -> dict:
    """The session transcript's content (``session_files``), path -> its text and digest
    (:class:`~.lib.sessions.SessionText`), the warnings of reading it under the trust rules
    (``session_read_warnings``: a log over the 64 MiB cap keeps its newest part) and, for a
    transcript found in Claude Code's own folder, the project's folders its lines must be
    recorded in (``session_cwds``; () otherwise)."""
    read = _Reader(project_dir, trust_settings)
    files = _session_files(project_dir, state_settings, read)
    return {"session_files": {path: text for path, text in files.items() if text is not None},
            "session_read_warnings": tuple(read.warnings), "session_cwds": read.cwds}


def _session_files(project_dir: str, state_settings: StateSettings,
                   read: _Reader) -> dict[str, _session.SessionText | None]:
    """At most one file; {} when switched off or absent. ``state.sessionFormat``: auto prefers
    the Claude Code transcript named by ``state.claudeCode.transcript``, then
    .planning/sessions/current/session.log, then aider's .aider.chat.history.md at the project
    root, then under .planning/, then the project's newest Claude Code transcript in the user's
    Claude folder (``trust.claudeProjects``)."""
    if not _on(state_settings, "history"):
        return {}
    fmt = _choice(state_settings.session_format, "sessionFormat", ("auto", "jsonl", "aider", "claude"))
    if fmt in ("auto", "claude"):
        named = _claude_named(project_dir, state_settings, read)
        if named or fmt == "claude":  # a named transcript that cannot be read is not replaced by another
            return named if named is not None else _claude_found(project_dir, state_settings, read)
    candidates = []
    if fmt in ("auto", "jsonl"):
        candidates.append(os.path.join(project_dir, _JSONL_SESSION))
    if fmt in ("auto", "aider"):
        candidates.extend(os.path.join(project_dir, name) for name in _AIDER_NAMES)
    for path in candidates:
        if os.path.lexists(path):  # a FIFO, device or folder is a warning, and the next candidate is tried
            text = read.transcript(path)
            if text is not None:
                return {path: text}
    return _claude_found(project_dir, state_settings, read) if fmt == "auto" else {}


def _claude_named(project_dir: str, state_settings: StateSettings, read: _Reader) -> dict | None:
    """The transcript ``state.claudeCode.transcript`` names (a .jsonl file, or a folder: its
    newest), None when unset. Named in .planning/config.json it must resolve inside the project
    (or a trust.allowedPaths folder); named by the user (user config, --set, API) it may be
    anywhere, relative paths still taken from the project."""
    named = state_settings.claude_transcript.strip()
    if not named:
        return None
    config_json = os.path.join(project_dir, ".planning", "config.json")
    from_project = state_settings.claude_transcript_from_project
    path = os.path.join(project_dir, named if from_project else os.path.expanduser(named))
    trust = read.trust
    if from_project and not trusted_path(path, trust):
        read.warnings.append(f"{config_json}: state.claudeCode.transcript {quoted(named)} resolves outside the "
                             "project; a project may name only a transcript inside it (set the key in your user "
                             "config or with --set to read one elsewhere); no Claude Code transcript read")
        return {}
    if not from_project:
        trust = replace(trust, allowed_paths=trust.allowed_paths + (os.path.realpath(path if os.path.isdir(path)
                                                                                    else os.path.dirname(path)),))
    if os.path.isdir(path):
        folder, path = path, _claude.newest_transcript(path)
        if path is None:
            read.warnings.append(f"{folder}: no Claude Code transcript (*.jsonl) in the folder state.claudeCode.transcript names")
            return {}
    return _claude_read(path, trust, read)


def _claude_found(project_dir: str, state_settings: StateSettings, read: _Reader) -> dict:
    """The project's newest transcript in Claude Code's own folder ($CLAUDE_CONFIG_DIR or
    ~/.claude, projects/<encoded project path>/), when the user's trust.claudeProjects allows.
    The folder name is shared by every path that differs only in its punctuation (``/t/a-b``,
    ``/t/a.b``, ``/t/a/b``), so a transcript is the project's only when it was recorded in the
    project (its first ``cwd``); the others are skipped with a note that names none of them,
    and ``read.cwds`` tells the parser to skip any later line recorded elsewhere."""
    if not state_settings.claude_projects:
        return {}
    paths = _claude.project_paths(project_dir)
    for folder in _claude.project_folders(project_dir):
        found = _claude.transcripts(folder)
        mine = next((p for p in found if _claude.in_project(_claude.head_cwd(p) or "", paths)), None)
        skipped = found.index(mine) if mine is not None else len(found)
        if skipped:
            read.warnings.append(f"{folder}: {skipped} Claude Code transcript{'s' if skipped != 1 else ''} skipped: "
                                 "recorded in another folder whose name Claude Code stores in the same place "
                                 "(not this project)")
        if mine is not None:
            read.cwds = paths
            trust = replace(read.trust, allowed_paths=read.trust.allowed_paths + (os.path.realpath(folder),))
            return _claude_read(mine, trust, read)
    return {}


def _claude_read(path: str, trust: Trust, read: _Reader) -> dict:
    text = read.transcript(path, trust, path)
    return {} if text is None else {path: text}


@tag(stage=STAGE)
def session_history(session_files: dict[str, _session.SessionText], state_settings: StateSettings,
                    session_cwds: tuple, memo: Memo = NO_MEMO) -> _session.SessionHistory:
    """The session's rounds (a user request and everything up to the next), with a warning
    per malformed line; an empty history when there is no session file. A Claude Code
    transcript is read by its own parser (``state.claudeCode.*``; only the lines recorded in
    ``session_cwds`` when those are given). The ``memo`` keeps each line's reading and each
    round's parse, so a transcript that grew reads only its new part."""
    for path, read in session_files.items():
        text = read.text
        if _claude.is_claude_code(text):
            return _claude.parse_claude_code(text, path, _claude.Options(
                sidechains=state_settings.claude_sidechains, compacted=state_settings.claude_compacted,
                result_max_lines=state_settings.claude_result_max_lines,
                result_max_chars=state_settings.claude_result_max_chars, cwds=tuple(session_cwds)), memo)
        return _session.parse_session(text, path, memo=memo, digest=read.digest, grew_from=read.grew_from)
    return _session.SessionHistory()


@tag(stage=STAGE)
def round_summaries(session_history: _session.SessionHistory, memo: Memo = NO_MEMO) -> tuple:
    """Every round's one-line summary, oldest first (str each): made once per round and shared
    by the history section and the budget monitor; a round the ``memo`` summarized before (a
    transcript that only grew) is not summarized again."""
    return _session.round_summaries(_session.rounds_of(session_history), memo)


@tag(stage=STAGE)
def history_section(session_history: _session.SessionHistory, round_summaries: tuple,
                    state_settings: StateSettings, project_dir: str) -> Section | None:
    """The "Session History" section: the last ``state.maxHistoryRounds`` rounds verbatim, older
    rounds as their summary lines, ``state.summaryBlock`` at a time; the counts in a trailer, so
    a new round leaves the text before it unchanged. ``data`` keeps the rounds so truncation can
    re-compact: {"rounds", "verbatim_from" (index into rounds), "format"}. Its sources are named
    as state_sections names them (relative to the project), so that node keeps this section
    object (its digest, over the transcript's rounds, computed once)."""
    if not _on(state_settings, "history") or not session_history.rounds:
        return None
    rounds = session_history.rounds
    keep = max(0, state_settings.max_history_rounds)
    verbatim_from = _session.verbatim_start(len(rounds), keep, state_settings.summary_block)
    path = session_history.source or ""
    sessions = session_history.sessions if session_history.format == _session.AIDER else 0
    trailer = _session.history_trailer(rounds, verbatim_from, f" in {sessions} session{'' if sessions == 1 else 's'}" if sessions else "")
    head = f"Session log {os.path.basename(path)} ({session_history.format})." if path else "Session history."
    content = (head + "\n\n"
               + _session.compact_history(rounds, len(rounds) - verbatim_from, round_summaries) + "\n\n" + trailer)
    sources = []
    older, recent = rounds[:verbatim_from], rounds[verbatim_from:]
    for group in (older, recent):
        spans = [r.lines for r in group if r.lines]
        if spans:
            sources.append(_project_relative(Source("file", path, (spans[0][0], spans[-1][1])), project_dir))
    return Section(
        key="history",
        title="Session History",
        kind="history",
        content=content,
        priority=_priority(state_settings, "history"),
        pool=POOL["history"],
        sources=tuple(sources),
        data={"rounds": rounds, "verbatim_from": verbatim_from, "format": session_history.format, "source": path},
    )


# ----------------------------------------------------------------------------- git


@tag(stage=STAGE, loader="git")
@cache(behavior="recompute")
def git_snapshot(project_dir: str, state_settings: StateSettings) -> _git.GitSnapshot:
    """One look at the repository through real git: status (porcelain v2), ``diff HEAD
    --numstat`` and the patch only when under ``state.gitDiffMaxLines``, the last commits.
    Timeouts and output caps apply; problems are warnings. Nothing when switched off. Only the
    project's own repository is read (or one in ``trust.allowedPaths``), with nothing it could run."""
    if not _on(state_settings, "git"):
        return _git.GitSnapshot(project_dir)
    return _git.take_snapshot(
        project_dir,
        max_lines=state_settings.git_diff_max_lines,
        timeout=state_settings.git_timeout,
        max_bytes=state_settings.git_max_bytes,
        log_count=state_settings.git_log_count,
        allowed_paths=state_settings.allowed_paths,
        enclosing_is_note=_bundled_example(project_dir),
    )


def _bundled_example(project_dir: str) -> bool:
    """Whether ``project_dir`` is one of ctxengine's bundled examples (then the clone or virtual
    environment it sits in is ctxengine's, not the project's: not reading it is no news)."""
    examples = os.path.realpath(str(resources.files("ctxengine.examples")))
    return os.path.realpath(project_dir).startswith(examples + os.sep)


@tag(stage=STAGE)
def git_state(git_snapshot: _git.GitSnapshot) -> _git.GitState:
    """The parsed repository state: branch, staged / unstaged / untracked / renamed files,
    per-file +n/-m, and the patch or summary mode."""
    return _git.git_state_from(git_snapshot)


@tag(stage=STAGE)
def git_section(git_state: _git.GitState, state_settings: StateSettings) -> Section | None:
    """The "Git Status" section (kind git): status and diff, or per-file counts without hunks
    in summary mode. ``data``: {"files": [(path, added, removed, status)], "summary_mode"}."""
    if not _on(state_settings, "git") or not git_state.available:
        return None
    root = git_state.root or ""
    sources = [Source("git", root)]
    for path, _, _, status in git_state.files[:200]:
        if status == "deleted":
            continue
        sources.append(Source("file", os.path.join(root, path), git_state.hunks.get(path)))
    return Section(
        key="git",
        title="Git Status",
        kind="git",
        content=_git.render_git(git_state),
        priority=_priority(state_settings, "git"),
        pool=POOL["git"],
        sources=tuple(sources),
        data={
            "files": tuple(git_state.files),
            "summary_mode": git_state.summary_mode,
            "branch": git_state.branch,
            "head": git_state.head,
            "staged": tuple((e.path, e.x) for e in git_state.staged),
            "unstaged": tuple((e.path, e.y) for e in git_state.unstaged),
            "untracked": git_state.untracked,
            "renames": dict(git_state.renames),
            "total_lines": git_state.total_lines,
        },
    )


# ----------------------------------------------------------------------------- file tree


@tag(stage=STAGE, loader="git")
@cache(behavior="recompute")
def file_listing(project_dir: str, state_settings: StateSettings, git_snapshot: _git.GitSnapshot) -> _filetree.FileListing:
    """The project's files: ``git ls-files`` in a repository (.gitignore holds; the filter
    drivers ``git_snapshot`` switched off reused), else a walk that skips .git, node_modules,
    virtualenvs, caches and build output and never follows symlinks. Nothing when
    ``state.includeFileTree`` is off (the default)."""
    if not _on(state_settings, "tree"):
        return _filetree.FileListing(project_dir, "off")
    return _filetree.list_files(project_dir, timeout=state_settings.git_timeout, snapshot=git_snapshot)


@tag(stage=STAGE)
def file_tree_section(file_listing: _filetree.FileListing, state_settings: StateSettings) -> Section | None:
    """The "File Tree" section (kind tree): at most ``state.fileTreeMaxEntries`` entries, then
    "... and N more"."""
    if not _on(state_settings, "tree") or file_listing.method == "off":
        return None
    limit = state_settings.file_tree_max_entries
    total = len(file_listing.paths)
    how = "git ls-files" if file_listing.method == "git" else "folder walk"
    head = f"{total}{'' if file_listing.complete else '+'} files ({how})"
    return Section(
        key="tree",
        title="File Tree",
        kind="tree",
        content=head + "\n" + _filetree.render_tree(file_listing, limit),
        priority=_priority(state_settings, "tree"),
        pool=POOL["tree"],
        sources=(Source("git" if file_listing.method == "git" else "file", file_listing.root),),
        data={"total": total, "shown": min(total, limit), "method": file_listing.method},
    )


# ----------------------------------------------------------------------------- environment


def _version_of(program: str, project_dir: str, path: str | None, memo: Memo) -> str | None:
    """``program --version``'s first line, the program found on the absolute entries of ``path``
    and never inside the project (:func:`executable_path`), started by that absolute path; kept
    in the memo by its binary (:func:`program_answer`)."""
    where = executable_path(program, project_dir, path)
    return None if where is None else program_answer(
        where, ("--version",), lambda: _first_version_line(where, safe_search_path(path, project_dir)), memo)


def _first_version_line(program: str, search_path: str) -> str | None:
    """The first line ``program --version`` prints (its absolute path; ``search_path`` as its
    PATH), or None when it cannot start, times out or exits non-zero."""
    try:
        result = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL,
            env={**os.environ, "PATH": search_path},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (result.stdout or result.stderr).strip().splitlines()
    return text[0].strip() if text and result.returncode == 0 else None


def _git_version(project_dir: str, path: str | None, memo: Memo) -> str | None:
    """The git version through the safe runner, git found as :func:`_version_of` finds a
    program and kept as it keeps one."""
    where = executable_path("git", project_dir, path)
    return None if where is None else program_answer(
        where, ("--version", "safe runner"), lambda: _git.git_version(where), memo)


@tag(stage=STAGE, loader="environment")
@cache(behavior="recompute")
def environment_facts(project_dir: str, memo: Memo = NO_MEMO) -> dict:
    """Python, OS, git and ctxengine versions, and node's where it is installed. git and node are
    looked up on the absolute entries of PATH only and never inside ``project_dir`` (a project's
    committed ``node`` must not run, nor its version reach the context); their answers are kept
    in the memo by their binaries."""
    ours = __version__
    path = os.environ.get("PATH")
    git = _git_version(project_dir, path, memo)
    facts = {
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "git": git,
        "ctxengine": ours,
    }
    node = _version_of("node", project_dir, path, memo)
    if node:
        facts["node"] = node
    return facts


@tag(stage=STAGE)
def environment_section(environment_facts: dict, state_settings: StateSettings) -> Section | None:
    """The "Environment" section (kind environment): one line per fact."""
    if not _on(state_settings, "environment"):
        return None
    labels = {"python": "Python", "os": "OS", "git": "git", "ctxengine": "ctxengine", "node": "node"}
    lines = []
    for key, value in environment_facts.items():
        lines.append(f"- {labels.get(key, key)}: {value if value is not None else 'not found'}")
    return Section(
        key="environment",
        title="Environment",
        kind="environment",
        content="\n".join(lines),
        priority=_priority(state_settings, "environment"),
        pool=POOL["environment"],
        sources=tuple(Source("environment", key) for key in environment_facts),
        data=dict(environment_facts),
    )


# ----------------------------------------------------------------------------- stage outputs


@tag(stage=STAGE)
def state_sections(
    plan_section: Section | None,
    roadmap_section: Section | None,
    history_section: Section | None,
    git_section: Section | None,
    file_tree_section: Section | None,
    environment_section: Section | None,
    state_settings: StateSettings,
    project_dir: str,
) -> list[Section]:
    """The state sections in order plan, roadmap, history, git, tree, environment, skipping None
    and those switched off; their file sources named relative to the project, like references
    (a section whose sources are named so already is kept as it is)."""
    out = []
    for section in (plan_section, roadmap_section, history_section, git_section, file_tree_section, environment_section):
        if section is not None and _on(state_settings, section.kind):
            sources = tuple(_project_relative(s, project_dir) for s in section.sources)
            out.append(section if sources == section.sources else replace(section, sources=sources))
    return out


def _project_relative(source: Source, project_dir: str) -> Source:
    if source.kind not in ("file", "git") or not os.path.isabs(source.location):
        return source
    relative = os.path.relpath(source.location, project_dir)
    if relative.startswith(".."):
        return source
    return replace(source, location=relative)


@tag(stage=STAGE)
def state_warnings(
    gsd_position: _gsd.GsdPosition,
    plan_state: _plan.PlanView,
    roadmap_state: _plan.PlanView,
    session_history: _session.SessionHistory,
    git_state: _git.GitState,
    file_listing: _filetree.FileListing,
    plan_read_warnings: tuple = (),
    session_read_warnings: tuple = (),
) -> tuple[str, ...]:
    """Every warning of the state stage: where STATE.md and the phase files disagree, plan
    problems (missing GSD files, unknown task boxes), malformed session lines with their line
    numbers, git problems, file-tree problems, files the trust rules refused or cleaned."""
    return (tuple(plan_read_warnings) + tuple(session_read_warnings) + tuple(gsd_position.warnings)
            + tuple(plan_state.warnings) + tuple(roadmap_state.warnings)
            + session_history.warnings + git_state.warnings + file_listing.warnings)


@tag(stage=STAGE)
def state_notes(git_state: _git.GitState) -> tuple[str, ...]:
    """Information of the state stage that is not a problem (the JSON's ``notes``, never printed
    as a warning): no git repository, a detached HEAD, a bundled example's enclosing clone."""
    return tuple(git_state.notes)



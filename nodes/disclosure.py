"""Progressive disclosure: which documents beyond the configured references load, in which
layer, and by which rule (runs before assembly).

Layer 1 (core) is loaded by the other stages: the rules documents, the plan summary and the
request; they are reported here. Layer 2 loads on demand by mode (``template``) and by GSD
phase (``disclosure.phase``, CLI ``--phase``); layer 3 loads on triggers found in the current
work (the plan section without the roadmap, the phase's CONTEXT, the diff, the request), the
documents the request names (``see FIX-PLAN.md``), and ``@doc URL`` in the request. The rules live in
configs/disclosure.yaml (and a project file named by ``disclosure.rules``), never in code.

Three loader nodes read: ``disclosure_rules`` (the YAML rules), ``planning_files`` (the
listing of .planning/ and the candidate documents) and ``requested_documents`` (``@doc``
URLs). Everything after them is pure and lives in nodes/lib/disclosure/.
"""

import os
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping, Optional

from hamilton.function_modifiers import cache, tag

from .lib import disclosure as _dis
from .lib.disclosure import Candidate, Decision, DisclosureRules, FetchedDoc, PhaseSelection, Signals
from .lib.gsd import AUTO, GsdPosition, PhaseWork, phase_work
from .lib.markdown import nest_under_title
from .lib.digest import digest16
from .lib.memo import NO_MEMO, Memo
from .lib.references import (fallback_title, root_group, normalise_url, parse_document, parsed_document,
                             priority_for, title_for)
from .lib.quote import quoted
from .lib.settings import DisclosureSettings, trust_at
from .lib.textio import (CONFIG_MAX_BYTES, Refused, TextUnavailable, Trust, fetch_url, list_files, read_local_text,
                          trusted_path)
from .lib.yamlio import YAMLError, load_yaml
from .types import ConfigError, Document, Section, Source

_LIST_LIMIT = 5000  # files of .planning/ listed at most


@dataclass(frozen=True)
class PlanningFiles:
    """The listing of .planning/ and the candidate documents read from it."""

    listing: tuple[str, ...] = ()  # every file, relative to .planning/, "/"-separated
    documents: Mapping[str, Candidate] = field(default_factory=dict)  # path -> document read
    warnings: tuple[str, ...] = ()
    named: Mapping[str, str] = field(default_factory=dict)  # path the request names -> the name as written


@dataclass(frozen=True)
class DisclosureOutcome:
    """Every decision of the run (files and @doc URLs) and the warnings met."""

    decisions: tuple[Decision, ...] = ()
    warnings: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- loaders


#: The memo kind of the parsed disclosure rules (:func:`disclosure_rules`).
RULES = "disclosure-rules"
BUNDLED_RULES = "configs/disclosure.yaml"


@cache(behavior="recompute")
@tag(stage="disclosure", loader="file")
def disclosure_rules(disclosure_settings: DisclosureSettings, trust_settings: Trust, project_dir: str,
                     memo: Memo = NO_MEMO) -> DisclosureRules:
    """The disclosure rules: bundled configs/disclosure.yaml, with the project's YAML file named
    by ``disclosure.rules`` (relative to .planning/) laid over it; parsed once per content of the
    two files (``memo``, in the process only)."""
    bundled = resources.files("ctxengine.configs").joinpath("disclosure.yaml").read_text(encoding="utf-8")
    named = disclosure_settings.rules
    if not named:
        return memo.get(RULES, digest16(bundled.encode("utf-8")),
                        lambda: _dis.parse_rules(load_yaml(bundled) or {}, BUNDLED_RULES), persist=False)
    path = os.path.expanduser(named)
    if not os.path.isabs(path):
        path = os.path.join(project_dir, ".planning", path)
    trust = trust_at(trust_settings, project_dir)
    if trusted_path(path, trust) and not os.path.lexists(path):  # outside: refused without looking
        raise ConfigError(f"key 'disclosure.rules' is {quoted(named)}, but there is no file {path}; "
                          "give a YAML file relative to .planning/ or remove the key")
    try:  # under the trust rules: inside the project (or trust.allowedPaths), a regular file, capped
        text = read_local_text(path, trust, CONFIG_MAX_BYTES, f"the rules file cap ({CONFIG_MAX_BYTES} bytes)").text
    except TextUnavailable as exc:
        raise ConfigError(f"key 'disclosure.rules' ({quoted(named)}): {exc}") from None
    source = f"{BUNDLED_RULES} + {_display(path, project_dir)}"
    key = digest16(bundled.encode("utf-8"), text.encode("utf-8", "surrogatepass"), path.encode("utf-8", "surrogatepass"),
                   source.encode("utf-8", "surrogatepass"))
    return memo.get(RULES, key, lambda: _rules_over(load_yaml(bundled) or {}, text, path, source), persist=False)


def _rules_over(bundled: dict, text: str, path: str, source: str) -> DisclosureRules:
    """The bundled rules with the project's rules file (``text``, read from ``path``) laid over
    them; a problem of that file is a ConfigError naming it (and the line of bad YAML)."""
    try:
        over = load_yaml(text) or {}
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)}); fix the rules file") from None
    if not isinstance(over, dict):
        raise ConfigError(f"{path}: the top level must be a mapping with modes, triggers, phases, state")
    _dis.parse_rules(_dis.merge_rules({}, over), path)  # errors name the project file
    return _dis.parse_rules(_dis.merge_rules(bundled, over), source)


@cache(behavior="recompute")
@tag(stage="disclosure", loader="file")
def planning_files(
    project_dir: str,
    disclosure_settings: DisclosureSettings,
    trust_settings: Trust,
    disclosure_rules: DisclosureRules,
    disclosure_phase: Optional[str],
    requested_names: tuple,
    disclosure_work: PhaseWork,
    memo: Memo = NO_MEMO,
) -> PlanningFiles:
    """The files under .planning/ (hidden ones skipped), with every disclosure candidate read:
    the markdown documents that are not state, the files the current phase's rules name, and
    the regular files inside the project that the request names (outside .planning/ only the
    named paths themselves are looked at, as ``../path``). A candidate whose text did not change
    is not parsed again (``memo``)."""
    root = os.path.realpath(project_dir)
    base = os.path.join(root, ".planning")
    present = [name for name in _dis.project_documents(requested_names)
               if os.path.lexists(os.path.join(root, *name.split("/")))]  # only the named paths, no walk
    if not os.path.isdir(base) and not present:
        return PlanningFiles()
    trust = trust_at(trust_settings, project_dir)
    warnings: list[str] = []
    listing = _listing(base, trust, warnings) if os.path.isdir(base) else []
    wanted = list(_dis.generic_candidates(listing, disclosure_rules))
    if disclosure_phase:
        selection = _dis.phase_selection(disclosure_rules, disclosure_phase, listing, disclosure_work.folder,
                                         disclosure_work.why)
        wanted += [p for p in selection.files if p not in wanted]
    resolved = _dis.resolve_named(requested_names, listing, present)
    warnings.extend(resolved.warnings)
    named = _regular_inside(base, root, resolved.files, warnings)
    wanted += [p for p in named if p not in wanted]
    max_bytes = disclosure_settings.max_file_bytes
    documents: dict[str, Candidate] = {}
    for path in wanted:
        documents[path] = _candidate(base, path, max_bytes, warnings, trust, memo)
    return PlanningFiles(tuple(listing), documents, tuple(warnings), named)


@cache(behavior="recompute")
@tag(stage="disclosure", loader="url")
def requested_documents(
    requested_doc_urls: tuple, disclosure_settings: DisclosureSettings, trust_settings: Trust,
    fetch_deadline: Optional[float] = None,
) -> tuple:
    """Each ``@doc URL`` of the request fetched (http/https only, under the trust rules, with
    the references stage's timeout and size cap and the build's URL deadline), or the reason
    it was not."""
    timeout, max_bytes = disclosure_settings.url_timeout, disclosure_settings.url_max_bytes
    trust = trust_at(trust_settings, os.curdir)
    return tuple(_fetch(url, timeout, max_bytes, trust, fetch_deadline) for url in requested_doc_urls)


# ----------------------------------------------------------------------------- pure nodes


@tag(stage="disclosure")
def disclosure_work(disclosure_settings: DisclosureSettings, gsd_position: GsdPosition, project_layout: str) -> PhaseWork:
    """The GSD phase type whose files load and the phase folder ``{phase}`` names, with why
    (config key disclosure.phase, CLI --phase). ``auto`` (the default) follows the position:
    nothing planned, plan (or discuss); plans pending, execute; all done, the next phase's
    discuss/plan, else verify. A given type wins; after a finished phase, plan, discuss,
    research and execute point at the next phase. Empty: no phase files."""
    value = disclosure_settings.phase
    if value in (None, "", False):
        return phase_work(gsd_position, None)
    phase = str(value).strip().lower()
    if phase != AUTO and phase not in _dis.PHASES:
        raise ConfigError(f"key 'disclosure.phase' is {quoted(value)}; use auto or one of {', '.join(_dis.PHASES)} "
                          "(or leave it empty for no phase)")
    return phase_work(gsd_position, phase, project_layout == "gsd")


@tag(stage="disclosure")
def disclosure_phase(disclosure_work: PhaseWork) -> Optional[str]:
    """The GSD phase type whose files load (``disclosure_work``), or None."""
    return disclosure_work.type


@tag(stage="disclosure")
def requested_doc_urls(user_request: str) -> tuple:
    """The targets of ``@doc URL`` in the user request, normalised, in order, once each."""
    out: dict[str, None] = {}
    for target in _dis.request_urls(user_request):
        out.setdefault(normalise_url(target) if target.lower().startswith(("http://", "https://")) else target, None)
    return tuple(out)


@tag(stage="disclosure")
def requested_names(user_request: str) -> tuple:
    """The file names and relative paths the user request names (``see FIX-PLAN.md``), in
    order, once each; URLs, ``@doc`` targets and fenced code blocks name nothing."""
    return _dis.request_names(user_request)


@tag(stage="disclosure")
def disclosure_signals(
    user_request: str,
    plan_section: Optional[Section],
    git_section: Optional[Section],
    disclosure_phase_files: PhaseSelection,
    planning_files: PlanningFiles,
) -> Signals:
    """What the layer-3 triggers look at: the current work. The request; "the plan": the plan
    section without the roadmap (which names every phase) and the current phase's CONTEXT
    (when the phase rules select it); the diff (changed files from the git section's data, and
    its text)."""
    changed: list[str] = []
    diff = ""
    if git_section is not None:
        diff = git_section.content or ""
        for entry in (git_section.data or {}).get("files", ()) or ():
            path = entry[0] if isinstance(entry, (tuple, list)) else entry.get("path") if isinstance(entry, dict) else entry
            if path:
                changed.append(str(path).replace("\\", "/"))
    contexts = [planning_files.documents[path].content for path in disclosure_phase_files.files
                if path.endswith("-CONTEXT.md") and path in planning_files.documents]
    plan = _dis.plan_signal_text(plan_section.content if plan_section is not None else "", contexts)
    return Signals(user_request or "", plan, diff, tuple(changed))


@tag(stage="disclosure")
def disclosure_phase_files(
    planning_files: PlanningFiles, disclosure_rules: DisclosureRules, disclosure_phase: Optional[str],
    disclosure_work: PhaseWork,
) -> PhaseSelection:
    """The files the current GSD phase's rules name (relative to .planning/), with warnings
    for required ones that match nothing; ``{phase}`` is the folder ``disclosure_work`` names
    (from the one GSD position, shared with the plan section)."""
    if not disclosure_phase:
        return PhaseSelection({})
    return _dis.phase_selection(disclosure_rules, disclosure_phase, planning_files.listing, disclosure_work.folder,
                                disclosure_work.why)


@tag(stage="disclosure")
def disclosure_decisions(
    planning_files: PlanningFiles,
    disclosure_rules: DisclosureRules,
    disclosure_phase: Optional[str],
    disclosure_phase_files: PhaseSelection,
    disclosure_signals: Signals,
    requested_documents: tuple,
    ordered_references: list[Document],
    plan_section: Optional[Section],
    roadmap_section: Optional[Section],
    disclosure_settings: DisclosureSettings,
    project_dir: str,
) -> DisclosureOutcome:
    """The decision for every candidate: loaded or not, its layer, and the rule or reason.
    Documents the references or state stage already loaded (STATE.md in the plan section,
    ROADMAP.md in the roadmap section) are never loaded twice."""
    already = _already_loaded(ordered_references, (plan_section, roadmap_section), project_dir)
    candidates = list(planning_files.documents.values())
    rows, warnings = _dis.decide(
        candidates,
        disclosure_rules,
        disclosure_settings.template,
        disclosure_phase,
        disclosure_phase_files.files,
        disclosure_signals,
        already,
        planning_files.named,
    )
    rows += _dis.url_decisions(requested_documents, already)
    return DisclosureOutcome(tuple(rows), tuple(warnings))


@tag(stage="disclosure")
def disclosure_plan(
    disclosure_decisions: DisclosureOutcome,
    ordered_references: list[Document],
    plan_section: Optional[Section],
    user_request: str,
    project_dir: str,
) -> list[dict]:
    """One row per document the run considered: {"document", "layer" (1|2|3), "loaded",
    "rule" (what loaded it) or "reason" (why it stayed out), "section", "kind"}. Layer 1
    rows (rules, configured references, plan, request) come first."""
    rows = _core_rows(ordered_references, plan_section, user_request, project_dir)
    listed = {row["document"]: row for row in rows}
    for decision in disclosure_decisions.decisions:
        core = listed.get(decision.document)
        if core is None:
            rows.append(decision.as_dict())
        elif decision.layer != 1 and decision.rule:
            core["also"] = decision.rule.split("; already loaded by")[0]  # e.g. the phase rule naming it
    return rows


@tag(stage="disclosure")
def disclosed_sections(
    disclosure_decisions: DisclosureOutcome,
    planning_files: PlanningFiles,
    requested_documents: tuple,
    disclosure_settings: DisclosureSettings,
) -> list[Section]:
    """One "reference" section (references pool) per document disclosure loaded, keyed
    ``ref:<path or URL>``: layer 2 before layer 3, then by priority, then by path."""
    default = disclosure_settings.reference_priority
    by_display = {doc.display: doc for doc in planning_files.documents.values()}
    by_url = {doc.url: doc for doc in requested_documents}
    out = []
    for decision in disclosure_decisions.decisions:
        if not decision.loaded or decision.loaded_by_other is not None:
            continue
        if decision.kind == "url":
            fetched = by_url[decision.document]
            out.append((decision, _section_of(decision, fetched.title, fetched.content, fetched.metadata,
                                              Source("url", fetched.url, fetched.lines), default)))
        else:
            doc = by_display[decision.document]
            out.append((decision, _section_of(decision, doc.title, doc.content, doc.metadata,
                                              Source("file", doc.display, doc.lines), default)))
    out.sort(key=lambda pair: (pair[0].layer, pair[0].kind == "url", -pair[1].priority, pair[1].key))
    return [section for _, section in out]


@tag(stage="disclosure")
def disclosure_warnings(
    planning_files: PlanningFiles,
    disclosure_phase_files: PhaseSelection,
    disclosure_decisions: DisclosureOutcome,
    disclosed_sections: list[Section],
    disclosure_settings: DisclosureSettings,
    requested_documents: tuple = (),
) -> tuple[str, ...]:
    """Warnings of the disclosure stage: a required phase file missing, bad frontmatter, an
    @doc URL that could not be fetched, a document the request names that matches several
    files or could not be loaded, a disclosed document with a bad priority."""
    seen: dict[str, None] = {}
    for warning in (*planning_files.warnings, *disclosure_phase_files.warnings, *disclosure_decisions.warnings):
        seen.setdefault(warning, None)
    for decision in disclosure_decisions.decisions:
        if decision.kind == "url" and not decision.loaded:
            seen.setdefault(f"{decision.document}: {decision.reason}", None)
        elif not decision.loaded and (decision.reason or "").startswith(_dis.NAMED):
            seen.setdefault(f"{decision.document}: {decision.reason}", None)
    for fetched in requested_documents:
        for note in getattr(fetched, "notes", ()):
            seen.setdefault(note, None)
    default = disclosure_settings.reference_priority
    for section in disclosed_sections:
        _, warning = priority_for(section.data.get("metadata", {}), default, section.key[len("ref:"):])
        if warning:
            seen.setdefault(warning, None)
    return tuple(seen)


# ----------------------------------------------------------------------------- helpers


def _display(path: str, project_dir: str) -> str:
    return _dis.project_relative(os.path.realpath(path), os.path.realpath(project_dir))


def _listing(base: str, trust: Trust, warnings: list[str]) -> list[str]:
    """Files under .planning/ (hidden ones skipped, symlinked folders not followed)."""
    names, problems = list_files(base, trust, _LIST_LIMIT, hidden_files=False)
    warnings.extend(problems)
    return names


def _regular_inside(base: str, root: str, named: Mapping[str, str], warnings: list[str]) -> dict[str, str]:
    """The named paths (relative to .planning/, ``../`` for the rest of the project) that are
    regular files inside the project; each other one is a warning naming it."""
    out: dict[str, str] = {}
    for path, name in named.items():
        real = os.path.realpath(_full(base, path))
        if not real.startswith(root + os.sep) or not os.path.isfile(real):
            warnings.append(f"{_dis.display_of(path)}: the request names it ({quoted(name)}), but it is not a regular file "
                            "inside the project; not loaded (copy the document into the project to load it)")
            continue
        out[path] = name
    return out


def _full(base: str, path: str) -> str:
    """The file of a candidate path: under .planning/ (``base``), or ``../x`` from the project folder
    itself (not through a symlinked .planning/)."""
    if path.startswith(_dis.OUTSIDE):
        return os.path.join(os.path.dirname(base), *path[len(_dis.OUTSIDE):].split("/"))
    return os.path.join(base, *path.split("/"))


def _read_text(path: str, max_bytes: int, trust: Trust, shown: str | None = None,
               warnings: list[str] | None = None) -> tuple[str | None, str | None]:
    """(text, None) or (None, why it was not read), under the trust rules; a refusal and the
    control characters removed are also added to ``warnings``."""
    try:
        loaded = read_local_text(path, trust, max_bytes, "disclosure.maxFileBytes", shown)
    except Refused as exc:
        if warnings is not None:
            warnings.append(str(exc))
        return None, str(exc)
    except TextUnavailable as exc:
        return None, str(exc)
    if warnings is not None:
        warnings.extend(loaded.notes(shown or path))
    return loaded.text, None


def _candidate(base: str, path: str, max_bytes: int, warnings: list[str], trust: Trust, memo: Memo) -> Candidate:
    full = _full(base, path)
    display = _dis.display_of(path)
    text, problem = _read_text(full, max_bytes, trust, display, warnings)
    size = os.lstat(full).st_size if os.path.lexists(full) else 0
    if text is None:
        return Candidate(path, fallback_title(display), "", {}, None, size, problem)
    parsed = parsed_document(text, display, memo)
    if parsed.warning:
        warnings.append(parsed.warning)
    title = title_for(parsed.metadata, parsed.body, fallback_title(display))
    return Candidate(path, title, parsed.body, dict(parsed.metadata), (parsed.body_start, parsed.last_line), size)


def _fetch(url: str, timeout: float, max_bytes: int, trust: Trust, deadline: Optional[float] = None) -> FetchedDoc:
    try:
        loaded = fetch_url(url, trust, timeout, max_bytes, deadline)
    except TextUnavailable as exc:
        return FetchedDoc(url, problem=str(exc))
    parsed = parse_document(loaded.text, url)
    return _Fetched(url, title_for(parsed.metadata, parsed.body, fallback_title(url)), parsed.body,
                    dict(parsed.metadata), (parsed.body_start, parsed.last_line), notes=loaded.notes(url))


@dataclass(frozen=True)
class _Fetched(FetchedDoc):
    """A fetched @doc URL with the warnings its read owes (control characters removed)."""

    notes: tuple[str, ...] = ()


def _relative(location: str, project_dir: str) -> str:
    """A location as the disclosure plan names it: project-relative inside the project (as
    given or with symlinks resolved), else as it is."""
    for root in (os.path.realpath(project_dir), os.path.abspath(project_dir)):
        relative = _dis.project_relative(location, root)
        if relative != location or not os.path.isabs(location):
            return relative
    real = os.path.realpath(location) if os.path.isabs(location) else location
    return _dis.project_relative(real, os.path.realpath(project_dir))


def _already_loaded(
    ordered_references: list[Document], state_sections: tuple[Optional[Section], ...], project_dir: str
) -> dict[str, tuple[str, str]]:
    """Project-relative path or URL -> (section key, how) of documents other stages loaded."""
    out: dict[str, tuple[str, str]] = {}
    by_key = {doc.key: doc for doc in ordered_references}
    for doc in ordered_references:
        out.setdefault(_relative(doc.source.location, project_dir), (f"ref:{doc.source.location}", _how(doc, by_key)))
        if doc.source.kind == "file":
            out.setdefault(_relative(doc.key, project_dir), (f"ref:{doc.source.location}", _how(doc, by_key)))
    for section in state_sections:
        excerpts = _excerpts(section)
        for source in section.sources if section is not None else ():
            if source.kind == "file" and source.location not in excerpts:
                out.setdefault(_relative(source.location, project_dir), (section.key, f"the {section.key} section"))
    return out


def _excerpts(section: Optional[Section]) -> set[str]:
    """The files a GSD plan section only quotes: a done plan's SUMMARY (its one-liner) and a
    pending PLAN (its outline). A phase rule that names them (verify: SUMMARYs, as GSD's own
    manifest has it) loads them whole; the next plan, shown in full, is loaded already."""
    out: set[str] = set()
    for task in ((section.data or {}).get("tasks") or ()) if section is not None else ():
        if not isinstance(task, dict):
            continue
        if task.get("status") == "done" and task.get("summary"):
            out.add(task["summary"])
        elif task.get("status") == "pending" and task.get("plan"):
            out.add(task["plan"])
    return out


def _how(doc: Document, by_key: Mapping[str, Document]) -> str:
    if doc.group == "inline" and doc.parent in by_key:
        return f"an @ line in {by_key[doc.parent].source.location}"
    return doc.why or f"references.{doc.group}"


def _core_rows(
    ordered_references: list[Document], plan_section: Optional[Section], user_request: str, project_dir: str
) -> list[dict]:
    by_key = {doc.key: doc for doc in ordered_references}
    rows = []
    for doc in ordered_references:
        core = root_group(doc, by_key) == "core"
        rows.append({
            "document": _relative(doc.source.location, project_dir),
            "layer": 1,
            "loaded": True,
            "rule": ("" if doc.why else "core rules: " if core else "configured reference: ") + _how(doc, by_key),
            "section": f"ref:{doc.source.location}",
            "kind": "rules" if core else "reference",
        })
    if plan_section is not None:
        files = [s.location for s in plan_section.sources if s.kind == "file"]
        rows.append({"document": _relative(files[0], project_dir) if files else plan_section.key,
                     "layer": 1, "loaded": True, "rule": "core: plan summary (state.includePlan)",
                     "section": plan_section.key, "kind": "plan"})
    else:
        rows.append({"document": "plan", "layer": 1, "loaded": False,
                     "reason": "no plan found, or state.includePlan is false", "section": None, "kind": "plan"})
    rows.append({"document": "user_request", "layer": 1, "loaded": bool((user_request or "").strip()),
                 **({"rule": "core: the user request"} if (user_request or "").strip()
                    else {"reason": "the request is empty"}),
                 "section": "request", "kind": "request"})
    return rows


def _section_of(decision: Decision, title: str, content: str, metadata: Mapping[str, Any], source: Source,
                default: int) -> Section:
    priority, _ = priority_for(metadata, default, decision.document)
    return Section(
        key=decision.section or _dis.section_key(decision.document),
        title=title,
        kind="reference",
        content=nest_under_title(content, title),
        priority=priority,
        pool="references",
        sources=(source,),
        deprecated=bool(metadata.get("deprecated", False)),
        data={"metadata": dict(metadata), "group": "disclosure", "layer": decision.layer, "rule": decision.rule},
    )

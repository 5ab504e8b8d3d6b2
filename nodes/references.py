"""Stage 2, reference documents: the configured references and every @-line they pull in.

``reference_documents`` is the only node that reads (files, http(s) URLs, built-ins shipped
in ctxengine.configs/references); the recursion rules live in nodes/lib/references/ and
everything after the loader is pure.
"""

import os
import time
from dataclasses import replace
from importlib import resources
from typing import Optional

from hamilton.function_modifiers import cache, tag

from .lib.quote import quoted
from .lib import references as _refs
from .lib.markdown import nest_under_title
from .lib.memo import NO_MEMO, Memo
from .lib.references import ReferenceProblem, ReferenceSet, RuleFile, RulesChoice, Target
from .lib.settings import ReferenceSettings, trust_at
from .lib.textio import Trust, exit_point, fetch_url, list_files, read_local_text, trusted_path
from .types import Document, Section

_PLANNING_LIST_LIMIT = 5000  # files under .planning/ considered for "did you mean"


@cache(behavior="recompute")
@tag(stage="references", loader="file")
def project_rules(project_dir: str, project_layout: str, reference_settings: ReferenceSettings) -> RulesChoice:
    """Which rules load beyond ``references.core`` as written, and why: the project's own agent
    instructions found at its root (``references.projectRules``: CLAUDE.md, .claude/CLAUDE.md,
    CLAUDE.local.md as Claude Code reads them, AGENTS.override.md or else AGENTS.md as Codex
    does; empty files skipped, one file under two names read once), and whether
    ``builtin:gsd-rules`` loads (``references.gsdRules``; auto: only for a project that keeps
    a GSD or article plan in .planning/). Only names are looked at here; the trust rules
    (inside the project, a regular file, ``references.projectRulesMaxBytes``) apply when
    ``reference_documents`` reads them."""
    root = os.path.realpath(project_dir)
    files = tuple(_rule_files(root, _refs.rule_names(reference_settings.project_rules)))
    load, why = _gsd_rules_choice(reference_settings.gsd_rules, project_layout, root)
    return RulesChoice(files, load, why)


@tag(stage="references")
def reference_specs(reference_settings: ReferenceSettings, project_rules: Optional[RulesChoice] = None) -> list:
    """The configured references (``references.core``, ``.project``, ``.session``) as
    ReferenceSpec values with their group and config order, the project's rules files first
    and the GSD rules left out where ``project_rules`` says so."""
    specs = _refs.reference_specs_from(reference_settings.groups)
    return _refs.with_rules(specs, project_rules) if project_rules is not None else specs


@cache(behavior="recompute")
@tag(stage="references", loader="url")
def fetch_deadline(trust_settings: Trust) -> float:
    """The ``time.monotonic()`` moment by which every URL fetch of this build must be done
    (now + ``trust.buildDeadline``): one deadline shared by references and @doc URLs."""
    return time.monotonic() + trust_settings.build_deadline


@cache(behavior="recompute")
@tag(stage="references", loader="file")
def reference_documents(
    project_dir: str, reference_specs: list, reference_settings: ReferenceSettings, trust_settings: Trust,
    fetch_deadline: Optional[float] = None, memo: Memo = NO_MEMO,
) -> ReferenceSet:
    """Every configured reference document, and recursively the documents its @ lines name,
    each loaded once, with the @ links between them and the warnings met on the way. Files
    and URLs are read under the trust rules (``trust.*``); a refusal is a warning. A document
    whose text did not change is not parsed again (``memo``)."""
    settings = reference_settings
    trust = trust_at(trust_settings, project_dir)
    locate = _locator(trust)
    notes: list[str] = []
    read = _reader(trust, settings.url_timeout, settings.url_max_bytes, settings.max_file_bytes, fetch_deadline, notes,
                   {spec.target: settings.project_rules_max_bytes for spec in reference_specs if spec.optional})
    priorities = dict(settings.group_priorities)
    found = _refs.walk_references(reference_specs, locate, read, settings.max_depth, priorities, memo)
    return replace(found, warnings=found.warnings + tuple(dict.fromkeys(notes)))


@tag(stage="references")
def ordered_references(reference_documents: ReferenceSet) -> list[Document]:
    """The documents by priority, higher first; ties keep config order, and a document pulled
    in by an @ line comes right after the document that pulled it in."""
    return _refs.ordered(reference_documents.documents)


@tag(stage="references")
def reference_sections(ordered_references: list[Document]) -> list[Section]:
    """One Section per document: core references (and what they pull in) are "rules" in the
    system pool; the others are "reference" in the references pool."""
    by_key = {doc.key: doc for doc in ordered_references}
    return [_section(doc, _refs.root_group(doc, by_key), by_key) for doc in ordered_references]


@tag(stage="references")
def reference_warnings(reference_documents: ReferenceSet) -> tuple[str, ...]:
    """Warnings of the references stage, each naming its file and line."""
    return tuple(reference_documents.warnings)


# ----------------------------------------------------------------------------- helpers


def _rule_files(root: str, entries: list) -> list[RuleFile]:
    """What became of each ``references.projectRules`` name under ``root``: the first present,
    not empty alternative of an entry is found; a file found under an earlier name is read once."""
    out: list[RuleFile] = []
    seen: dict[str, str] = {}  # real path -> the name it was found under
    for index, names in entries:
        chosen = False
        for name in names:
            path = os.path.join(root, *name.replace("\\", "/").split("/"))
            status, why = _rule_file_status(path, name, chosen, seen)
            out.append(RuleFile(name, index, status, path if status == "found" else None, why))
            if status == "found":
                chosen = True
                seen.setdefault(os.path.realpath(path), name)
    return out


def _rule_file_status(path: str, name: str, chosen: bool, seen: dict[str, str]) -> tuple[str, str]:
    """(status, why) of one project rules candidate (see :class:`RuleFile`)."""
    if chosen:
        return "shadowed", "an earlier name of the same entry was read (Codex reads one file of these)"
    if not os.path.lexists(path):
        return "missing", f"no {name} at the project root"
    if os.path.isdir(path):
        return "directory", f"{name} is a folder"
    real = os.path.realpath(path)
    if real in seen:
        return "same", f"the same file as {seen[real]}; read once"
    try:
        if os.path.isfile(real) and os.path.getsize(real) == 0:
            return "empty", f"{name} is empty"
    except OSError:
        pass  # the reader says why
    tool = "Codex" if name.upper().startswith("AGENTS") else "Claude Code"
    return "found", f"project rules: {name} at the project root ({_refs.PROJECT_RULES_KEY}; {tool} reads it)"


def _gsd_rules_choice(setting: str, layout: str, root: str) -> tuple[bool, str]:
    """Whether ``builtin:gsd-rules`` loads (when references.core names it), and why."""
    if setting == "always":
        return True, "references.gsdRules is always"
    if setting == "never":
        return False, "references.gsdRules is never"
    planning = os.path.join(root, ".planning")
    if layout == "gsd":
        return True, "references.gsdRules auto: a GSD layout (.planning/STATE.md or ROADMAP.md, or state.layout gsd)"
    if os.path.lexists(os.path.join(planning, "plans", "current", "plan.md")):
        return True, "references.gsdRules auto: the article layout (.planning/plans/current/plan.md)"
    return False, ("references.gsdRules auto: not a GSD project (no .planning/STATE.md, ROADMAP.md or "
                   "plans/current/plan.md)")


def _section(doc: Document, group: str, by_key: dict[str, Document]) -> Section:
    rules = group == "core"
    parent = by_key.get(doc.parent) if doc.parent else None
    return Section(
        key=f"ref:{doc.source.location}",
        title=doc.title,
        kind="rules" if rules else "reference",
        content=nest_under_title(doc.content, doc.title),
        priority=doc.priority,
        pool="system" if rules else "references",
        sources=(doc.source,),
        deprecated=doc.deprecated,
        data={
            "metadata": dict(doc.metadata),
            "group": group,
            "parent": parent.source.location if parent else None,
            **({"why": doc.why} if doc.why else {}),
        },
    )


def _locator(trust: Trust):
    """locate(token, referrer) -> Target for this project (``trust.root``), or ReferenceProblem."""
    root = trust.root
    home = os.path.expanduser("~")  # a loader: read each build
    planning: list[tuple[str, ...]] = []  # listed on the first miss only

    def suggestions_pool() -> tuple[str, ...]:
        if not planning:
            planning.append(_planning_files(root) + tuple(f"builtin:{n}" for n in sorted(_builtin_names())))
        return planning[0]

    def locate(token: str, referrer: Target | None) -> Target:
        kind = _refs.target_kind(token)
        if kind == "path" and referrer is not None and referrer.kind == "url":
            if _refs.is_absolute_path(token):
                raise ReferenceProblem("a URL document may not pull in local files")
            return _url_target(_refs.url_child(token, referrer.key))
        if kind == "url":
            return _url_target(token)
        if kind == "scheme":
            raise ReferenceProblem(f"only http:// and https:// URLs are read, not {token.split(':', 1)[0]}:")
        if kind == "builtin":
            return _builtin_target(token)
        return _file_target(token, trust, home, suggestions_pool)

    return locate


def _url_target(token: str) -> Target:
    url = _refs.normalise_url(token)
    return Target("url", url, url)


def _builtin_target(token: str) -> Target:
    name = _refs.builtin_name(token)
    if name not in _builtin_names():
        close = _refs.closest_names(name, sorted(_builtin_names()))
        hint = f"; did you mean {', '.join('builtin:' + c for c in close)}?" if close else ""
        raise ReferenceProblem(
            f"no builtin reference {quoted(name)} (built-ins: {', '.join(sorted(_builtin_names()))}){hint}"
        )
    return Target("builtin", f"builtin:{name}", f"builtin:{name}")


def _file_target(token: str, trust: Trust, home: str, suggestions_pool) -> Target:
    """The file a path reference names: the first candidate that is there; a candidate outside
    the project and the allowed folders is taken without looking (the reader refuses it the same
    way whether or not a file is there)."""
    root = trust.root
    candidates = _refs.file_candidates(token, root, home)
    for path in candidates:
        if not trusted_path(path, trust):  # named where it leaves the project: nothing beyond is looked at
            where = exit_point(path, trust)
            return Target("file", where, _refs.display_path(where, root))
        if os.path.lexists(path) and not os.path.isdir(path):
            real = os.path.realpath(path)  # FIFOs, loops: the reader says why
            return Target("file", real, _refs.display_path(real, root))
    directories = [path for path in candidates if os.path.isdir(path)]
    if directories:
        raise ReferenceProblem(f"{directories[0]} is a directory, not a document")
    close = _refs.closest_names(token, suggestions_pool())
    raise ReferenceProblem(f"file not found (tried {', '.join(candidates)}){_refs.suggestion_text(close)}")


def _planning_files(root: str) -> tuple[str, ...]:
    """Files under <root>/.planning/ as paths relative to it (hidden folders skipped, symlinked
    folders not followed, nothing when .planning/ leads outside the project)."""
    names, _ = list_files(os.path.join(root, ".planning"), Trust(root), _PLANNING_LIST_LIMIT)
    return tuple(names)


def _builtin_folder():
    return resources.files("ctxengine.configs").joinpath("references")


def _builtin_names() -> frozenset[str]:
    folder = _builtin_folder()
    if not folder.is_dir():
        return frozenset()
    return frozenset(item.name[:-3] for item in folder.iterdir() if item.name.endswith(".md"))


def _reader(trust: Trust, timeout: float, max_url_bytes: int, max_file_bytes: int, deadline: float | None,
            notes: list[str], caps: dict[str, int] | None = None):
    """read(target) -> text for files, URLs and built-ins under the trust rules, or a
    TextUnavailable (Refused when the rules refuse it); what cleaning removed goes to ``notes``.
    ``caps``: a path -> its own size cap (the project's rules files: references.projectRulesMaxBytes)."""
    caps = {os.path.realpath(path): cap for path, cap in (caps or {}).items()}
    if deadline is None:
        deadline = time.monotonic() + trust.build_deadline

    def read(target: Target) -> str:
        if target.kind == "builtin":
            name = target.key[len("builtin:"):]
            return _builtin_folder().joinpath(f"{name}.md").read_text(encoding="utf-8")
        if target.kind == "url":
            loaded = fetch_url(target.key, trust, timeout, max_url_bytes, deadline)
        else:
            capped = target.key in caps
            loaded = read_local_text(target.key, trust, caps[target.key] if capped else max_file_bytes,
                                     "references.projectRulesMaxBytes" if capped else "references.maxFileBytes",
                                     target.display)
        notes.extend(loaded.notes(target.display))
        return loaded.text

    return read

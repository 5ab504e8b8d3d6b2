"""The disclosure plan: which candidate document loads in which layer and by which rule, or why
it stays out.

Nothing here reads files or the network. The node module lists ``.planning/``, reads the
candidate documents and fetches ``@doc`` URLs; these functions decide, from those values:

* layer 1, core: the rules documents, the plan summary and the request (other stages load
  them; configured references are reported here too, since they are always loaded);
* layer 2, on demand: the documents of the current mode (``configs/disclosure.yaml``
  ``modes:`` or frontmatter ``modes: [...]``) and of the current GSD phase (``phases:`` or
  frontmatter ``phases: [...]``, :mod:`.phases`);
* layer 3, triggers: documents a trigger rule loads when the plan, the diff or the request
  mention one of its keywords or the diff touches one of its path globs (``triggers:``, or
  frontmatter ``triggers: [...]`` / ``paths: [...]``, :mod:`.signals`), ``@doc URL`` in the
  request, and the documents the request names (:mod:`.request`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from ..quote import quoted
from .globs import first_match, natural_key
from .request import OUTSIDE, display_of
from .rules import DisclosureRules, TriggerRule
from .signals import SIGNALS, Signals, keyword_hit, path_hit


def generic_candidates(files: Iterable[str], rules: DisclosureRules) -> list[str]:
    """Markdown files under .planning/ that are not state (``state:`` globs), in path order."""
    out = []
    for path in files:
        if not path.lower().endswith((".md", ".markdown")):
            continue
        if first_match(rules.state, path) is not None:
            continue
        out.append(path)
    return sorted(out, key=natural_key)


@dataclass(frozen=True)
class Candidate:
    """A candidate document as the loader read it (paths relative to .planning/)."""

    path: str
    title: str
    content: str  # the body, without frontmatter
    metadata: Mapping[str, Any] = field(default_factory=dict)
    lines: tuple[int, int] | None = None
    size: int = 0
    problem: str | None = None  # why it could not be read (too large, binary, unreadable)

    @property
    def display(self) -> str:
        return display_of(self.path)


@dataclass(frozen=True)
class FetchedDoc:
    """A document named by ``@doc URL`` in the request, fetched (or the reason it was not)."""

    url: str
    title: str = ""
    content: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    lines: tuple[int, int] | None = None
    problem: str | None = None


@dataclass(frozen=True)
class Decision:
    """One row of the disclosure plan."""

    document: str  # project-relative path (".planning/...") or URL
    layer: int  # 1 core | 2 on demand (mode, phase) | 3 triggers
    loaded: bool
    rule: str | None = None  # what loaded it
    reason: str | None = None  # why it stayed out
    section: str | None = None  # the key of the section that holds it, when loaded
    kind: str = "file"  # file | url
    loaded_by_other: str | None = None  # the stage that already holds it (never loaded twice)

    def as_dict(self) -> dict:
        row = {"document": self.document, "layer": self.layer, "loaded": self.loaded}
        if self.loaded:
            row["rule"] = self.rule
        else:
            row["reason"] = self.reason
        row["section"] = self.section
        row["kind"] = self.kind
        return row


def frontmatter_list(metadata: Mapping[str, Any], key: str, display: str, warnings: list[str]) -> tuple[str, ...]:
    """A frontmatter list of strings (a single string is a list of one); bad types warn."""
    value = metadata.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v).strip() for v in value if str(v).strip())
    warnings.append(f"{display}: frontmatter {key} {quoted(value)} is not a list of strings; ignored")
    return ()


def _describe(keyword: str, place: str) -> str:
    return f"{quoted(keyword)} in the {place}"


def decide(
    candidates: Sequence[Candidate],
    rules: DisclosureRules,
    mode: str,
    phase: str | None,
    phase_files: Mapping[str, str],
    signals: Signals,
    already: Mapping[str, tuple[str, str]],
    named: Mapping[str, str] | None = None,
) -> tuple[list[Decision], list[str]]:
    """The decision for every candidate document, and the warnings met (bad frontmatter).

    ``named`` holds the paths the request names (:func:`resolve_named`): layer 3, rule
    "named in the request", even for a state file. ``already`` maps a project-relative path to
    (section key, rule) for documents another stage already put in the context (configured
    references, the plan): they are reported as loaded there and never loaded twice.
    """
    decisions: list[Decision] = []
    warnings: list[str] = []
    for doc in candidates:
        decisions.append(_decide_one(doc, rules, mode, phase, phase_files, signals, already, warnings, named or {}))
    return decisions, warnings


def section_key(display: str) -> str:
    return f"ref:{display}"


NAMED = "named in the request"


class _Frontmatter(NamedTuple):
    """The disclosure keys of a document's frontmatter: the modes and phases it is for, the
    keywords (``triggers``) and changed-file globs (``paths``) that load it."""

    modes: tuple[str, ...] = ()
    phases: tuple[str, ...] = ()
    triggers: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()


def _frontmatter_of(meta: Mapping[str, Any], display: str, rules: DisclosureRules, warnings: list[str]) -> _Frontmatter:
    """The disclosure keys of a document's frontmatter (``meta``; ``display`` names it in
    warnings); bad types and unknown modes warn."""
    fm = _Frontmatter(frontmatter_list(meta, "modes", display, warnings),
                      frontmatter_list(meta, "phases", display, warnings),
                      frontmatter_list(meta, "triggers", display, warnings),
                      frontmatter_list(meta, "paths", display, warnings))
    unknown = [m for m in fm.modes if m not in rules.modes and m not in ("dev", "review", "research")]
    if unknown:
        warnings.append(f"{display}: frontmatter modes names unknown mode {quoted(unknown[0])}")
    return fm


def _decide_one(doc, rules, mode, phase, phase_files, signals, already, warnings, named) -> Decision:
    """The decision for one candidate: loaded by the first rule that selects it (or by the stage
    that already holds it), else left out with the reason."""
    display = doc.display
    fm = _frontmatter_of(doc.metadata, display, rules, warnings)
    selected = _selected_by(doc, fm, rules, mode, phase, phase_files, signals, named)
    decision = _selected_decision(display, doc.problem, selected, already)
    return decision if decision is not None else _left_out(doc, rules, mode, phase, fm)


def _selected_by(doc, fm, rules, mode, phase, phase_files, signals, named) -> tuple[int, str] | None:
    """(layer, rule) of the first rule that selects the document: the mode or phase (layer 2),
    else the request naming it, else a trigger (layer 3). A project file outside .planning/ is
    selected only by the request naming it."""
    if doc.path.startswith(OUTSIDE):
        return (3, NAMED) if doc.path in named else None
    return (_on_demand(doc, fm, rules, mode, phase, phase_files)
            or ((3, NAMED) if doc.path in named else None)
            or _trigger(doc, rules, signals, fm))


def _on_demand(doc, fm, rules, mode, phase, phase_files) -> tuple[int, str] | None:
    """(2, rule) when the current phase's rules, the frontmatter phases or modes, or a rule of the
    current mode select the document (in that order); else None."""
    if phase and doc.path in phase_files:
        return 2, phase_files[doc.path]
    if phase and phase in fm.phases:
        return 2, f"frontmatter phases: [{', '.join(fm.phases)}]"
    if mode in fm.modes:
        return 2, f"frontmatter modes: [{', '.join(fm.modes)}]"
    for rule in rules.modes.get(mode, ()):
        pattern = first_match(rule.load, doc.path)
        if pattern is not None:
            return 2, f"{rules.source} modes.{mode} '{rule.name}' ({pattern})"
    return None


def _selected_decision(display: str, problem: str | None, selected: tuple[int, str] | None,
                       already) -> Decision | None:
    """The row of a document another stage already holds (reported there, never loaded twice) or
    a rule selected (loaded, or not when it could not be read: ``problem``); None when neither."""
    if display in already:
        key, how = already[display]
        layer = 1 if selected is None else selected[0]
        rule = how if selected is None else f"{selected[1]}; already loaded by {how}"
        return Decision(display, layer, True, rule=rule, section=key, loaded_by_other=how)
    if selected is None:
        return None
    if problem is None:
        return Decision(display, selected[0], True, rule=selected[1], section=section_key(display))
    return Decision(display, selected[0], False, reason=f"{selected[1]} selected it, but {problem}")


def _trigger(doc, rules, signals, fm) -> tuple[int, str] | None:
    """(3, rule) of the first trigger rule, then frontmatter trigger or path, that fires; else None."""
    for rule in rules.triggers:
        pattern = first_match(rule.load, doc.path)
        if pattern is None:
            continue
        hit = keyword_hit(rule.keywords, signals, rule.where) if rule.keywords else None
        if hit:
            return 3, f"{rules.source} trigger '{rule.name}': {_describe(*hit)} ({pattern})"
        path = path_hit(rule.paths, signals.changed_files) if rule.paths else None
        if path:
            return 3, f"{rules.source} trigger '{rule.name}': the diff touches {path[1]} ({path[0]}) ({pattern})"
    hit = keyword_hit(fm.triggers, signals, SIGNALS) if fm.triggers else None
    if hit:
        return 3, f"frontmatter triggers: {_describe(*hit)}"
    path = path_hit(fm.paths, signals.changed_files) if fm.paths else None
    if path:
        return 3, f"frontmatter paths: the diff touches {path[1]} ({path[0]})"
    return None


def _left_out(doc, rules, mode, phase, fm) -> Decision:
    """The row of a document no rule selected, with the reason: for other modes or phases only,
    triggers that did not fire, unreadable, or named by no rule."""
    display = doc.display
    other_modes = [m for m, rs in rules.modes.items() if m != mode and any(first_match(r.load, doc.path) for r in rs)]
    if fm.modes or other_modes:
        modes = list(dict.fromkeys([*fm.modes, *other_modes]))
        return Decision(display, 2, False, reason=f"for mode {', '.join(modes)} only; the current mode is {mode}")
    if fm.phases:
        current = phase or "none (--phase)"
        return Decision(display, 2, False,
                        reason=f"for phase {', '.join(fm.phases)} only; the current phase is {current}")
    named_by = [r for r in rules.triggers if first_match(r.load, doc.path)]
    if named_by or fm.triggers or fm.paths:
        return Decision(display, 3, False, reason="; ".join(_unfired(named_by, fm)))
    if doc.problem:
        return Decision(display, 3, False, reason=doc.problem)
    return Decision(display, 3, False,
                    reason="no mode, phase or trigger rule names it (add frontmatter modes/triggers/paths)")


def _unfired(triggers: Sequence[TriggerRule], fm: _Frontmatter) -> list[str]:
    """Why each trigger rule naming the document, then its frontmatter triggers and paths, did not
    load it."""
    parts = [f"trigger '{rule.name}' ({_watched(rule)}) did not fire" for rule in triggers]
    if fm.triggers:
        parts.append(f"frontmatter triggers ({', '.join(fm.triggers)}) not in the plan, diff or request")
    if fm.paths:
        parts.append(f"frontmatter paths ({', '.join(fm.paths)}) match no changed file")
    return parts


def _watched(rule: TriggerRule) -> str:
    """What a trigger rule watches: ``keywords a, b; paths x/**``."""
    watch = [f"keywords {', '.join(rule.keywords)}"] if rule.keywords else []
    watch += [f"paths {', '.join(rule.paths)}"] if rule.paths else []
    return "; ".join(watch)


def url_decisions(
    fetched: Sequence[FetchedDoc], already: Mapping[str, tuple[str, str]]
) -> list[Decision]:
    """One layer-3 row per ``@doc`` target of the request."""
    rows = []
    for doc in fetched:
        if doc.url in already:
            key, how = already[doc.url]
            rows.append(Decision(doc.url, 3, True, rule=f"request @doc; already loaded by {how}", section=key,
                                 kind="url", loaded_by_other=how))
        elif doc.problem is None:
            rows.append(Decision(doc.url, 3, True, rule="request @doc", section=section_key(doc.url), kind="url"))
        else:
            rows.append(Decision(doc.url, 3, False, reason=f"request @doc: {doc.problem}", kind="url"))
    return rows


def project_relative(location: str, project_root: str) -> str:
    """A source location as the disclosure plan names it: project-relative when inside."""
    if location.startswith(("http://", "https://", "builtin:")):
        return location
    location = location.replace("\\", "/")
    root = project_root.replace("\\", "/").rstrip("/")
    if location.startswith(root + "/"):
        return posixpath.relpath(location, root)
    return posixpath.normpath(location)

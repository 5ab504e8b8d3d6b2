"""Pure helpers of progressive disclosure: globs, rules, signals, GSD phases and decisions.

Nothing here reads files or the network. The node module lists ``.planning/``, reads the
candidate documents and fetches ``@doc`` URLs; these functions decide, from those values,
which document loads in which layer and by which rule:

* layer 1, core: the rules documents, the plan summary and the request (other stages load
  them; configured references are reported here too, since they are always loaded);
* layer 2, on demand: the documents of the current mode (``configs/disclosure.yaml``
  ``modes:`` or frontmatter ``modes: [...]``) and of the current GSD phase (``phases:`` or
  frontmatter ``phases: [...]``);
* layer 3, triggers: documents a trigger rule loads when the plan, the diff or the request
  mention one of its keywords or the diff touches one of its path globs (``triggers:``, or
  frontmatter ``triggers: [...]`` / ``paths: [...]``), and ``@doc URL`` in the request.

Globs of documents (``load``, ``state``, phase globs) are relative to ``.planning/``: a glob
without ``/`` matches that name at the top of ``.planning/`` only (``**/NAME`` finds it at
any depth). Globs of changed files (``paths``, relative to the repository) match a name
without ``/`` at any depth, as .gitignore does. ``**`` spans folders, ``*`` and ``?`` stay
inside one path segment; matching ignores case.

Layer 3 also loads the documents the request names (``see FIX-PLAN.md``,
``.planning/v1.0-MILESTONE-AUDIT.md``): :func:`request_names` finds the names,
:func:`resolve_named` finds the files under ``.planning/`` they name, or else a document of the
project outside it (``docs/DESIGN.md``, ``README.md``: only the named path itself is looked at,
a bare name at the project top level; such a candidate's path is ``../docs/DESIGN.md``,
relative to ``.planning/`` like every other, and only the request can load it).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from ...types import ConfigError
from ..fences import without_code
from ..quote import quoted

#: The GSD phase types (GSD's own engine: discuss, research, plan, execute, verify, repair).
PHASES = ("execute", "research", "plan", "verify", "repair", "discuss")
#: Where a trigger looks by default.
SIGNALS = ("plan", "diff", "request")
PICKS = ("all", "first", "last", "open")

_DOC = re.compile(r"(?<!\S)@doc[ \t]+(\S+)", re.I)


# ----------------------------------------------------------------------------- globs


@lru_cache(maxsize=1024)
def glob_regex(pattern: str, anywhere: bool = False) -> re.Pattern:
    """The regular expression of a glob (see the module docstring for the dialect). A glob
    without "/" matches at the top only, or at any depth when ``anywhere`` (changed files)."""
    pattern = pattern.strip().replace("\\", "/").removeprefix("./")
    anchored = "/" in pattern.rstrip("/") or not anywhere
    if pattern.endswith("/"):
        pattern += "**"
    pattern = pattern.lstrip("/")
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pattern[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(rf"\A{prefix}{body}\Z", re.I)


def glob_match(pattern: str, path: str, anywhere: bool = False) -> bool:
    """Whether ``path`` (relative, ``/``-separated) matches ``pattern``; a glob without "/"
    matches a name at the top only, or at any depth when ``anywhere``."""
    return bool(glob_regex(pattern, anywhere).match(path.replace("\\", "/").removeprefix("./")))


def first_match(patterns: Iterable[str], path: str, anywhere: bool = False) -> str | None:
    """The first pattern that matches ``path``, or None."""
    for pattern in patterns:
        if glob_match(pattern, path, anywhere):
            return pattern
    return None


# ----------------------------------------------------------------------------- keywords


@lru_cache(maxsize=1024)
def _keyword_regex(keyword: str) -> re.Pattern:
    words = [re.escape(part) for part in keyword.strip().split()]
    # A keyword matches a word that starts with it: "test" finds "tests" and "testing".
    return re.compile(r"(?<![A-Za-z0-9])" + r"[\s_-]+".join(words), re.I)


def keyword_in(keyword: str, text: str) -> bool:
    """Whether ``keyword`` starts a word of ``text`` (case-insensitive; ``test`` finds ``tests``)."""
    return bool(keyword.strip()) and bool(_keyword_regex(keyword).search(text or ""))


def request_urls(request: str) -> list[str]:
    """The targets of every ``@doc TARGET`` in the request, in order, without repeats."""
    seen: dict[str, None] = {}
    for match in _DOC.finditer(request or ""):
        seen.setdefault(match.group(1).rstrip(".,;:)]}>\"'"), None)
    return list(seen)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+|(?<!\S)@doc[ \t]+\S+", re.I)
_NAME = re.compile(r"(?<![\w./@:\\-])((?:\./)?[\w.-]+(?:/[\w.-]+)*\.[A-Za-z][A-Za-z0-9]{0,9})(?![\w/\\-])")


def request_names(request: str) -> tuple[str, ...]:
    """File names and relative paths the request names (``see FIX-PLAN.md``,
    ``.planning/v1.0-MILESTONE-AUDIT.md``, in a `code span` too), in order, once each.
    URLs, ``@doc`` targets and fenced code blocks (pasted code or logs) name nothing."""
    text = _URL.sub(" ", without_code(request or ""))
    seen: dict[str, None] = {}
    for match in _NAME.finditer(text):
        seen.setdefault(match.group(1).removeprefix("./"), None)
    return tuple(seen)


OUTSIDE = "../"  # how a candidate path relative to .planning/ starts when the file is elsewhere in the project
DOCUMENT_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".rst", ".adoc")  # what a named project file may be


def project_documents(names: Sequence[str]) -> tuple[str, ...]:
    """The names of the request that may be a document of the project outside .planning/:
    a relative path (or a bare name, looked for at the top level) with a document suffix,
    no ``..``, not under .planning/ or .git/. The loader checks just these paths."""
    out = []
    for name in names:
        parts = name.split("/")
        if (name.lower().startswith((".planning/", ".git/")) or not name.lower().endswith(DOCUMENT_SUFFIXES)
                or any(part in ("", ".", "..") for part in parts)):
            continue
        out.append(name)
    return tuple(out)


def display_of(path: str) -> str:
    """A candidate path (relative to .planning/) as the project-relative path the plan shows."""
    return posixpath.normpath(".planning/" + path) if path.startswith(OUTSIDE) else f".planning/{path}"


@dataclass(frozen=True)
class NamedFiles:
    """The files under .planning/ the request names, and the names that stayed ambiguous."""

    files: Mapping[str, str] = field(default_factory=dict)  # path (relative to .planning/) -> name as written
    warnings: tuple[str, ...] = ()


def resolve_named(names: Sequence[str], listing: Sequence[str], present: Iterable[str] = ()) -> NamedFiles:
    """The file each name of the request names under .planning/ (``listing``, relative paths).

    A name matches a file of that name, a path matches the file at that path or ending with
    it (``.planning/`` in front is dropped), ignoring case. When several match, the one at the
    top of .planning/ (or at exactly that path) wins, then the one spelled with the same case;
    a name still ambiguous loads nothing and is a warning listing the files. A name that
    matches no file under .planning/ names the project file at that path when it is in
    ``present`` (the :func:`project_documents` that exist), as ``../<path>``; else nothing (it
    may be a source file, or a file to create).
    """
    files: dict[str, str] = {}
    warnings: list[str] = []
    lowered = [(path, path.lower()) for path in listing]
    present = set(present)
    for name in names:
        wanted = name.removeprefix(".planning/") if name.lower().startswith(".planning/") else name
        key = wanted.lower()
        matches = [path for path, low in lowered if low == key or low.endswith("/" + key)]
        if not matches:
            if name in present:
                files.setdefault(OUTSIDE + name, name)
            continue
        exact = [path for path in matches if path.lower() == key] or matches
        chosen = [path for path in exact if path == wanted or path.endswith("/" + wanted)] if len(exact) > 1 else exact
        if len(chosen) == 1:
            files.setdefault(chosen[0], name)
            continue
        shown = ", ".join(f".planning/{path}" for path in sorted(chosen or exact, key=_natural)[:5])
        warnings.append(f"the request names {quoted(name)}, which matches several files ({shown}); none loaded: "
                        f"name it by its path (e.g. {'.planning/' + sorted(chosen or exact, key=_natural)[0]})")
    return NamedFiles(files, tuple(warnings))


# ----------------------------------------------------------------------------- signals


@dataclass(frozen=True)
class Signals:
    """What the triggers look at: the request, the plan text, the diff text, the changed files."""

    request: str = ""
    plan: str = ""
    diff: str = ""
    changed_files: tuple[str, ...] = ()

    def text(self, where: str) -> str:
        if where == "diff":
            return "\n".join((*self.changed_files, self.diff))
        return getattr(self, where, "")


_LEVEL2 = re.compile(r"^## ", re.M)


def plan_signal_text(plan: str, contexts: Sequence[str] = ()) -> str:
    """What triggers read as "the plan": the plan section without any roadmap block (a
    ``## `` block whose heading names the roadmap), then the current phase's CONTEXT texts.
    The roadmap lists every phase of the project, so its words say nothing of the current work."""
    starts = [m.start() for m in _LEVEL2.finditer(plan or "")]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    blocks = [(plan or "")[a:b] for a, b in zip(starts, [*starts[1:], len(plan or "")])]
    kept = [b for b in blocks if not (b.startswith("## ") and "roadmap" in b.split("\n", 1)[0].lower())]
    return "\n\n".join(part.strip("\n") for part in ["".join(kept), *contexts] if part and part.strip())


def keyword_hit(keywords: Sequence[str], signals: Signals, where: Sequence[str]) -> tuple[str, str] | None:
    """(keyword, signal) of the first keyword found, looking in ``where`` in order; or None."""
    for place in where:
        text = signals.text(place)
        for keyword in keywords:
            if keyword_in(keyword, text):
                return keyword, place
    return None


def path_hit(globs: Sequence[str], changed_files: Sequence[str]) -> tuple[str, str] | None:
    """(glob, changed file) of the first changed file a glob matches (a glob without "/"
    matches the name at any depth); or None."""
    for path in changed_files:
        pattern = first_match(globs, path, anywhere=True)
        if pattern is not None:
            return pattern, path
    return None


# ----------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class ModeRule:
    name: str
    load: tuple[str, ...]


@dataclass(frozen=True)
class TriggerRule:
    name: str
    load: tuple[str, ...]
    keywords: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    where: tuple[str, ...] = SIGNALS


@dataclass(frozen=True)
class PhaseEntry:
    glob: str  # may hold {phase}: the current phase folder, relative to .planning/
    required: bool
    pick: str = "all"  # all | first | last (in path order)


@dataclass(frozen=True)
class DisclosureRules:
    """The parsed rules of configs/disclosure.yaml (and a project's rules file over them)."""

    state: tuple[str, ...] = ()
    modes: Mapping[str, tuple[ModeRule, ...]] = field(default_factory=dict)
    triggers: tuple[TriggerRule, ...] = ()
    phases: Mapping[str, tuple[PhaseEntry, ...]] = field(default_factory=dict)
    source: str = "configs/disclosure.yaml"


def merge_rules(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict:
    """A project's rules file laid over the bundled one: ``modes`` and ``phases`` replace per
    mode or phase, ``triggers`` replace by name (new names are added), ``state`` replaces."""
    out = {key: value for key, value in base.items()}
    for key in ("modes", "phases"):
        if key in over:
            mine, theirs = base.get(key) or {}, over.get(key)
            both = isinstance(mine, Mapping) and isinstance(theirs, Mapping)
            out[key] = {**mine, **theirs} if both else theirs  # parse_rules names a wrong shape
    if "triggers" in over:
        theirs = over.get("triggers")
        if not isinstance(theirs, list):
            out["triggers"] = theirs  # parse_rules names the wrong shape
        else:
            by_name = {str(t.get("name")): t for t in base.get("triggers") or [] if isinstance(t, Mapping)}
            order = list(by_name)
            for trigger in theirs:
                name = str(trigger.get("name")) if isinstance(trigger, Mapping) else repr(trigger)
                if name not in by_name:
                    order.append(name)
                by_name[name] = trigger
            out["triggers"] = [by_name[name] for name in order]
    if "state" in over:
        out["state"] = over["state"]
    return out


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where} must be a list of non-empty strings, got {quoted(value)}")
    return tuple(v.strip() for v in value)


def _mapping(value: Any, where: str, shape: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of {shape}, got {_shown(value)}")
    return value


def _sequence(value: Any, where: str, shape: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of {shape}, got {_shown(value)}")
    return value


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_rules(data: Any, source: str) -> DisclosureRules:
    """Validate the rules mapping; a ConfigError names the file and the key to fix."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping with modes, triggers, phases, state")
    state = _strings(data.get("state"), f"{source}: key 'state'")
    modes: dict[str, tuple[ModeRule, ...]] = {}
    for mode, entries in _mapping(data.get("modes"), f"{source}: key 'modes'", "mode -> rules").items():
        where = f"{source}: key 'modes.{mode}'"
        rules = []
        for index, entry in enumerate(_sequence(entries, where, "{name, load} rules")):
            if isinstance(entry, str):
                entry = {"name": entry, "load": [entry]}
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{where}[{index}] must be a mapping with name and load")
            load = _strings(entry.get("load"), f"{where}[{index}].load")
            if not load:
                raise ConfigError(f"{where}[{index}] needs a 'load' list of globs")
            rules.append(ModeRule(str(entry.get("name") or load[0]), load))
        modes[str(mode)] = tuple(rules)
    triggers = []
    for index, entry in enumerate(_sequence(data.get("triggers"), f"{source}: key 'triggers'", "trigger rules")):
        where = f"{source}: key 'triggers[{index}]'"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a mapping with name, keywords or paths, and load")
        load = _strings(entry.get("load"), f"{where}.load")
        keywords = _strings(entry.get("keywords"), f"{where}.keywords")
        paths = _strings(entry.get("paths"), f"{where}.paths")
        where_in = _strings(entry.get("in"), f"{where}.in") or SIGNALS
        bad = [w for w in where_in if w not in SIGNALS]
        if bad:
            raise ConfigError(f"{where}.in has {quoted(bad[0])}; use any of {', '.join(SIGNALS)}")
        if not load or not (keywords or paths):
            raise ConfigError(f"{where} needs 'load' globs and 'keywords' or 'paths' to fire on")
        triggers.append(TriggerRule(str(entry.get("name") or f"trigger {index}"), load, keywords, paths, where_in))
    phases: dict[str, tuple[PhaseEntry, ...]] = {}
    for phase, spec in _mapping(data.get("phases"), f"{source}: key 'phases'", "phase -> manifest").items():
        where = f"{source}: key 'phases.{phase}'"
        if str(phase) not in PHASES:
            raise ConfigError(f"{where}: unknown phase {quoted(phase)}; GSD phases are {', '.join(PHASES)}")
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where} must be a mapping with 'required' and 'optional' lists")
        entries = []
        for kind in ("required", "optional"):
            for index, item in enumerate(_sequence(spec.get(kind), f"{where}.{kind}", "globs")):
                if isinstance(item, str):
                    item = {"glob": item}
                if not isinstance(item, Mapping) or not isinstance(item.get("glob"), str):
                    raise ConfigError(f"{where}.{kind}[{index}] must be a glob or {{glob, pick}}")
                pick = str(item.get("pick", "all"))
                if pick not in PICKS:
                    raise ConfigError(f"{where}.{kind}[{index}].pick is {quoted(pick)}; use one of {', '.join(PICKS)}")
                entries.append(PhaseEntry(item["glob"].strip(), kind == "required", pick))
        phases[str(phase)] = tuple(entries)
    return DisclosureRules(state, modes, tuple(triggers), phases, source)


# ----------------------------------------------------------------------------- GSD phases


def _open_plans_in(paths: Sequence[str], names: set[str]) -> list[str]:
    """The PLAN files among ``paths`` that have no SUMMARY beside them, in the order given."""
    return [p for p in paths if p.endswith("-PLAN.md") and p[: -len("-PLAN.md")] + "-SUMMARY.md" not in names]


def _natural(path: str) -> list:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path)]


@dataclass(frozen=True)
class PhaseSelection:
    """The files the current phase's rules name, and the warnings of required ones missing."""

    files: Mapping[str, str]  # path (relative to .planning/) -> rule text
    warnings: tuple[str, ...] = ()


def phase_selection(
    rules: DisclosureRules, phase: str, files: Sequence[str], folder: str | None, folder_note: str
) -> PhaseSelection:
    """Which files the phase's rules load; a required glob matching nothing is a warning."""
    chosen: dict[str, str] = {}
    warnings: list[str] = []
    for entry in rules.phases.get(phase, ()):
        kind = "required" if entry.required else "optional"
        label = f"phase {phase}: {entry.glob} ({kind})"
        if "{phase}" in entry.glob:
            if folder is None:
                if entry.required:
                    warnings.append(f".planning/{entry.glob}: required for phase {quoted(phase)}, but there is no "
                                    f"current phase folder ({folder_note})")
                continue
            pattern = entry.glob.replace("{phase}", folder)
            label = f"phase {phase}: {entry.glob} ({kind}; {{phase}} = {folder}: {folder_note})"
        else:
            pattern = entry.glob
        matched = sorted((f for f in files if glob_match(pattern, f)), key=_natural)
        if entry.pick == "first":
            matched = matched[:1]
        elif entry.pick == "last":
            matched = matched[-1:]
        elif entry.pick == "open":
            matched = (_open_plans_in(matched, set(files)) or matched[-1:])[:1]
        if not matched and entry.required:
            warnings.append(f".planning/{pattern}: required for phase {quoted(phase)} ({rules.source}) but no file matches")
        for path in matched:
            chosen.setdefault(path, label)
    return PhaseSelection(chosen, tuple(warnings))


# ----------------------------------------------------------------------------- candidates


def generic_candidates(files: Iterable[str], rules: DisclosureRules) -> list[str]:
    """Markdown files under .planning/ that are not state (``state:`` globs), in path order."""
    out = []
    for path in files:
        if not path.lower().endswith((".md", ".markdown")):
            continue
        if first_match(rules.state, path) is not None:
            continue
        out.append(path)
    return sorted(out, key=_natural)


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
    "named in the request", even for a state file. ``already`` maps a project-relative path to (section key, rule) for documents another
    stage already put in the context (configured references, the plan): they are reported
    as loaded there and never loaded twice.
    """
    decisions: list[Decision] = []
    warnings: list[str] = []
    for doc in candidates:
        decisions.append(_decide_one(doc, rules, mode, phase, phase_files, signals, already, warnings, named or {}))
    return decisions, warnings


def section_key(display: str) -> str:
    return f"ref:{display}"


NAMED = "named in the request"


def _decide_one(doc, rules, mode, phase, phase_files, signals, already, warnings, named) -> Decision:
    display = doc.display
    fm_modes = frontmatter_list(doc.metadata, "modes", display, warnings)
    fm_phases = frontmatter_list(doc.metadata, "phases", display, warnings)
    fm_triggers = frontmatter_list(doc.metadata, "triggers", display, warnings)
    fm_paths = frontmatter_list(doc.metadata, "paths", display, warnings)
    unknown = [m for m in fm_modes if m not in rules.modes and m not in ("dev", "review", "research")]
    if unknown:
        warnings.append(f"{display}: frontmatter modes names unknown mode {quoted(unknown[0])}")

    loaded_by: tuple[int, str] | None = None
    if doc.path.startswith(OUTSIDE):  # a project file outside .planning/: only the request loads it
        loaded_by = (3, NAMED) if doc.path in named else None
    elif phase and doc.path in phase_files:
        loaded_by = (2, phase_files[doc.path])
    elif phase and phase in fm_phases:
        loaded_by = (2, f"frontmatter phases: [{', '.join(fm_phases)}]")
    elif mode in fm_modes:
        loaded_by = (2, f"frontmatter modes: [{', '.join(fm_modes)}]")
    else:
        for rule in rules.modes.get(mode, ()):
            pattern = first_match(rule.load, doc.path)
            if pattern is not None:
                loaded_by = (2, f"{rules.source} modes.{mode} '{rule.name}' ({pattern})")
                break
    if loaded_by is None and doc.path in named:
        loaded_by = (3, NAMED)
    if loaded_by is None and not doc.path.startswith(OUTSIDE):
        loaded_by = _trigger(doc, rules, signals, fm_triggers, fm_paths)

    if display in already:
        key, how = already[display]
        layer = 1 if loaded_by is None else loaded_by[0]
        rule = how if loaded_by is None else f"{loaded_by[1]}; already loaded by {how}"
        return Decision(display, layer, True, rule=rule, section=key, loaded_by_other=how)
    if loaded_by is not None and doc.problem is None:
        return Decision(display, loaded_by[0], True, rule=loaded_by[1], section=section_key(display))
    if loaded_by is not None:
        return Decision(display, loaded_by[0], False, reason=f"{loaded_by[1]} selected it, but {doc.problem}")
    return _left_out(doc, rules, mode, phase, fm_modes, fm_phases, fm_triggers, fm_paths)


def _trigger(doc, rules, signals, fm_triggers, fm_paths) -> tuple[int, str] | None:
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
    if fm_triggers:
        hit = keyword_hit(fm_triggers, signals, SIGNALS)
        if hit:
            return 3, f"frontmatter triggers: {_describe(*hit)}"
    if fm_paths:
        path = path_hit(fm_paths, signals.changed_files)
        if path:
            return 3, f"frontmatter paths: the diff touches {path[1]} ({path[0]})"
    return None


def _left_out(doc, rules, mode, phase, fm_modes, fm_phases, fm_triggers, fm_paths) -> Decision:
    display = doc.display
    other_modes = [m for m, rs in rules.modes.items() if m != mode and any(first_match(r.load, doc.path) for r in rs)]
    if fm_modes or other_modes:
        modes = list(dict.fromkeys([*fm_modes, *other_modes]))
        return Decision(display, 2, False, reason=f"for mode {', '.join(modes)} only; the current mode is {mode}")
    if fm_phases:
        current = phase or "none (--phase)"
        return Decision(display, 2, False,
                        reason=f"for phase {', '.join(fm_phases)} only; the current phase is {current}")
    named_by = [r for r in rules.triggers if first_match(r.load, doc.path)]
    if named_by or fm_triggers or fm_paths:
        parts = []
        for rule in named_by:
            watch = [f"keywords {', '.join(rule.keywords)}"] if rule.keywords else []
            watch += [f"paths {', '.join(rule.paths)}"] if rule.paths else []
            parts.append(f"trigger '{rule.name}' ({'; '.join(watch)}) did not fire")
        if fm_triggers:
            parts.append(f"frontmatter triggers ({', '.join(fm_triggers)}) not in the plan, diff or request")
        if fm_paths:
            parts.append(f"frontmatter paths ({', '.join(fm_paths)}) match no changed file")
        return Decision(display, 3, False, reason="; ".join(parts))
    if doc.problem:
        return Decision(display, 3, False, reason=doc.problem)
    return Decision(display, 3, False,
                    reason="no mode, phase or trigger rule names it (add frontmatter modes/triggers/paths)")


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

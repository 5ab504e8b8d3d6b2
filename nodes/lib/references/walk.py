"""Pure helpers of the references stage: @-lines, targets, paths, suggestions, the walk.

Nothing here reads files or the network. ``walk_references`` takes the two IO steps as
callables (``locate`` and ``read``) so the recursion, load-once, cycle and depth rules can be
tested with plain dicts; the node module passes the real file, URL and builtin readers.
"""

from __future__ import annotations

import difflib
import ntpath
import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence
from urllib.parse import urljoin, urlsplit, urlunsplit

from ..quote import quoted
from ...types import ConfigError, Document, ReferenceLoadError, Source
from ..fences import fenced
from ..markdown import FrontmatterError, first_heading, frontmatter_block, split_frontmatter
from ..textio import Refused, TextUnavailable

GROUPS = ("core", "project", "session")
INLINE = "inline"
#: Which entry of ``context_config["priorities"]`` gives each group its default priority.
GROUP_PRIORITY_KEYS = {"core": "rules", "project": "reference", "session": "session_reference"}
#: Link statuses whose @ line is dropped from the content (the document is a section of its own).
RESOLVED = ("loaded", "already-loaded", "configured", "cycle")

_URL = re.compile(r"\Ahttps?://", re.I)
_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.\-]+):")
_DRIVE = re.compile(r"\A[A-Za-z]:[\\/]")
_PATH_CHARS = re.compile(r"\A[\w.~/\\:+\-]+\Z")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}\Z")
_BUILTIN_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")


class ReferenceProblem(TextUnavailable):
    """A reference that cannot be located or read; the walk makes it an error or a warning."""


@dataclass(frozen=True)
class ReferenceSpec:
    """One configured reference: its group, the text as written, and its place in the config."""

    group: str  # core | project | session
    target: str
    index: int  # position inside its group's list
    order: int  # position over all groups (core, then project, then session)
    setting: str = ""  # the configuration list it comes from, when not references.<group>
    shown: str = ""  # how messages name it, when not as written (an absolute path found for the project)
    optional: bool = False  # found, not named: a document that cannot be read is a warning, never an error
    why: str = ""  # why it loads (the disclosure plan's rule), when not "references.<group>"

    @property
    def where(self) -> str:
        return f"{self.setting or 'references.' + self.group}[{self.index}]"

    @property
    def label(self) -> str:
        """Where it is configured and what it names, as warnings and errors start."""
        return f"{self.where} {quoted(self.shown or self.target)}"


@dataclass(frozen=True)
class Target:
    """A located reference: kind file | url | builtin, its load-once key and its display name."""

    kind: str
    key: str  # normalised absolute path, normalised URL, or builtin:NAME: what is read
    display: str  # how warnings, sources and section keys name it (project-relative path, URL, builtin:NAME)


@dataclass(frozen=True)
class ReferenceLink:
    """One @ line: who wrote it (file line), what it names, and what became of it."""

    parent: str  # key of the referring document
    line: int  # 1-based line in the referring file
    target: str  # as written after the @
    key: str | None  # key of the document it names, when located
    status: str  # loaded | already-loaded | configured | cycle | depth-limit | missing | unreadable


@dataclass(frozen=True)
class ReferenceSet:
    """The loaded reference documents in load order, the @ links between them, and warnings."""

    documents: tuple[Document, ...] = ()
    links: tuple[ReferenceLink, ...] = ()
    warnings: tuple[str, ...] = ()

    def by_key(self) -> dict[str, Document]:
        return {doc.key: doc for doc in self.documents}


@dataclass(frozen=True)
class ParsedDocument:
    """A document's text split into metadata and body, with the line the body starts on."""

    metadata: Mapping[str, Any]
    body: str
    body_start: int
    last_line: int
    warning: str | None = None


# ----------------------------------------------------------------------------- config


def reference_specs_from(references: Mapping[str, Any]) -> list[ReferenceSpec]:
    """The configured entries of core, project and session, in that order, validated."""
    specs: list[ReferenceSpec] = []
    for group in GROUPS:
        entries = references.get(group) or []
        if not isinstance(entries, (list, tuple)):
            raise ConfigError(f"key 'references.{group}' must be a list of paths, URLs or builtin:NAME")
        for index, entry in enumerate(entries):
            if not isinstance(entry, str) or not entry.strip():
                raise ConfigError(
                    f"key 'references.{group}[{index}]' is {quoted(entry)}; write a path relative to .planning/, "
                    "an absolute path, an http(s) URL or builtin:NAME"
                )
            specs.append(ReferenceSpec(group, entry.strip(), index, len(specs)))
    return specs


def group_priorities(priorities: Mapping[str, Any]) -> dict[str, int]:
    """Default priority of each configured group, from ``context_config["priorities"]``."""
    return {
        group: int(priorities[key])
        for group, key in GROUP_PRIORITY_KEYS.items()
    }


# ----------------------------------------------------------------------------- rules

#: The bundled GSD rules; ``references.gsdRules`` decides whether they load (auto: for GSD layouts).
GSD_RULES = "builtin:gsd-rules"
PROJECT_RULES_KEY = "references.projectRules"


@dataclass(frozen=True)
class RuleFile:
    """One candidate of ``references.projectRules`` and what became of it."""

    name: str  # project-relative, as configured
    index: int  # its entry in references.projectRules
    status: str  # found | missing | empty | same | directory
    path: str | None = None  # absolute, when found
    why: str = ""


@dataclass(frozen=True)
class RulesChoice:
    """Which rules a build loads beyond ``references.core`` as written, and why: the project's
    own agent instructions (``references.projectRules``) and whether ``builtin:gsd-rules``
    stays (``references.gsdRules``)."""

    files: tuple[RuleFile, ...] = ()
    gsd_rules: bool = True
    gsd_why: str = ""

    def found(self) -> tuple[RuleFile, ...]:
        return tuple(f for f in self.files if f.status == "found")

    def explanation(self) -> list[tuple[str, str, str]]:
        """(what, found or not, why) per project rules candidate and for the GSD rules: the rows
        ``config --explain`` adds under the configuration (a found file is read under the trust
        rules by the build, whose warnings say when they refuse it)."""
        rows = [(f"rules: {f.name}", "found" if f.status == "found" else f"skipped ({f.status})", f.why)
                for f in self.files]
        rows.append((f"rules: {GSD_RULES}", "loads" if self.gsd_rules else "skipped", self.gsd_why))
        return rows


def rule_names(entries: Sequence[Any]) -> list[tuple[int, tuple[str, ...]]]:
    """(index, alternatives) of each ``references.projectRules`` entry: a project-relative file
    name, or names joined by ``|`` of which the first present and not empty is read (Codex reads
    AGENTS.override.md instead of AGENTS.md). Absolute paths and ``..`` are a ConfigError."""
    out = []
    for index, entry in enumerate(entries):
        names = tuple(part.strip() for part in str(entry).split("|") if part.strip())
        for name in names:
            parts = name.replace("\\", "/").split("/")
            if posixpath.isabs(name) or _DRIVE.match(name) or ".." in parts or name.startswith("~"):
                raise ConfigError(
                    f"key '{PROJECT_RULES_KEY}[{index}]' is {quoted(entry)}; name files inside the project, "
                    "relative to its root (like CLAUDE.md or .claude/CLAUDE.md)")
        if names:
            out.append((index, names))
    return out


def is_gsd_rules(entry: str) -> bool:
    """Whether a ``references.core`` entry names the bundled GSD rules."""
    entry = entry.strip()
    return entry.startswith("builtin:") and entry.removesuffix(".md") == GSD_RULES


def with_rules(specs: Sequence[ReferenceSpec], choice: RulesChoice) -> list[ReferenceSpec]:
    """The configured specs with the project's rules files first (core group, in the order of
    ``references.projectRules``) and ``builtin:gsd-rules`` left out when ``choice`` says so."""
    found = [ReferenceSpec("core", f.path or f.name, f.index, 0, PROJECT_RULES_KEY, f.name, True, f.why)
             for f in choice.found()]
    kept = [spec for spec in specs if choice.gsd_rules or not (spec.group == "core" and is_gsd_rules(spec.target))]
    return [replace(spec, order=order) for order, spec in enumerate(found + kept)]


# ----------------------------------------------------------------------------- @ lines


def is_reference_token(token: str) -> bool:
    """Whether the word after an @ names a document: an http(s) URL, builtin:NAME, another
    scheme's URL (refused later), or a path with a / or a file extension; not an email or an
    annotation like ``@Composable``."""
    if not token:
        return False
    if _URL.match(token):
        return True
    if "@" in token:
        return False
    if token.startswith("builtin:"):
        return bool(_BUILTIN_NAME.match(token[len("builtin:"):]))
    if "://" in token and _SCHEME.match(token):
        return True
    if not _PATH_CHARS.match(token):
        return False
    return "/" in token or "\\" in token or bool(_EXTENSION.search(token))


def at_references(body: str, first_line: int = 1) -> list[tuple[int, str]]:
    """(file line, target) of each ``@target`` line of a body, outside fenced code blocks.

    The target is the first word after the @; words after it are a note and are ignored.
    ``first_line`` is the file line the body starts on (after frontmatter).
    """
    found = []
    lines = body.split("\n")
    code = fenced(lines, strict=True)
    for offset, line in enumerate(lines):
        if code[offset] or not line.startswith("@"):
            continue
        words = line[1:].split(None, 1)
        token = words[0] if words and not line[1:2].isspace() else ""
        if is_reference_token(token):
            found.append((first_line + offset, token))
    return found


def without_lines(body: str, first_line: int, drop: Iterable[int]) -> str:
    """The body without the given file lines (each removed whole, newline included)."""
    dropped = set(drop)
    if not dropped:
        return body
    lines = body.split("\n")
    return "\n".join(line for offset, line in enumerate(lines) if first_line + offset not in dropped)


# ----------------------------------------------------------------------------- targets


def target_kind(token: str) -> str:
    """url | builtin | path | scheme (a URL of a scheme other than http/https)."""
    if _URL.match(token):
        return "url"
    if token.startswith("builtin:"):
        return "builtin"
    if _DRIVE.match(token):
        return "path"
    if _SCHEME.match(token) and ("://" in token or not _looks_like_path(token)):
        return "scheme"
    return "path"


def is_absolute_path(token: str) -> bool:
    """An absolute POSIX path, a Windows drive path, or a path under ``~``."""
    return token.startswith(("/", "~")) or bool(_DRIVE.match(token))


def _looks_like_path(token: str) -> bool:
    return "/" in token or "\\" in token


def normalise_url(url: str) -> str:
    """The URL with scheme and host in lower case and no fragment: the load-once key."""
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))


def builtin_name(token: str) -> str:
    """``builtin:gsd-rules`` or ``builtin:gsd-rules.md`` -> ``gsd-rules``; ReferenceProblem if odd."""
    name = token[len("builtin:"):].strip()
    if name.endswith(".md"):
        name = name[:-3]
    if not _BUILTIN_NAME.match(name) or ".." in name:
        raise ReferenceProblem(f"{quoted(token)} is not a builtin name (letters, digits, - _ .)")
    return name


def file_candidates(token: str, project_dir: str, home: str | None = None) -> list[str]:
    """Absolute paths a path reference may mean, in the order they are tried.

    Absolute (and Windows drive) paths are themselves; ``~/`` is under ``home``; a path that
    starts with ``.planning/`` is relative to the project root (GSD style); any other relative
    path is relative to ``.planning/`` first, then to the project root.
    """
    token = token.replace("\\", "/") if _DRIVE.match(token) or "\\" in token else token
    if _DRIVE.match(token):
        return [ntpath.normpath(token).replace("\\", "/")]
    if token.startswith("~/") and home:
        return [posixpath.normpath(posixpath.join(home, token[2:]))]
    if posixpath.isabs(token):
        return [posixpath.normpath(token)]
    root = posixpath.normpath(project_dir)
    relative = posixpath.normpath(token)
    if relative == ".planning" or relative.startswith(".planning/"):
        return [posixpath.join(root, relative)]
    out = [posixpath.join(root, ".planning", relative), posixpath.join(root, relative)]
    return list(dict.fromkeys(posixpath.normpath(path) for path in out))


def display_path(path: str, project_dir: str) -> str:
    """A file path as warnings and section keys show it: project-relative inside the project."""
    root = posixpath.normpath(project_dir)
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return posixpath.relpath(path, root)
    return path


def url_child(token: str, parent_url: str) -> str:
    """A relative reference inside a URL document, resolved against that URL."""
    return urljoin(parent_url, token)


def closest_names(wanted: str, names: Sequence[str], n: int = 3) -> list[str]:
    """Up to n names like ``wanted``: by whole relative path, then by file name."""
    wanted = wanted.replace("\\", "/").removeprefix("./").removeprefix(".planning/")
    by_path = difflib.get_close_matches(wanted, names, n=n, cutoff=0.6)
    base = posixpath.basename(wanted)
    bases: dict[str, list[str]] = {}
    for name in names:
        bases.setdefault(posixpath.basename(name), []).append(name)
    by_base = [
        name for close in difflib.get_close_matches(base, list(bases), n=n, cutoff=0.75) for name in bases[close]
    ]
    return list(dict.fromkeys(by_path + by_base))[:n]


def suggestion_text(names: Sequence[str]) -> str:
    """``; did you mean a, b?`` or a hint that nothing similar exists."""
    if not names:
        return "; no similar file under .planning/"
    return "; did you mean " + ", ".join(names) + "?"


# ----------------------------------------------------------------------------- documents


def parse_document(text: str, display: str) -> ParsedDocument:
    """Frontmatter as metadata and the body; bad frontmatter is a warning (file:line) and the
    document is used without metadata (its frontmatter block still left out of the body)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
    last_line = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    try:
        metadata, body, start = split_frontmatter(text)
        return ParsedDocument(dict(metadata), body, start, max(last_line, start))
    except FrontmatterError as exc:
        where = f"{display}:{exc.line}" if exc.line else display
        _, body, start = frontmatter_block(text)
        warning = f"{where}: {exc}; the document is used without metadata"
        return ParsedDocument({}, body, start, max(last_line, start), warning)


def title_for(metadata: Mapping[str, Any], body: str, fallback: str) -> str:
    """Frontmatter ``title``, else the first heading, else the file name."""
    title = metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return first_heading(body) or fallback


def fallback_title(display: str) -> str:
    """The file name of a path or URL (``builtin:x`` -> ``x``)."""
    if display.startswith("builtin:"):
        return display[len("builtin:"):]
    if _URL.match(display):
        parts = urlsplit(display)
        return posixpath.basename(parts.path.rstrip("/")) or parts.netloc
    return posixpath.basename(display.rstrip("/")) or display


def priority_for(metadata: Mapping[str, Any], default: int, display: str) -> tuple[int, str | None]:
    """Frontmatter ``priority`` (an integer 0-100) or the group default, with a warning if bad."""
    if "priority" not in metadata:
        return default, None
    value = metadata["priority"]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100:
        return value, None
    return default, f"{display}: frontmatter priority {quoted(value)} is not an integer 0-100; using {default}"


# ----------------------------------------------------------------------------- the walk

Locate = Callable[[str, "Target | None"], Target]
Read = Callable[[Target], str]


@dataclass
class _Record:
    target: Target
    parsed: ParsedDocument
    group: str
    root_group: str
    parent: str | None
    why: str = ""
    resolved_lines: set[int] = field(default_factory=set)


@dataclass
class _Frame:
    key: str
    chain: tuple[str, ...]  # keys from the configured document down to this one
    root_group: str
    pending: list[tuple[int, str]]  # @ lines not handled yet


def walk_references(
    specs: Sequence[ReferenceSpec],
    locate: Locate,
    read: Read,
    max_depth: int,
    priorities: Mapping[str, int],
) -> ReferenceSet:
    """Every configured document and, depth first, the documents its @ lines name.

    A configured reference that cannot be located or read raises ReferenceLoadError; one the
    trust rules refuse (Refused) is a warning and left out; an @ line that cannot be read or is
    refused is a warning naming the referring file and line. Each key loads once; a cycle
    is a warning with its path and is not followed; depth beyond ``max_depth`` is a warning.
    """
    roots, warnings = _located_roots(specs, locate)
    walk = _Walk(locate, read, max_depth, {target.key for _, target in roots}, warnings)
    for spec, target in roots:
        try:
            text = read(target)
        except TextUnavailable as exc:
            if not (spec.optional or isinstance(exc, Refused)):
                raise ReferenceLoadError(f"{spec.label}: {exc}") from None
            warnings.append(f"{spec.label}: {exc}")
            continue
        walk.visit(walk.add(target, text, spec.group, spec.group, None, spec.why), spec.group)
    documents = tuple(
        _document(record, order, priorities, warnings) for order, record in enumerate(walk.records.values())
    )
    return ReferenceSet(documents, tuple(walk.links), tuple(warnings))


def _located_roots(specs: Sequence[ReferenceSpec], locate: Locate) -> tuple[list, list[str]]:
    """(spec, target) of each configured reference, once per key; a miss raises ReferenceLoadError."""
    roots: list[tuple[ReferenceSpec, Target]] = []
    warnings: list[str] = []
    seen: dict[str, ReferenceSpec] = {}
    for spec in specs:
        try:
            target = locate(spec.target, None)
        except TextUnavailable as exc:
            if not (spec.optional or isinstance(exc, Refused)):
                raise ReferenceLoadError(f"{spec.label}: {exc}") from None
            warnings.append(f"{spec.label}: {exc}")
            continue
        if target.key in seen:
            first = seen[target.key]
            if not spec.optional:  # a project rules file that is a configured one too: loaded once, no news
                warnings.append(f"{spec.label}: the same document as {first.where}; loaded once")
            continue
        seen[target.key] = spec
        roots.append((spec, target))
    return roots, warnings


@dataclass
class _Walk:
    """The state of one walk: documents loaded so far (in load order), links and warnings."""

    locate: Locate
    read: Read
    max_depth: int
    configured: set[str]
    warnings: list[str]
    records: dict[str, _Record] = field(default_factory=dict)
    links: list[ReferenceLink] = field(default_factory=list)

    def add(self, target: Target, text: str, group: str, root_group: str, parent: str | None,
            why: str = "") -> _Record:
        parsed = parse_document(text, target.display)
        if parsed.warning:
            self.warnings.append(parsed.warning)
        self.records[target.key] = _Record(target, parsed, group, root_group, parent, why)
        return self.records[target.key]

    def visit(self, root: _Record, root_group: str) -> None:
        """Follow the @ lines under ``root`` depth first (an explicit stack: no recursion limit)."""
        stack = [_Frame(root.target.key, (root.target.key,), root_group, _pending(root))]
        while stack:
            frame = stack[-1]
            if not frame.pending:
                stack.pop()
                continue
            line, token = frame.pending.pop(0)
            child = self.follow(frame, line, token)
            if child is not None:
                stack.append(_Frame(child.target.key, frame.chain + (child.target.key,), root_group, _pending(child)))

    def follow(self, frame: _Frame, line: int, token: str) -> _Record | None:
        """Handle one @ line of the frame's document; the new record when it loads one."""
        parent = self.records[frame.key]
        where = f"{parent.target.display}:{line}"
        try:
            target = self.locate(token, parent.target)
        except TextUnavailable as exc:
            return self._skip(frame, line, token, None, "missing", f"{where}: @{token}: {exc}")
        if target.key in frame.chain:
            cycle = " -> ".join(self._displays(frame.chain[frame.chain.index(target.key):]) + [target.display])
            return self._skip(frame, line, token, target.key, "cycle",
                              f"{where}: @{token} closes a cycle {cycle}; not followed again")
        if target.key in self.records or target.key in self.configured:
            status = "already-loaded" if target.key in self.records else "configured"
            return self._skip(frame, line, token, target.key, status, None)
        if len(frame.chain) > self.max_depth:
            chain = " -> ".join(self._displays(frame.chain))
            return self._skip(frame, line, token, target.key, "depth-limit",
                              f"{where}: @{token} not followed: references.maxDepth ({self.max_depth}) "
                              f"reached ({chain})")
        try:
            text = self.read(target)
        except TextUnavailable as exc:
            return self._skip(frame, line, token, target.key, "unreadable", f"{where}: @{token}: {exc}")
        self._link(frame, line, token, target.key, "loaded")
        return self.add(target, text, INLINE, frame.root_group, frame.key)

    def _skip(self, frame: _Frame, line: int, token: str, key: str | None, status: str,
              warning: str | None) -> None:
        self._link(frame, line, token, key, status)
        if warning:
            self.warnings.append(warning)
        return None

    def _link(self, frame: _Frame, line: int, token: str, key: str | None, status: str) -> None:
        self.links.append(ReferenceLink(frame.key, line, token, key, status))
        if status in RESOLVED:
            self.records[frame.key].resolved_lines.add(line)

    def _displays(self, keys: Iterable[str]) -> list[str]:
        return [self.records[key].target.display for key in keys]


def _pending(record: _Record) -> list[tuple[int, str]]:
    return at_references(record.parsed.body, record.parsed.body_start)


def _document(record: _Record, order: int, priorities: Mapping[str, int], warnings: list[str]) -> Document:
    parsed, target = record.parsed, record.target
    priority, warning = priority_for(parsed.metadata, priorities[record.root_group], target.display)
    if warning:
        warnings.append(warning)
    return Document(
        key=target.key,
        title=title_for(parsed.metadata, parsed.body, fallback_title(target.display)),
        content=without_lines(parsed.body, parsed.body_start, record.resolved_lines),
        source=Source(target.kind, target.display, (parsed.body_start, parsed.last_line)),
        metadata=dict(parsed.metadata),
        group=record.group,
        priority=priority,
        order=order,
        parent=record.parent,
        why=record.why,
    )


# ----------------------------------------------------------------------------- sections


def root_group(document: Document, by_key: Mapping[str, Document]) -> str:
    """The configured group a document belongs to: its own, or that of the document that
    (through @ lines) pulled it in."""
    seen = set()
    while document.group == INLINE and document.parent in by_key and document.parent not in seen:
        seen.add(document.parent)
        document = by_key[document.parent]
    return document.group


def ordered(documents: Iterable[Document]) -> list[Document]:
    """Higher priority first; ties keep load order (config order, @ children after parent)."""
    return sorted(documents, key=lambda doc: (-doc.priority, doc.order))


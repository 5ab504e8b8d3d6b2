"""The walk of the references stage: every configured document and, depth first, the documents
its @ lines name, loaded once each, with the cycle and depth rules; then the order of the sections.

Nothing here reads files or the network. ``walk_references`` takes the two IO steps as
callables (``locate`` and ``read``) so the recursion, load-once, cycle and depth rules can be
tested with plain dicts; the node module passes the real file, URL and builtin readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from ...types import Document, ReferenceLoadError, Source
from ..textio import Refused, TextUnavailable
from ..memo import NO_MEMO, Memo
from .documents import (ParsedDocument, at_references, fallback_title, parsed_document, priority_for, title_for,
                        without_lines)
from .specs import ReferenceSpec
from .targets import Target

INLINE = "inline"
#: Link statuses whose @ line is dropped from the content (the document is a section of its own).
RESOLVED = ("loaded", "already-loaded", "configured", "cycle")


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
    memo: Memo = NO_MEMO,
) -> ReferenceSet:
    """Every configured document and, depth first, the documents its @ lines name (each parsed
    once per content: :func:`.documents.parsed_document` keeps it in ``memo``).

    A configured reference that cannot be located or read raises ReferenceLoadError; one the
    trust rules refuse (Refused) is a warning and left out; an @ line that cannot be read or is
    refused is a warning naming the referring file and line. Each key loads once; a cycle
    is a warning with its path and is not followed; depth beyond ``max_depth`` is a warning.
    """
    roots, warnings = _located_roots(specs, locate)
    walk = _Walk(locate, read, max_depth, {target.key for _, target in roots}, warnings, memo)
    for spec, target in roots:
        try:
            text = read(target)
        except TextUnavailable as exc:
            warnings.append(_left_out_warning(spec, exc))
            continue
        walk.visit(walk.add(target, text, spec.group, spec.group, None, spec.why), spec.group)
    documents = tuple(
        _document(record, order, priorities, warnings) for order, record in enumerate(walk.records.values())
    )
    return ReferenceSet(documents, tuple(walk.links), tuple(warnings))


def _left_out_warning(spec: ReferenceSpec, exc: TextUnavailable) -> str:
    """The warning for a configured reference that cannot be found or read: an optional one, or
    one the trust rules refuse, is left out with it; any other raises ReferenceLoadError."""
    if not (spec.optional or isinstance(exc, Refused)):
        raise ReferenceLoadError(f"{spec.label}: {exc}") from None
    return f"{spec.label}: {exc}"


def _located_roots(specs: Sequence[ReferenceSpec], locate: Locate) -> tuple[list, list[str]]:
    """(spec, target) of each configured reference, once per key; a miss raises ReferenceLoadError."""
    roots: list[tuple[ReferenceSpec, Target]] = []
    warnings: list[str] = []
    seen: dict[str, ReferenceSpec] = {}
    for spec in specs:
        try:
            target = locate(spec.target, None)
        except TextUnavailable as exc:
            warnings.append(_left_out_warning(spec, exc))
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
    memo: Memo = NO_MEMO
    records: dict[str, _Record] = field(default_factory=dict)
    links: list[ReferenceLink] = field(default_factory=list)

    def add(self, target: Target, text: str, group: str, root_group: str, parent: str | None,
            why: str = "") -> _Record:
        parsed = parsed_document(text, target.display, self.memo)
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

"""Stage 2, reference documents: the configured references and every @-line they pull in.

``reference_documents`` is the only node that reads (files, http(s) URLs, built-ins shipped
in ctxengine.configs/references); the recursion rules live in nodes/lib/references.py and
everything after the loader is pure.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from importlib import resources
from typing import Optional

from hamilton.function_modifiers import cache, tag

from .lib.quote import quoted
from .lib import references as _refs
from .lib.markdown import nest_under_title
from .lib.references import ReferenceProblem, ReferenceSet, Target
from .lib.settings import ReferenceSettings, trust_at
from .lib.textio import Trust, exit_point, fetch_url, list_files, read_local_text, trusted_path
from .types import Document, Section

_PLANNING_LIST_LIMIT = 5000  # files under .planning/ considered for "did you mean"


@tag(stage="references")
def reference_specs(reference_settings: ReferenceSettings) -> list:
    """The configured references (``references.core``, ``.project``, ``.session``) as
    ReferenceSpec values with their group and config order."""
    return _refs.reference_specs_from(reference_settings.groups)


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
    fetch_deadline: Optional[float] = None,
) -> ReferenceSet:
    """Every configured reference document, and recursively the documents its @ lines name,
    each loaded once, with the @ links between them and the warnings met on the way. Files
    and URLs are read under the trust rules (``trust.*``); a refusal is a warning."""
    settings = reference_settings
    trust = trust_at(trust_settings, project_dir)
    locate = _locator(trust)
    notes: list[str] = []
    read = _reader(trust, settings.url_timeout, settings.url_max_bytes, settings.max_file_bytes, fetch_deadline, notes)
    priorities = dict(settings.group_priorities)
    found = _refs.walk_references(reference_specs, locate, read, settings.max_depth, priorities)
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
            notes: list[str]):
    """read(target) -> text for files, URLs and built-ins under the trust rules, or a
    TextUnavailable (Refused when the rules refuse it); what cleaning removed goes to ``notes``."""
    if deadline is None:
        deadline = time.monotonic() + trust.build_deadline

    def read(target: Target) -> str:
        if target.kind == "builtin":
            name = target.key[len("builtin:"):]
            return _builtin_folder().joinpath(f"{name}.md").read_text(encoding="utf-8")
        if target.kind == "url":
            loaded = fetch_url(target.key, trust, timeout, max_url_bytes, deadline)
        else:
            loaded = read_local_text(target.key, trust, max_file_bytes, "references.maxFileBytes", target.display)
        notes.extend(loaded.notes(target.display))
        return loaded.text

    return read

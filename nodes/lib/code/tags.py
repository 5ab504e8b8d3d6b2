"""Definitions and references of one source file, from tree-sitter.

Grammars come from wheels that ship them compiled (``tree-sitter-python`` and friends), so
nothing is downloaded at run time. The queries are ``queries/<language>.scm`` beside this
module: a capture ``@name.definition.<kind>`` marks a name a file defines (class, function,
method, interface, type ...), ``@name.reference.<kind>`` one it uses. tree-sitter is imported
only when a file is parsed (:class:`Grammars`), so a build without the code stage never loads it.

Tags depend only on a file's content and language: :func:`file_tags` keys them by the content's
digest through the reuse layer's memo (``memo.get(kind, digest, make)``), so a warm build parses
only the files that changed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping

from ..digest import digest16
from ..memo import NO_MEMO
from .keys import NameKeys, name_keys

#: Bumped when a query or the tag format changes: memoised tags of older versions are not used.
TAGS_VERSION = "code-tags-2"

#: Language of each file extension (lower case).
LANGUAGE_OF_SUFFIX = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
}

#: The wheel (module, function) giving each language's compiled grammar, and its query file.
_GRAMMARS = {
    "python": ("tree_sitter_python", "language", "python"),
    "javascript": ("tree_sitter_javascript", "language", "javascript"),
    "typescript": ("tree_sitter_typescript", "language_typescript", "typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx", "typescript"),
    "go": ("tree_sitter_go", "language", "go"),
    "rust": ("tree_sitter_rust", "language", "rust"),
    "java": ("tree_sitter_java", "language", "java"),
    "c": ("tree_sitter_c", "language", "c"),
    "cpp": ("tree_sitter_cpp", "language", "cpp"),
}


def language_of(path: str) -> str | None:
    """The tree-sitter language of ``path`` by its extension (``os.path.splitext``'s: a name's
    leading dots start no extension), or None (a file mapped by name only). Called for every
    listed file on every build: string methods, not ``splitext``'s generality."""
    name = path[path.rfind("/") + 1:]
    dot = name.rfind(".")
    if dot <= 0 or not name[:dot].strip("."):
        return None
    return LANGUAGE_OF_SUFFIX.get(name[dot:].lower())


@dataclass(frozen=True)
class Definition:
    """A name a file defines: the name, its 1-based line and its kind (class, function ...)."""

    name: str
    line: int
    kind: str


@dataclass(frozen=True)
class FileTags:
    """What one file defines and references. ``references``: each name with how often it is
    used (sorted by name); ``error``: why the file has no or partial tags ("" when parsed cleanly);
    ``keys``: its defined and referenced names packed as 64-bit keys (keys.py), made with the tags
    and memoised with them, from which the repo map's graph is assembled."""

    language: str | None
    definitions: tuple[Definition, ...] = ()
    references: tuple[tuple[str, int], ...] = ()
    lines: int = 0
    error: str = ""
    keys: NameKeys = NameKeys()

    @property
    def defined_names(self) -> frozenset[str]:
        return frozenset(d.name for d in self.definitions)


class CodeTags(Mapping):
    """The tags of every file read (relative path -> :class:`FileTags`), a read-only mapping;
    ``digest``: that of the files they were made from (its fingerprint for Hamilton's cache)."""

    DIGEST_TAG = b"ct"  # carries a content digest (nodes/lib/digest.py)

    def __init__(self, tags: Mapping[str, FileTags], digest: bytes = b""):
        self._tags, self.digest = dict(tags), digest

    def __getitem__(self, path: str) -> FileTags:
        return self._tags[path]

    def __iter__(self):
        return iter(self._tags)

    def __len__(self) -> int:
        return len(self._tags)

    def __reduce__(self):
        return CodeTags, (self._tags, self.digest)


@dataclass
class Grammars:
    """Parsers and compiled queries of the languages met in one build, made on first use (a
    query compiles in milliseconds; nothing outlives the build). A language whose wheel is
    missing is remembered as unavailable, with the reason. ``name_keys``: the 64-bit key of
    each name met in this build's parses (keys.py), so a name used in a thousand files is
    digested once."""

    _loaded: dict = field(default_factory=dict)
    name_keys: dict = field(default_factory=dict)

    def get(self, language: str) -> tuple[Any, Any] | str:
        """(parser, query) for ``language``, or a string saying why there is none."""
        if language not in self._loaded:
            self._loaded[language] = _load_grammar(language)
        return self._loaded[language]


def _load_grammar(language: str) -> tuple[Any, Any] | str:
    module_name, function, query_name = _GRAMMARS[language]
    try:
        import tree_sitter

        grammar = tree_sitter.Language(getattr(importlib.import_module(module_name), function)())
    except (ImportError, AttributeError, ValueError) as exc:
        return f"no tree-sitter grammar for {language} ({module_name}: {exc}); mapped by name only"
    text = resources.files(__package__).joinpath("queries", f"{query_name}.scm").read_text(encoding="utf-8")
    try:
        query = tree_sitter.Query(grammar, text)
    except tree_sitter.QueryError as exc:  # a grammar wheel whose node names changed
        return f"queries/{query_name}.scm does not fit the installed {module_name} ({exc}); mapped by name only"
    return tree_sitter.Parser(grammar), query


def line_count(text: str) -> int:
    """The lines of ``text`` (a last line without its newline counts)."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def tags_digest(language: str | None, text: str) -> bytes:
    """The key of a file's tags: the tags version, its language and its content."""
    return digest16(TAGS_VERSION.encode(), (language or "").encode(), text.encode("utf-8", "surrogatepass"))


def file_tags(path: str, text: str, grammars: Grammars, memo: Any = NO_MEMO, digest: bytes | None = None) -> FileTags:
    """The definitions and references of ``text`` (the file at ``path``, whose extension picks the
    language), memoised by content through ``memo`` (``digest``: its :func:`tags_digest`, when
    already computed). A file with syntax errors keeps the tags
    tree-sitter recovered and says so in ``error``; a parse that fails leaves no tags."""
    language = language_of(path)
    if language is None:
        return FileTags(None, lines=line_count(text))
    return memo.get(TAGS_VERSION, digest or tags_digest(language, text), lambda: parsed_tags(language, text, grammars))


def parsed_tags(language: str, text: str, grammars: Grammars) -> FileTags:
    """:func:`file_tags` without the memo: parse ``text`` as ``language`` and run its query."""
    lines = line_count(text)
    loaded = grammars.get(language)
    if isinstance(loaded, str):
        return FileTags(language, lines=lines, error=loaded)
    parser, query = loaded
    try:
        import tree_sitter

        tree = parser.parse(text.encode("utf-8", "surrogatepass"))
        captures = tree_sitter.QueryCursor(query).captures(tree.root_node)
    except Exception as exc:  # a grammar's own failure must not stop the map of the other files
        return FileTags(language, lines=lines, error=f"tree-sitter failed: {exc}")
    definitions: dict[tuple[str, int], Definition] = {}
    counts: dict[str, int] = {}
    for capture, nodes in captures.items():
        parts = capture.split(".")
        if len(parts) < 3 or parts[0] != "name":
            continue
        for node in nodes:
            name = node.text.decode("utf-8", "replace") if node.text else ""
            if not name:
                continue
            if parts[1] == "definition":
                line = node.start_point[0] + 1
                definitions.setdefault((name, line), Definition(name, line, parts[2]))
            elif parts[1] == "reference":
                counts[name] = counts.get(name, 0) + 1
    ordered = tuple(sorted(definitions.values(), key=lambda d: (d.line, d.name)))
    references = tuple(sorted(counts.items()))
    error = "syntax errors (tags from what tree-sitter recovered)" if tree.root_node.has_error else ""
    keys = name_keys((d.name for d in ordered), references, grammars.name_keys)
    return FileTags(language, ordered, references, lines, error, keys)

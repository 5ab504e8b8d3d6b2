"""Shared value types passed between the nodes of the ctxengine dataflow.

Every type is a plain frozen dataclass (not ``slots=True``: Hamilton's cache fingerprints
objects through ``__dict__``). Nodes never mutate them; a changed value is a new object
(``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field, replace
from functools import cached_property
from typing import Any, Mapping

from .errors import BudgetExceededError, ConfigError, CtxEngineError, ReferenceLoadError, TemplateError  # noqa: F401
from .lib.digest import fields_digest, long_text, round_digest_of, value_digest

IMMUTABLE = "immutable"
SUMMARIZABLE = "summarizable"
DISCARDABLE = "discardable"

#: Ledger actions, in increasing order of loss.
ACTIONS = ("kept", "summarized", "compacted", "cut", "dropped", "mended")


def tier_for(priority: int) -> str:
    """The truncation tier of a priority: >= 90 immutable, 50-89 summarizable, < 50 discardable."""
    if priority >= 90:
        return IMMUTABLE
    if priority >= 50:
        return SUMMARIZABLE
    return DISCARDABLE


@dataclass(frozen=True)
class Source:
    """Where a piece of text came from: a file (with a 1-based inclusive line range), a URL,
    a built-in reference, git, the environment, or the caller (the request)."""

    kind: str  # file | url | builtin | git | environment | request | config
    location: str
    lines: tuple[int, int] | None = None

    def as_dict(self) -> dict:
        out = {"kind": self.kind, "location": self.location}
        if self.lines is not None:
            out["lines"] = list(self.lines)
        return out


@dataclass(frozen=True)
class Document:
    """A loaded reference document: its body without frontmatter, and the frontmatter as metadata."""

    key: str  # normalised path or URL: each document loads once per run under this key
    title: str
    content: str
    source: Source
    metadata: Mapping[str, Any] = field(default_factory=dict)
    group: str = "project"  # core | project | session | inline (pulled in by an @ line)
    priority: int = 60
    order: int = 0  # position in config order (ties in priority keep this order)
    parent: str | None = None  # the key of the document whose @ line pulled this one in
    why: str = ""  # why a configured document loads, when not "references.<group>" (project rules)

    @property
    def deprecated(self) -> bool:
        return bool(self.metadata.get("deprecated", False))


@dataclass(frozen=True)
class Message:
    """One message of a session: user, assistant, tool or system."""

    role: str
    content: str
    round: int
    line: int | None = None  # 1-based line in the session file
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    call_id: str | None = None
    usage: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Round:
    """One round of a session: a user request and everything up to the next one."""

    index: int
    messages: tuple[Message, ...]
    lines: tuple[int, int] | None = None
    #: The digest of what a parser made the round from (its index included), when it knows it
    #: (:func:`.lib.digest.round_digest_of`); else the round's content is hashed.
    source_digest: InitVar[bytes] = b""
    #: A digest of its content, set when it is made (a changed round, ``replace(round_, ...)``,
    #: gets its own): memo keys and the cache's fingerprint of a round use it.
    digest: bytes = field(init=False, default=b"", compare=False, repr=False)

    DIGEST_TAG = b"r"  # carries a content digest (nodes/lib/digest.py)

    def __post_init__(self, source_digest: bytes) -> None:
        object.__setattr__(self, "digest", source_digest or round_digest_of(
            value_digest((self.index, self.messages, self.lines))))


@dataclass(frozen=True)
class Section:
    """One block of the context: what the template renders and truncation works on.

    ``tier`` follows from ``priority``; ``pool`` is the budget pool it draws from
    (system | references | state | request). ``data`` holds kind-specific structure the
    strategies need (``rounds`` for history, ``tasks`` for a plan, ``files`` for a diff).
    """

    key: str
    title: str
    kind: str  # rules | reference | plan | history | git | tree | environment | request | instructions
    content: str
    priority: int
    pool: str
    sources: tuple[Source, ...] = ()
    deprecated: bool = False
    data: Mapping[str, Any] = field(default_factory=dict)

    DIGEST_TAG = b"S"  # carries a content digest (nodes/lib/digest.py)

    @property
    def tier(self) -> str:
        return tier_for(self.priority)

    @cached_property
    def digest(self) -> bytes:
        """A digest of its content (every field), computed on first use and kept: the history
        section (its rounds hold the 4 MB transcript), in every truncation state, is hashed
        once. Never pickled (a loaded section computes its own): a section's pickle is its
        content only. A changed section (``replace``, :meth:`with_content`) gets its own."""
        return fields_digest(self)

    def __post_init__(self) -> None:
        """A content over 64K chars carries its digest from now on (``long_text``)."""
        object.__setattr__(self, "content", long_text(self.content))

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "digest"}

    def with_content(self, content: str, **changes: Any) -> "Section":
        return replace(self, content=content, **changes)


@dataclass(frozen=True)
class BudgetReport:
    """Token use of a rendered context against the available budget (max - reserve)."""

    total_tokens: int
    available_tokens: int
    is_over_budget: bool
    over_budget_amount: int
    utilization_rate: float
    exact: bool = True  # False when total_tokens is the chars/4 estimate, not a tiktoken count

    def as_dict(self) -> dict:
        return {
            "total_tokens": self.total_tokens,
            "available_tokens": self.available_tokens,
            "is_over_budget": self.is_over_budget,
            "over_budget_amount": self.over_budget_amount,
            "utilization_rate": self.utilization_rate,
            "exact": self.exact,
        }


@dataclass(frozen=True)
class LedgerEntry:
    """What one truncation step did to one section, and why."""

    section_key: str
    step: str  # the node that acted
    action: str  # one of ACTIONS
    tokens_before: int
    tokens_after: int
    reason: str
    estimated: bool = False  # tokens_before is an estimate (chars / 4), not an exact count

    def as_dict(self) -> dict:
        return dict(self.__dict__)

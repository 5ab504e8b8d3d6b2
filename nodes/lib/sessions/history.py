"""What every transcript format shares: :class:`SessionText` (a session file's text with its
digest), :class:`SessionHistory` (a session's rounds, warnings and source), the caps on what is
read (:data:`MAX_ROUNDS`, :data:`MAX_LOG_LINES`) with their one warning each, the memo kinds of
the values made from a transcript, numbering rounds, and the tool calls of a round with their
results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...types import Message, Round

JSONL = "jsonl"
AIDER = "aider"

#: Rounds of a transcript that are parsed: the newest ones, the older ones left out with one
#: warning. A round's summary line is at least ~15 tokens, so no context window holds more;
#: past it, a build's time and memory stop growing with the transcript.
MAX_ROUNDS = 10_000
#: Lines of a JSON Lines log that are read: the newest ones, with one warning (the memo keeps
#: the reading of each line, so a log that grows reads only its new lines).
MAX_LOG_LINES = 200_000

#: The memo kinds of the values made from a transcript (see nodes/lib/memo.py).
LINE, STRETCH, LAST_PARSE, SUMMARY = "line", "aider-stretch", "aider-last-parse", "summary"
ROUNDS = "aider-rounds"  # a run of the rounds of a last parse (aider._round_chunks)


@dataclass(frozen=True)
class SessionText:
    """A session file's text and its :func:`..digest.text_digest`, known from the read (a
    transcript that grew: from the digest of its old part and its new part only,
    nodes/lib/grown.py): the cache fingerprints it by the digest (``DIGEST_TAG``) and its parser
    is given both, so the text is never hashed whole again. Not a ``str`` subclass
    (:class:`..digest.DigestedText`): making one copies the text, 16 MB of fresh memory for a 4 MB
    transcript holding one emoji, whose page faults cost a warm build about 7 ms."""

    text: str = field(repr=False)
    digest: bytes
    #: (length, digest) of the text read before from the same file that this one begins with (it
    #: only grew), or None: a parser resumes its last parse of that text without comparing them.
    grew_from: tuple[int, bytes] | None = None

    DIGEST_TAG = b"T"  # carries a content digest (nodes/lib/digest.py)


@dataclass(frozen=True)
class SessionHistory:
    """The parsed rounds of one session file, with the warnings met and where it came from."""

    rounds: tuple[Round, ...] = ()
    warnings: tuple[str, ...] = ()
    source: str | None = None  # the file path; None when there is no session
    format: str | None = None  # "jsonl" | "aider"
    sessions: int = 0  # aider: how many "# aider chat started" headers; jsonl: 1
    total_lines: int = 0


def newest_lines_start(text: str, limit: int) -> tuple[int, int]:
    """(where the newest ``limit`` lines of ``text`` start, how many lines come before):
    (0, 0) when it has no more. Found from the end (one ``rfind`` a line kept), so a huge log
    is never split whole."""
    position = len(text) - 1 if text.endswith("\n") else len(text)  # a last newline ends a line, opens none
    if text.count("\n", 0, position) < limit:
        return 0, 0
    for _ in range(limit):
        position = text.rfind("\n", 0, position)
    return position + 1, text.count("\n", 0, position + 1)


def number_rounds(groups: Sequence[Sequence[Message]], first: int = 1) -> list[Round]:
    """The rounds of ``groups`` of messages, numbered from ``first`` (each message given its round's
    number), each with its line span and digest."""
    rounds = []
    for index, group in enumerate(groups, first):
        messages = tuple(
            m if m.round == index else Message(m.role, m.content, index, m.line, m.tool_calls, m.call_id, m.usage)
            for m in group
        )
        numbers = [m.line for m in messages if m.line is not None]
        lines = (min(numbers), max(numbers)) if numbers else None
        rounds.append(Round(index=index, messages=messages, lines=lines))
    return rounds


def lines_cap_warning(path: str, skipped: int) -> str:
    """The one warning of a JSON Lines transcript whose oldest ``skipped`` lines were left out
    (:data:`MAX_LOG_LINES`)."""
    return (f"{path}: {skipped + MAX_LOG_LINES:,} lines; only the newest {MAX_LOG_LINES:,} are read (from line "
            f"{skipped + 1:,}), older ones cannot fit a context window (ctxengine reads at most {MAX_LOG_LINES:,} "
            "lines of a session log)")


def rounds_cap_warning(path: str, requests: int, first_line: int) -> str:
    """The one warning of a transcript whose oldest rounds were left out (:data:`MAX_ROUNDS`)."""
    return (f"{path}: {requests:,} rounds; only the newest {MAX_ROUNDS:,} are read (from line {first_line:,}), "
            f"older ones cannot fit a context window (ctxengine reads at most {MAX_ROUNDS:,} rounds of a session)")


def tool_units(round_: Round) -> list[tuple[Mapping[str, Any], tuple[Message, ...]]]:
    """Each tool call of the round with its results, in call order: [(call, results)]."""
    results: dict[str, list[Message]] = {}
    for message in round_.messages:
        if message.role == "tool" and message.call_id is not None:
            results.setdefault(message.call_id, []).append(message)
    units = []
    for message in round_.messages:
        for call in message.tool_calls:
            units.append((call, tuple(results.get(str(call.get("id")), ()))))
    return units


def rounds_of(session_history: Any) -> tuple[Round, ...]:
    """The rounds of a SessionHistory (``.rounds``), or of a plain sequence of rounds; () for None."""
    if session_history is None:
        return ()
    rounds = getattr(session_history, "rounds", session_history)
    return tuple(r for r in rounds if isinstance(r, Round))

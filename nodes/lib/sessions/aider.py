"""aider's ``.aider.chat.history.md``: ``# aider chat started at`` opens a session, ``#### `` lines
are the user's turn (but for aider's replayed confirmation answers), ``> `` lines are tool output,
the rest is the assistant (its reasoning blocks left out). Parsed line-oriented, one stretch per
round through the memo, so a transcript that only grew parses just its new rounds."""

from __future__ import annotations

import pickle
import re
from dataclasses import MISSING, dataclass, fields
from itertools import chain as _chain

from ...types import Message, Round
from ..digest import digest16, round_digest_of, text_digest
from ..memo import NO_MEMO, Memo
from .history import AIDER, AIDER_ROUND, LAST_PARSE, MAX_ROUNDS, STRETCH, SessionHistory, rounds_cap_warning


def parse_aider(text: str, path: str, memo: Memo = NO_MEMO) -> SessionHistory:
    """Rounds of an aider ``.aider.chat.history.md``.

    ``# aider chat started at`` opens a session (kept as a system message at the head of the
    session's first round); consecutive ``#### `` lines are one user message, and a user
    message opens a round (a bare blank line between two ``#### `` runs separates two
    messages); ``> `` lines are tool output; everything else is the assistant, without its
    reasoning blocks (:func:`without_reasoning`). A run of ``#### `` lines that only answers
    confirmation questions (:func:`is_confirmation_run`) is tool output too, not a request. Blank
    lines never switch roles. Output before a session's first user message (aider's start-up
    banner) belongs to no round.

    The text is cut into one stretch per round (from a run of ``#### `` lines to the next) and
    each stretch is parsed on its own through the ``memo``, keyed by the hash of its text,
    its first line and the session header it inherits: a transcript that only grew parses just
    its new rounds; when this process parsed it before it grew, the stretches before the last
    one are not even cut and hashed again. Line-oriented without a Python loop per line: compiled regexes with a
    literal newline prefix find the runs of ``#### `` and ``> `` lines and the session headers;
    the text between two runs is the assistant's.

    Only the newest :data:`MAX_ROUNDS` requests are parsed (with one warning): the stretches
    before them are not cut or hashed, their lines and session headers only counted, and the
    rounds kept are numbered as if each request left out made a round.
    """
    source = path.encode("utf-8", "surrogatepass")
    resumed = _resume_point(memo.peek(LAST_PARSE, digest16(source)), text)
    warnings: tuple[str, ...] = ()
    if resumed is not None:
        prev, k = resumed
        starts = prev.starts[:k] + _request_starts(text, prev.starts[k] - 1)
        state, rounds, cursors = prev.cursors[k], list(prev.rounds[:prev.cursors[k][-1]]), list(prev.cursors[:k])
        skipped = prev.skipped
    if resumed is None or len(starts) > MAX_ROUNDS:
        starts = _user_run_starts(text)
        skipped = max(0, len(starts) - MAX_ROUNDS)
        state = _prelude_state(text, starts) if not skipped else _state_at_cut(text, starts, skipped)
        if skipped:
            warnings = (rounds_cap_warning(path, len(starts), state[0]),)
        starts = starts[skipped:]
        rounds: list[Round] = []
        cursors: list[tuple] = []
    line, position, header, sessions, _ = state
    for i in range(len(cursors), len(starts)):
        cursors.append((line, position, header, sessions, len(rounds)))
        begin = starts[i]
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
        line += text.count("\n", position, begin)
        position = begin
        key = digest16(text_digest(text[begin:end].rstrip()), line.to_bytes(8, "little"),
                       b"" if header is None else pickle.dumps(header))  # most stretches have no header
        group, last, header, found = memo.get(STRETCH, key, lambda: _aider_round(text, begin, end, line, header))
        sessions += found
        if group:
            rounds.append(_aider_round_of(key, group, last, skipped + len(rounds) + 1, memo))
    newlines = line - 1 + text.count("\n", position)  # line: the number of the line at position
    memo.put(LAST_PARSE, digest16(source), _AiderParse(text, starts, tuple(cursors), tuple(rounds), skipped),
             2 * len(text))
    total = newlines + (0 if text.endswith("\n") or not text else 1)
    return SessionHistory(tuple(rounds), warnings, path, AIDER, sessions, total)


@dataclass(frozen=True)
class _AiderParse:
    """The last parse of a transcript: its text, where each round's stretch starts, and the
    parser's state before each start (line, position, header, sessions, rounds made); the
    requests before the first start left out (:data:`MAX_ROUNDS`)."""

    text: str
    starts: list[int]
    cursors: tuple[tuple, ...]
    rounds: tuple[Round, ...]
    skipped: int = 0


_HEADER = "\n# aider chat started at"


def _state_at_cut(text: str, starts: list[int], skipped: int) -> tuple:
    """The parser's state at request ``skipped`` (0-based) when the requests before it are left
    out: its line number, the session headers before it, and the header it inherits (one in the
    stretch just before it: a header ends a round and heads the next)."""
    cut = starts[skipped]
    sessions = text.count(_HEADER, 0, cut) + text.startswith(_HEADER[1:])
    found = text.rfind(_HEADER, starts[skipped - 1], cut)
    header = None
    if found >= 0:
        end = text.find("\n", found + 1)
        header = ("system", text[found + 3:end if end >= 0 else len(text)].rstrip(), text.count("\n", 0, found + 1) + 1)
    return text.count("\n", 0, cut) + 1, cut, header, sessions, 0


def _resume_point(prev: _AiderParse | None, text: str) -> tuple[_AiderParse, int] | None:
    """(the last parse, the index of its last stretch) when ``text`` is that parse's text with
    lines appended: every stretch before its last one is unchanged, and parsing goes on from
    there. None otherwise (another text, an edit, or a last line that was not finished)."""
    if prev is None or len(prev.starts) < 2 or not prev.text.endswith("\n") or not text.startswith(prev.text):
        return None
    return prev, len(prev.starts) - 1


def _prelude_state(text: str, starts: list[int]) -> tuple:
    """The parser's state at the first request: start-up output before it counts only for its
    session headers."""
    header, sessions = None, 0
    for kind, body, first, _ in _aider_events(text, 0, max(0, starts[0] - 1) if starts else len(text), 1):
        if kind == "header":
            sessions += 1
            header = ("system", body, first)
    return 1, 0, header, sessions, 0


def _user_run_starts(text: str) -> list[int]:
    """Where each request begins: each run of ``#### `` lines that is not only confirmation
    answers (:func:`is_confirmation_run`) opens a round."""
    first = _AIDER_FIRST.match(text)
    starts = [0] if first is not None and first.lastgroup == "user" and not _confirms(first.group()) else []
    return starts + _request_starts(text, first.end() if starts else 0)


def _request_starts(text: str, position: int) -> list[int]:
    """Where each run of ``#### `` lines after ``position`` (a newline before it) begins,
    leaving out the runs of confirmation answers."""
    return [m.start() + 1 for m in _USER_RUNS.finditer(text, position)
            if text.find(CONFIRM_OPTIONS, m.start(), m.end()) < 0 or not is_confirmation_run(m.group())]


#: What every aider confirmation question offers ("Add file to the chat? (Y)es/(N)o/(A)ll/… [Yes]: ").
CONFIRM_OPTIONS = "(Y)es/(N)o"


def is_confirmation_run(run: str) -> bool:
    """Whether a run of ``#### `` lines is only answers to aider's confirmation questions, each
    ``<question> (Y)es/(N)o… [<default>]: <answer>``: aider writes that as the user's input when an
    earlier "(A)ll" or "(S)kip all" answers the rest of a group of questions, so it is tool
    output, not a request."""
    for line in run.strip("\n").split("\n"):
        head, colon, answer = line[4:].strip().rpartition("]:")
        options = head.find(CONFIRM_OPTIONS)
        answer = answer.strip().replace("'", "")
        if not colon or options < 0 or head.rfind("[") < options or not (answer.isalpha() or not answer):
            return False
    return True


def _confirms(run: str) -> bool:
    """:func:`is_confirmation_run`, after a cheap test for the options every question offers."""
    return CONFIRM_OPTIONS in run and is_confirmation_run(run)


def _aider_events(text: str, begin: int, end: int, first_line: int) -> list[tuple[str, str, int, int]]:
    """(kind, content, first line, last line) of each run and assistant stretch of ``text[begin:end]``,
    whose first line is number ``first_line``; tool output across blank lines is one event.

    Line numbers follow from the newlines counted between two runs (each counted once)."""
    events: list[tuple[str, str, int, int]] = []
    append = events.append
    count, search = text.count, _NON_SPACE.search
    line = first_line  # the number of the line holding text[previous_end]
    previous_end = begin
    opening = _AIDER_FIRST.match(text, begin, end)
    matches = _AIDER_RUNS.finditer(text, opening.end() if opening else begin, end)
    for match in _chain((opening,), matches) if opening else matches:
        newline = match.start() - (match is opening)  # the newline before the run (none at the start)
        found = search(text, previous_end, newline)  # None for an empty range
        gap = count("\n", previous_end, newline + 1)
        if found is not None:  # the assistant's stretch between two runs
            append(_assistant_event(text, previous_end, newline, found.start(), line))
        kind = match.lastgroup
        block = match.group(kind)
        first = line + gap
        line = first + block.count("\n")
        if kind == "header":
            append((kind, block[2:].rstrip(), first, line))
        else:
            if kind == "user":  # the first line's prefix cut off, the others' substituted (a literal newline leads)
                body, prefix = block[5:] if block.startswith((" ", "\t"), 4) else block[4:], _USER_PREFIX
                if _confirms(block):
                    kind = "tool"  # replayed confirmation answers: aider's output, not a request
            else:
                body, prefix = block[2:] if block.startswith(" ", 1) else block[1:], _TOOL_PREFIX
            if "\n" in body:
                body = prefix.sub("\n", body).replace("  \n", "\n")
            body = body.rstrip()
            if kind == "tool" and found is None and events and events[-1][0] == "tool":
                _, before, start_line, _ = events[-1]  # tool output across blank lines: one message
                events[-1] = ("tool", before + "\n" * gap + body, start_line, line)
            else:
                append((kind, body, first, line))
        previous_end = match.end()
    found = search(text, previous_end, end)
    if found is not None:
        append(_assistant_event(text, previous_end, end, found.start(), line))
    return events


def _assistant_event(text: str, start: int, stop: int, non_space: int, line: int) -> tuple[str, str, int, int]:
    """The assistant's event of ``text[start:stop]`` (line ``line`` at ``start``), from the line of
    its first non-blank character ``non_space``."""
    line_start = text.rfind("\n", start, non_space) + 1 or start
    body = text[line_start:stop].rstrip()
    first = line + text.count("\n", start, line_start)
    last = first + body.count("\n")
    if "<think" in body or "<reasoning>" in body:
        body, first = without_reasoning(body, first)
    return "assistant", body, first, last


#: A reasoning block as aider writes it in a reply: ``<thinking-content-<hash>>`` (or a model's own
#: ``<think>``, ``<thinking>``, ``<reasoning>``) at the start of a line, up to its closing tag
#: (or the end of the reply, when the model was cut off while reasoning).
_REASONING = re.compile(r"^<(thinking-content-[0-9a-f]+|think|thinking|reasoning)>.*?(?:</\1>|\Z)",
                        re.S | re.M)


def without_reasoning(body: str, first: int) -> tuple[str, int]:
    """(``body`` without its reasoning blocks, the number of its first line): the model's
    scratch work is not what it answered; a reply that starts with one starts after it."""
    found = _REASONING.match(body)
    if found is not None:
        rest = _NON_SPACE.search(body, found.end())
        if rest is None:
            return "", first
        begin = max(found.end(), body.rfind("\n", 0, rest.start()) + 1)
        first += body.count("\n", 0, begin)
        body = body[begin:]
    return _REASONING.sub("", body).rstrip(), first


def _aider_round(text: str, begin: int, end: int, first_line: int, header):
    """One round's stretch parsed: (its messages as (role, content, line), its last line, the
    session header a later round inherits, how many session headers it holds). A session
    header ends the round: what follows it up to the next request is start-up output."""
    group: list[tuple[str, str, int]] = [header] if header is not None else []
    last = first_line
    header = None
    sessions = 0
    for kind, body, first, event_last in _aider_events(text, begin, end, first_line):
        if kind == "header":
            sessions += 1
            header = ("system", body, first)
            continue
        if kind == "user":
            last = event_last
        elif header is not None:
            continue
        if body.strip():
            group.append((kind, body, first))
            last = event_last
    return tuple(group), last, header, sessions


def _aider_round_of(key: bytes, group, last: int, index: int, memo: Memo) -> Round:
    """The Round of a parsed stretch (``key``: its digest) as round ``index``, its digest made of both."""
    digest = digest16(key, index.to_bytes(8, "little"))
    return memo.get(AIDER_ROUND, digest, lambda: _round_from(group, last, index, digest), persist=False)


def _round_from(group, last: int, index: int, digest: bytes) -> Round:
    messages = tuple([_message(role, body, index, first) for role, body, first in group])
    begin = next((line for role, _, line in group if role == "user"), group[0][2])
    return Round(index=index, messages=messages, lines=(begin, last), digest=round_digest_of(digest))


_MESSAGE_FIELDS = tuple(f.name for f in fields(Message))
_MESSAGE_TAIL = {f.name: f.default for f in fields(Message)[4:]}  # tool_calls, call_id, usage: their defaults


#: Whether Message is still the plain frozen dataclass _message fills directly (else: its constructor).
_PLAIN_MESSAGE = (_MESSAGE_FIELDS[:4] == ("role", "content", "round", "line") and not hasattr(Message, "__post_init__")
                  and all(v is not MISSING for v in _MESSAGE_TAIL.values()))


def _message(role: str, content: str, index: int, line: int) -> Message:
    """``Message(role, content, index, line)``, the same object (its fields in the same order),
    made without the frozen dataclass's ``__setattr__`` per field."""
    if not _PLAIN_MESSAGE:
        return Message(role, content, index, line)
    message = object.__new__(Message)
    message.__dict__.update(role=role, content=content, round=index, line=line, **_MESSAGE_TAIL)
    return message


_USER_LINE = r"####(?:[ \t][^\n]*)?(?![^\n])"
_TOOL_LINE = r">(?: [^\n]*)?(?![^\n])"  # "> text" or a bare ">"; ">>>>>>> REPLACE" is the assistant's
_AIDER_RUN = (
    r"(?:(?P<user>" + _USER_LINE + r"(?:\n" + _USER_LINE + r")*)"
    r"|(?P<tool>" + _TOOL_LINE + r"(?:\n" + _TOOL_LINE + r")*)"
    r"|(?P<header># aider chat started at[^\n]*))"
)
_AIDER_RUNS = re.compile(r"\n" + _AIDER_RUN)  # literal prefix: the engine jumps from newline to newline
_USER_RUNS = re.compile(r"\n" + _USER_LINE + r"(?:\n" + _USER_LINE + r")*")  # each run of "####" lines
_AIDER_FIRST = re.compile(_AIDER_RUN)  # the same at the very start of the file
_NON_SPACE = re.compile(r"\S")
_USER_PREFIX = re.compile(r"\n####[ \t]?")
_TOOL_PREFIX = re.compile(r"\n> ?")

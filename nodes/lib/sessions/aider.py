"""aider's ``.aider.chat.history.md``: ``# aider chat started at`` opens a session, ``#### `` lines
are the user's turn (but for aider's replayed confirmation answers), ``> `` lines are tool output,
the rest is the assistant (its reasoning blocks left out). Parsed line-oriented, one stretch per
round through the memo, so a transcript that only grew parses just its new rounds."""

from __future__ import annotations

import pickle
import re
from dataclasses import MISSING, dataclass, fields
from itertools import chain as _chain
from typing import NamedTuple

from ...types import Message, Round
from ..digest import digest16, round_digest_of, text_digest
from ..memo import NO_MEMO, Memo
from ..regex import lazy_regex
from .history import AIDER, LAST_PARSE, MAX_ROUNDS, ROUNDS, STRETCH, SessionHistory, rounds_cap_warning


def parse_aider(text: str, path: str, memo: Memo = NO_MEMO, digest: bytes | None = None,
                grew_from: tuple[int, bytes] | None = None) -> SessionHistory:
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
    its first line and the session header it inherits (kept in the process only). The last
    parse of the transcript (:class:`_AiderParse`, by its path) is kept in the ``memo`` and
    written with a cached build: when this process parsed the text before it grew, the
    stretches before the last one are not even cut and hashed again, and only the new ones are
    parsed; after an earlier process, the stretches of the last run of rounds not yet complete
    (:data:`ROUNDS_CHUNK`) are parsed again too. Line-oriented without a Python loop per line:
    compiled regexes with a literal newline prefix find the runs of ``#### `` and ``> `` lines
    and the session headers; the text between two runs is the assistant's.

    Only the newest :data:`MAX_ROUNDS` requests are parsed (with one warning): the stretches
    before them are not cut or hashed, their lines and session headers only counted, and the
    rounds kept are numbered as if each request left out made a round.

    ``digest``: the text's :func:`..digest.text_digest` when the caller knows it (else it is
    computed: the last parse keeps it); ``grew_from``: the length and digest of a text this one
    begins with, when the caller knows it (a transcript read again after it grew,
    nodes/lib/grown.py): the last parse of that text is resumed without comparing the texts.
    """
    source = digest16(path.encode("utf-8", "surrogatepass"))
    resumed = _resume_point(memo.peek(LAST_PARSE, source), text, memo, grew_from)
    start = _resumed_start(text, resumed)
    if start is None or len(start.starts) > MAX_ROUNDS:
        start = _fresh_start(text, path)
    walked = _walked_stretches(text, start, memo)
    newlines = walked.line - 1 + text.count("\n", walked.position)  # line: the number of the line at position
    rounds = tuple(walked.rounds)
    changed = resumed is None or resumed[0].length != len(text)  # else: the parse read or written before
    chunks = _round_chunks(rounds, start.kept, memo) if changed else resumed[0].chunks
    parsed = _AiderParse(text, len(text), digest or text_digest(text), text.endswith("\n"), start.starts,
                         tuple(walked.cursors), chunks, start.skipped, rounds)
    # written when what it pickles as changed (a run of rounds completed, or another text)
    memo.put(LAST_PARSE, source, parsed, 4 * len(text), persist=resumed is None or chunks != resumed[0].chunks)
    total = newlines + (0 if text.endswith("\n") or not text else 1)
    return SessionHistory(rounds, start.warnings, path, AIDER, walked.sessions, total)


class _Start(NamedTuple):
    """Where a parse starts: the stretches' starts (the requests kept), the parser's state at the
    first stretch still to parse (line, position, header, sessions, rounds made), the cursors and
    rounds of the stretches before it, the requests left out, the runs of round keys already
    made, and the warnings."""

    starts: list
    state: tuple
    cursors: list
    rounds: list
    skipped: int
    kept: tuple
    warnings: tuple[str, ...]


def _resumed_start(text: str, resumed) -> _Start | None:
    """The :class:`_Start` of a text that grew from the last parse (:func:`_resume_point`): its
    stretches up to the resume point kept, the requests after it found again; None without one,
    or when a request no longer begins at the resume point (the text after it was edited: the
    stretch before it may now run on)."""
    if resumed is None:
        return None
    prev, k, prev_rounds = resumed
    state, found = prev.cursors[k], _request_starts(text, prev.starts[k] - 1)
    if not found or found[0] != prev.starts[k]:
        return None
    return _Start(prev.starts[:k] + found, state, list(prev.cursors[:k]),
                  list(prev_rounds[:state[-1]]), prev.skipped, prev.chunks[:state[-1] // ROUNDS_CHUNK], ())


def _fresh_start(text: str, path: str) -> _Start:
    """The :class:`_Start` of a parse from the beginning: the newest :data:`MAX_ROUNDS` requests
    kept (a warning when some are left out), nothing parsed yet."""
    starts = _user_run_starts(text)
    skipped = max(0, len(starts) - MAX_ROUNDS)
    state = _prelude_state(text, starts) if not skipped else _state_at_cut(text, starts, skipped)
    warnings = (rounds_cap_warning(path, len(starts), state[0]),) if skipped else ()
    return _Start(starts[skipped:], state, [], [], skipped, (), warnings)


class _Walked(NamedTuple):
    """What parsing the stretches left: the rounds and cursors, and the parser's line, position
    and session count at the end."""

    rounds: list
    cursors: list
    line: int
    position: int
    sessions: int


def _walked_stretches(text: str, start: _Start, memo: Memo) -> _Walked:
    """The stretches of ``text`` from ``start`` on parsed, each through the memo by the hash of
    its text, first line and inherited header."""
    starts, skipped, rounds, cursors = start.starts, start.skipped, start.rounds, start.cursors
    line, position, header, sessions, _ = start.state
    for i in range(len(cursors), len(starts)):
        cursors.append((line, position, header, sessions, len(rounds)))
        begin = starts[i]
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
        line += text.count("\n", position, begin)
        position = begin
        key = digest16(text_digest(text[begin:end].rstrip()), line.to_bytes(8, "little"),
                       b"" if header is None else pickle.dumps(header))  # most stretches have no header
        stretch = memo.get(STRETCH, key, lambda: _aider_round(text, begin, end, line, header), persist=False,
                           size=_STRETCH_BYTES + 2 * (end - begin))
        group, last, header, found = stretch
        sessions += found
        if group:
            rounds.append(_aider_round_of(key, group, last, skipped + len(rounds) + 1))
    return _Walked(rounds, cursors, line, position, sessions)


#: What a parsed stretch or a round costs in the memo beyond twice its text's length (its
#: tuples, or its messages).
_STRETCH_BYTES = 512
#: Rounds a run of the last parse holds: a complete run never changes as the transcript grows,
#: so it is written once; the rounds after the last complete one are kept in the process only.
ROUNDS_CHUNK = 64


@dataclass(frozen=True)
class _AiderParse:
    """The last parse of a transcript: its text's length and digest (and the text itself in
    this process), whether it ended a line, where each round's stretch starts, the parser's
    state before each start (line, position, header, sessions, rounds made), the memo keys of
    its complete runs of :data:`ROUNDS_CHUNK` rounds (:func:`_round_chunks`), the requests
    before the first start left out (:data:`MAX_ROUNDS`), and, in this process, its rounds.

    Kept in the memo by the digest of the transcript's path and written, as it was at the end of
    its last complete run (:meth:`through_last_run`), with the build that completed a run or
    parsed another text (one row a transcript, replaced; its complete runs of rounds beside it,
    each written once): a new process given the transcript with a round appended parses only
    the new round and the rounds after the last complete run."""

    text: str | None
    length: int
    digest: bytes
    finished: bool  # the text ends with a newline (its last line is whole)
    starts: list[int]
    cursors: tuple[tuple, ...]
    chunks: tuple[bytes, ...]
    skipped: int = 0
    rounds: tuple[Round, ...] | None = None

    def __reduce__(self):
        """Pickled as the parse of the text up to the end of its last complete run of rounds
        (:meth:`through_last_run`), without its text and rounds: what it holds changes only when
        a run completes, so a transcript that grows by a round leaves the written row as it is."""
        kept = self.through_last_run()
        return (_AiderParse, (None, kept.length, kept.digest, kept.finished, kept.starts, kept.cursors, kept.chunks,
                              kept.skipped))

    def through_last_run(self) -> "_AiderParse":
        """This parse cut where the stretch after its last complete run of :data:`ROUNDS_CHUNK`
        rounds begins (itself when that is its end, or its text is not held): the text before
        that stretch, its length and digest, its starts up to that stretch (a new process goes
        on from there) and its cursors."""
        made = len(self.chunks) * ROUNDS_CHUNK
        k = next((i for i, cursor in enumerate(self.cursors) if cursor[-1] == made), None)
        if self.text is None or k is None:
            return self
        head = self.text[:self.starts[k]]
        return _AiderParse(None, len(head), text_digest(head), True, self.starts[:k + 1], self.cursors[:k + 1],
                           self.chunks, self.skipped)

    def begins(self, text: str, grew_from: tuple[int, bytes] | None = None) -> bool:
        """Whether ``text`` starts with this parse's text: known from the caller (``grew_from``,
        the length and digest of a text ``text`` begins with, is this parse's), else compared,
        or, read from the database, hashed (the digest of ``text``'s first :attr:`length`
        characters)."""
        if grew_from == (self.length, self.digest):
            return True
        if self.text is not None:
            return text.startswith(self.text)
        return len(text) >= self.length and text_digest(text[:self.length]) == self.digest


def _round_chunks(rounds: tuple[Round, ...], kept: tuple[bytes, ...], memo: Memo) -> tuple[bytes, ...]:
    """The memo keys of the complete runs of :data:`ROUNDS_CHUNK` of ``rounds``, each run kept in
    the memo (kind :data:`ROUNDS`, written with the build when new); the first ``len(kept)``
    runs are the last parse's, unchanged. The rounds after the last complete run are not kept:
    they change with every round appended (a row of up to 63 rounds, written again by each
    build), and a new process parses their stretches again instead."""
    keys = list(kept)
    for start in range(len(kept) * ROUNDS_CHUNK, len(rounds) - ROUNDS_CHUNK + 1, ROUNDS_CHUNK):
        run = rounds[start:start + ROUNDS_CHUNK]
        key = digest16(b"rounds", b"".join([r.digest for r in run]))  # 16 bytes each: the join is unambiguous
        memo.get(ROUNDS, key, lambda run=run: run,
                 size=sum(_STRETCH_BYTES + 2 * sum(len(m.content) for m in r.messages) for r in run))
        keys.append(key)
    return tuple(keys)


def _rounds_of(parse: _AiderParse, memo: Memo) -> tuple[Round, ...] | None:
    """The rounds of a last parse: kept with it in this process (all), else its complete runs
    read from the memo; None when a run is no longer there."""
    if parse.rounds is not None:
        return parse.rounds
    runs = [memo.peek(ROUNDS, key) for key in parse.chunks]
    return None if any(run is None for run in runs) else tuple(_chain.from_iterable(runs))


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


def _resume_point(prev: _AiderParse | None, text: str, memo: Memo,
                  grew_from: tuple[int, bytes] | None = None) -> tuple[_AiderParse, int, tuple] | None:
    """(the last parse, the index of the stretch to go on from, its rounds) when ``text`` is
    that parse's text with lines appended: every stretch before its last one is unchanged, and
    parsing goes on from the last one, or, when only the complete runs of its rounds are known
    (read by a new process), from the first stretch after them (``grew_from``: see
    :meth:`_AiderParse.begins`). None otherwise (another text, an edit, a last line that was not
    finished, or rounds the memo no longer holds)."""
    if not isinstance(prev, _AiderParse) or len(prev.starts) < 2 or not prev.finished:
        return None
    if not prev.begins(text, grew_from):
        return None
    rounds = _rounds_of(prev, memo)
    if rounds is None:
        return None
    k = len(prev.starts) - 1
    while prev.cursors[k][-1] > len(rounds):  # the stretch of a round not known: parsed again
        k -= 1
    return prev, k, rounds


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
            kind, body = run_body(kind, block)
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


def run_body(kind: str, block: str) -> tuple[str, str]:
    """(kind, text) of a run of ``#### `` (kind "user") or ``> `` lines (kind "tool"): each
    line's prefix cut off, trailing spaces aider adds to a line left out. A user run that only
    replays confirmation answers (:func:`is_confirmation_run`) is aider's output: kind "tool"."""
    if kind == "user":  # the first line's prefix cut off, the others' substituted (a literal newline leads)
        body, prefix = block[5:] if block.startswith((" ", "\t"), 4) else block[4:], _USER_PREFIX
        if _confirms(block):
            kind = "tool"  # replayed confirmation answers: aider's output, not a request
    else:
        body, prefix = block[2:] if block.startswith(" ", 1) else block[1:], _TOOL_PREFIX
    if "\n" in body:
        body = prefix.sub("\n", body).replace("  \n", "\n")
    return kind, body.rstrip()


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
_REASONING = lazy_regex(r"^<(thinking-content-[0-9a-f]+|think|thinking|reasoning)>.*?(?:</\1>|\Z)",
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


def _aider_round_of(key: bytes, group, last: int, index: int) -> Round:
    """The Round of a parsed stretch (``key``: its digest) as round ``index``, its digest made
    of both (made again when the stretch is parsed again: cheaper than a memo entry)."""
    return _round_from(group, last, index, round_digest_of(key, index.to_bytes(8, "little")))


def _round_from(group, last: int, index: int, digest: bytes) -> Round:
    """Round ``index`` of a parsed stretch, carrying ``digest`` (:func:`..digest.round_digest_of`)."""
    messages = tuple([_message(role, body, index, first) for role, body, first in group])
    begin = next((line for role, _, line in group if role == "user"), group[0][2])
    return Round(index=index, messages=messages, lines=(begin, last), source_digest=digest)


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
_AIDER_RUNS = lazy_regex(r"\n" + _AIDER_RUN)  # literal prefix: the engine jumps from newline to newline
_USER_RUNS = lazy_regex(r"\n" + _USER_LINE + r"(?:\n" + _USER_LINE + r")*")  # each run of "####" lines
_AIDER_FIRST = lazy_regex(_AIDER_RUN)  # the same at the very start of the file
_NON_SPACE = lazy_regex(r"\S")
_USER_PREFIX = lazy_regex(r"\n####[ \t]?")
_TOOL_PREFIX = lazy_regex(r"\n> ?")

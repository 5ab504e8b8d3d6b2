"""Session transcripts: parse them into rounds, render rounds verbatim, summarise old rounds.

Two formats are read (LAYOUT.md):

* the JSON Lines ``session.log`` (one message a line: ``role``, ``content``, optional
  ``round``, ``tool_calls`` and ``call_id``); a malformed line is a warning with its line
  number and is skipped;
* aider's ``.aider.chat.history.md``: ``# aider chat started at`` opens a session,
  ``#### `` lines are the user's turn (but for aider's replayed confirmation answers),
  ``> `` lines are tool output, the rest is the assistant (its reasoning blocks left out).

A round is one user request and everything up to the next one. A tool call and its results
are one unit: rendering shows each result right under its call, and the one-line summary of a
round names a call only together with its result. Everything here is pure, deterministic and
line-oriented (no model call, no token counting), so the 4 MB aider transcript of the corpus
parses and compacts in a fraction of one tiktoken pass over it. The truncation stage reuses
:func:`render_rounds`, :func:`round_summary` and :func:`compact_history`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import MISSING, dataclass, fields
from itertools import chain as _chain
from typing import Any, Iterable, Mapping, Sequence

import pickle

from .digest import digest16, digested, round_digest, round_digest_of, text_digest
from .memo import NO_MEMO, Memo
from .quote import capped_warnings, quoted
from .regex import lazy_regex
from ..types import Message, Round

JSONL = "jsonl"
AIDER = "aider"

_ROLES = frozenset(("user", "assistant", "tool", "system"))

#: Rounds of a transcript that are parsed: the newest ones, the older ones left out with one
#: warning. A round's summary line is at least ~15 tokens, so no context window holds more;
#: past it, a build's time and memory stop growing with the transcript.
MAX_ROUNDS = 10_000
#: Lines of a JSON Lines log that are read: the newest ones, with one warning (the memo keeps
#: the reading of each line, so a log that grows reads only its new lines).
MAX_LOG_LINES = 200_000

#: The memo kinds of the values made from a transcript (see nodes/lib/memo.py).
LINE, STRETCH, LAST_PARSE, SUMMARY = "line", "aider-stretch", "aider-last-parse", "summary"
ROUNDS = "aider-rounds"  # a run of the rounds of a last parse (:func:`_round_chunks`)


@dataclass(frozen=True)
class SessionHistory:
    """The parsed rounds of one session file, with the warnings met and where it came from."""

    rounds: tuple[Round, ...] = ()
    warnings: tuple[str, ...] = ()
    source: str | None = None  # the file path; None when there is no session
    format: str | None = None  # "jsonl" | "aider"
    sessions: int = 0  # aider: how many "# aider chat started" headers; jsonl: 1
    total_lines: int = 0

    @property
    def message_count(self) -> int:
        return sum(len(r.messages) for r in self.rounds)


# ----------------------------------------------------------------------------- detection


def detect_format(path: str, text: str) -> str:
    """``aider`` for an aider chat history (by name or content), else ``jsonl``."""
    name = os.path.basename(path)
    if name.endswith(".md") or "aider" in name:
        return AIDER
    head = text.lstrip()[:1]
    if head == "{":
        return JSONL
    if "# aider chat started at" in text[:65536] or "\n#### " in text[:65536]:
        return AIDER
    return JSONL


def parse_session(text: str, path: str, fmt: str | None = None, memo: Memo = NO_MEMO) -> SessionHistory:
    """Parse a session file of either format (``fmt`` None: detect it); what ``memo`` keeps
    (the reading of a line, the parse of a round's stretch) is not made again."""
    fmt = fmt or detect_format(path, text)
    if fmt == AIDER:
        return parse_aider(text, path, memo)
    return parse_jsonl(text, path, memo)


# ----------------------------------------------------------------------------- JSON Lines


def _text_of(content: Any) -> str:
    """Message content as text: strings as they are, OpenAI-style parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                value = part.get("text", part.get("content", ""))
                parts.append(value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True)


def _normalise_call(call: Any, fallback_id: str) -> dict | None:
    """A tool call as {"id", "name", "arguments"} (OpenAI's nested "function" form too)."""
    if not isinstance(call, dict):
        return None
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = call.get("name", function.get("name", "tool"))
    arguments = call.get("arguments", function.get("arguments", call.get("input", "")))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, sort_keys=True)
    call_id = call.get("id") or call.get("call_id") or fallback_id
    return {"id": str(call_id), "name": str(name), "arguments": arguments}


def _message_of(raw: str, number: int, path: str, warnings: list[str]) -> tuple[Any, Message | None]:
    """(its ``round`` value, its Message) of one log line; None, with a warning, for a bad line."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        warnings.append(f"{path}:{number}: malformed JSON line skipped ({msg})")
        return None, None
    if not isinstance(obj, dict):
        warnings.append(f"{path}:{number}: not a JSON object; line skipped")
        return None, None
    role = obj.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        warnings.append(
            f"{path}:{number}: 'role' must be one of user, assistant, tool, system (got {quoted(role)}); line skipped"
        )
        return None, None
    round_key = obj.get("round")
    if isinstance(round_key, (list, dict)):
        warnings.append(f"{path}:{number}: 'round' must be a number or a string; ignored")
        round_key = None
    calls = ()
    raw_calls = obj.get("tool_calls") or ()
    if raw_calls and not isinstance(raw_calls, list):
        warnings.append(f"{path}:{number}: 'tool_calls' must be a list; calls ignored")
        raw_calls = ()
    if raw_calls:
        normalised = [_normalise_call(c, f"L{number}.{i}") for i, c in enumerate(raw_calls, 1)]
        if any(c is None for c in normalised):
            warnings.append(f"{path}:{number}: a tool call that is not an object was ignored")
        calls = tuple(c for c in normalised if c is not None)
    call_id = obj.get("call_id", obj.get("tool_call_id"))
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    message = Message(
        role=role,
        content=_text_of(obj.get("content")),
        round=0,  # set by parse_jsonl, once rounds are numbered
        line=number,
        tool_calls=calls,
        call_id=None if call_id is None else str(call_id),
        usage=usage,
    )
    return round_key, message


def _read_line(raw: str, number: int, path: str) -> tuple[Any, Message | None, tuple[str, ...]]:
    """(its ``round`` value, its Message or None, warnings) of one log line, read once per
    process while it stays the same line at the same place (a log that grew reads its new lines)."""
    line_warnings: list[str] = []
    try:
        round_key, message = _message_of(raw, number, path, line_warnings)
    except RecursionError:  # json.loads / json.dumps of a value nested ~1000 levels deep
        return None, None, (f"{path}:{number}: JSON nested too deeply to read; line skipped "
                            "(a session message needs no more than a few levels of nesting)",)
    return round_key, message, tuple(line_warnings)


def parse_jsonl(text: str, path: str, memo: Memo = NO_MEMO) -> SessionHistory:
    """Rounds of a JSON Lines session log; bad lines become warnings with their line number.

    A round is the messages sharing a ``round`` value; without one, a new round starts at
    each user message. A tool result whose call sits in an earlier round joins that round, so
    a call and its results are never split across rounds.

    Only the newest :data:`MAX_LOG_LINES` lines are read and the newest :data:`MAX_ROUNDS`
    rounds kept, each cap with one warning; lines keep their line numbers, and the rounds kept
    past the round cap their numbers (past the line cap, rounds count from the first line
    read); warnings about single lines are capped as every build's are
    (:func:`~ctxengine.nodes.lib.quote.capped_warnings`: a few of each kind, then "... and N
    more like this"), so a log of bad lines never holds a warning per line.
    """
    warnings: list[str] = []
    groups: list[list[Message]] = []
    current_key: Any = object()
    auto = 0
    offset, skipped_lines = newest_lines_start(text, MAX_LOG_LINES)
    lines = text[offset:].split("\n")
    where = pickle.dumps((JSONL, path))
    for number, raw in enumerate(lines, skipped_lines + 1):
        if not raw or raw.isspace():
            continue
        round_key, message, line_warnings = memo.get(
            LINE, digest16(where, number.to_bytes(8, "little"), raw.encode("utf-8", "surrogatepass")),
            lambda: _read_line(raw, number, path), persist=False)
        warnings.extend(line_warnings)
        if message is None:
            continue
        role = message.role
        key = round_key
        if key is None:
            if role == "user":
                auto += 1
                key = ("auto", auto)
            else:
                key = current_key
        if not groups or key != current_key:
            if role == "user" and groups and round_key is None and all(m.role != "user" for m in groups[-1]):
                current_key = key  # lead-in messages (a system prompt) join the first request's round
            else:
                groups.append([])
                current_key = key
        groups[-1].append(message)

    # A tool result follows its call into the call's round.
    owner: dict[str, int] = {}
    moved: list[list[Message]] = [[] for _ in groups]
    for gi, group in enumerate(groups):
        for message in group:
            target = gi
            if message.role == "tool" and message.call_id is not None and message.call_id in owner:
                target = min(gi, owner[message.call_id])
            moved[target].append(message)
            for call in message.tool_calls:
                owner.setdefault(call["id"], gi)
    # Warn about each result whose call is nowhere in the log.
    for group in moved:
        for message in group:
            if message.role == "tool" and message.call_id is not None and message.call_id not in owner:
                warnings.append(
                    f"{path}:{message.line}: tool result for call {quoted(message.call_id)} has no matching tool call"
                )
    kept = [g for g in moved if g]
    skipped_rounds = max(0, len(kept) - MAX_ROUNDS)
    rounds = number_rounds(kept[skipped_rounds:], skipped_rounds + 1)
    caps = []
    if skipped_lines:
        caps.append(lines_cap_warning(path, skipped_lines))
    if skipped_rounds:
        caps.append(rounds_cap_warning(path, len(kept), rounds[0].lines[0] if rounds[0].lines else skipped_lines + 1))
    return SessionHistory(tuple(rounds), tuple(caps) + capped_warnings(warnings, source=path), path, JSONL,
                          1 if rounds else 0, skipped_lines + len(lines))


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
    rounds = []
    for index, group in enumerate(groups, first):
        messages = tuple(
            m if m.round == index else Message(m.role, m.content, index, m.line, m.tool_calls, m.call_id, m.usage)
            for m in group
        )
        numbers = [m.line for m in messages if m.line is not None]
        lines = (min(numbers), max(numbers)) if numbers else None
        rounds.append(digested(Round(index=index, messages=messages, lines=lines)))
    return rounds


# ----------------------------------------------------------------------------- aider


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
    its first line and the session header it inherits (kept in the process only). The last
    parse of the transcript (:class:`_AiderParse`, by its path) is kept in the ``memo`` and
    written with a cached build: when this process or an earlier build parsed the text before
    it grew, the stretches before the last one are not even cut and hashed again, and only the
    new ones are parsed. Line-oriented without a Python loop per line: compiled regexes with a
    literal newline prefix find the runs of ``#### `` and ``> `` lines and the session headers;
    the text between two runs is the assistant's.

    Only the newest :data:`MAX_ROUNDS` requests are parsed (with one warning): the stretches
    before them are not cut or hashed, their lines and session headers only counted, and the
    rounds kept are numbered as if each request left out made a round.
    """
    source = digest16(path.encode("utf-8", "surrogatepass"))
    resumed = _resume_point(memo.peek(LAST_PARSE, source), text, memo)
    warnings: tuple[str, ...] = ()
    tail, kept = None, ()
    if resumed is not None:
        prev, k, prev_rounds = resumed
        starts = prev.starts[:k] + _request_starts(text, prev.starts[k] - 1)
        state, cursors = prev.cursors[k], list(prev.cursors[:k])
        rounds = list(prev_rounds[:state[-1]])
        skipped, tail, kept = prev.skipped, prev.tail, prev.chunks[:state[-1] // ROUNDS_CHUNK]
    if resumed is None or len(starts) > MAX_ROUNDS:
        starts = _user_run_starts(text)
        skipped = max(0, len(starts) - MAX_ROUNDS)
        state = _prelude_state(text, starts) if not skipped else _state_at_cut(text, starts, skipped)
        if skipped:
            warnings = (rounds_cap_warning(path, len(starts), state[0]),)
        starts = starts[skipped:]
        rounds: list[Round] = []
        cursors: list[tuple] = []
        tail, kept = None, ()
    line, position, header, sessions, _ = state
    for i in range(len(cursors), len(starts)):
        cursors.append((line, position, header, sessions, len(rounds)))
        begin = starts[i]
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
        line += text.count("\n", position, begin)
        position = begin
        key = digest16(text_digest(text[begin:end].rstrip()), line.to_bytes(8, "little"),
                       b"" if header is None else pickle.dumps(header))  # most stretches have no header
        if tail is not None and tail[0] == key:  # the last parse's last stretch, unchanged
            stretch = tail[1]
        else:
            stretch = memo.get(STRETCH, key, lambda: _aider_round(text, begin, end, line, header), persist=False,
                               size=_STRETCH_BYTES + 2 * (end - begin))
        tail = (key, stretch)
        group, last, header, found = stretch
        sessions += found
        if group:
            rounds.append(_aider_round_of(key, group, last, skipped + len(rounds) + 1))
    newlines = line - 1 + text.count("\n", position)  # line: the number of the line at position
    rounds = tuple(rounds)
    changed = resumed is None or resumed[0].length != len(text)  # else: the parse read or written before
    parsed = _AiderParse(text, len(text), text_digest(text), text.endswith("\n"), starts, tuple(cursors),
                         _round_chunks(rounds, kept, memo) if changed else prev.chunks, skipped, tail, rounds)
    memo.put(LAST_PARSE, source, parsed, 4 * len(text), persist=changed)
    total = newlines + (0 if text.endswith("\n") or not text else 1)
    return SessionHistory(rounds, warnings, path, AIDER, sessions, total)


#: What a parsed stretch or a round costs in the memo beyond twice its text's length (its
#: tuples, or its messages).
_STRETCH_BYTES = 512
#: Rounds a run of the last parse holds: the runs before the last one never change as the
#: transcript grows, so a build writes the last run only (at most this many rounds).
ROUNDS_CHUNK = 64


@dataclass(frozen=True)
class _AiderParse:
    """The last parse of a transcript: its text's length and digest (and the text itself in
    this process), whether it ended a line, where each round's stretch starts, the parser's
    state before each start (line, position, header, sessions, rounds made), the memo keys of
    its rounds in runs of :data:`ROUNDS_CHUNK` (:func:`_round_chunks`), the requests before the
    first start left out (:data:`MAX_ROUNDS`), its last stretch (its key and what it parsed to:
    the one stretch a grown text parses again, most often unchanged), and, in this process, its
    rounds.

    Kept in the memo by the digest of the transcript's path and written with the build that
    changed it (one row a transcript, replaced by the next build that parsed it; its runs of
    rounds beside it, each written once): a new process given the transcript with a round
    appended parses only the new round."""

    text: str | None
    length: int
    digest: bytes
    finished: bool  # the text ends with a newline (its last line is whole)
    starts: list[int]
    cursors: tuple[tuple, ...]
    chunks: tuple[bytes, ...]
    skipped: int = 0
    tail: tuple[bytes, tuple] | None = None
    rounds: tuple[Round, ...] | None = None

    def __reduce__(self):
        """Pickled without its text and rounds (their digest, and the keys of the runs of rounds)."""
        return (_AiderParse, (None, self.length, self.digest, self.finished, self.starts, self.cursors, self.chunks,
                              self.skipped, self.tail))

    def begins(self, text: str) -> bool:
        """Whether ``text`` starts with this parse's text (compared, or, read from the database,
        hashed: the digest of ``text``'s first :attr:`length` characters)."""
        if self.text is not None:
            return text.startswith(self.text)
        return len(text) >= self.length and text_digest(text[:self.length]) == self.digest


def _round_chunks(rounds: tuple[Round, ...], kept: tuple[bytes, ...], memo: Memo) -> tuple[bytes, ...]:
    """The memo keys of ``rounds`` in runs of :data:`ROUNDS_CHUNK`, each run kept in the memo
    (kind :data:`ROUNDS`, written with the build when new); the first ``len(kept)`` runs are the
    last parse's, unchanged."""
    keys = list(kept)
    for start in range(len(kept) * ROUNDS_CHUNK, len(rounds), ROUNDS_CHUNK):
        run = rounds[start:start + ROUNDS_CHUNK]
        key = digest16(b"rounds", b"".join([r.digest for r in run]))  # 16 bytes each: the join is unambiguous
        memo.get(ROUNDS, key, lambda run=run: run,
                 size=sum(_STRETCH_BYTES + 2 * sum(len(m.content) for m in r.messages) for r in run))
        keys.append(key)
    return tuple(keys)


def _rounds_of(parse: _AiderParse, memo: Memo) -> tuple[Round, ...] | None:
    """The rounds of a last parse: kept with it in this process, else its runs read from the
    memo; None when a run is no longer there."""
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


def _resume_point(prev: _AiderParse | None, text: str, memo: Memo) -> tuple[_AiderParse, int, tuple] | None:
    """(the last parse, the index of its last stretch, its rounds) when ``text`` is that
    parse's text with lines appended: every stretch before its last one is unchanged, and
    parsing goes on from there. None otherwise (another text, an edit, a last line that was not
    finished, or rounds the memo no longer holds)."""
    if not isinstance(prev, _AiderParse) or len(prev.starts) < 2 or not prev.finished or not prev.begins(text):
        return None
    rounds = _rounds_of(prev, memo)
    return None if rounds is None else (prev, len(prev.starts) - 1, rounds)


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
    """Round ``index`` of a parsed stretch, carrying ``digest`` (:func:`.digest.round_digest_of`)."""
    messages = tuple([_message(role, body, index, first) for role, body, first in group])
    begin = next((line for role, _, line in group if role == "user"), group[0][2])
    return Round(index=index, messages=messages, lines=(begin, last), digest=digest)


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


# ----------------------------------------------------------------------------- tool units


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


# ----------------------------------------------------------------------------- rendering


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def render_round(round_: Round) -> str:
    """One round verbatim: each message under its role, each tool result right under its call."""
    lines_note = f" · lines {round_.lines[0]}-{round_.lines[1]}" if round_.lines else ""
    out = [f"### Round {round_.index}{lines_note}"]
    call_ids = {str(c.get("id")) for m in round_.messages for c in m.tool_calls}
    results: dict[str, list[Message]] = {}
    for message in round_.messages if call_ids else ():  # (an aider round has no calls)
        if message.role == "tool" and message.call_id is not None and message.call_id in call_ids:
            results.setdefault(message.call_id, []).append(message)
    for message in round_.messages:
        if message.role == "tool" and message.call_id is not None and message.call_id in call_ids:
            continue  # shown under its call
        if message.role == "system":
            out.append(f"[session] {message.content}")
            continue
        if message.role == "tool":
            label = f"[tool output {message.call_id}]" if message.call_id else "[tool output]"
            out.append(label)
            out.append(message.content)
            continue
        if message.content:
            out.append(f"[{message.role}]")
            out.append(message.content)
        for call in message.tool_calls:
            call_id = str(call.get("id"))
            out.append(f"[tool call {call_id}] {call.get('name', 'tool')}: {call.get('arguments', '')}")
            found = results.get(call_id)
            if not found:
                out.append(f"[tool result {call_id}] (no result recorded)")
            for result in found or ():
                out.append(f"[tool result {call_id}]")
                out.append(_indent(result.content) if result.content else "    (empty)")
    return "\n".join(out)


def render_rounds(rounds: Iterable[Round]) -> str:
    """The rounds verbatim, oldest first, separated by blank lines."""
    return "\n\n".join(render_round(r) for r in rounds)


# ----------------------------------------------------------------------------- summaries


def _alternation_trie(words: Sequence[str]) -> str:
    """A regex matching exactly ``words`` (plain letters), factored by their leading characters:
    ``["py", "pyi", "php"]`` gives ``p(?:y(?:i)?|hp)``."""
    tails: dict[str, list[str]] = {}
    for word in words:
        tails.setdefault(word[:1], []).append(word[1:])
    branches = [re.escape(head) + _alternation_trie(rest) for head, rest in sorted(tails.items()) if head]
    if not branches:
        return ""
    if "" not in tails and len(branches) == 1:
        return branches[0]
    return "(?:" + "|".join(branches) + ")" + ("?" if "" in tails else "")


_EXT = (
    r"py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|kts|swift|c|h|cc|cpp|hpp|cs|rb|php|scala|sh|bash|zsh|"
    r"sql|md|mdx|rst|txt|toml|yaml|yml|json|jsonl|ini|cfg|conf|lock|html|css|scss|vue|svelte|"
    r"dart|lua|ex|exs|erl|hs|ml|r|jl|proto|graphql|tf|xml|gradle|csv|ipynb|env|log"
)
# Paths are found from their extension (a regex with a literal "." prefix, which the regex
# engine searches for fast) and grown backwards over path characters: a regex that starts with
# a character class would be tried at every position of a 4 MB transcript.
# The alternation is factored by leading letters (a trie), so a "." that starts no extension
# costs one character test, not sixty.
_EXTENSION = lazy_regex(r"\.(?:" + _alternation_trie(_EXT.split("|")) + r")(?![\w-])")
_PATH_CHARS_BACK = lazy_regex(r"[\w./~-]*")
_APPLIED = lazy_regex(r"\n(?:Applied edit to|Creating empty file|Wrote) ([^\n]+)")
_SEARCH_BLOCK = lazy_regex(r"\n<<<<<<< SEARCH")
_COMMIT = lazy_regex(r"\nCommit ([0-9a-f]{7,40}) ([^\n]+)")
# Test results: keywords found with a fast alternation, then widened to their line.
_TEST_KEY = lazy_regex(
    r"passed|failed|Failed|Passed|FAILED|PASSED|ERROR|Error|Traceback|exit code|Ran \d+ test|\nOK\b"
)
_FILLER = frozenset(
    ("certainly", "sure", "okay", "ok", "yes", "alright", "great", "understood", "got it", "absolutely", "of course")
)
_SENTENCE_END = lazy_regex(r"(?<=[.!?])\s")

_MAX_FILES = 6
_MAX_TESTS = 2
_MAX_CALLS = 3
_MAX_SCAN = 200_000  # characters of one message scanned for paths and test results


def _first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped; past 50 blank lines, all the rest, stripped."""
    found = _NON_SPACE.search(text)
    if found is None:
        return ""
    start = text.rfind("\n", 0, found.start()) + 1
    if start and text.count("\n", 0, start) >= 50:  # the first 50 lines are blank: the rest is one piece
        return text.split("\n", 50)[-1].strip()
    end = text.find("\n", start)
    return text[start:end if end >= 0 else len(text)].strip()


def _first_sentence(text: str) -> str:
    """The first sentence of the first line, skipping fillers such as "Certainly!"."""
    line = _first_line(text)
    start = 0
    for end in _SENTENCE_END.finditer(line):
        sentence = line[start:end.start()]
        if sentence.strip(" !.,").lower() not in _FILLER:
            return sentence
        start = end.end()
    return line[start:]


def find_paths(text: str, limit: int = 64) -> list[str]:
    """File paths mentioned in ``text`` (``src/x.py``, ``setup.py``), in order, without repeats;
    at most ``limit`` of them."""
    seen: dict[str, None] = {}
    text = text[:_MAX_SCAN]
    for match in _EXTENSION.finditer(text):
        if len(seen) >= limit:
            break
        dot = match.start()
        if dot == 0:
            continue
        back = text[max(0, dot - 120) : dot][::-1]
        width = _PATH_CHARS_BACK.match(back).end()
        if width == 0:
            continue
        path = text[dot - width : match.end()]
        if path[0] == ".":
            if path.startswith("..."):
                path = path.lstrip(".")  # an ellipsis, not a relative path
            while path.startswith("./"):
                path = path[2:]
        if path[:1] == "/" and (path.startswith("//") or text[dot - width - 1 : dot - width] == ":"):
            continue  # a URL
        if path and path[0] != "-" and path[0] != "." or path.startswith((".github", ".planning", "../")):
            seen.setdefault(path, None)
    return list(seen)


def _header_paths(content: str) -> list[str]:
    """aider: the file named above each SEARCH/REPLACE block (the line before the fence)."""
    found = []
    text = "\n" + content
    for match in _SEARCH_BLOCK.finditer(text):
        fence = text.rfind("\n", 0, match.start())
        head = text.rfind("\n", 0, fence) if fence > 0 else -1
        if head >= 0 and text.startswith("```", fence + 1):
            name = text[head + 1 : fence].strip().strip("`*")
            if name and " " not in name and len(name) <= 120:
                found.append(name)
    return found


def _files_in(round_: Round) -> list[str]:
    first: dict[str, None] = {}
    later: dict[str, None] = {}
    for message in round_.messages:
        if message.role == "system":
            continue
        content = message.content
        if message.role == "tool":
            for match in _APPLIED.finditer("\n" + content[:_MAX_SCAN]):
                first.setdefault(match.group(1).strip().rstrip(".,:;"), None)
        elif message.role == "assistant" and "<<<<<<< SEARCH" in content:
            for name in _header_paths(content[:_MAX_SCAN]):
                first.setdefault(name, None)
        for call in message.tool_calls:
            for path in find_paths(str(call.get("arguments", ""))):
                first.setdefault(path, None)
        if len(later) < 64:
            for path in find_paths(content, 64 - len(later)):
                later.setdefault(path, None)
    for path in later:
        first.setdefault(path, None)
    paths = [p for p in first if p][:64]
    relative = {p for p in paths if not p.startswith(("/", "~"))}
    names = {r.rpartition("/")[2] for r in relative if "/" in r}  # what a bare name would repeat
    # an absolute path or a bare name that repeats a relative path already listed says nothing new
    return [p for p in paths if not (p.startswith(("/", "~")) and _ends_with_one_of(p, relative))
            and not ("/" not in p and p in names)]


def _ends_with_one_of(path: str, relative: set[str]) -> bool:
    """Whether ``path`` ends with "/" + one of ``relative`` (each tail after a "/" looked up)."""
    slash = path.find("/")
    while slash >= 0:
        if path[slash + 1:] in relative:
            return True
        slash = path.find("/", slash + 1)
    return False


def _line_at(text: str, pos: int) -> str:
    begin = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[begin : end if end >= 0 else len(text)]


def _test_lines(text: str, limit: int) -> list[str]:
    """Up to ``limit`` test-result lines, failures first, then counts ("3 passed"), then the rest."""
    found: list[str] = []
    text = text[:_MAX_SCAN]
    for match in _TEST_KEY.finditer(text):
        line = _one_line(_line_at(text, match.start() + (1 if text[match.start()] == "\n" else 0)).strip(" =-*#>"), 90)
        if line and line not in found:
            found.append(line)
            if len(found) >= 4 * limit:
                break
    return sorted(found, key=_test_line_rank)[:limit]


_FAILURE = lazy_regex(r"FAILED|\bfailed\b|Error|ERROR|Traceback|exit code [1-9]")
_COUNTS = lazy_regex(r"\d+ (?:passed|failed)|Ran \d+ test")


def _test_line_rank(line: str) -> int:
    return 0 if _FAILURE.search(line) else 1 if _COUNTS.search(line) else 2


def _tests_in(messages: Iterable[Message], skip: set[str]) -> list[str]:
    found: list[str] = []
    for message in messages:
        if message.role != "tool":
            continue
        for line in _test_lines(message.content, _MAX_TESTS + len(skip)):
            if line not in skip and line not in found:
                found.append(line)
                if len(found) >= _MAX_TESTS:
                    return found
    return found


def _result_gist(results: Sequence[Message]) -> str:
    if not results:
        return "no result recorded"
    for result in results:
        lines = _test_lines(result.content, 1)
        if lines:
            return _one_line(lines[0], 70)
    text = _first_line(results[0].content)
    return _one_line(text, 70) if text else "(empty result)"


def round_summary(round_: Round, memo: Memo = NO_MEMO) -> str:
    """One deterministic summary bullet for a round (no model call), made once per round
    content when ``memo`` keeps it; see :func:`_summarize_round`."""
    return memo.get(SUMMARY, round_digest(round_), lambda: _summarize_round(round_))


def round_summaries(rounds: Iterable[Round], memo: Memo = NO_MEMO) -> tuple[str, ...]:
    """The summary bullet of every round, oldest first (each made once: :func:`round_summary`;
    in runs of rounds, :meth:`Memo.values_of`)."""
    rounds = tuple(rounds)
    return memo.values_of(SUMMARY, rounds, [round_digest(r) for r in rounds], _summarize_round)


def _summarize_round(round_: Round) -> str:
    """One deterministic summary bullet for a round (no model call).

    Request's first line, what was done (aider's commit line or the assistant's first
    sentence), files touched (aider's "Applied edit to" and paths the round mentions), each
    tool call together with the gist of its result, and test results the round shows.
    """
    user = next((m for m in round_.messages if m.role == "user"), None)
    request = _one_line(_first_line(user.content), 120) if user else "(no user request)"
    where = f" (lines {round_.lines[0]}-{round_.lines[1]})" if round_.lines else ""
    parts = [f"- Round {round_.index}{where}: {request}"]

    done = ""
    commits = []
    for message in round_.messages:
        if message.role == "tool":
            commits.extend(
                f"commit {m.group(1)[:7]} {m.group(2).strip()}" for m in _COMMIT.finditer("\n" + message.content)
            )
    if commits:
        done = "; ".join(_one_line(c, 100) for c in commits[:2])
        if len(commits) > 2:
            done += f" (+{len(commits) - 2} more commits)"
    else:  # the round's conclusion: the last thing the assistant said
        for message in reversed(round_.messages):
            if message.role == "assistant" and message.content.strip():
                done = _one_line(_first_sentence(message.content), 140)
                break
    if done:
        parts.append(f"done: {done}")

    files = _files_in(round_)
    if files:
        extra = f" (+{len(files) - _MAX_FILES} more)" if len(files) > _MAX_FILES else ""
        parts.append("files: " + ", ".join(files[:_MAX_FILES]) + extra)

    shown: set[str] = set()
    units = tool_units(round_)
    if units:
        calls = []
        for call, results in units[:_MAX_CALLS]:
            gist = _result_gist(results)
            shown.add(gist)
            args = _one_line(str(call.get("arguments", "")), 60)
            calls.append(f"{call.get('name', 'tool')} `{args}` → {gist}")
        extra = f" (+{len(units) - _MAX_CALLS} more calls)" if len(units) > _MAX_CALLS else ""
        parts.append("ran: " + "; ".join(calls) + extra)

    tests = _tests_in(round_.messages, shown)
    if tests:
        parts.append("tests: " + " | ".join(tests))
    return parts[0] + (" — " + "; ".join(parts[1:]) if len(parts) > 1 else "")


def summarize_rounds(rounds: Iterable[Round], summaries: Sequence[str] | None = None) -> str:
    """One summary bullet per round, oldest first (``summaries``: the bullets, already made)."""
    return "\n".join(summaries if summaries is not None else round_summaries(rounds))


def verbatim_start(count: int, keep_last: int, block: int = 1) -> int:
    """Index of the first verbatim round of ``count``: at least the last ``keep_last`` verbatim,
    the older ones summarised ``block`` at a time, so the boundary moves every ``block`` rounds."""
    older = max(0, count - max(0, int(keep_last)))
    block = max(1, int(block))
    return older // block * block


def compact_history(rounds: Sequence[Round], keep_last: int, summaries: Sequence[str] | None = None) -> str:
    """The last ``keep_last`` rounds verbatim, every older round as one summary bullet
    (``summaries``: every round's bullet, as the ``round_summaries`` node has them). No counts
    in the headings: a new round only appends (or moves the boundary), the text before stays."""
    rounds = tuple(rounds)
    keep_last = max(0, min(int(keep_last), len(rounds)))
    split = len(rounds) - keep_last
    older, recent = rounds[:split], rounds[split:]
    parts = []
    if older:
        parts.append("Earlier rounds, summarised:\n"
                     + summarize_rounds(older, None if summaries is None else tuple(summaries)[:split]))
    if recent:
        parts.append("Recent rounds, verbatim:\n\n" + render_rounds(recent))
    return "\n\n".join(parts)


def history_trailer(rounds: Sequence[Round], verbatim_from: int, extra: str = "") -> str:
    """The counts of a history, for its end: "(12 rounds: 1-7 summarised, 8-12 verbatim)"
    (``extra`` follows the count: " in 2 sessions")."""
    rounds = tuple(rounds)
    spans = []
    for label, group in (("summarised", rounds[:verbatim_from]), ("verbatim", rounds[verbatim_from:])):
        if group:
            first, last = group[0].index, group[-1].index
            spans.append(f"{first}-{last} {label}" if first != last else f"{first} {label}")
    return f"({len(rounds)} round{'' if len(rounds) == 1 else 's'}{extra}: {', '.join(spans)})"


def rounds_of(session_history: Any) -> tuple[Round, ...]:
    """The rounds of a SessionHistory (``.rounds``), or of a plain sequence of rounds; () for None."""
    if session_history is None:
        return ()
    rounds = getattr(session_history, "rounds", session_history)
    return tuple(r for r in rounds if isinstance(r, Round))

"""The JSON Lines ``session.log``: one message a line (``role``, ``content``, optional ``round``,
``tool_calls`` and ``call_id``); a malformed line is a warning with its line number and is
skipped."""

from __future__ import annotations

import json
import pickle
from typing import Any

from ...types import Message
from ..digest import digest16
from ..memo import NO_MEMO, Memo
from ..quote import capped_warnings, quoted
from .history import (JSONL, LINE, MAX_LOG_LINES, MAX_ROUNDS, SessionHistory, lines_cap_warning, newest_lines_start,
                      number_rounds, rounds_cap_warning)

_ROLES = frozenset(("user", "assistant", "tool", "system"))


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
    raw_calls = obj.get("tool_calls")
    calls = _tool_calls_of(raw_calls, path, number, warnings) if raw_calls else ()
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


def _tool_calls_of(raw_calls: Any, path: str, number: int, warnings: list[str]) -> tuple[dict, ...]:
    """The ``tool_calls`` of line ``number`` normalised (:func:`_normalise_call`; a call without
    an id is ``L<number>.<n>``); not a list, or a call not an object, is a warning at path:number."""
    if not isinstance(raw_calls, list):
        warnings.append(f"{path}:{number}: 'tool_calls' must be a list; calls ignored")
        return ()
    normalised = [_normalise_call(c, f"L{number}.{i}") for i, c in enumerate(raw_calls, 1)]
    if any(c is None for c in normalised):
        warnings.append(f"{path}:{number}: a tool call that is not an object was ignored")
    return tuple(c for c in normalised if c is not None)


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
    offset, skipped_lines = newest_lines_start(text, MAX_LOG_LINES)
    lines = text[offset:].split("\n")
    where = pickle.dumps((JSONL, path))
    read: list[tuple[Any, Message]] = []
    for number, raw in enumerate(lines, skipped_lines + 1):
        if not raw or raw.isspace():
            continue
        round_key, message, line_warnings = memo.get(
            LINE, digest16(where, number.to_bytes(8, "little"), raw.encode("utf-8", "surrogatepass")),
            lambda: _read_line(raw, number, path), persist=False)
        warnings.extend(line_warnings)
        if message is not None:
            read.append((round_key, message))
    groups = _results_with_their_calls(_round_groups(read))
    warnings.extend(_orphan_result_warnings(groups, path))
    kept = [g for g in groups if g]
    skipped_rounds = max(0, len(kept) - MAX_ROUNDS)
    rounds = number_rounds(kept[skipped_rounds:], skipped_rounds + 1)
    caps = []
    if skipped_lines:
        caps.append(lines_cap_warning(path, skipped_lines))
    if skipped_rounds:
        caps.append(rounds_cap_warning(path, len(kept), rounds[0].lines[0] if rounds[0].lines else skipped_lines + 1))
    return SessionHistory(tuple(rounds), tuple(caps) + capped_warnings(warnings, source=path), path, JSONL,
                          1 if rounds else 0, skipped_lines + len(lines))


def _round_groups(read: list[tuple[Any, Message]]) -> list[list[Message]]:
    """The messages (each with its line's ``round`` value) grouped into rounds, in order: the
    messages sharing a ``round`` value; without one, a new round at each user message (messages
    before the first request, a system prompt, join its round)."""
    groups: list[list[Message]] = []
    current_key: Any = object()
    auto = 0
    for round_key, message in read:
        key = round_key
        if key is None and message.role == "user":
            auto += 1
            key = ("auto", auto)
        elif key is None:
            key = current_key
        if not groups or key != current_key:
            joins_lead_in = (message.role == "user" and round_key is None and bool(groups)
                             and all(m.role != "user" for m in groups[-1]))
            if not joins_lead_in:  # lead-in messages (a system prompt) join the first request's round
                groups.append([])
            current_key = key
        groups[-1].append(message)
    return groups


def _results_with_their_calls(groups: list[list[Message]]) -> list[list[Message]]:
    """The rounds with each tool result moved into the round of its call when that is earlier
    (a call and its results are never split across rounds); rounds may end up empty."""
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
    return moved


def _orphan_result_warnings(groups: list[list[Message]], path: str) -> list[str]:
    """A warning (file:line) for each tool result whose call is nowhere in the log."""
    calls = {call["id"] for group in groups for message in group for call in message.tool_calls}
    return [f"{path}:{message.line}: tool result for call {quoted(message.call_id)} has no matching tool call"
            for group in groups for message in group
            if message.role == "tool" and message.call_id is not None and message.call_id not in calls]

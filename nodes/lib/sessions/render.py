"""Rounds rendered verbatim: each message under its role, each tool result right under its call."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ...types import Message, Round


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``limit`` characters with "…"."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def indented(text: str, prefix: str = "    ") -> str:
    """``text`` with ``prefix`` before each line that is not empty."""
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def render_round(round_: Round) -> str:
    """One round verbatim: each message under its role, each tool result right under its call."""
    call_ids = call_ids_of(round_.messages)
    results = results_by_call(round_.messages, call_ids)
    out = [round_heading(round_)]
    for message in round_.messages:
        if not _is_result_of_a_call(message, call_ids):  # those are shown under their call
            out.extend(message_lines(message, results))
    return "\n".join(out)


def round_heading(round_: Round) -> str:
    """``### Round N``, with the transcript lines it came from when they are known."""
    lines_note = f" · lines {round_.lines[0]}-{round_.lines[1]}" if round_.lines else ""
    return f"### Round {round_.index}{lines_note}"


def call_ids_of(messages: Iterable[Message]) -> set[str]:
    """The ids (as text) of every tool call the messages make."""
    return {str(call.get("id")) for message in messages for call in message.tool_calls}


def _is_result_of_a_call(message: Message, call_ids: set[str]) -> bool:
    """Whether ``message`` is tool output answering one of the calls ``call_ids``."""
    return message.role == "tool" and message.call_id is not None and message.call_id in call_ids


def results_by_call(messages: Iterable[Message], call_ids: set[str]) -> dict[str, list[Message]]:
    """Call id -> the tool outputs answering it, in order (an aider round has no calls: empty)."""
    results: dict[str, list[Message]] = {}
    for message in messages if call_ids else ():
        if _is_result_of_a_call(message, call_ids):
            results.setdefault(message.call_id, []).append(message)
    return results


def message_lines(message: Message, results: dict[str, list[Message]]) -> list[str]:
    """The lines of one message not shown under a call: a session note, tool output with its
    label, or the message under its role followed by each of its calls with their results."""
    if message.role == "system":
        return [f"[session] {message.content}"]
    if message.role == "tool":
        return [f"[tool output {message.call_id}]" if message.call_id else "[tool output]", message.content]
    lines = [f"[{message.role}]", message.content] if message.content else []
    for call in message.tool_calls:
        lines.extend(call_lines(call, results))
    return lines


def call_lines(call: Mapping[str, Any], results: dict[str, list[Message]]) -> list[str]:
    """A tool call's line, then each of its results indented (or a line saying there is none)."""
    call_id = str(call.get("id"))
    lines = [f"[tool call {call_id}] {call.get('name', 'tool')}: {call.get('arguments', '')}"]
    found = results.get(call_id)
    if not found:
        lines.append(f"[tool result {call_id}] (no result recorded)")
    for result in found or ():
        lines.append(f"[tool result {call_id}]")
        lines.append(indented(result.content) if result.content else "    (empty)")
    return lines


def render_rounds(rounds: Iterable[Round]) -> str:
    """The rounds verbatim, oldest first, separated by blank lines."""
    return "\n\n".join(render_round(r) for r in rounds)

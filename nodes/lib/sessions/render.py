"""Rounds rendered verbatim: each message under its role, each tool result right under its call."""

from __future__ import annotations

from typing import Iterable

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
                out.append(indented(result.content) if result.content else "    (empty)")
    return "\n".join(out)


def render_rounds(rounds: Iterable[Round]) -> str:
    """The rounds verbatim, oldest first, separated by blank lines."""
    return "\n\n".join(render_round(r) for r in rounds)

"""The rounds of a Claude Code transcript (:func:`parse_claude_code`): the thread, rounds per user
prompt, sidechains folded, compactions and summaries."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from ....types import Message
from ...memo import NO_MEMO, Memo
from ...quote import capped_warnings
from ..history import MAX_ROUNDS, SessionHistory, lines_cap_warning, number_rounds, rounds_cap_warning
from .events import CLAUDE_CODE, SUBAGENT_TOOLS, Event, Options, Read, prompt_key, read_events


# ----------------------------------------------------------------------------- the thread


def _thread(read: Read) -> set[int]:
    """Lines of the events that are off the thread: on a branch that forks off the active
    chain and holds a user prompt (rewound and asked again)."""
    main = [e for e in read.events if not e.sidechain and e.uuid is not None and e.kind != "summary"]
    if not main:
        return set()
    active = _active_chain(main[-1].uuid, read.parents)
    branch = _branch_roots(main, active, read.parents)
    abandoned = {branch[e.uuid] for e in main if e.kind == "prompt" and branch.get(e.uuid or "")}
    return {e.line for e in main if branch.get(e.uuid or "") in abandoned}


def _active_chain(last: str | None, parents: dict) -> set[str]:
    """The uuids from the last event up its ``parentUuid`` chain (a loop stops it)."""
    active: set[str] = set()
    while last is not None and last not in active:
        active.add(last)
        last = parents.get(last)
    return active


def _branch_roots(main: list[Event], active: set[str], parents: dict) -> dict[str, str | None]:
    """For each event off the active chain, the first event of its branch off the chain (None:
    detached from it)."""
    branch: dict[str, str | None] = {}
    for event in main:
        if event.uuid in active:
            continue
        path: list[str] = []
        node = event.uuid
        while node is not None and node not in active and node not in branch and node not in path:
            path.append(node)
            node = parents.get(node)
        root = path[-1] if node in active and path else branch.get(node) if node is not None else None
        for visited in path:
            branch[visited] = root
    return branch


# ----------------------------------------------------------------------------- rounds


@dataclass
class _Builder:
    options: Options
    groups: list[list[Message]] = field(default_factory=list)
    calls: dict[str, tuple[int, str]] = field(default_factory=dict)  # tool_use id -> (group, timestamp)
    results: dict[str, str] = field(default_factory=dict)  # tool_use id -> timestamp of its result
    agents: dict[str, str] = field(default_factory=dict)  # agentId -> the tool_use id it answered
    prompts: dict[str, bytes] = field(default_factory=dict)  # subagent call id -> prompt_key of its prompt
    uuid_group: dict[str, int] = field(default_factory=dict)
    starts: list[str] = field(default_factory=list)  # timestamp of each group's first event
    boundary: Event | None = None
    last_message_id: str | None = None

    def open(self, event: Event) -> list[Message]:
        self.groups.append([])
        self.starts.append(event.timestamp)
        self.last_message_id = None
        return self.groups[-1]

    def current(self, event: Event) -> list[Message]:
        return self.groups[-1] if self.groups else self.open(event)

    def add(self, event: Event) -> None:
        if event.kind == "boundary":
            self.settle(event)
            self.boundary = event
            return
        if event.kind == "compact":
            self.fold(event.text, event.line)
            return
        if event.kind == "prompt":
            self.settle(event)
            self.open(event).append(Message("user", event.text, 0, event.line))
        elif event.kind == "note":
            self.current(event).append(Message("system", event.text, 0, event.line))
        elif event.kind == "results":
            group = self.current(event)
            for call_id, text in event.results:
                group.append(Message("tool", text, 0, event.line, call_id=call_id))
                self.results.setdefault(call_id, event.timestamp)
                if event.agent_id:
                    self.agents.setdefault(event.agent_id, call_id)
            if event.text.strip():
                group.append(Message("system", event.text, 0, event.line))
        elif event.kind == "assistant":
            self.assistant(event)
        else:
            return
        if event.uuid:
            self.uuid_group[event.uuid] = len(self.groups) - 1
        if event.kind != "assistant":
            self.last_message_id = None

    def assistant(self, event: Event) -> None:
        group = self.current(event)
        for call in event.calls:
            self.calls.setdefault(call["id"], (len(self.groups) - 1, event.timestamp))
        self.prompts.update(event.tasks)
        previous = group[-1] if group else None
        if previous is not None and previous.role == "assistant" and event.message_id \
                and event.message_id == self.last_message_id:
            text = "\n\n".join(t for t in (previous.content, event.text) if t)
            group[-1] = replace(previous, content=text, tool_calls=previous.tool_calls + event.calls)
        elif event.text or event.calls:
            group.append(Message("assistant", event.text, 0, event.line, event.calls))
        self.last_message_id = event.message_id

    def settle(self, event: Event) -> None:
        """A compaction boundary with no summary message after it folds with its own text."""
        if self.boundary is not None:
            self.fold(self.boundary.text + " (no summary recorded)", event.line - 1)

    def fold(self, summary: str, line: int) -> None:
        start = self.boundary.line if self.boundary is not None else line
        self.boundary = None
        folded = [g for g in self.groups if g]
        requests = [f"- lines {g[0].line}-{g[-1].line}: {_first_line(g)}" for g in folded]
        if self.options.compacted == "keep" or not folded:
            head = "[Claude Code compacted the conversation here; its summary:]"
            self.groups.append([Message("user", f"{head}\n{summary}", 0, start)])
            self.starts.append("")
        else:
            asked = "; ".join(_first_line(g) for g in folded)
            asked = asked if len(asked) <= 160 else asked[:159] + "…"
            head = f"[Claude Code compacted {len(folded)} earlier round{'s' if len(folded) != 1 else ''} ({asked}); its summary:]"
            body = f"{head}\n{summary}\n\nThe rounds it replaces, by request:\n" + "\n".join(requests)
            first = folded[0][0].line or start
            message = Message("user", body, 0, first)
            self.groups = [[message, Message("system", f"Claude Code compacted the conversation at line {line}", 0, line)]]
            self.starts = [self.starts[0] if self.starts else ""]
            self.calls.clear()
            self.uuid_group.clear()
        self.last_message_id = None


def _first_line(group: list[Message]) -> str:
    user = next((m for m in group if m.role == "user"), None)
    text = user.content.strip() if user else "no user request (the transcript starts mid-round)"
    line = text.split("\n", 1)[0]
    return line if len(line) <= 100 else line[:99] + "…"


def _fold_sidechains(read: Read, builder: _Builder, off: set[int]) -> None:
    """Each subagent's chain of sidechain events as one line under the call that spawned it,
    added to that call's result (one result a call), else a session note in the round it ran in.

    The call is found by the chain's ``agentId`` (on the call's result), else by its first
    message: the subagent call whose ``input.prompt`` it is (parallel calls each have their
    own); only when neither says, by time (the first subagent call whose run spans the chain's
    start), and the line says so."""
    chains = _sidechains(read, off)
    by_prompt: dict[bytes, list[str]] = {}
    for call_id, key in builder.prompts.items():
        if call_id in builder.calls:
            by_prompt.setdefault(key, []).append(call_id)
    taken: set[str] = set()
    matched: list[tuple[list[Event], str | None, bool]] = []  # (chain, its call, matched by time)
    for root, events in chains.items():
        call_id = _named_call(root, events, builder, by_prompt, taken)
        if call_id is not None:
            taken.add(call_id)
        matched.append((events, call_id, False))
    for index, (events, call_id, _) in enumerate(matched):  # by time: calls no chain named first
        timed = _timed_call(events, builder, taken) if call_id is None else None
        if timed is not None:
            taken.add(timed)
            matched[index] = (events, timed, True)
    for events, call_id, by_time in matched:
        _place_chain(builder, events, call_id, by_time)


def _sidechains(read: Read, off: set[int]) -> dict[str, list[Event]]:
    """The sidechain events (not off the thread) by the root of their chain, in order."""
    chains: dict[str, list[Event]] = {}
    for event in read.events:
        if event.sidechain and event.line not in off:
            chains.setdefault(_chain_root(event, read), []).append(event)
    return chains


def _named_call(root: str, events: list[Event], builder: _Builder, by_prompt: dict[bytes, list[str]],
                taken: set[str]) -> str | None:
    """The call a chain names: by its ``agentId`` (an agent's chains all go to its call), else the
    first subagent call not yet taken whose prompt is the chain's opening message; or None."""
    agent = next((e.agent_id for e in events if e.agent_id), None)
    call_id = builder.agents.get(agent) if agent else None
    if call_id is not None and call_id in builder.calls:
        return call_id
    opening = next((e.text for e in events if e.uuid == root and e.kind == "prompt"), None)
    if opening is None:
        return None
    return next((c for c in by_prompt.get(prompt_key(opening), ()) if c not in taken), None)


def _timed_call(events: list[Event], builder: _Builder, taken: set[str]) -> str | None:
    """The first subagent call not yet taken whose run spans the chain's start (else the first
    whose run does, taken or not); None when none does."""
    first = _first_timestamp(events)
    running = [cid for cid, (_, ts) in builder.calls.items() if _spawns(builder, cid, ts, first)]
    return next((cid for cid in running if cid not in taken), running[0] if running else None)


def _first_timestamp(events: list[Event]) -> str:
    """The earliest timestamp of the events ("" when none has one)."""
    return min((e.timestamp for e in events if e.timestamp), default="")


def _place_chain(builder: _Builder, events: list[Event], call_id: str | None, by_time: bool) -> None:
    """The chain's line added to its call's result, else as a session note in the round it ran in
    (none when it has no timestamp or there is no round)."""
    line = _sidechain_line(events)
    if call_id is not None:
        if by_time:
            line += " [matched to this call by time: no subagent call's prompt is its first message]"
        _add_to_result(builder.groups[builder.calls[call_id][0]], call_id, line, events[0].line)
        return
    first = _first_timestamp(events)
    if first and builder.groups:
        index = max((i for i, ts in enumerate(builder.starts) if ts and ts <= first), default=0)
        builder.groups[index].append(Message("system", line, 0, events[0].line))


def _add_to_result(group: list[Message], call_id: str, line: str, number: int) -> None:
    """``line`` (a subagent's work) at the end of the call's result in ``group``: a call has one
    result; a new one when the call has none (it was interrupted)."""
    for index in range(len(group) - 1, -1, -1):
        message = group[index]
        if message.role == "tool" and message.call_id == call_id:
            group[index] = replace(message, content=f"{message.content}\n\n[{line}]" if message.content else line)
            return
    group.append(Message("tool", line, 0, number, call_id=call_id))


def _spawns(builder: _Builder, call_id: str, started: str, first: str) -> bool:
    if not first or not started or started > first:
        return False
    ended = builder.results.get(call_id)
    group = builder.groups[builder.calls[call_id][0]]
    named = any(c.get("id") == call_id and c.get("name") in SUBAGENT_TOOLS for m in group for c in m.tool_calls)
    return named and (not ended or first <= ended)


def _chain_root(event: Event, read: Read) -> str:
    node, seen = event.uuid, set()
    while node is not None and read.parents.get(node) in read.parents and node not in seen:
        seen.add(node)
        node = read.parents[node]
    return node or f"line {event.line}"


def _sidechain_line(events: list[Event]) -> str:
    tools = Counter(c["name"] for e in events for c in e.calls)
    used = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in tools.most_common()) or "none"
    said = next((e.text for e in reversed(events) if e.kind == "assistant" and e.text.strip()), "")
    said = " ".join(said.split())
    said = said if len(said) <= 200 else said[:199] + "…"
    count = f"{len(events)} event{'s' if len(events) != 1 else ''}"
    return f"subagent work (sidechain, {count}; tools: {used})" + (f": {said}" if said else "")


def _add_summaries(read: Read, builder: _Builder) -> None:
    """Claude Code's ``summary`` events (titles of the conversation up to ``leafUuid``): a session
    note at the end of the round of the leaf (or of the nearest event before it that is in a
    round; the first round when the leaf's round was compacted away). A summary whose leaf is
    not a line of this file is left out: Claude Code writes the titles of other sessions (of
    this project or, in a shared folder, of another one) at a file's head, and none of them
    summarizes this conversation."""
    for event in read.events:
        if event.kind != "summary" or not builder.groups or (event.leaf or "") not in read.parents:
            continue
        note = Message("system", f"Claude Code's summary of the conversation so far: {event.text}", 0, event.line)
        index = _leaf_group(event.leaf, read, builder)
        if index is not None:
            builder.groups[index].append(note)
        else:
            builder.groups[0].insert(0, note)


def _leaf_group(leaf: str | None, read: Read, builder: _Builder) -> int | None:
    """The round of ``leaf`` or of the nearest event before it (up its ``parentUuid`` chain) that
    is in one; None when none is."""
    seen: set[str] = set()
    while leaf is not None and leaf not in seen:
        if leaf in builder.uuid_group:
            return builder.uuid_group[leaf]
        seen.add(leaf)
        leaf = read.parents.get(leaf)
    return None


def parse_claude_code(text: str, path: str, options: Options | None = None, memo: Memo = NO_MEMO) -> SessionHistory:
    """The rounds of a Claude Code transcript (see the module docstring), with a warning per
    malformed line and per tool result whose call is not in the thread, and one note of the
    lines recorded in another folder (``options.cwds``); ``memo`` keeps the reading of each line.

    Like a JSON Lines log, only the newest :data:`~..history.MAX_LOG_LINES` lines are read and
    the newest :data:`~..history.MAX_ROUNDS` rounds kept (numbered as in the whole file past the
    round cap), each cap with one warning, and warnings about single lines capped per kind
    (:func:`~ctxengine.nodes.lib.quote.capped_warnings`)."""
    options = options or Options()
    read = read_events(text, path, options, memo)
    off = _thread(read)
    builder = _Builder(options)
    for event in read.events:
        if not event.sidechain and event.line not in off and event.kind != "summary":
            builder.add(event)
    if builder.boundary is not None:
        builder.fold(builder.boundary.text + " (no summary recorded)", builder.boundary.line)
    if options.sidechains == "fold":
        _fold_sidechains(read, builder, off)
    _add_summaries(read, builder)
    groups = [g for g in builder.groups if g]
    skipped_rounds = max(0, len(groups) - MAX_ROUNDS)
    rounds = number_rounds(groups[skipped_rounds:], skipped_rounds + 1)
    caps = _cap_notes(read, path, len(groups), rounds, skipped_rounds)
    warnings = [*read.warnings, *_orphan_result_warnings(rounds, path)]
    return SessionHistory(tuple(rounds), tuple(caps) + capped_warnings(warnings, source=path),
                          path, CLAUDE_CODE,
                          len(read.sessions) or (1 if rounds else 0), read.total_lines)


def _cap_notes(read: Read, path: str, total_rounds: int, rounds: list, skipped_rounds: int) -> list[str]:
    """One warning per cap that left something out: the oldest lines, the oldest rounds, the lines
    recorded in another folder."""
    caps = []
    if read.skipped:
        caps.append(lines_cap_warning(path, read.skipped))
    if skipped_rounds:
        caps.append(rounds_cap_warning(path, total_rounds, rounds[0].lines[0] if rounds[0].lines else read.skipped + 1))
    if read.foreign:
        caps.append(f"{path}: {read.foreign} line{'s' if read.foreign != 1 else ''} recorded in another folder "
                    "(not this project) skipped")
    return caps


def _orphan_result_warnings(rounds: list, path: str) -> list[str]:
    """A warning (file:line) per tool result whose call is not in the rounds kept."""
    called = {c["id"] for r in rounds for m in r.messages for c in m.tool_calls}
    return [f"{path}:{message.line}: tool result for call {message.call_id!r} has no matching "
            "tool call in the thread (the transcript starts after it)"
            for round_ in rounds for message in round_.messages
            if message.role == "tool" and message.call_id not in called]

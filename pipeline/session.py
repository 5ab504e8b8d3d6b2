"""A library API for agent loops: one context per round, with the budget watched across rounds.

    >>> import ctxengine
    >>> session = ctxengine.Session("path/to/project", max_tokens=32000)
    >>> for request in requests:
    ...     result = session.next_context(request)      # BuildResult: the context for this round
    ...     answer = call_the_model(result.context)
    ...     session.record(answer.tokens, answer.text)  # the assistant turn joins the history

The session holds the conversation in memory, seeded from the project's session log when
there is one. Every round runs the shared Hamilton driver (``ctxengine.driver.execute``: the
same driver, built once per process and reused) with the in-memory history as a node
override of ``session_history``. After each build the budget monitor's
``preventive_compaction`` is read: when it is active the older rounds are folded into a
rolling summary that every later round carries (as a summary round at the head of the
history), so the context shrinks before a hard cut is forced.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .nodes.lib.quote import quoted
from . import driver
from .api import build_overrides, bundled_example
from .nodes.lib.layout import shared_prefix_length
from .nodes.lib.sessions import rounds_of, summarize_rounds
from .nodes.report import BuildResult
from .nodes.types import CtxEngineError, Message, Round

#: The outputs every round asks the driver for.
ROUND_OUTPUTS = ("build_result", "budget_monitor", "preventive_compaction", "exact_counter")
SUMMARY_TITLE = "Rolling summary of earlier rounds"
#: state.maxHistoryRounds inside a session: high enough that no held round is summarised by the state stage.
HISTORY_ROUNDS = 1_000_000


@dataclass(frozen=True)
class RoundRecord:
    """What one ``next_context`` call produced, for reports and tests."""

    round: int  # 1-based index of the round in the session
    request: str
    total_tokens: int  # the final context
    available_tokens: int
    utilization: float
    initial_tokens: int  # the assembled context before truncation
    initial_exact: bool  # whether that count is exact (far from the budget it is the chars/4 estimate)
    over_budget: bool
    monitor: Mapping[str, Any]
    compaction: Mapping[str, Any]
    folded: int = 0  # rounds folded into the rolling summary after this build
    history_rounds: int = 0  # verbatim rounds the build carried
    response_tokens: int | None = None
    stable_prefix_tokens: int = 0  # tokens of the context's stable part (BuildResult.stable_prefix_tokens)
    shared_prefix_tokens: int | None = None  # leading tokens the context shares with the previous round's (None: first)

    def as_dict(self) -> dict:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in dataclasses.asdict(self).items()}


class Session:
    """A multi-round session against one project (see the module docstring).

    ``overrides`` take dotted keys as in :func:`ctxengine.build_context`; the named options
    (mode, max_tokens, reserve_tokens, reserve_share, compact, strategy, layout) and ``phase``
    (the GSD phase type: disclosure.phase) are shortcuts. The answer reserve scales with
    ``max_tokens`` unless ``reserve_tokens`` is given: ``Session(max_tokens=32000)`` leaves
    25,600 tokens for the context (budget.reserveShare 0.2, within gpt-4o's maxOutputTokens). ``seed_history=False`` starts from an empty history
    even when the project has a session log. Every round builds with
    Hamilton's cache between runs (``cache=False``: without; ``cache_dir`` picks its folder).
    ``nodes`` swaps nodes for every round, as in :func:`ctxengine.build_context`.

    Attributes: ``rounds`` (the verbatim rounds, oldest first), ``summary`` (the rolling
    summary of the folded rounds), ``folded_rounds`` (their indexes), ``monitor`` and
    ``compaction`` (the last round's budget monitor and compaction decision), ``records``
    (one RoundRecord per round).
    """

    def __init__(
        self,
        project_dir: str | os.PathLike | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        seed_history: bool = True,
        phase: str | None = None,
        cache: bool | None = None,
        cache_dir: str | os.PathLike | None = None,
        nodes: Sequence[driver.NodeSwap] = (),
        **options: Any,
    ) -> None:
        self.project_dir = os.path.abspath(os.fspath(project_dir if project_dir is not None else bundled_example()))
        extra = dict(overrides or {})
        if phase is not None:
            extra["disclosure.phase"] = phase
        configured = build_overrides(extra, **options)
        self.cache = {"cache": cache, "cache_dir": cache_dir}
        self.nodes = driver.swap_modules(nodes)  # loaded and checked once, for every round
        seeded = driver.execute(["state_settings", "session_history"], self.project_dir, configured, **self.cache,
                                nodes=self.nodes)
        # The session manages its history itself (folding older rounds into the rolling
        # summary), so every round it holds rides verbatim: the state stage must not summarise
        # the summary round away. The configured state.maxHistoryRounds applies once, to the
        # seeded log: its older rounds start out folded, as the state stage would show them.
        keep = seeded["state_settings"].max_history_rounds
        self.overrides = {**configured, "state.maxHistoryRounds": HISTORY_ROUNDS}
        self.seed_history = seed_history
        self.phase = phase
        self.options = dict(options)
        self.rounds = []
        self.summary_lines = []
        self.folded_rounds = ()
        self.records = []
        self.monitor = None
        self.compaction = None
        self._pending = None
        self._last_tokens = None  # the previous round's context, encoded
        self._template = seeded["session_history"]
        if seed_history:
            self.rounds = list(rounds_of(self._template))
            if len(self.rounds) > keep:
                self._fold(keep)

    # ------------------------------------------------------------------------- the loop

    def next_context(self, request: str) -> BuildResult:
        """The context for this round's ``request``: the project, the history so far (with the
        rolling summary) and the request, fitted to the budget. Call :meth:`record` with the
        answer before the next round (an unrecorded round is recorded without an answer)."""
        if self._pending is not None:
            self.record(0)
        history = self.history_value()
        out = driver.execute(
            list(ROUND_OUTPUTS), self.project_dir, self.overrides, request,
            node_overrides={"session_history": history}, **self.cache, nodes=self.nodes,
        )
        result: BuildResult = out["build_result"]
        carried = len(self.rounds)
        self.monitor = out["budget_monitor"]
        self.compaction = dict(out["preventive_compaction"])
        folded = self._fold(int(self.compaction["keep_last"])) if self.compaction.get("active") else 0
        initial = result.initial_budget or result.budget
        tokens = out["exact_counter"].encode(result.context)
        shared = None if self._last_tokens is None else shared_prefix_length(self._last_tokens, tokens)
        self._last_tokens = tokens
        self.records.append(RoundRecord(
            round=len(self.records) + 1,
            request=request,
            total_tokens=result.budget.total_tokens,
            available_tokens=result.budget.available_tokens,
            utilization=result.budget.utilization_rate,
            initial_tokens=initial.total_tokens,
            initial_exact=bool(getattr(initial, "exact", True)),
            over_budget=result.budget.is_over_budget,
            monitor=self.monitor.as_dict(),
            compaction=dict(self.compaction),
            folded=folded,
            history_rounds=carried,
            stable_prefix_tokens=result.stable_prefix_tokens,
            shared_prefix_tokens=shared,
        ))
        self._pending = request
        return result

    def record(self, response_tokens: int, response_text: str | None = None, *,
               usage: Mapping[str, Any] | None = None) -> Round:
        """Close the round: the request of the last :meth:`next_context` and the assistant's
        answer (``response_tokens`` as its usage; ``response_text`` in the history when given)."""
        if self._pending is None:
            raise CtxEngineError("Session.record() without a round: call next_context(request) first")
        if not isinstance(response_tokens, int) or isinstance(response_tokens, bool) or response_tokens < 0:
            raise CtxEngineError(f"Session.record(): response_tokens must be a non-negative int, got {quoted(response_tokens)}")
        index = self._next_index()
        messages = [Message("user", self._pending, index)]
        answer_usage = dict(usage) if usage is not None else {"completion_tokens": response_tokens}
        messages.append(Message("assistant", response_text or "", index, usage=answer_usage))
        round_ = Round(index=index, messages=tuple(messages))
        self.rounds.append(round_)
        self._pending = None
        if self.records:
            self.records[-1] = dataclasses.replace(self.records[-1], response_tokens=response_tokens)
        return round_

    # ------------------------------------------------------------------------- state

    @property
    def summary(self) -> str:
        """The rolling summary of the folded rounds ("" before any fold)."""
        if not self.summary_lines:
            return ""
        first, last = self.folded_rounds[0], self.folded_rounds[-1]
        count = len(self.folded_rounds)  # in a trailer: a fold appends lines, the text before stays
        return (f"{SUMMARY_TITLE}:\n" + "\n".join(self.summary_lines)
                + f"\n({count} round{'' if count == 1 else 's'}, {first}-{last})")

    def history_value(self) -> Any:
        """The ``session_history`` node value for the next build: a summary round (index 0,
        one system message) when rounds were folded, then the verbatim rounds."""
        rounds: list[Round] = []
        if self.summary_lines:
            rounds.append(Round(index=0, messages=(Message("system", self.summary, 0),)))
        rounds.extend(self.rounds)
        template = self._template
        if template is not None and dataclasses.is_dataclass(template) and hasattr(template, "rounds"):
            return dataclasses.replace(template, rounds=tuple(rounds))  # the log's source and warnings stay
        return tuple(rounds)

    def utilisation_table(self) -> str:
        """One line per round: final tokens, utilisation, the assembled context before truncation
        ("~": the chars/4 estimate the budget report uses far from the budget), the monitor's
        projected rounds, how many rounds were folded after the build."""
        lines = [f"{'round':>5} {'tokens':>7} {'avail':>6} {'util':>6} {'uncut':>7} {'proj':>5} {'fold':>4}  note"]
        for r in self.records:
            projected = r.monitor.get("projected_rounds")
            note = "COMPACT keep_last=%d" % r.compaction["keep_last"] if r.compaction.get("active") else ""
            if r.over_budget:
                note += " OVER BUDGET"
            lines.append(f"{r.round:>5} {r.total_tokens:>7} {r.available_tokens:>6} {r.utilization:>6.1%} "
                         f"{('' if r.initial_exact else '~') + str(r.initial_tokens):>7} "
                         f"{'-' if projected is None else projected:>5} {r.folded:>4}  {note}")
        return "\n".join(lines)

    # ------------------------------------------------------------------------- helpers

    def _next_index(self) -> int:
        known = [r.index for r in self.rounds] + list(self.folded_rounds)
        return max(known, default=0) + 1

    def _fold(self, keep_last: int) -> int:
        """Fold every round but the last ``keep_last`` into the rolling summary; how many."""
        keep_last = max(0, keep_last)
        if len(self.rounds) <= keep_last:
            return 0
        split = len(self.rounds) - keep_last
        older, self.rounds = self.rounds[:split], self.rounds[split:]
        self.summary_lines.extend(summarize_rounds(older).split("\n"))
        self.folded_rounds = self.folded_rounds + tuple(r.index for r in older)
        return len(older)

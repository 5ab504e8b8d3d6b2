"""Outputs: the warnings of the run, the build result the CLI and API hand out, a flat run row."""

from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd  # loaded with hamilton already (0.0 ms more)
from hamilton.function_modifiers import tag

from .lib.lineage import section_fate
from .lib.quote import capped_warnings
from .types import BudgetReport, LedgerEntry, Section


@dataclass(frozen=True)
class BuildResult:
    """Everything one build produced: the context, its budget, the sections and the warnings.

    ``as_json()`` is the contract of ``ctxengine build --format json``; later stages add keys
    beside the first four, never rename them.
    """

    context: str
    budget: BudgetReport
    sections: tuple[Section, ...]
    section_tokens: Mapping[str, int]
    warnings: tuple[str, ...]
    ledger: tuple[LedgerEntry, ...] = ()
    truncation: Mapping[str, Any] = field(default_factory=dict)
    pools: Mapping[str, Any] = field(default_factory=dict)
    initial_budget: BudgetReport | None = None
    disclosure: tuple[Mapping[str, Any], ...] = ()
    monitor: Mapping[str, Any] = field(default_factory=dict)
    position: Mapping[str, Any] = field(default_factory=dict)  # the GSD position ({} outside GSD)
    stable_prefix_tokens: int = 0  # tokens of the stable part: context[:stable_chars]
    stable_chars: int = 0
    notes: tuple[str, ...] = ()  # information, not warnings: no git repository, a detached HEAD

    def messages(self) -> list[dict]:
        """The context as chat messages in the Anthropic Messages API shape: a system message
        holding the stable part, its text block ending in a ``cache_control`` breakpoint, and a
        user message holding the rest (the history, the diff, the request). The texts of the
        blocks joined are the context. ``--format messages`` prints this list."""
        stable, volatile = self.context[:self.stable_chars], self.context[self.stable_chars:]
        out = []
        if stable:
            out.append({"role": "system", "content": [{"type": "text", "text": stable,
                                                       "cache_control": {"type": "ephemeral"}}]})
        out.append({"role": "user", "content": [{"type": "text", "text": volatile}]})
        return out

    def as_json(self) -> dict:
        """The JSON document of ``--format json``."""
        return {
            "context": self.context,
            "budget": self.budget.as_dict(),
            "sections": [self._section_json(s) for s in self.sections],
            "warnings": list(self.warnings),
            "ledger": [entry.as_dict() for entry in self.ledger],
            "truncation": dict(self.truncation),
            "pools": dict(self.pools),
            "disclosure": [dict(row) for row in self.disclosure],
            "monitor": dict(self.monitor),
            "position": dict(self.position),
            "stable_prefix_tokens": self.stable_prefix_tokens,
            "notes": list(self.notes),
        }

    def _section_json(self, section: Section) -> dict:
        return {
            "key": section.key,
            "title": section.title,
            "kind": section.kind,
            "priority": section.priority,
            "tier": section.tier,
            "tokens": self.section_tokens.get(section.key, 0),
            "sources": [source.as_dict() for source in section.sources],
            "content": section.content,
        }

    def ledger_frame(self):
        """The ledger as a pandas DataFrame, one row per section and step."""
        columns = ["section_key", "step", "action", "tokens_before", "tokens_after", "reason"]
        return pd.DataFrame([entry.as_dict() for entry in self.ledger], columns=columns)


@tag(stage="report")
def run_warnings(
    config_warnings: tuple,
    reference_warnings: tuple,
    state_warnings: tuple,
    disclosure_warnings: tuple,
    budget_warnings: tuple,
    truncation_warnings: tuple,
    template_warnings: tuple = (),
    code_warnings: tuple = (),
) -> tuple:
    """Every warning of the run, stage by stage, without repeats, capped per kind
    (:func:`~ctxengine.nodes.lib.quote.capped_warnings`: a few of each, then "... and N more like this")."""
    groups = (config_warnings, reference_warnings, template_warnings, state_warnings, disclosure_warnings,
              code_warnings, budget_warnings, truncation_warnings)
    return capped_warnings(warning for group in groups for warning in group)


@tag(stage="report")
def build_result(
    final_context: str,
    final_budget_report: BudgetReport,
    final_sections: list,
    final_section_tokens: dict,
    run_warnings: tuple,
    truncation_ledger: list,
    truncation_summary: dict,
    budget_pools: dict,
    budget_report: BudgetReport,
    disclosure_plan: list,
    monitor_report: dict,
    gsd_position: Any,
    disclosure_work: Any = None,
    stable_prefix: str = "",
    stable_prefix_tokens: int = 0,
    state_notes: tuple = (),
) -> BuildResult:
    """The whole result of one build, as the CLI prints it and the API returns it."""
    return BuildResult(
        context=final_context,
        budget=final_budget_report,
        sections=tuple(final_sections),
        section_tokens=dict(final_section_tokens),
        warnings=run_warnings,
        ledger=tuple(truncation_ledger),
        truncation=dict(truncation_summary),
        pools=dict(budget_pools),
        initial_budget=budget_report,
        disclosure=tuple(disclosure_plan),
        monitor=dict(monitor_report),
        position=_position_json(gsd_position, disclosure_work),
        stable_prefix_tokens=stable_prefix_tokens,
        stable_chars=len(stable_prefix),
        notes=tuple(dict.fromkeys(state_notes)),
    )


def _position_json(gsd_position: Any, disclosure_work: Any) -> dict:
    """The GSD position as the JSON shows it, with ``work``: the phase type whose files loaded,
    its phase folder, and why (``--phase auto`` or given); {} without a GSD position."""
    if gsd_position.source == "none":
        return {}
    out = gsd_position.as_dict()
    if disclosure_work is not None:
        out["work"] = disclosure_work.as_dict()
    return out


@tag(stage="report")
def stable_prefix_tokens(stable_prefix: str, exact_counter: Any) -> int:
    """Exact tokens of the stable part of the final context (``stable_prefix``)."""
    return exact_counter.count(stable_prefix)


@tag(stage="report")
def run_record(build_result: BuildResult, project_dir: str) -> dict:
    """One flat row describing the run (for a pandas DataFrame over a batch of projects)."""
    budget = build_result.budget
    return {
        "project_dir": project_dir,
        "total_tokens": budget.total_tokens,
        "available_tokens": budget.available_tokens,
        "utilization_rate": budget.utilization_rate,
        "is_over_budget": budget.is_over_budget,
        "sections": len(build_result.sections),
        "truncated": bool(build_result.truncation.get("triggered", False)),
        "warnings": len(build_result.warnings),
        "error": None,
    }


@tag(stage="report")
def context_lineage(sections: list, truncation_ledger: list, final_sections: list) -> Any:
    """Which sources fed which sections, what each ledger entry did to them (one node per entry,
    mended cross-references included), and which reached the final context: a networkx DiGraph
    source -> section -> entry -> ... -> output. Sections carry their fate (kept, compacted,
    summarized, cut, dropped); a mend links to the section whose reference it mended."""
    import networkx as nx  # here, not at the top: it costs ~0.4 s of every CLI start

    graph = nx.DiGraph()
    graph.add_node("output:final_context", kind="output", label="final context")
    graph.add_node("output:dropped", kind="output", label="dropped")
    final = {s.key for s in final_sections}
    entries_of: dict[str, list[tuple[int, LedgerEntry]]] = {}
    for index, entry in enumerate(truncation_ledger):
        entries_of.setdefault(entry.section_key, []).append((index, entry))
    for section in sections:
        node = f"section:{section.key}"
        entries = entries_of.get(section.key, [])
        graph.add_node(node, kind="section", label=section.title, tier=section.tier, priority=section.priority,
                       fate=section_fate((e.action for _, e in entries), section.key in final),
                       section_kind=section.kind)
        for source in section.sources:
            source_node = f"source:{source.location}"
            graph.add_node(source_node, kind="source", label=_source_label(source))
            graph.add_edge(source_node, node)
        previous = node
        for index, entry in entries:
            step_node = f"entry:{index}"  # one node per ledger entry: a step acting twice is two nodes
            graph.add_node(step_node, kind="mend" if entry.action == "mended" else "step", action=entry.action,
                           label=f"{entry.step}\n{entry.action} {entry.tokens_before}->{entry.tokens_after}",
                           reason=entry.reason, section=section.key)
            graph.add_edge(previous, step_node)
            previous = step_node
        graph.add_edge(previous, "output:final_context" if section.key in final else "output:dropped")
    _link_mends(graph, sections)
    return graph


def _link_mends(graph, sections: list) -> None:
    """A "refers to" edge from each reduced section to the mends that point at its full text."""
    reduced = [s for s in sections if graph.nodes[f"section:{s.key}"]["fate"] != "kept"]
    for node, attrs in list(graph.nodes(data=True)):
        if attrs.get("kind") != "mend":
            continue
        for section in reduced:
            names = [section.title] + [source.location for source in section.sources]
            if section.key != attrs["section"] and any(f"'{n}'" in attrs["reason"] or f" {n})" in attrs["reason"]
                                                       or attrs["reason"].endswith(f" {n}") for n in names if n):
                graph.add_edge(f"section:{section.key}", node, kind="refers")


def _source_label(source) -> str:
    where = source.location
    if source.lines:
        where += f":{source.lines[0]}-{source.lines[1]}"
    return f"{source.kind}: {where}"

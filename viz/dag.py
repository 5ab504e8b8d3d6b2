"""The dataflow diagram: every node, laid out by stage left to right, one cluster per stage.

Draws what it is handed (a Hamilton driver): the nodes' ``stage`` tags give the clusters, in
the order of the pipeline (``STAGES``); inside a stage the nodes stand in columns of at most
``COLUMN_DEPTH`` steps of its own chain (top to bottom), so the picture grows in height with
long chains instead of in width. ``stage=`` draws one stage, with the nodes of other stages it
reads greyed on its left. Renders with graphviz's ``dot`` when it is installed and writes the
DOT text otherwise.
"""

from __future__ import annotations

from pathlib import Path

import graphviz

from ..nodes.types import CtxEngineError
from .output import write_digraph

STAGE_COLOURS = {
    "config": "#d9e8fb",
    "references": "#d5f0dd",
    "state": "#fde8c8",
    "disclosure": "#f3dcf5",
    "code": "#d8ecd0",
    "render": "#e4e0fb",
    "budget": "#fbe0e0",
    "monitor": "#fff3b0",
    "summarize": "#e0f4f4",
    "truncation": "#f9d6c4",
    "quality": "#e8f5c8",
    "report": "#eeeeee",
}
#: The stages in pipeline order: the clusters from left to right (the driver's inputs first).
INPUTS = "inputs"
STAGES = (INPUTS, *STAGE_COLOURS)
#: The most steps of a stage's own chain stacked in one column (a deeper chain wraps to the next).
COLUMN_DEPTH = 6
GREY = "#e6e6e6"


def dag_digraph(dr, stage: str | None = None) -> graphviz.Digraph:
    """The graphviz Digraph of every node of ``dr`` clustered by stage (or of one ``stage``,
    with the nodes of other stages it reads greyed). An unknown stage is a CtxEngineError
    naming the stages there are."""
    nodes = {n.name: n for n in dr.list_available_variables()}
    stage_of = {name: _stage(n) for name, n in nodes.items()}
    deps = {name: sorted(set(n.required_dependencies) | set(n.optional_dependencies)) for name, n in nodes.items()}
    _check_stage(stage, stage_of)
    shown = _shown(stage_of, stage)
    greyed = _greyed(shown, deps, stage)
    dot = _empty_digraph(stage)
    columns = _columns(shown, stage_of, deps)
    _draw_greyed(dot, greyed, nodes, stage_of)
    for group in STAGES:
        members = sorted(n for n in shown if stage_of[n] == group)
        if members:
            _draw_cluster(dot, group, members, nodes, columns)
    _draw_column_order(dot, _column_heads(shown, stage_of, columns))
    _draw_dependencies(dot, shown, greyed, deps)
    return dot


def _check_stage(stage: str | None, stage_of: dict[str, str]) -> None:
    """Raise a CtxEngineError naming the stages there are when ``stage`` is given and no node has it."""
    there = set(stage_of.values())
    if stage is not None and stage not in there:
        known = [s for s in STAGES if s in there]
        raise CtxEngineError(f"dag --stage {stage!r}: no node has this stage; choose one of: {', '.join(known)}")


def _shown(stage_of: dict[str, str], stage: str | None) -> set[str]:
    """The names drawn in colour: every node, or those of ``stage``."""
    return {name for name, s in stage_of.items() if stage is None or s == stage}


def _greyed(shown: set[str], deps: dict[str, list[str]], stage: str | None) -> set[str]:
    """The names drawn grey: when one stage is drawn, the nodes of other stages it reads."""
    if stage is None:
        return set()
    return {d for name in shown for d in deps[name] if d in deps} - shown


def _empty_digraph(stage: str | None) -> graphviz.Digraph:
    """The Digraph with the diagram's graph, node and edge attributes and no node yet."""
    return graphviz.Digraph(
        "dag" if stage is None else f"dag_{stage}",
        graph_attr={"rankdir": "LR", "newrank": "true", "nodesep": "0.12", "ranksep": "0.35", "fontsize": "12",
                    "fontname": "Helvetica", "compound": "true"},
        node_attr={"shape": "box", "style": "rounded,filled", "fontsize": "9", "fontname": "Helvetica",
                   "margin": "0.06,0.03", "height": "0.3"},
        edge_attr={"arrowsize": "0.5", "color": "#00000066"},
    )


def _draw_greyed(dot: graphviz.Digraph, greyed: set[str], nodes: dict, stage_of: dict[str, str]) -> None:
    """Add the greyed nodes (dashed, their stage in the tooltip), sorted by name."""
    for name in sorted(greyed):
        dot.node(name, label=_label(name), tooltip=graphviz.nohtml(f"{stage_of[name]}: {_first_line(nodes[name])}"),
                 fillcolor=GREY, color="#999999", fontcolor="#666666", style="rounded,filled,dashed")


def _draw_cluster(dot: graphviz.Digraph, group: str, members: list[str], nodes: dict, columns: dict[str, int]) -> None:
    """Add the cluster of stage ``group``: its ``members`` (inputs as ellipses) in its colour, then
    one rank=same subgraph per column."""
    with dot.subgraph(name=f"cluster_{group}") as cluster:
        cluster.attr(label=group, style="rounded,filled", fillcolor=_tint(group), color="#bbbbbb", labeljust="l")
        fill = STAGE_COLOURS.get(group, "#ffffff")
        for name in members:
            cluster.node(name, label=_label(name), tooltip=graphviz.nohtml(_first_line(nodes[name])),
                         fillcolor=fill, shape="ellipse" if nodes[name].is_external_input else "box")
        for column, names in sorted(_by_column(members, columns).items()):
            with cluster.subgraph(name=f"{group}_col{column}") as same:
                same.attr(rank="same")
                for name in names:
                    same.node(name)


def _by_column(members: list[str], columns: dict[str, int]) -> dict[int, list[str]]:
    """Column -> the ``members`` in it, in their order."""
    out: dict[int, list[str]] = {}
    for name in members:
        out.setdefault(columns[name], []).append(name)
    return out


def _draw_column_order(dot: graphviz.Digraph, heads: dict[tuple[int, int], list[str]]) -> None:
    """Add invisible edges from the first node of each column to the next: stage by stage, column
    by column, left to right."""
    order = [names[0] for _, names in sorted(heads.items())]
    for tail, head in zip(order, order[1:]):
        dot.edge(tail, head, style="invis", weight="0")


def _draw_dependencies(dot: graphviz.Digraph, shown: set[str], greyed: set[str], deps: dict[str, list[str]]) -> None:
    """Add an edge into every shown node from each of its dependencies that is drawn."""
    for head in sorted(shown):
        for tail in deps[head]:
            if tail in shown or tail in greyed:
                dot.edge(tail, head)


def write_dag(dr, output: str | Path, stage: str | None = None) -> tuple[Path, str | None]:
    """Write the diagram of ``dr`` (or of one ``stage``) to ``output`` (format from its suffix)
    with :func:`~ctxengine.viz.output.write_digraph`; (path written, note)."""
    return write_digraph(dag_digraph(dr, stage), output)


def _stage(node) -> str:
    if node.is_external_input:
        return INPUTS
    return node.tags.get("stage") if node.tags.get("stage") in STAGE_COLOURS else INPUTS


def _column_heads(shown, stage_of, columns) -> dict[tuple[int, int], list[str]]:
    """(stage's place, column) -> the names in that column, sorted."""
    out: dict[tuple[int, int], list[str]] = {}
    for name in sorted(shown):
        out.setdefault((STAGES.index(stage_of[name]), columns[name]), []).append(name)
    return out


def _columns(shown: set[str], stage_of: dict[str, str], deps: dict[str, list[str]]) -> dict[str, int]:
    """Each node's column: its stage's place times the widest stage, plus its depth in its
    stage's own chain divided by COLUMN_DEPTH (so a stage is at most a few columns wide)."""
    depth: dict[str, int] = {}

    def local(name: str) -> int:
        if name not in depth:
            depth[name] = 0  # a cycle cannot occur (Hamilton refuses one); this guards the recursion
            inside = [d for d in deps[name] if d in shown and stage_of[d] == stage_of[name]]
            depth[name] = 1 + max((local(d) for d in inside), default=-1)
        return depth[name]

    return {name: local(name) // COLUMN_DEPTH for name in shown}


def _label(name: str) -> str:
    """The node name wrapped at its underscores, about 18 characters a line."""
    lines = [""]
    for part in name.split("_"):
        piece = part if not lines[-1] else f"_{part}"
        if lines[-1] and len(lines[-1]) + len(piece) > 18:
            lines.append(piece)
        else:
            lines[-1] += piece
    return "\\n".join(lines)


def _first_line(node) -> str:
    return (node.documentation or node.name).strip().split("\n")[0]


def _tint(stage: str) -> str:
    """A pale version of the stage's colour for its cluster's background."""
    colour = STAGE_COLOURS.get(stage, "#f4f4f4").lstrip("#")
    rgb = [int(colour[i:i + 2], 16) for i in (0, 2, 4)]
    return "#" + "".join(f"{(c + 3 * 255) // 4:02x}" for c in rgb)

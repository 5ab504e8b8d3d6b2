"""The section lineage diagram: sources -> sections -> truncation steps -> the final context.

Draws the networkx graph the ``context_lineage`` node hands over; renders with graphviz's
``dot`` when it is installed and writes the DOT text otherwise.
"""

from __future__ import annotations

from pathlib import Path

import graphviz

from .output import write_digraph

KIND_STYLE = {
    "source": {"shape": "note", "fillcolor": "#d5f0dd"},
    "section": {"shape": "box", "fillcolor": "#e4e0fb"},
    "step": {"shape": "cds", "fillcolor": "#f9d6c4"},
    "output": {"shape": "doubleoctagon", "fillcolor": "#eeeeee"},
}
TIER_COLOUR = {"immutable": "#b4d8e4", "summarizable": "#e4e0fb", "discardable": "#f3dcf5"}


def lineage_digraph(graph) -> graphviz.Digraph:
    """A graphviz Digraph of a lineage graph (left to right, one style per kind of node)."""
    dot = graphviz.Digraph("lineage", graph_attr={"rankdir": "LR", "fontsize": "10"},
                           node_attr={"style": "filled", "fontsize": "10"})
    ids = {name: f"n{i}" for i, name in enumerate(graph.nodes)}  # DOT ids: no ports, no quoting traps
    for name, attrs in graph.nodes(data=True):
        style = dict(KIND_STYLE.get(attrs.get("kind"), {}))
        if attrs.get("kind") == "section":
            style["fillcolor"] = TIER_COLOUR.get(attrs.get("tier"), style["fillcolor"])
        label = attrs.get("label", name)
        if attrs.get("kind") == "section":
            label = f"{label}\n{attrs.get('tier')} ({attrs.get('priority')})"
        dot.node(ids[name], label=label.replace("\n", "\\n"), tooltip=attrs.get("reason", name), **style)
    for tail, head in graph.edges():
        dot.edge(ids[tail], ids[head])
    return dot


def write_lineage(graph, output: str | Path) -> tuple[Path, str | None]:
    """Write the lineage diagram to ``output`` (format from its suffix), atomically; (path written, note)."""
    return write_digraph(lineage_digraph(graph), output, option="--lineage")

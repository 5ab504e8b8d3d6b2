"""The section lineage diagram: sources -> sections -> truncation steps -> the final context.

Draws the networkx graph the ``context_lineage`` node hands over; renders with graphviz's
``dot`` when it is installed and writes the DOT text otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import graphviz

from .output import write_digraph

KIND_STYLE = {
    "source": {"shape": "note", "fillcolor": "#d5f0dd"},
    "section": {"shape": "box", "fillcolor": "#e4e0fb"},
    "step": {"shape": "cds", "fillcolor": "#f9d6c4"},
    "mend": {"shape": "component", "fillcolor": "#fff3b0"},
    "output": {"shape": "doubleoctagon", "fillcolor": "#eeeeee"},
}
TIER_COLOUR = {"immutable": "#b4d8e4", "summarizable": "#e4e0fb", "discardable": "#f3dcf5"}
#: How a section's fate shows: dropped greyed and dashed, reduced ones with a heavy border.
FATE_STYLE = {
    "dropped": {"style": "filled,dashed", "fillcolor": "#dddddd", "fontcolor": "#555555"},
    "summarized": {"penwidth": "2.5", "color": "#7a4fb0"},
    "cut": {"penwidth": "2.5", "color": "#c0392b"},
    "compacted": {"penwidth": "2.5", "color": "#b9770e"},
}
STEP_COLOUR = {"kept": "#eeeeee", "dropped": "#dddddd", "mended": "#fff3b0"}


def lineage_digraph(graph) -> graphviz.Digraph:
    """A graphviz Digraph of a lineage graph (left to right, one style per kind of node, one
    node per ledger entry, a section's fate in its label and border, mends linked dashed)."""
    dot = graphviz.Digraph("lineage", graph_attr={"rankdir": "LR", "fontsize": "10"},
                           node_attr={"style": "filled", "fontsize": "10"})
    ids = {name: f"n{i}" for i, name in enumerate(graph.nodes)}  # DOT ids: no ports, no quoting traps
    for name, attrs in graph.nodes(data=True):
        kind = attrs.get("kind")
        style = dict(KIND_STYLE.get(kind, {}))
        label = attrs.get("label", name)
        if kind == "section":
            style["fillcolor"] = TIER_COLOUR.get(attrs.get("tier"), style["fillcolor"])
            style.update(FATE_STYLE.get(attrs.get("fate"), {}))
            fate = attrs.get("fate", "kept")
            label = f"{label}\n{attrs.get('tier')} ({attrs.get('priority')})" + ("" if fate == "kept" else f"\n[{fate}]")
        elif kind == "step":
            style["fillcolor"] = STEP_COLOUR.get(attrs.get("action"), style["fillcolor"])
        dot.node(ids[name], label=dot_text(label), tooltip=dot_text(attrs.get("reason", name)), **style)
    for tail, head, attrs in graph.edges(data=True):
        if attrs.get("kind") == "refers":
            dot.edge(ids[tail], ids[head], style="dashed", color="#b9770e", label="refers to", fontsize="8",
                     constraint="false")
        else:
            dot.edge(ids[tail], ids[head])
    return dot


def dot_text(text: str) -> str:
    """``text`` as a DOT label or tooltip that shows exactly that text: backslashes doubled (a
    file name ending in ``\\`` would escape the closing quote, and ``\\l`` would left-justify),
    newlines as DOT's ``\\n``, never a graphviz HTML label (a title like ``<b>x</b>`` is text);
    graphviz quotes the double quotes."""
    return graphviz.nohtml(text.replace("\\", "\\\\").replace("\n", "\\n"))


def write_lineage(graph, output: str | Path, project_dir: str | os.PathLike | None = None) -> tuple[Path, str | None]:
    """Write the lineage diagram of a build of ``project_dir`` to ``output`` (format from its
    suffix) with :func:`~ctxengine.viz.output.write_digraph`; (path written, note)."""
    return write_digraph(lineage_digraph(graph), output, option="--lineage", project_dir=project_dir)

"""The dataflow diagram: every node, coloured by its stage tag.

Draws what it is handed (a Hamilton driver); renders with graphviz's ``dot`` when it is
installed and writes the DOT text otherwise.
"""

from __future__ import annotations

from pathlib import Path

from .output import write_digraph

STAGE_COLOURS = {
    "config": "#d9e8fb",
    "references": "#d5f0dd",
    "state": "#fde8c8",
    "disclosure": "#f3dcf5",
    "render": "#e4e0fb",
    "budget": "#fbe0e0",
    "monitor": "#fff3b0",
    "summarize": "#e0f4f4",
    "truncation": "#f9d6c4",
    "quality": "#e8f5c8",
    "report": "#eeeeee",
}


def stage_style(*, node, node_class):
    """Hamilton custom style: fill each node with the colour of its ``stage`` tag."""
    stage = node.tags.get("stage")
    if stage not in STAGE_COLOURS:
        return {}, node_class, None
    return {"fillcolor": STAGE_COLOURS[stage], "style": "filled"}, node_class, f"stage: {stage}"


def dag_digraph(dr):
    """The graphviz Digraph of every node of ``dr``."""
    return dr.display_all_functions(custom_style_function=stage_style, show_legend=True)


def write_dag(dr, output: str | Path) -> tuple[Path, str | None]:
    """Write the diagram of ``dr`` to ``output`` (format from its suffix), atomically; (path written, note)."""
    return write_digraph(dag_digraph(dr), output)

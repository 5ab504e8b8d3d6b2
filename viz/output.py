"""Writing a graphviz drawing: rendered with ``dot`` when it is installed, else its DOT text."""

from __future__ import annotations

import shutil
from pathlib import Path


def write_digraph(digraph, output: str | Path) -> tuple[Path, str | None]:
    """Write ``digraph`` to ``output`` (format from its suffix); (path written, note).

    Without the ``dot`` program, or for a ``.dot``/``.gv`` suffix, the DOT text is written.
    """
    output = Path(output)
    fmt = output.suffix.lstrip(".").lower() or "svg"
    if fmt in ("dot", "gv") or shutil.which("dot") is None:
        target = output if fmt in ("dot", "gv") else output.with_suffix(".dot")
        target.write_text(digraph.source, encoding="utf-8")
        note = None if fmt in ("dot", "gv") else "graphviz 'dot' is not installed; wrote the DOT text instead"
        return target, note
    digraph.format = fmt
    return Path(digraph.render(outfile=str(output), cleanup=True)), None

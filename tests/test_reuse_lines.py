"""benchmarks/reuse_lines.py counts code lines only: no blank, comment or docstring line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "reuse_lines.py"


def _module():
    spec = importlib.util.spec_from_file_location("reuse_lines", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_code_lines_leave_out_blanks_comments_and_docstrings_and_count_every_reuse_module():
    reuse = _module()
    source = '"""Module\ndoc."""\n\n# a comment\nX = (1,\n     2)  # trailing\n\n\ndef f():\n    """Doc."""\n    return """not a\ndocstring"""\n'
    assert sorted(reuse.code_lines(source)) == [5, 6, 9, 11, 12]
    assert reuse.function_lines(source, "f") == 3
    counts = reuse.reuse_modules(BENCH.parents[1])
    assert {"pipeline/caching/store.py", "nodes/lib/memo.py", "nodes/lib/atomic.py"} <= set(counts)
    assert all(lines > 0 for lines in counts.values())

"""The code that does reuse, in lines: per module and in total (issue 21's goal: at most 1,200).

    python benchmarks/reuse_lines.py [--root REPO]

A line counts when it holds code: blank lines, comment lines and docstrings are left out. The
reuse modules: the caching package (pipeline/caching/*, or pipeline/cache.py before it was
one), the memo (nodes/lib/memo.py), the user cache (nodes/lib/usercache.py), the grown-file
reader (nodes/lib/grown.py), the content digests (nodes/lib/digest.py) and the atomic writer
(nodes/lib/atomic.py, with its caller ``output_file`` of viz/output.py; before it existed, that
caller with the functions it used: ``_commit``, ``_file_object``). ``--root``: another checkout
(e.g. the main branch's, for the figure before).
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Files of the reuse layer besides the caching package, relative to the repository.
REUSE_FILES = ("nodes/lib/memo.py", "nodes/lib/usercache.py", "nodes/lib/grown.py", "nodes/lib/digest.py",
               "nodes/lib/atomic.py")
#: The output writer's functions that replace a file atomically (all present before
#: nodes/lib/atomic.py; output_file, its caller, after).
WRITER = ("viz/output.py", ("output_file", "_commit", "_file_object"))
#: Reuse functions in modules of another concern: a program's kept answer (in usercache.py
#: before it went through the memo).
REUSE_FUNCTIONS = (("nodes/lib/programs.py", ("program_answer", "binary_identity")),)
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENCODING, tokenize.ENDMARKER}


def code_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold code (not blank, comment or docstring)."""
    lines: set[int] = set()
    for token in tokenize.tokenize(io.BytesIO(source.encode("utf-8")).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines - docstring_lines(ast.parse(source))


def docstring_lines(tree: ast.AST) -> set[int]:
    """The lines of every module, class and function docstring in ``tree``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.update(range(first.lineno, first.end_lineno + 1))
    return found


def function_lines(source: str, name: str) -> int:
    """The code lines of the top-level function ``name`` of ``source`` (0 when there is none)."""
    lines = code_lines(source)
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return len([n for n in lines if start <= n <= node.end_lineno])
    return 0


def reuse_modules(root: Path) -> dict[str, int]:
    """Module path -> its code lines, for every reuse module of the checkout at ``root``."""
    package = sorted((root / "pipeline" / "caching").glob("*.py")) or [root / "pipeline" / "cache.py"]
    counts = {str(p.relative_to(root)): len(code_lines(p.read_text(encoding="utf-8"))) for p in package if p.is_file()}
    for name in REUSE_FILES:
        path = root / name
        if path.is_file():
            counts[name] = len(code_lines(path.read_text(encoding="utf-8")))
    for module, functions in (WRITER, *REUSE_FUNCTIONS):
        path = root / module
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        found = [name for name in functions if function_lines(source, name)]
        if found:
            counts[f"{module}:{','.join(found)}"] = sum(function_lines(source, name) for name in found)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to count (default: this one)")
    counts = reuse_modules(parser.parse_args().root.resolve())
    width = max(map(len, counts))
    for name, lines in counts.items():
        print(f"{name:<{width}} {lines:>6}")
    print(f"{'total':<{width}} {sum(counts.values()):>6}  (goal: at most 1,200)")


if __name__ == "__main__":
    main()

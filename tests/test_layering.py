"""The product's layers, read from its sources with ``ast``: no import cycles, nodes never reach up.

The graph holds every module of the packages pyproject.toml lists (so a module or subpackage
added later is checked without editing this file) and every import in them, at module level or
inside a function; imports under ``if TYPE_CHECKING:`` are left out (they never run). An edge
goes to the module named (``from .x import y`` is an edge to ``.x.y`` when that is a module,
else to ``.x``), not to its parent packages, as import-linter counts them.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import networkx as nx
import pytest

from conftest import REPO

#: ctxengine modules below the nodes layer may import: itself, the bundled configs and the version.
NODES_MAY_IMPORT = ("ctxengine.nodes", "ctxengine.configs", "ctxengine.version")
#: The front ends: viz draws what it is handed and never calls back into them.
FRONT_ENDS = ("ctxengine.api", "ctxengine.cli", "ctxengine.batch", "ctxengine.batch_io",
              "ctxengine.experiment", "ctxengine.serve", "ctxengine.__main__")


def product_modules(repo: Path) -> dict[str, Path]:
    """Module name -> source file, for every package pyproject.toml lists (its .py files, not deeper)."""
    tool = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = tool.get("package-dir", {})
    modules = {}
    for package in tool["packages"]:
        root = max((p for p in folders if package == p or package.startswith(p + ".")), key=len)
        folder = repo / folders[root] / Path(*package[len(root):].split(".")[1:])
        for source in sorted(folder.glob("*.py")):
            name = package if source.stem == "__init__" else f"{package}.{source.stem}"
            modules[name] = source
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` tests ``TYPE_CHECKING`` (or ``typing.TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(tree: ast.AST):
    """Every Import/ImportFrom in the tree, at any depth, except inside ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
            else:
                stack.append(child)


def imported_modules(module: str, is_package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """The known modules a module's imports load: ``from a import b`` is ``a.b`` when that is a
    module, else ``a``; ``import a.b.c`` is the longest known prefix of ``a.b.c``."""
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in _import_statements(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            anchor = ".".join(parts[:len(parts) - node.level + 1])
            base = f"{anchor}.{base}" if base else anchor
        names.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names)
    found = set()
    for name in names:
        parts = name.split(".")
        prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
        found.add(next((prefix for prefix in prefixes if prefix in known), None))
    return found - {module, None}


def import_graph(modules: dict[str, Path]) -> nx.DiGraph:
    """Module -> the product modules it imports."""
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, source in modules.items():
        tree = ast.parse(source.read_text(), filename=str(source))
        graph.add_edges_from((module, target) for target in
                             imported_modules(module, source.stem == "__init__", tree, set(modules)))
    return graph


def import_cycles(graph: nx.DiGraph) -> list[list[str]]:
    """The simple cycles of the graph, each starting at its smallest name, sorted."""
    cycles = [cycle[cycle.index(min(cycle)):] + cycle[:cycle.index(min(cycle))]
              for cycle in nx.simple_cycles(graph)]
    return sorted(cycles)


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph(product_modules(REPO))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_graph_sees_the_product_and_its_imports(graph):
    """A guard against a graph too empty to fail: known modules and a known edge are in it."""
    assert {"ctxengine.cli", "ctxengine.api", "ctxengine.nodes.types", "ctxengine.viz.report"} <= set(graph)
    assert graph.has_edge("ctxengine.viz.dag", "ctxengine.nodes.types")
    assert len(graph) > 80 and graph.number_of_edges() > 150


def test_every_folder_with_an_init_is_a_listed_package():
    """A subpackage missing from pyproject.toml would be left out of the wheel (and of this graph)."""
    modules = product_modules(REPO)
    listed = {path.parent for name, path in modules.items() if path.stem == "__init__"}
    roots = {path.parent for name, path in modules.items() if name.count(".") <= 1 and path.stem == "__init__"}
    unlisted = sorted(str(init.parent.relative_to(REPO)) for root in roots if root != REPO / "examples"
                      for init in root.rglob("__init__.py")
                      if init.parent not in listed and "examples" not in init.parts)
    assert not unlisted, f"add these packages to [tool.setuptools] packages in pyproject.toml: {unlisted}"


def test_no_import_cycles(graph):
    cycles = import_cycles(graph)
    assert not cycles, f"{len(cycles)} import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles)


def test_nodes_never_import_the_pipeline(graph):
    """nodes/ is the lower layer: the front ends (api, cli, the cache, the package top) build on it."""
    wrong = sorted((module, target) for module, target in graph.edges
                   if _within(module, ("ctxengine.nodes",)) and not _within(target, NODES_MAY_IMPORT))
    assert not wrong, "nodes/ imports the pipeline package:\n" + "\n".join(f"{m} -> {t}" for m, t in wrong)


def _is_node_module(name: str) -> bool:
    """A Hamilton node module: nodes/<stage>.py (not nodes/types.py, nodes/lib/ or the package)."""
    package, _, stem = name.rpartition(".")
    return package == "ctxengine.nodes" and stem not in ("types", "lib")


def test_node_modules_never_import_each_other(graph):
    """docs/CONTRIBUTING-NODES.md: a node module imports nodes/types.py and nodes/lib/, never
    another node module (a shared constant lives in nodes/lib/)."""
    wrong = sorted((module, target) for module, target in graph.edges
                   if _is_node_module(module) and _is_node_module(target))
    assert not wrong, "node modules import each other:\n" + "\n".join(f"{m} -> {t}" for m, t in wrong)


def test_viz_never_imports_the_front_ends(graph):
    """viz/ draws what it is handed: running nodes is the caller's (api, cli) job."""
    wrong = sorted((module, target) for module, target in graph.edges
                   if _within(module, ("ctxengine.viz",)) and _within(target, FRONT_ENDS))
    assert not wrong, "viz/ imports a front end:\n" + "\n".join(f"{m} -> {t}" for m, t in wrong)


def test_the_front_ends_named_are_product_modules():
    """A front end moved or removed (pipeline/batch_fanout.py went to benchmarks/) leaves no stale
    name behind, which would check nothing."""
    missing = sorted(set(FRONT_ENDS) - set(product_modules(REPO)))
    assert not missing, f"FRONT_ENDS names modules that are not in the product: {missing}"


def test_only_the_entry_point_imports_the_cli(graph):
    """The CLI is the top: what other front ends share with it lives in ctxengine.options."""
    importers = sorted(module for module, target in graph.edges if target == "ctxengine.cli")
    assert set(importers) <= {"ctxengine.__main__"}, f"these import the CLI (use ctxengine.options): {importers}"


def test_the_version_is_written_in_one_leaf_module():
    """pipeline/version.py holds it, imports nothing, and pyproject.toml and the package read it there."""
    import ctxengine
    from ctxengine import version

    modules = product_modules(REPO)
    writers = sorted(name for name, path in modules.items() if "__version__ =" in path.read_text())
    assert writers == ["ctxengine.version"], writers
    leaf = ast.parse(modules["ctxengine.version"].read_text())
    assert not any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(leaf))
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["dynamic"]["version"] == {"attr": "ctxengine.version.__version__"}
    assert ctxengine.__version__ == version.__version__


def test_the_graph_builder_finds_function_level_and_relative_imports(tmp_path):
    """The builder itself, on a made-up package: a cycle through a function-level import is found,
    an import under TYPE_CHECKING is not an edge."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from . import b\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from .c import x\n")
    (tmp_path / "pkg" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import f\nimport pkg.a\n")
    (tmp_path / "pkg" / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackages = ["pkg"]\n'
                                             '[tool.setuptools.package-dir]\npkg = "pkg"\n')
    found = import_graph(product_modules(tmp_path))
    assert import_cycles(found) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert not found.out_edges("pkg.d")

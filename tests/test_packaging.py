"""The wheel holds every package: pyproject.toml lists packages explicitly, so a folder split into a
package (nodes/lib/git/, textio/, sessions/ ...) that is not listed would be left out of a
non-editable install, while an editable one (the tests') still finds it."""

from __future__ import annotations

import tomllib
from conftest import REPO


def test_pyproject_lists_every_python_package_folder():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for name, folder in setuptools["package-dir"].items():
        for init in sorted((REPO / folder).rglob("__init__.py")):
            relative = init.parent.relative_to(REPO / folder).parts
            if name != "ctxengine.examples" or not relative:  # the examples' own sources are data
                found.add(".".join((name, *relative)))
    assert {"ctxengine.nodes.lib.git", "ctxengine.nodes.lib.textio", "ctxengine.nodes.lib.sessions",
            "ctxengine.nodes.lib.sessions.claude_code"} <= found
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"

"""graphviz's ``dot``, found on the absolute entries of PATH only and started by its absolute path.

The graphviz package starts ``dot`` by its bare name, so an empty, ``.`` or relative PATH entry
(a leading ``:``, ``node_modules/.bin``) would run a ``dot`` from the working folder, which
under ``ctxengine serve`` is the project. :func:`dot_program` looks it up the safe way
(:func:`ctxengine.nodes.lib.programs.executable_path`) and :func:`piped_through_dot` draws a
digraph with it, as ``digraph.pipe(format=...)`` would, raising the same graphviz exceptions.
"""

from __future__ import annotations

import os

from ..nodes.lib.programs import executable_path, safe_search_path


def dot_program(project_dir: str | os.PathLike | None = None) -> str | None:
    """The absolute path of graphviz's ``dot`` (absolute PATH entries only, never inside
    ``project_dir``, the project whose drawing it makes when there is one), or None."""
    return executable_path("dot", os.fspath(project_dir) if project_dir is not None else None)


def piped_through_dot(digraph, fmt: str, dot: str | None = None,
                      project_dir: str | os.PathLike | None = None) -> bytes:
    """``digraph`` drawn in ``fmt`` by ``dot`` (an absolute path; :func:`dot_program` of
    ``project_dir`` when None), with a PATH of absolute entries only, none inside
    ``project_dir``. Like ``digraph.pipe(format=fmt)``: ValueError for an
    unknown format, ``graphviz.ExecutableNotFound`` without dot, ``graphviz.CalledProcessError``
    when dot fails."""
    import graphviz
    from graphviz.backend import execute

    if fmt not in graphviz.FORMATS:
        raise ValueError(f"unknown format: {fmt!r}")
    project = os.fspath(project_dir) if project_dir is not None else None
    dot = dot or dot_program(project)
    if dot is None:
        raise graphviz.ExecutableNotFound(["dot"])
    data = digraph.source.encode(digraph.encoding or "utf-8")
    env = {**os.environ, "PATH": safe_search_path(None, project)}
    return execute.run_check([dot, f"-T{fmt}"], input=data, capture_output=True, env=env).stdout

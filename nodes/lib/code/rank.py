"""Files ranked by a personalised PageRank over references to definitions (aider's repo map idea).

The graph (a networkx DiGraph): one node per file; an edge from a file that uses a name to each
file that defines it, weighted by ``sqrt(uses)`` shared among the definers, times 10 for a name
the work mentions, a tenth for a private name (``_x``) or one defined in many files; a name
defined in more than :data:`MAX_DEFINERS` files (``__init__``, ``run``) draws no edge. The walk
restarts at the named files (the current task's weigh most) and the files that define the named
identifiers; with none, uniformly. The iteration is numpy over the edge arrays (networkx's own
pagerank needs scipy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .tags import FileTags

#: Restart weight of a named file by where it was named, and of a file defining a named identifier.
ORIGIN_WEIGHT = {"task": 4.0, "request": 3.0, "diff": 2.0, "plan": 2.0}
IDENTIFIER_WEIGHT = 2.0
MENTIONED = 10.0
RARE_DEFINERS = 5  # a name defined in more files than this is common: its edges weigh a tenth
MAX_DEFINERS = 20  # a name defined in more files than this (run, __init__, get) tells nothing: no edges
DAMPING = 0.85


@dataclass(frozen=True)
class Ranking:
    """Files by rank, best first, each with its score; ``edges``: the graph's edge count."""

    files: tuple[tuple[str, float], ...] = ()
    edges: int = 0


def definers_of(tags: Mapping[str, FileTags]) -> dict[str, list[str]]:
    """Each defined name -> the files defining it (in path order)."""
    out: dict[str, list[str]] = {}
    for path in sorted(tags):
        for name in tags[path].defined_names:
            out.setdefault(name, []).append(path)
    return out


@dataclass(frozen=True)
class Edges:
    """The graph's edges over ``paths`` as numpy arrays: user index, definer index, weight (one
    entry per pair, weights summed over the names one uses and the other defines)."""

    paths: tuple[str, ...]
    source: Any
    target: Any
    weight: Any

    def __len__(self) -> int:
        return len(self.source)


def reference_edges(tags: Mapping[str, FileTags], mentioned: frozenset[str] = frozenset()) -> Edges:
    """The edges from each file to the files defining the names it uses (see the module
    docstring for the weights), joined in numpy: one Python pass over the references only."""
    import numpy as np

    paths = tuple(sorted(tags))
    index = {p: i for i, p in enumerate(paths)}
    name_ids: dict[str, int] = {}
    factors: list[float] = []
    definer_files: list[int] = []
    counts: list[int] = []
    for name, files in definers_of(tags).items():
        if len(files) > MAX_DEFINERS:
            continue
        name_ids[name] = len(factors)
        factor = (MENTIONED if name in mentioned else 1.0) / len(files)
        factors.append(factor * 0.1 if name.startswith("_") or len(files) > RARE_DEFINERS else factor)
        definer_files.extend(index[p] for p in files)
        counts.append(len(files))
    ref_file: list[int] = []
    ref_name: list[int] = []
    ref_uses: list[int] = []
    get = name_ids.get
    for i, path in enumerate(paths):
        for name, uses in tags[path].references:
            nid = get(name)
            if nid is not None:
                ref_file.append(i)
                ref_name.append(nid)
                ref_uses.append(uses)
    empty = np.zeros(0, dtype=np.int64)
    if not ref_file:
        return Edges(paths, empty, empty, np.zeros(0))
    count = np.asarray(counts, dtype=np.int64)
    first = np.cumsum(count) - count  # where each name's definers start in definer_files
    names = np.asarray(ref_name, dtype=np.int64)
    repeat = count[names]
    source = np.repeat(np.asarray(ref_file, dtype=np.int64), repeat)
    offset = np.arange(repeat.sum()) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    target = np.asarray(definer_files, dtype=np.int64)[np.repeat(first[names], repeat) + offset]
    weight = np.repeat(np.sqrt(np.asarray(ref_uses, dtype=np.float64)) * np.asarray(factors)[names], repeat)
    own = source != target
    pair = source[own] * len(paths) + target[own]
    unique, inverse = np.unique(pair, return_inverse=True)
    summed = np.bincount(inverse, weights=weight[own], minlength=len(unique))
    return Edges(paths, unique // len(paths), unique % len(paths), summed)


def file_graph(tags: Mapping[str, FileTags], mentioned: frozenset[str] = frozenset()):
    """The networkx DiGraph of files, edges from users to definers with their ``weight`` (for
    drawing and inspection; the rank itself runs on the arrays)."""
    import networkx as nx

    edges = reference_edges(tags, mentioned)
    graph = nx.DiGraph()
    graph.add_nodes_from(edges.paths)
    graph.add_weighted_edges_from((edges.paths[a], edges.paths[b], float(w))
                                  for a, b, w in zip(edges.source.tolist(), edges.target.tolist(), edges.weight.tolist()))
    return graph


def restart_weights(paths: Sequence[str], named: Mapping[str, str], identifiers: Sequence[str],
                    tags: Mapping[str, FileTags]) -> dict[str, float]:
    """Where the walk restarts: named files (``named``: path -> origin) and the files defining a
    named identifier (a file name stem equal to it counts too)."""
    weights: dict[str, float] = {}
    for path, origin in named.items():
        if path in tags:
            weights[path] = weights.get(path, 0.0) + ORIGIN_WEIGHT.get(origin, 1.0)
    wanted = set(identifiers)
    if wanted:
        for path in paths:
            stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
            hits = len(wanted & tags[path].defined_names) + (stem in wanted)
            if hits:
                weights[path] = weights.get(path, 0.0) + IDENTIFIER_WEIGHT * hits
    return weights


def personalised_pagerank(edges: Edges, restart: Mapping[str, float], tolerance: float = 1e-8,
                          max_iterations: int = 100) -> list[float]:
    """PageRank of each of ``edges.paths`` over the weighted edges, restarting at ``restart``
    (uniform when empty); a file without out-edges gives its rank back to the restart distribution."""
    import numpy as np

    n = len(edges.paths)
    if n == 0:
        return []
    index = {p: i for i, p in enumerate(edges.paths)}
    source, target, weight = edges.source, edges.target, edges.weight
    out_sum = np.bincount(source, weights=weight, minlength=n)
    share = weight / out_sum[source] if len(weight) else weight
    dangling = out_sum == 0
    p = np.zeros(n)
    for path, w in restart.items():
        p[index[path]] += w
    p = p / p.sum() if p.sum() > 0 else np.full(n, 1.0 / n)
    rank = p.copy()
    for _ in range(max_iterations):
        flow = np.bincount(target, weights=rank[source] * share, minlength=n)
        new = DAMPING * (flow + rank[dangling].sum() * p) + (1 - DAMPING) * p
        done = np.abs(new - rank).sum() < n * tolerance
        rank = new
        if done:
            break
    return rank.tolist()


def ranked_files(tags: Mapping[str, FileTags], named: Mapping[str, str], identifiers: Sequence[str]) -> Ranking:
    """Every file of ``tags`` by personalised PageRank, best first (ties by path)."""
    edges = reference_edges(tags, frozenset(identifiers))
    paths = edges.paths
    scores = personalised_pagerank(edges, restart_weights(paths, named, identifiers, tags))
    order = sorted(range(len(paths)), key=lambda i: (-scores[i], paths[i]))
    return Ranking(tuple((paths[i], scores[i]) for i in order), len(edges))

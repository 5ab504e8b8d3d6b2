"""Files ranked by a personalised PageRank over references to definitions (aider's repo map idea).

The graph (a networkx DiGraph): one node per file; an edge from a file that uses a name to each
file that defines it, weighted by ``sqrt(uses)`` shared among the definers, times 10 for a name
the work mentions, a tenth for a private name (``_x``) or one defined in many files. The walk
restarts at the named files (the current task's weigh most) and the files that define the named
identifiers; with none, uniformly. The iteration is numpy over the edge arrays (networkx's own
pagerank needs scipy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from .tags import FileTags

#: Restart weight of a named file by where it was named, and of a file defining a named identifier.
ORIGIN_WEIGHT = {"task": 4.0, "request": 3.0, "diff": 2.0, "plan": 2.0}
IDENTIFIER_WEIGHT = 2.0
MENTIONED = 10.0
RARE_DEFINERS = 5  # a name defined in more files than this is common: its edges weigh a tenth
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


def reference_edges(tags: Mapping[str, FileTags], mentioned: frozenset[str] = frozenset()) -> dict[tuple[str, str], float]:
    """(user file, defining file) -> weight, summed over the names one uses and the other defines."""
    definers = definers_of(tags)
    edges: dict[tuple[str, str], float] = {}
    for path, file_tags in tags.items():
        for name, uses in file_tags.references:
            targets = definers.get(name)
            if not targets:
                continue
            weight = math.sqrt(uses) / len(targets)
            if name in mentioned:
                weight *= MENTIONED
            if name.startswith("_") or len(targets) > RARE_DEFINERS:
                weight *= 0.1
            for target in targets:
                if target != path:
                    edges[(path, target)] = edges.get((path, target), 0.0) + weight
    return edges


def file_graph(tags: Mapping[str, FileTags], mentioned: frozenset[str] = frozenset()):
    """The networkx DiGraph of files, edges from users to definers with their ``weight``."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(sorted(tags))
    graph.add_weighted_edges_from((a, b, w) for (a, b), w in reference_edges(tags, mentioned).items())
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


def personalised_pagerank(paths: Sequence[str], edges: Mapping[tuple[str, str], float],
                          restart: Mapping[str, float], tolerance: float = 1e-8, max_iterations: int = 100) -> list[float]:
    """PageRank of each of ``paths`` over the weighted ``edges``, restarting at ``restart`` (uniform
    when empty); a file without out-edges gives its rank back to the restart distribution."""
    import numpy as np

    n = len(paths)
    if n == 0:
        return []
    index = {p: i for i, p in enumerate(paths)}
    source = np.fromiter((index[a] for a, _ in edges), dtype=np.int64, count=len(edges))
    target = np.fromiter((index[b] for _, b in edges), dtype=np.int64, count=len(edges))
    weight = np.fromiter(edges.values(), dtype=np.float64, count=len(edges))
    out_sum = np.bincount(source, weights=weight, minlength=n)
    share = weight / out_sum[source] if len(edges) else weight
    dangling = out_sum == 0
    p = np.zeros(n)
    for path, w in restart.items():
        p[index[path]] += w
    p = p / p.sum() if p.sum() > 0 else np.full(n, 1.0 / n)
    rank = p.copy()
    for _ in range(max_iterations):
        flow = np.bincount(target, weights=rank[source] * share, minlength=n)
        new = DAMPING * (flow + rank[dangling].sum() * p) + (1 - DAMPING) * p
        if np.abs(new - rank).sum() < n * tolerance:
            rank = new
            break
        rank = new
    return rank.tolist()


def ranked_files(tags: Mapping[str, FileTags], named: Mapping[str, str], identifiers: Sequence[str]) -> Ranking:
    """Every file of ``tags`` by personalised PageRank, best first (ties by path)."""
    paths = sorted(tags)
    mentioned = frozenset(identifiers)
    edges = reference_edges(tags, mentioned)
    scores = personalised_pagerank(paths, edges, restart_weights(paths, named, identifiers, tags))
    order = sorted(range(len(paths)), key=lambda i: (-scores[i], paths[i]))
    return Ranking(tuple((paths[i], scores[i]) for i in order), len(edges))

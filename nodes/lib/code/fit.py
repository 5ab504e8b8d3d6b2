"""Filling the code pool: the named files first, then the repo map in rank order.

Named files start in full. While they are over their budget, the least important one (the last
by origin: plan, then diff, then request, the current task's last of all) gives up one level of
detail (full -> outline -> top -> name; outline.py); so at a tight budget a named file keeps its
class and def lines. The map then takes the best-ranked other files as outlines (top-level
definitions when the whole outline does not fit) while they fit what is left.

When the map runs, it keeps a floor of the pool (``code.mapMinShare``, or what the map would use if
less; ``map_floor``): the named files fit into the rest, so they grow from outline to full only while the map keeps its floor.
Without the floor a bigger pool could show fewer files: at 8,000 tokens the named files were
outlined and the map had the rest; at 16,000 they went to full and left the map less than before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .names import NamedFile
from .outline import LEVELS, Shown, shown_file
from .tags import FileTags

#: The map stops looking after this many ranked files in a row did not fit.
MAX_MISSES = 50
#: Tokens a file's block costs beyond its text (the blank line between blocks).
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Fitted:
    """What went into the pool: the shown files in order and the tokens they take."""

    shown: tuple[Shown, ...] = ()
    tokens: int = 0


def _sized(count: Callable[[str], int]) -> Callable[[Shown], int]:
    return lambda shown: count(shown.text) + 1


def map_floor(budget: int, map_min_share: float, map_demand: int) -> int:
    """The tokens of a pool of ``budget`` the named files leave to the map: ``map_min_share`` of
    the pool, or less when the map would not use that much (``map_demand``: what it takes with
    the whole pool), so the named files never shrink for room the map cannot use."""
    return min(int(budget * map_min_share), map_demand)


def fit_named(named: Sequence[NamedFile], sources: Mapping[str, str], tags: Mapping[str, FileTags],
              budget: int, count: Callable[[str], int]) -> Fitted:
    """The named files that could be read, each as large as ``budget`` allows (see the module
    docstring); in the order named. Below even the names, the least important are left out."""
    files = [f for f in named if f.path in sources]
    levels = [0] * len(files)
    size = _sized(count)

    def show(i: int) -> Shown:
        f = files[i]
        t = tags.get(f.path) or FileTags(None)
        return shown_file(f.path, sources[f.path], t.language, t.definitions, LEVELS[levels[i]])

    shown = [show(i) for i in range(len(files))]
    sizes = [size(s) for s in shown]
    kept = len(files)
    while sum(sizes[:kept]) > budget and kept:
        # the least important file still above "name" shrinks, else the last one goes
        candidates = [i for i in range(kept) if shown[i].level != "name"]
        if not candidates:
            kept -= 1
            continue
        i = candidates[-1]
        levels[i] = LEVELS.index(shown[i].level) + 1
        shown[i] = show(i)
        sizes[i] = size(shown[i])
    return Fitted(tuple(shown[:kept]), sum(sizes[:kept]))


def fit_map(ranked: Sequence[str], sources: Mapping[str, str], tags: Mapping[str, FileTags], budget: int,
            count: Callable[[str], int], skip: frozenset[str] = frozenset()) -> Fitted:
    """Outlines of the best-ranked files (not in ``skip``) while they fit ``budget``: each as its
    whole outline, else its top-level definitions; files that define nothing are left out."""
    size = _sized(count)
    shown: list[Shown] = []
    used = misses = 0
    for path in ranked:
        if misses >= MAX_MISSES or budget - used < 8:
            break
        if path in skip or path not in sources:
            continue
        t = tags.get(path)
        if t is None or not t.definitions:
            continue
        for level in ("outline", "top"):
            candidate = shown_file(path, sources[path], t.language, t.definitions, level)
            cost = size(candidate)
            if candidate.level != "name" and used + cost <= budget:
                shown.append(candidate)
                used += cost
                misses = 0
                break
        else:
            misses += 1
    return Fitted(tuple(shown), used)

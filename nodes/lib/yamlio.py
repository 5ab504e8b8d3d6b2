"""YAML parsing with libyaml's C loader when it is there (about 10x faster than pure Python),
with limits that keep a hostile file small: a size cap, an alias cap, a cap on the node count
once aliases are expanded (a "billion laughs" alias bomb), and a nesting cap."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAMLError = yaml.YAMLError

MAX_CHARS = 1 << 20  # text of one YAML document (configuration, rules, frontmatter)
MAX_ALIASES = 256  # *alias references in one text
MAX_NODES = 200_000  # scalars and collections once every alias is expanded
MAX_DEPTH = 64  # nested collections


class YAMLLimitError(YAMLError):
    """YAML text over one of the limits of :func:`load_yaml`; ``problem`` says which."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None


def load_yaml(
    text: str,
    *,
    max_chars: int = MAX_CHARS,
    max_aliases: int = MAX_ALIASES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """``yaml.safe_load`` semantics, C-accelerated; YAMLLimitError (a YAMLError) past a limit."""
    if len(text) > max_chars:
        raise YAMLLimitError(f"{len(text):,} characters, more than the {max_chars:,} a YAML file may have")
    if "&" in text or "*" in text:  # an alias needs an anchor: text without both is read directly
        _check_events(text, max_aliases, max_nodes, max_depth)
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except RecursionError:
        raise YAMLLimitError(f"nested deeper than {max_depth} levels") from None
    depth = nesting_depth(data, max_depth)
    if depth > max_depth:
        raise YAMLLimitError(f"nested deeper than {max_depth} levels")
    return data


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply dicts and lists nest in ``value`` (a scalar: 0), counted without recursion;
    the count stops at ``limit + 1``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _check_events(text: str, max_aliases: int, max_nodes: int, max_depth: int) -> None:
    """Walk the parser's events once: count aliases, the expanded size of every anchored node,
    and the nesting, before anything is built."""
    sizes: dict[str, int] = {}  # anchor -> nodes it stands for once expanded
    open_: list[list] = [[None, 0]]  # [anchor, nodes so far] per open collection (a root frame)
    aliases = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > max_aliases:
                raise YAMLLimitError(f"more than {max_aliases} aliases (*name); a YAML file may use at most "
                                     f"{max_aliases} (an alias bomb?)")
            if event.anchor not in sizes:
                raise YAMLLimitError(f"alias *{_short(event.anchor)} refers to an anchor that is not complete "
                                     "(a recursive structure); write the value out")
            size = sizes[event.anchor]
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            open_.append([event.anchor, 1])
            if len(open_) - 1 > max_depth:
                raise YAMLLimitError(f"nested deeper than {max_depth} levels")
            continue
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, size = open_.pop()
            if anchor is not None:
                sizes[anchor] = size
        else:
            continue
        open_[-1][1] += size
        if open_[-1][1] > max_nodes:
            raise YAMLLimitError(f"more than {max_nodes:,} values once its aliases are expanded (an alias bomb?); "
                                 "write the values out or use fewer aliases")


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

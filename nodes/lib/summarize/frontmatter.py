"""YAML frontmatter: split off and shown compactly."""

from __future__ import annotations

from typing import Any, Mapping

import yaml

from ..markdown import frontmatter_block



def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(raw YAML or None, body); never raises (bad YAML is kept as raw lines)."""
    raw, body, _ = frontmatter_block(text)
    return raw, body


def _compact_value(value: Any, depth: int, tight: bool) -> Any:
    max_str, max_items, max_depth = (60, 3, 1) if tight else (160, 8, 2)
    if isinstance(value, str):
        value = " ".join(value.split())
        return value if len(value) <= max_str else value[: max_str - 1].rstrip() + "…"
    if isinstance(value, Mapping):
        if depth >= max_depth:
            return f"… ({len(value)} keys)"
        items = list(value.items())
        out = {k: _compact_value(v, depth + 1, tight) for k, v in items[:max_items]}
        if len(items) > max_items:
            out["…"] = f"{len(items) - max_items} more"
        return out
    if isinstance(value, (list, tuple)):
        if depth >= max_depth:
            return f"… ({len(value)} items)"
        out = [_compact_value(v, depth + 1, tight) for v in value[:max_items]]
        if len(value) > max_items:
            out.append(f"… {len(value) - max_items} more")
        return out
    return value


def _flow(value: Any) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True, sort_keys=False)
    dumped = dumped.strip()
    if dumped.endswith("\n..."):
        dumped = dumped[:-4].rstrip()
    elif dumped.endswith("..."):
        dumped = dumped[:-3].rstrip()
    return dumped


def compact_frontmatter(raw: str, tight: bool = False) -> str:
    """The YAML frontmatter ``raw`` (without its ``---`` lines) as a compact block: one
    ``key: value`` line per top-level key, nested values in flow style, long strings and
    lists shortened (``tight`` shortens harder). Still valid YAML when the input was;
    unparseable YAML keeps its non-blank, non-comment lines (shortened)."""
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        data = None
    lines: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            try:
                lines.append(f"{_flow(key)}: {_flow(_compact_value(value, 0, tight))}")
            except yaml.YAMLError:  # an unrepresentable value: keep its repr
                lines.append(f"{key}: {str(value)[:60]}")
    else:
        limit = 60 if tight else 160
        for line in raw.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line if len(line) <= limit else line[: limit - 1] + "…")
    return "---\n" + "\n".join(lines) + "\n---"


def frontmatter_within(raw: str, max_tokens: int, counter) -> str | None:
    """The YAML frontmatter ``raw`` as it is written, as many of its first lines as fit
    ``max_tokens`` with its ``---`` lines and a ``# … N more lines`` comment for the rest (a
    summary with room to spare shows more than the compact form); None when not even one line
    fits."""
    lines = [line for line in raw.split("\n") if line.strip()]

    def block(k: int) -> str:
        more = f"\n# … {len(lines) - k} more line{'s' if len(lines) - k != 1 else ''}" if k < len(lines) else ""
        return "---\n" + "\n".join(lines[:k]) + more + "\n---"

    lo, hi = 0, len(lines)  # the most lines known to fit, the fewest known to be over (+1)
    if counter.count(block(hi)) <= max_tokens:
        return block(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if counter.count(block(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return block(lo) if lo else None

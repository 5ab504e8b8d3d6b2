"""What the front ends share: the choices of ``--mode`` and ``--phase``, reading ``--set KEY=VALUE``,
and the one line an unexpected error prints.

A leaf module (it imports only nodes/): the CLI, the batch job reader, the experiment and the MCP
server import it, and none of them imports the CLI.
"""

from __future__ import annotations

from typing import Any

from .nodes.lib.quote import QUOTE_LIMIT, quoted
from .nodes.errors import ConfigError

MODES = ("dev", "research", "review")
PHASES = ("auto", "execute", "research", "plan", "verify", "repair", "discuss")


def parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` from the CLI: the value is read as a YAML scalar (32000 -> int, true -> bool)."""
    from .nodes.lib.yamlio import YAMLError, load_yaml  # PyYAML: ~20 ms that --help and --version skip

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {quoted(text)}: write it as dotted.key=value, e.g. --set budget.maxTokens=32000")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except YAMLError:
        value = raw
    return key.strip(), value


def internal_error(exc: BaseException) -> str:
    """One line for an unexpected exception: its type and the first line of its message, capped."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    first = first if len(first) <= QUOTE_LIMIT else f"{first[:QUOTE_LIMIT]}... ({len(first):,} characters in all)"
    return f"internal error: {type(exc).__name__}: {first}"

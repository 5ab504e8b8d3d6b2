"""The answer reserve: tokens of the budget kept free for the model's response."""

from __future__ import annotations

from typing import Any, Mapping

AUTO = "auto"


def is_auto(reserve: Any) -> bool:
    """Whether budget.reserveTokens asks for the scaled reserve ("auto" or null)."""
    return reserve is None or reserve == AUTO


def effective_reserve(budget: Mapping[str, Any], model: Mapping[str, Any], max_tokens: int | None = None) -> int:
    """Tokens kept free for the answer. An explicit budget.reserveTokens is used as given;
    "auto" (or null) is budget.reserveShare of the budget (``max_tokens``, by default
    budget.maxTokens, never more than the model's window), capped by the model's
    maxOutputTokens."""
    explicit = budget["reserveTokens"]
    if not is_auto(explicit):
        return int(explicit)
    tokens = int(budget["maxTokens"] if max_tokens is None else max_tokens)
    window = model.get("window")
    if window:
        tokens = min(tokens, int(window))
    reserve = int(tokens * float(budget["reserveShare"]))
    cap = model.get("maxOutputTokens")
    return min(reserve, int(cap)) if cap else reserve

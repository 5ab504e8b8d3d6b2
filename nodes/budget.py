"""Stage 5, budget validation: the model preset, the token counter and the budget report."""

from __future__ import annotations

from hamilton.function_modifiers import tag

from .lib.tokens import TokenCounter, budget_report_for, model_presets, token_counter_for
from .types import BudgetReport, ConfigError


@tag(stage="budget")
def model_preset(context_config: dict) -> dict:
    """The configured model's preset from configs/models.yaml: its window and encoding."""
    presets = model_presets()
    name = context_config["model"]
    if name not in presets:
        known = ", ".join(sorted(presets))
        raise ConfigError(f"key 'model' is {name!r}, which configs/models.yaml does not know; use one of {known}")
    return {"name": name, **presets[name]}


@tag(stage="budget")
def token_counter(model_preset: dict) -> TokenCounter:
    """Exact tiktoken counter for the model's encoding, loaded offline (cl100k_base fallback)."""
    return token_counter_for(model_preset["encoding"])


@tag(stage="budget")
def available_tokens(context_config: dict) -> int:
    """Tokens the context may use: budget.maxTokens minus budget.reserveTokens."""
    budget = context_config["budget"]
    return int(budget["maxTokens"]) - int(budget["reserveTokens"])


@tag(stage="budget")
def budget_report(rendered_context: str, token_counter: TokenCounter, available_tokens: int) -> BudgetReport:
    """Exact token count of the assembled context against the available budget."""
    return budget_report_for(token_counter.count(rendered_context), available_tokens)


@tag(stage="budget")
def budget_warnings(token_counter: TokenCounter) -> tuple:
    """Warnings of this stage: a tokenizer that had to fall back."""
    return (token_counter.warning,) if token_counter.warning else ()

"""Stage 5, budget validation: the model preset, the token counter and the budget report."""

from hamilton.function_modifiers import cache, tag

from .lib.memo import NO_MEMO, Memo
from .lib.quote import quoted
from .lib.settings import BudgetSettings
from .lib.truncate import CachedCounter, near_threshold
from .lib.tokens import TokenCounter, budget_report_for, model_presets, token_counter_for
from .types import BudgetReport, ConfigError


@tag(stage="budget")
def model_preset(budget_settings: BudgetSettings) -> dict:
    """The configured model's preset from configs/models.yaml: its window, encoding and maxOutputTokens."""
    presets = model_presets()
    name = budget_settings.model
    if name not in presets:
        known = ", ".join(sorted(presets))
        raise ConfigError(f"key 'model' is {quoted(name)}, which configs/models.yaml does not know; use one of {known}")
    return {"name": name, **presets[name]}


@tag(stage="budget")
def token_counter(model_preset: dict) -> TokenCounter:
    """Exact tiktoken counter for the model's encoding, loaded offline (cl100k_base fallback)."""
    return token_counter_for(model_preset["encoding"])


@cache(behavior="recompute")  # holds the memo, which a stored value would not keep
@tag(stage="budget")
def exact_counter(token_counter: TokenCounter, memo: Memo = NO_MEMO) -> CachedCounter:
    """The exact counter the later stages use: the token counter keeping its counts in the
    ``memo`` (by the digest of each piece of text; the memo is not part of the counter's value:
    counting changes no node's inputs), so text that stays (from the assembled context to the
    final one, from one build to the next) is counted once."""
    return CachedCounter(token_counter, memo)


@tag(stage="budget")
def reserve_tokens(budget_settings: BudgetSettings, model_preset: dict) -> int:
    """Tokens kept free for the model's answer: budget.reserveTokens, or when it is "auto"
    budget.reserveShare of the budget capped by the model's maxOutputTokens."""
    return budget_settings.reserve_for(model_preset)


@tag(stage="budget")
def available_tokens(budget_settings: BudgetSettings, model_preset: dict, reserve_tokens: int) -> int:
    """Tokens the context may use: budget.maxTokens (never more than the model's window)
    minus the reserve."""
    window = min(budget_settings.max_tokens, int(model_preset["window"]))
    available = window - reserve_tokens
    if available <= 0:
        raise ConfigError(
            f"key 'budget.reserveTokens' ({budget_settings.reserve_tokens}) leaves nothing of the {window}-token window "
            f"(budget.maxTokens {budget_settings.max_tokens}, model {quoted(model_preset['name'])} window {model_preset['window']}); "
            "lower budget.reserveTokens (or set it to auto) or choose a model with a larger window"
        )
    return available


@tag(stage="budget")
def budget_report(
    rendered_context: str, exact_counter: CachedCounter, available_tokens: int, budget_settings: BudgetSettings
) -> BudgetReport:
    """Tokens of the assembled context against the available budget: an exact count when the
    estimate (chars / 4) is near the budget (within budget.exactBand times it, which holds the
    soft limit), the estimate when it is clearly far (a multi-MB context is not counted twice);
    ``exact`` says which."""
    estimate = exact_counter.estimate(rendered_context)
    band = budget_settings.exact_band
    if near_threshold(estimate, available_tokens, band):
        return budget_report_for(exact_counter.count(rendered_context), available_tokens)
    return budget_report_for(estimate, available_tokens, exact=False)


@tag(stage="budget")
def budget_warnings(token_counter: TokenCounter, model_preset: dict, budget_settings: BudgetSettings) -> tuple:
    """Warnings of this stage: a tokenizer that had to fall back, a budget larger than the model's window."""
    warnings = [token_counter.warning] if token_counter.warning else []
    max_tokens = budget_settings.max_tokens
    if max_tokens > int(model_preset["window"]):
        warnings.append(f"budget.maxTokens {max_tokens} is larger than model {quoted(model_preset['name'])}'s window "
                        f"of {model_preset['window']} tokens; the window is used")
    return tuple(warnings)

"""Quality and final output (placeholder until the truncation engine lands)."""

from hamilton.function_modifiers import tag

from .lib.tokens import budget_report_for
from .lib.tokens import TokenCounter
from .types import BudgetReport


@tag(stage="quality")
def final_sections(sections: list) -> list:
    """The sections as they go out."""
    return list(sections)


@tag(stage="quality")
def final_context(rendered_context: str) -> str:
    """The context as it goes out."""
    return rendered_context


@tag(stage="quality")
def final_section_tokens(final_sections: list, token_counter: TokenCounter) -> dict:
    """Exact tokens of each final section's content."""
    return {s.key: token_counter.count(s.content) for s in final_sections}


@tag(stage="quality")
def final_budget_report(final_context: str, token_counter: TokenCounter, available_tokens: int) -> BudgetReport:
    """Exact budget report of the final context."""
    return budget_report_for(token_counter.count(final_context), available_tokens)

"""Quality: the context as it goes out. Cross-references to removed content are mended
(``crossref_mending``), the rendered prompt is counted exactly and cut further until it fits
(``exact_fit``, the last row of the table of steps: the estimates that steered truncation are
checked here), the required headings are checked, and the final budget is reported from the
exact count.
"""

import re
from dataclasses import replace

from hamilton.function_modifiers import tag

from .lib import truncate as _t
from .lib.crossref import CrossrefMending, mend_cross_references
from .lib.digest import long_text
from .lib.layout import render_context
from .lib.settings import QualitySettings
from .lib.tokens import budget_report_for
from .types import BudgetExceededError, BudgetReport, Section, TemplateError

STAGE = "quality"
FIT_STEP = _t.step_named("exact_fit").name


@tag(stage=STAGE)
def crossref_mending(slack_refilled: _t.TruncationState) -> CrossrefMending:
    """The sections after truncation with references to sections that were dropped, summarized
    or cut pointed at their full text (nodes/lib/crossref.py), and a note per mended
    reference. Immutable sections and session transcripts (a record of what was said) never
    change."""
    sections, notes = _mended(slack_refilled)
    return CrossrefMending(tuple(sections), tuple(notes))


@tag(stage=STAGE)
def crossref_fixed_sections(crossref_mending: CrossrefMending) -> list[Section]:
    """The sections after truncation, with their cross-references mended."""
    return list(crossref_mending.sections)


@tag(stage=STAGE)
def exact_fit(
    crossref_mending: CrossrefMending,
    slack_refilled: _t.TruncationState,
    truncation_trigger: _t.TruncationTrigger,
    rendered_context: str,
    context_template: str,
    mode_template: str,
    quality_settings: QualitySettings,
    exact_counter: _t.CachedCounter,
    truncation_strategies: dict,
) -> _t.ExactFit:
    """The prompt rendered and counted exactly and, while over the target, cut further (lowest
    priority first) and rendered again, at most truncation.maxFitPasses times. A context no
    step changed is the rendered context itself, byte for byte."""
    state, sections, notes = slack_refilled, crossref_mending.sections, crossref_mending.notes
    settings = quality_settings
    late, passes = None, 0
    for passes in range(1, settings.max_fit_passes + 1):
        text, tokens = _rendered(state, sections, rendered_context, truncation_trigger, context_template,
                                 mode_template, settings.escape, exact_counter)
        if tokens <= min(state.target, state.limit):
            break
        if not truncation_trigger.triggered and not state.ledger and late is None:
            late = _late_trigger(tokens, state, truncation_trigger)
            if late is None:
                break
            state = replace(state, target=truncation_trigger.soft_limit_tokens)
        state = replace(state, overhead=state.overhead + tokens - state.total)  # the exact count rules
        more = _t.cut_more(state, FIT_STEP, truncation_strategies, exact_counter, settings.min_keep_tokens)
        if more.ledger == state.ledger:
            if tokens <= state.limit:
                break  # only immutable content left: the soft target cannot be met
            raise BudgetExceededError(_overflow_message(state, tokens))
        state = more
        sections, notes = _mended(state)
    return _t.ExactFit(state, tuple(sections), long_text(text), tokens, passes, tuple(notes), late)


def _late_trigger(tokens: int, state: _t.TruncationState, trigger: _t.TruncationTrigger) -> str | None:
    """Why a context the trigger let through must be cut after all: "hard" or "soft", or None."""
    return "hard" if tokens > state.limit else "soft" if tokens > trigger.soft_limit_tokens else None


@tag(stage=STAGE)
def fitted_context(exact_fit: _t.ExactFit, exact_counter: _t.CachedCounter) -> _t.FittedContext:
    """The final prompt with its exact token count and each final section's exact tokens."""
    fit = exact_fit
    section_tokens = _section_tokens(fit.state, fit.sections, exact_counter)
    return _t.FittedContext(fit.state, fit.sections, fit.text, fit.tokens, section_tokens, fit.passes, fit.notes,
                            fit.late_trigger)


def _rendered(state, sections, rendered_context, trigger, context_template, mode_template, escape: str,
              counter) -> tuple[str, int]:
    """The prompt and its exact tokens; the rendered context unchanged when no step acted."""
    if not state.ledger:
        return rendered_context, trigger.initial_tokens if trigger.initial_exact else counter.count(rendered_context)
    text = render_context(sections, context_template, mode_template, escape)
    return text, counter.count(text)


def _mended(state: _t.TruncationState) -> tuple[list[Section], list[str]]:
    """The state's sections with cross-references mended (nodes/lib/crossref.py), immutable
    sections restored byte for byte whatever the mender did."""
    sections = list(state.sections)
    if not state.removed:
        return sections, []
    order = list(state.originals)
    transcripts = {s.key: s for s in sections if s.kind == "history"}
    others = [s for s in sections if s.key not in transcripts]
    mended, notes = mend_cross_references(others, {k: dict(v) for k, v in state.removed.items()}, order)
    by_key = {s.key: s for s in mended}
    originals = {s.key: s for s in sections if s.tier == "immutable"}  # byte-identical, whatever the mender did
    return [transcripts.get(s.key) or originals.get(s.key) or by_key[s.key] for s in sections], list(notes)


def _section_tokens(state: _t.TruncationState, sections, counter: _t.CachedCounter) -> dict[str, int]:
    """Exact tokens of each final section: the state's exact counts where its content is the
    one counted, a new count where mending or an estimate leaves none."""
    current = {s.key: s for s in state.sections}
    out = {}
    for section in sections:
        same = current.get(section.key) is section or (
            section.key in current and current[section.key].content == section.content)
        out[section.key] = state.tokens[section.key] if same and section.key in state.exact else counter.count(
            section.content)
    return out


def _overflow_message(state: _t.TruncationState, tokens: int) -> str:
    immutable = [s for s in state.sections if s.tier == "immutable"]
    listed = "; ".join(f"{s.title} ({s.key}): {state.tokens[s.key]:,} tokens" for s in immutable)
    return (f"the rendered context needs {tokens:,} tokens with only the immutable sections left ({listed}), "
            f"but {state.limit:,} are available ({tokens - state.limit:,} short); raise budget.maxTokens or "
            f"lower budget.reserveTokens")


@tag(stage=STAGE)
def structure_check(fitted_context: _t.FittedContext, quality_settings: QualitySettings) -> dict:
    """The required headings (truncation.requiredSections) found in the final context; a
    missing one is an error naming it and the template that should render it."""
    text = fitted_context.text
    found = {}
    for name in quality_settings.required_sections:
        pattern = re.compile(r"^#{1,6}[ \t]+" + re.escape(name) + r"[ \t]*$", re.M)
        found[name] = bool(pattern.search(text))
        if not found[name]:
            template = quality_settings.context_template
            where = template if ("/" in template or template.endswith(".md")) else f"configs/templates/{template}.md"
            raise TemplateError(
                f"the final context has no '{name}' heading: the context template {where} (with mode "
                f"template configs/modes/{quality_settings.template}.md) must render it, or remove it from "
                f"truncation.requiredSections"
            )
    return found


@tag(stage=STAGE)
def final_sections(fitted_context: _t.FittedContext) -> list:
    """The sections as they go out (dropped ones gone, cut ones shortened, references mended)."""
    return list(fitted_context.sections)


@tag(stage=STAGE)
def final_context(fitted_context: _t.FittedContext, structure_check: dict) -> str:
    """The context as it goes out, once its structure is checked."""
    return fitted_context.text


@tag(stage=STAGE)
def final_section_tokens(fitted_context: _t.FittedContext) -> dict:
    """Exact tokens of each final section's content."""
    return dict(fitted_context.section_tokens)


@tag(stage=STAGE)
def final_budget_report(fitted_context: _t.FittedContext, available_tokens: int) -> BudgetReport:
    """The budget of the final context, from its exact token count."""
    return budget_report_for(fitted_context.tokens, available_tokens)

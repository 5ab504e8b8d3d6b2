"""Stage 4, render: the request and instruction sections, the render order, the templates and
the rendered prompt.

The context template (configs/templates/<contextTemplate>.md, or a path) lays the sections
out; the mode template (configs/modes/<template>.md: dev, research, review) wraps that
context in a head and a tail around ``{{{context}}}``. The two are chosen independently.
The data model the context template sees is documented in nodes/lib/layout.py.
"""

import os
from importlib import resources

from hamilton.function_modifiers import cache, extract_fields, tag

from .lib.digest import long_text
from .lib.quote import quoted
from .lib.layout import layout_order, render_context, render_parts
from .lib.settings import RenderSettings, trust_at
from .lib.textio import Refused, TextUnavailable, Trust, read_local_text, trusted_path
from .types import ConfigError, Section, Source

_PACKAGE = "ctxengine.configs"
_REFERENCE_ORDER = ("rules",)  # kinds rendered before the other reference sections


@tag(stage="render")
def request_section(user_request: str, render_settings: RenderSettings) -> Section:
    """The user's request as an immutable section of the request pool."""
    return Section(
        key="request",
        title="User Request",
        kind="request",
        content=user_request,
        priority=render_settings.request_priority,
        pool="request",
        sources=(Source("request", "user_request"),),
    )


@tag(stage="render")
def instructions_section(render_settings: RenderSettings) -> Section:
    """The output instructions (config key outputInstructions) as a section of the request pool."""
    return Section(
        key="instructions",
        title="Output Instructions",
        kind="instructions",
        content=render_settings.output_instructions,
        priority=render_settings.instructions_priority,
        pool="request",
        sources=(Source("config", "outputInstructions"),),
    )


@tag(stage="render")
def sections(
    reference_sections: list,
    disclosed_sections: list,
    state_sections: list,
    request_section: Section,
    instructions_section: Section,
    code_sections: list = (),
) -> list:
    """Every section in render order, stable first and volatile last (lib/layout.py
    ``layout_order``): rules, instructions, references (configured, then disclosed), plan,
    roadmap, environment, tree, repo map; then documents disclosed for this request, the named
    code files, git, history, request. ``code_sections``: the code stage's (none in a graph
    without it)."""
    loaded = list(reference_sections) + list(disclosed_sections)
    assembled = loaded + list(state_sections) + list(code_sections)
    rules = [s for s in assembled if s.kind in _REFERENCE_ORDER]
    references = [s for s in loaded if s.kind not in _REFERENCE_ORDER]
    state = [s for s in list(state_sections) + list(code_sections) if s.kind not in _REFERENCE_ORDER]
    return layout_order(rules + references + state + [request_section, instructions_section])


@tag(stage="render", loader="file", target_=...)
@cache(behavior="recompute")
@extract_fields({"context_template": str, "template_warnings": tuple})
def context_template_file(render_settings: RenderSettings, trust_settings: Trust, project_dir: str) -> dict:
    """The text of the context template (``context_template``): built-in
    configs/templates/<contextTemplate>.md, or the file contextTemplate names when it is a path
    (relative paths are under <project>/.planning/), read under the trust rules with the
    references.maxFileBytes cap; a template they refuse is a warning (``template_warnings``)
    and the built-in "context" template is used."""
    value = render_settings.context_template
    path = _template_path(value, project_dir)
    if path is None:
        return {"context_template": _builtin_text("templates", value, "contextTemplate"), "template_warnings": ()}
    trust = trust_at(trust_settings, project_dir)
    if trusted_path(path, trust) and (not os.path.lexists(path) or os.path.isdir(path)):  # outside: refused unlooked
        raise ConfigError(
            f"contextTemplate {quoted(value)}: no file {path}; give a path relative to .planning/ "
            f"or one of the built-in names: {', '.join(_builtin_names('templates'))}"
        )
    cap = render_settings.max_file_bytes
    try:
        loaded = read_local_text(path, trust, cap, "references.maxFileBytes",
                                 f"contextTemplate {quoted(value)} ({path})")
    except Refused as exc:
        return {"context_template": _builtin_text("templates", "context", "contextTemplate"),
                "template_warnings": (f"{exc}; the built-in context template is used instead",)}
    except TextUnavailable as exc:
        raise ConfigError(f"{exc}; give a text template") from None
    return {"context_template": loaded.text, "template_warnings": loaded.notes(f"contextTemplate {quoted(value)} ({path})")}


@tag(stage="render", loader="file")
@cache(behavior="recompute")
def mode_template(render_settings: RenderSettings) -> str:
    """The text of the mode template configs/modes/<template>.md: a head and a tail around
    ``{{{context}}}`` that set the agent's task (dev, research, review)."""
    return _builtin_text("modes", render_settings.template, "template")


@tag(stage="render")
def rendered_context(sections: list, context_template: str, mode_template: str, render_settings: RenderSettings) -> str:
    """The full prompt: the mode template around the context template rendered over the sections."""
    return long_text(render_context(
        sections,
        context_template,
        mode_template,
        escape=render_settings.escape,
        context_name=_template_name(render_settings),
        mode_name=f"configs/modes/{render_settings.template}.md",
    ))


@tag(stage="render")
def stable_prefix(final_context: str, final_sections: list, context_template: str, mode_template: str,
                  render_settings: RenderSettings) -> str:
    """The stable part of the final context: its text up to the template's ``{{{cacheBreak}}}``
    (rules, instructions, references, plan, environment, tree), the part a provider's prompt
    cache can serve from one round to the next."""
    stable, _ = render_parts(final_sections, context_template, mode_template, render_settings.escape)
    if final_context.startswith(stable):
        return stable
    shared = os.path.commonprefix([final_context, stable])
    return shared[: shared.rfind("\n") + 1]


# ----------------------------------------------------------------------------- helpers


def _template_name(render_settings: RenderSettings) -> str:
    """How messages name the configured context template (built-in file or the given path)."""
    value = render_settings.context_template
    return value if _is_path(value) else f"configs/templates/{value}.md"


def _is_path(value: str) -> bool:
    return "/" in value or os.sep in value or value.endswith(".md")


def _template_path(value: str, project_dir: str) -> str | None:
    if not _is_path(value):
        return None
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) else os.path.join(project_dir, ".planning", path)


def _builtin_names(folder: str) -> list[str]:
    root = resources.files(_PACKAGE).joinpath(folder)
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".md"))


def _builtin_text(folder: str, name: str, key: str) -> str:
    entry = resources.files(_PACKAGE).joinpath(folder).joinpath(f"{name}.md")
    if not entry.is_file():
        raise ConfigError(
            f"{key} {quoted(name)}: there is no configs/{folder}/{name}.md; "
            f"use one of: {', '.join(_builtin_names(folder))}"
        )
    return entry.read_text(encoding="utf-8")

"""How sections become the prompt: the data the context template sees, and the two-step render.

The data model of a context template:

* ``system``: list of ``{key, title, kind, content, deprecated}`` for sections of kind ``rules``
* ``references``: the same for kind ``reference``
* ``plan``, ``roadmap``, ``history``, ``git``, ``tree``, ``environment``: one such dict each, absent when
  there is no section of that kind (a second one of a kind goes to ``extra``)
* ``extra``: list of the sections of any other kind
* ``sections``: every section above, in order
* ``userRequest``, ``outputInstructions``: strings ("" when absent)

The mode template sees the same data plus ``context``: the rendered context template.
Contents are values, so they are never expanded again.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..types import Section
from .template import compile_template

STATE_KINDS = ("plan", "roadmap", "history", "git", "tree", "environment")

# The budget pool each section kind draws from (budget.pools in configs/defaults.yaml holds the
# shares). Git changes and the file tree are the working environment the article's
# "environment" pool stands for, so they share it with the environment section; the roadmap
# is part of the plan.
POOL_OF_KIND = {
    "rules": "system",
    "reference": "references",
    "plan": "plan",
    "roadmap": "plan",
    "history": "history",
    "git": "environment",
    "tree": "environment",
    "environment": "environment",
    "request": "request",
    "instructions": "request",
}
POOLS = ("system", "references", "plan", "environment", "history", "request")
LIST_KINDS = {"rules": "system", "reference": "references"}
TEXT_KINDS = {"request": "userRequest", "instructions": "outputInstructions"}


def section_item(section: Section) -> dict:
    """The template's view of one section; content without leading or trailing blank lines."""
    return {
        "key": section.key,
        "title": section.title,
        "kind": section.kind,
        "content": section.content.strip("\r\n"),
        "deprecated": bool(section.deprecated),
    }


def context_data(sections: Iterable[Section]) -> dict[str, Any]:
    """The data model a context template renders (see the module docstring)."""
    data: dict[str, Any] = {"system": [], "references": [], "extra": [], "sections": []}
    texts: dict[str, list[str]] = {name: [] for name in TEXT_KINDS.values()}
    for section in sections:
        item = section_item(section)
        if section.kind in TEXT_KINDS:
            texts[TEXT_KINDS[section.kind]].append(item["content"])
            continue
        data["sections"].append(item)
        if section.kind in LIST_KINDS:
            data[LIST_KINDS[section.kind]].append(item)
        elif section.kind in STATE_KINDS and section.kind not in data:
            data[section.kind] = item
        else:
            data["extra"].append(item)
    data.update({name: "\n\n".join(parts) for name, parts in texts.items()})
    return data


def render_context(
    sections: Iterable[Section],
    context_template: str,
    mode_template: str,
    escape: str = "none",
    context_name: str = "context template",
    mode_name: str = "mode template",
) -> str:
    """The full prompt: the mode template rendered with ``context`` = the context template
    rendered over the sections' data. Template text never adds two blank lines in a row."""
    data = context_data(sections)
    context = compile_template(context_template, context_name).render(data, escape, squeeze=True)
    prompt = compile_template(mode_template, mode_name).render(
        {**data, "context": context.strip("\n")}, escape, squeeze=True
    )
    return prompt.strip("\n") + "\n"

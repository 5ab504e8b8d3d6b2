"""How sections become the prompt: the data the context template sees, and the two-step render.

The data model of a context template:

* ``system``: list of ``{key, title, kind, content, deprecated}`` for sections of kind ``rules``
* ``references``: the same for kind ``reference``; split in two by how long they stay:
  ``stableReferences`` (configured, and disclosed for the mode, the phase or the plan) and
  ``requestReferences`` (disclosed for this request or diff: they change with the work)
* ``plan``, ``roadmap``, ``history``, ``git``, ``tree``, ``environment``, ``code`` (the named files),
  ``codemap`` (the repo map): one such dict each, absent when there is no section of that kind (a
  second one of a kind goes to ``extra``)
* ``extra``: list of the sections of any other kind
* ``sections``: every section above, in order
* ``userRequest``, ``outputInstructions``: strings ("" when absent)
* ``cacheBreak``: where the stable part of the prompt ends (the prompt cache breakpoint of
  ``--format messages``); rendered as nothing. Put it on a line of its own between the stable
  sections (rules, instructions, references, plan, environment, tree) and the volatile ones
  (history, git, request). Without it the stable part is the mode template's head.

The mode template sees the same data plus ``context``: the rendered context template.
Contents are values, so they are never expanded again.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..types import Section
from .regex import lazy_regex
from .template import compile_template

STATE_KINDS = ("plan", "roadmap", "history", "git", "tree", "environment", "code", "codemap")

# The budget pool each section kind draws from (budget.pools in configs/defaults.yaml holds the
# shares). Git changes and the file tree are the working environment the article's
# "environment" pool stands for, so they share it with the environment section; the roadmap
# is part of the plan. The named files and the repo map share the code pool (code.share).
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
    "code": "code",
    "codemap": "code",
}
POOLS = ("system", "references", "plan", "environment", "history", "request", "code")
LIST_KINDS = {"rules": "system", "reference": "references"}
TEXT_KINDS = {"request": "userRequest", "instructions": "outputInstructions"}

# The prompt's order, for a provider's prompt cache: what stays the same from one round to the
# next first, what changes last. After the stable part: the documents this request disclosed
# and the diff (the same while the work stays on one thing), then the history, which only grows
# (a new round is appended, the text before it stays), then the request, new every round.
STABLE_ORDER = ("rules", "instructions", "reference", "plan", "roadmap", "environment", "tree", "codemap")
VOLATILE_ORDER = ("reference", "code", "git", "history", "request")
#: Rendered where ``{{{cacheBreak}}}`` stands and cut out of the prompt (a private-use character pair).
CACHE_BREAK = "\ue000cache-break\ue001"
_PLAN_TRIGGER = lazy_regex(r" in the plan\b")


def is_volatile(section: Section) -> bool:
    """Whether ``section`` changes from round to round: history, git, request, the named code
    files (edited as the work goes on), and documents
    disclosed by a trigger on the request or the diff (layer 3; a trigger on the plan is stable)."""
    if section.kind in ("history", "git", "request", "code"):
        return True
    data = section.data or {}
    return (section.kind == "reference" and data.get("layer") == 3
            and not _PLAN_TRIGGER.search(str(data.get("rule", ""))))


def layout_order(sections: Iterable[Section]) -> list[Section]:
    """The sections stable first, volatile last (:data:`STABLE_ORDER`, :data:`VOLATILE_ORDER`;
    other kinds end the stable part), in their given order among equals."""
    def rank(section: Section) -> tuple[int, int]:
        order = VOLATILE_ORDER if is_volatile(section) else STABLE_ORDER
        return (order is VOLATILE_ORDER, order.index(section.kind) if section.kind in order else len(order))
    return sorted(sections, key=rank)


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
    data: dict[str, Any] = {"system": [], "references": [], "stableReferences": [], "requestReferences": [],
                            "extra": [], "sections": [], "cacheBreak": CACHE_BREAK}
    texts: dict[str, list[str]] = {name: [] for name in TEXT_KINDS.values()}
    for section in sections:
        item = section_item(section)
        if section.kind in TEXT_KINDS:
            texts[TEXT_KINDS[section.kind]].append(item["content"])
            continue
        data["sections"].append(item)
        if section.kind in LIST_KINDS:
            data[LIST_KINDS[section.kind]].append(item)
            if section.kind == "reference":
                data["requestReferences" if is_volatile(section) else "stableReferences"].append(item)
        elif section.kind in STATE_KINDS and section.kind not in data:
            data[section.kind] = item
        else:
            data["extra"].append(item)
    data.update({name: "\n\n".join(parts) for name, parts in texts.items()})
    return data


def render_context(*args: Any, **kwargs: Any) -> str:
    """The full prompt: the mode template rendered with ``context`` = the context template
    rendered over the sections' data (the arguments of :func:`render_parts`, whose two parts
    it joins). Template text never adds two blank lines in a row."""
    return "".join(render_parts(*args, **kwargs))


def render_parts(
    sections: Iterable[Section],
    context_template: str,
    mode_template: str,
    escape: str = "none",
    context_name: str = "context template",
    mode_name: str = "mode template",
) -> tuple[str, str]:
    """The full prompt (:func:`render_context`) as (stable part, volatile part): split where the
    context template renders ``{{{cacheBreak}}}`` (that line is left out), else where the
    context begins in the mode template."""
    data = context_data(sections)
    context = compile_template(context_template, context_name).render(data, escape, squeeze=True).strip("\n")
    if CACHE_BREAK not in context:
        context = CACHE_BREAK + context
    prompt = compile_template(mode_template, mode_name).render({**data, "context": context}, escape, squeeze=True)
    prompt = prompt.strip("\n") + "\n"
    at = prompt.find(CACHE_BREAK)
    if at < 0:  # a mode template without the context
        return "", prompt
    rest = prompt[at + len(CACHE_BREAK):]
    stable = prompt[:at]
    if rest.startswith("\n") and (not stable or stable.endswith("\n")):
        rest = rest[1:]  # the marker's own line
    stable, rest = stable.lstrip("\n"), rest.replace(CACHE_BREAK, "")
    return stable, rest if stable else rest.lstrip("\n")


def shared_prefix_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common prefix of two sequences (of tokens, say): a binary search
    over slice comparisons, which run at C speed."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo

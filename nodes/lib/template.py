"""A small one-pass Mustache-style template engine for prompts.

Syntax: ``{{key}}`` (dotted names, ``{{.}}`` the current item), ``{{{key}}}`` / ``{{& key}}``
(raw), ``{{#key}}...{{/key}}`` (section: a list repeats per item with the item pushed on the
context stack, a dict or other truthy value is pushed once, a falsy value skips),
``{{^key}}...{{/key}}`` (inverted), ``{{?key}}...{{/key}}`` (conditional: rendered when the value
is truthy, nothing pushed), ``{{! comment}}``. Section and comment tags alone on a line take
their line with them (Mustache's standalone rule). Missing keys render as empty.

One pass: a template is parsed once into a tree (cached per text) and rendering only walks
that tree, so text substituted for a key is never expanded again. Escaping is ``none`` by
default (a prompt is not HTML); ``html`` escapes ``& < > "`` in ``{{key}}`` only.
Partials, delimiter changes and lambdas are not supported.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

from .quote import quoted
from ..types import TemplateError
from .regex import lazy_regex

ESCAPES = ("none", "html")

# Tree nodes: template text is a _Literal (a str subclass, so rendering can tell it from
# substituted values); tags are tuples (kind, name_parts, children_or_None).
_VAR, _RAW, _SECTION, _INVERTED, _IF = "var", "raw", "section", "inverted", "if"
_OPENERS = {"#": _SECTION, "^": _INVERTED, "?": _IF}
_STANDALONE_SIGILS = frozenset(("#", "^", "?", "/", "!"))
_BLANK_RUN = lazy_regex(r"\n{3,}")
MAX_NESTING = 100  # sections inside sections; rendering recurses once per level
MAX_REPEATS = 1_000_000  # section passes in one rendering (lists nested in lists multiply)


class _Literal(str):
    """Template text (as opposed to a value substituted into it)."""

    __slots__ = ()


@dataclass(frozen=True)
class Template:
    """A parsed template: its name (for messages) and its node tree."""

    name: str
    tree: tuple

    def render(self, data: Any, escape: str = "none", squeeze: bool = False) -> str:
        """The template rendered over ``data``.

        ``escape`` is ``none`` or ``html``. ``squeeze`` trims newlines of the template's own
        text so that it never adds a second blank line in a row; substituted values stay verbatim.
        """
        if escape not in ESCAPES:
            raise ValueError(f"escape must be one of {', '.join(ESCAPES)}, not {escape!r}")
        out: list[str] = []
        budget = [MAX_REPEATS]
        _render_nodes(self.tree, [data], out, escape == "html", budget)
        if budget[0] < 0:
            raise TemplateError(f"template {quoted(self.name)}: sections repeat more than {MAX_REPEATS} times "
                                "(a list section nested in another?); nest fewer list sections")
        return "".join(_squeezed(out) if squeeze else out)


@functools.lru_cache(maxsize=256)
def compile_template(text: str, name: str = "template") -> Template:
    """The parsed template for ``text`` (cached); raises TemplateError naming ``name`` and the line."""
    return Template(name, _parse(text, name))


def render(text: str, data: Any, escape: str = "none", name: str = "template", squeeze: bool = False) -> str:
    """``text`` compiled (cached) and rendered over ``data``."""
    return compile_template(text, name).render(data, escape, squeeze)


def html_escape(text: str) -> str:
    """``& < > "`` replaced by their HTML entities (what the Mustache spec expects)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# ----------------------------------------------------------------------------- parsing


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _error(name: str, text: str, pos: int, message: str) -> TemplateError:
    return TemplateError(f"template {quoted(name)}, line {_line_of(text, pos)}: {message}")


def _read_tag(text: str, start: int, name: str) -> tuple[str, str, int]:
    """(sigil, tag name, end position) of the tag opening at ``start``."""
    if text.startswith("{{{", start):
        end = text.find("}}}", start + 3)
        if end < 0:
            raise _error(name, text, start, "'{{{' is never closed with '}}}'")
        return "{", text[start + 3:end].strip(), end + 3
    end = text.find("}}", start + 2)
    if end < 0:
        raise _error(name, text, start, "'{{' is never closed with '}}'")
    body = text[start + 2:end].strip()
    sigil = body[:1] if body[:1] in "#^?/!&>=" else ""
    return sigil, body[len(sigil):].strip(), end + 2


def _standalone_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The whole line around a tag at [start, end) when nothing but blanks shares it."""
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip(" \t"):
        return None
    newline = text.find("\n", end)
    line_end = len(text) if newline < 0 else newline + 1
    if text[end:line_end].strip(" \t\r\n"):
        return None
    return line_start, line_end


def _name_parts(tag_name: str, name: str, text: str, pos: int) -> tuple[str, ...]:
    if not tag_name or any(ch.isspace() for ch in tag_name):
        raise _error(name, text, pos, f"bad tag name {quoted(tag_name)}")
    return () if tag_name == "." else tuple(tag_name.split("."))


def _append_text(children: list, piece: str) -> None:
    if not piece:
        return
    if children and isinstance(children[-1], _Literal):
        children[-1] = _Literal(children[-1] + piece)
    else:
        children.append(_Literal(piece))


def _parse(text: str, name: str) -> tuple:
    """The node tree of ``text``; unclosed, stray and mismatched sections raise TemplateError."""
    frames: list[tuple[str | None, str | None, int, list]] = [(None, None, 0, [])]  # kind, tag, pos, children
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            _append_text(frames[-1][3], text[pos:])
            break
        sigil, tag_name, end = _read_tag(text, start, name)
        span = _standalone_span(text, start, end) if sigil in _STANDALONE_SIGILS else None
        _append_text(frames[-1][3], text[pos:span[0] if span else start])
        pos = span[1] if span else end
        if sigil == "!":
            continue
        _add_tag(frames, sigil, tag_name, text, start, name)
    if len(frames) > 1:
        kind, open_name, open_pos, _ = frames[-1]
        raise _error(name, text, open_pos,
                     f"section {{{{{_sigil_of(kind)}{open_name}}}}} is never closed (add {{{{/{open_name}}}}})")
    return tuple(frames[0][3])


def _add_tag(frames: list, sigil: str, tag_name: str, text: str, start: int, name: str) -> None:
    """Add the tag at ``start`` to the open frames: a section opened (a new frame), closed (its
    frame folded into its parent's children), or a variable; partials and delimiter changes,
    too deep a nesting, or a stray or mismatched closing tag raise TemplateError."""
    if sigil in (">", "="):
        kind = "partials" if sigil == ">" else "delimiter changes"
        raise _error(name, text, start, f"{kind} ({{{{{sigil} ...}}}}) are not supported")
    parts = _name_parts(tag_name, name, text, start)
    if sigil in _OPENERS:
        if len(frames) > MAX_NESTING:
            raise _error(name, text, start, f"sections nested more than {MAX_NESTING} deep "
                         f"(at {{{{{sigil}{tag_name}}}}}); close sections sooner or flatten the template")
        frames.append((_OPENERS[sigil], tag_name, start, []))
    elif sigil == "/":
        kind, open_name, open_pos, children = frames.pop() if len(frames) > 1 else (None, None, 0, [])
        if kind is None:
            raise _error(name, text, start, f"closing tag {{{{/{tag_name}}}}} has no open section")
        if open_name != tag_name:
            raise _error(
                name, text, start,
                f"closing tag {{{{/{tag_name}}}}} does not match {{{{{_sigil_of(kind)}{open_name}}}}} "
                f"opened on line {_line_of(text, open_pos)}",
            )
        frames[-1][3].append((kind, parts, tuple(children)))
    else:
        frames[-1][3].append((_RAW if sigil in ("{", "&") else _VAR, parts, None))


def _sigil_of(kind: str | None) -> str:
    return {v: k for k, v in _OPENERS.items()}.get(kind, "")


# ----------------------------------------------------------------------------- rendering

_MISSING = None


def _lookup(stack: list, parts: tuple[str, ...]) -> Any:
    """Mustache name resolution: the first part through the stack, the rest strictly within it."""
    if not parts:
        return stack[-1]
    first = parts[0]
    for ctx in reversed(stack):
        if isinstance(ctx, Mapping) and first in ctx:
            value = ctx[first]
            break
    else:
        return _MISSING
    for part in parts[1:]:
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _text_of(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _render_nodes(nodes: tuple, stack: list, out: list, html: bool, budget: list) -> None:
    """Append the rendering of ``nodes`` to ``out``; ``budget[0]`` counts down section passes
    and below zero rendering stops (the caller raises)."""
    for node in nodes:
        if node.__class__ is _Literal:
            out.append(node)
            continue
        kind, parts, children = node
        value = _lookup(stack, parts)
        if kind is _VAR:
            text = _text_of(value)
            out.append(html_escape(text) if html and text else str(text))
            continue
        if kind is _RAW:
            out.append(str(_text_of(value)))
            continue
        if (not value) is not (kind is _INVERTED):
            continue
        budget[0] -= len(value) if kind is _SECTION and isinstance(value, (list, tuple)) else 1
        if budget[0] < 0:
            return
        if kind is not _SECTION:
            _render_nodes(children, stack, out, html, budget)
        elif isinstance(value, (list, tuple)):
            for item in value:
                stack.append(item)
                _render_nodes(children, stack, out, html, budget)
                stack.pop()
        else:
            stack.append(value)
            _render_nodes(children, stack, out, html, budget)
            stack.pop()


def _trailing_newlines(text: str) -> int:
    count = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] != "\n":
            break
        count += 1
    return count


def _squeezed(pieces: list[str]) -> list[str]:
    """The pieces with template text trimmed so it never makes two blank lines in a row."""
    out = []
    trailing = 2  # at the start: no leading blank lines
    for piece in pieces:
        if piece.__class__ is _Literal:
            piece = _BLANK_RUN.sub("\n\n", piece)
            lead = len(piece) - len(piece.lstrip("\n"))
            allowed = max(0, 2 - trailing)
            if lead > allowed:
                piece = piece[lead - allowed:]
        if not piece:
            continue
        tail = _trailing_newlines(piece)
        trailing = trailing + tail if tail == len(piece) else tail
        out.append(piece)
    return out

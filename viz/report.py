"""The run report: one self-contained HTML page a person can open (no network, nothing to install).

:func:`report_html` turns a BuildResult (and its lineage graph, when given) into the page: the
budget as bars per pool, a sortable table of the sections (tokens before and after, tier, what
happened and why), the lineage diagram inline (SVG from graphviz ``dot`` when it is installed,
else the same lineage as a list), the final context section by section in ``<details>``, the GSD
position, the disclosure plan and the warnings. It draws only what it is handed:
``ctxengine.build_report`` (pipeline/api.py) builds a project and hands its result here.

Project text is untrusted: every value is HTML-escaped, the lineage SVG comes from ``dot``
(which escapes its labels; labels are never graphviz HTML), and a Content-Security-Policy lets
only this page's own script run (a nonce) and forbids any network request, so a section holding
``</script>`` or ``<img onerror=...>`` shows as text and runs nothing.
"""

from __future__ import annotations

import html
import json
import os
import secrets
from typing import Any, Iterable, Mapping

from ..nodes.lib.lineage import section_fate
from ..nodes.report import BuildResult
from .dot import dot_program
from .lineage import lineage_digraph
from .output import OutputWriteError, rendered

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:1200px;
 padding:1em 2em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
.summary{color:#444}.summary b{color:#000}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border:1px solid #ddd;padding:4px 6px;
 vertical-align:top;text-align:left}th{background:#f4f4f4}td.num,th.num{text-align:right}
table.sortable th{cursor:pointer;user-select:none}table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
.pool{display:grid;grid-template-columns:9em 1fr;gap:2px 1em;margin:6px 0}.pool .name{font-weight:600}
.track{width:100%;height:14px;margin:1px 0}.bar{height:14px;border-radius:2px;min-width:1px}
.bar.share{background:#dbe8f7;border:1px solid #7fa7d6;box-sizing:border-box}.bar.use{background:#f0a35e}
.bar.final{background:#4a90d9}.legend span{display:inline-block;width:1em;height:.8em;margin:0 .3em 0 1em}
.fate-dropped{color:#888;text-decoration:line-through}.fate-cut{color:#b03a2e}.fate-summarized{color:#6c3fb0}
.fate-compacted{color:#9a6400}.tag{font-size:11px;border-radius:3px;padding:0 4px;background:#eee;margin-right:3px}
pre{white-space:pre-wrap;word-break:break-word;background:#fafafa;border:1px solid #eee;padding:.5em;margin:.3em 0}
details{margin:.2em 0}summary{cursor:pointer}.lineage svg{max-width:100%;height:auto}
ul.reasons{margin:0;padding-left:1.1em}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 1em}
dt{font-weight:600}dd{margin:0}.warn li{color:#8a5300}
"""

#: Sorting the sections table by a click on its header (numbers as numbers); this page's only script.
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var numeric = th.classList.contains("num");
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
        var order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return up ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def report_html(result: BuildResult, lineage: Any = None, *, title: str = "ctxengine run report",
                project_dir: str | os.PathLike | None = None) -> str:
    """The run report of ``result`` as one self-contained HTML page; ``lineage`` is the
    ``context_lineage`` node's graph (titles, tiers and sources of every section, dropped ones
    too, and the lineage diagram); without it the page says how to get it. ``project_dir``: the
    project built, whose own ``dot`` never draws the diagram."""
    nonce = secrets.token_urlsafe(16)
    csp = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'nonce-{nonce}'"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _summary(result),
        _budget(result),
        _sections_table(result, lineage),
        _lineage(lineage, project_dir),
        _final_context(result),
        _position(result.position),
        _disclosure(result.disclosure),
        _warnings(result.warnings),
        f'<script nonce="{nonce}">{SCRIPT}</script>',
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- parts


def _e(value: Any) -> str:
    """Any value as escaped HTML text."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def _summary(result: BuildResult) -> str:
    budget, trunc = result.budget, result.truncation
    over = " <b>OVER BUDGET</b>" if budget.is_over_budget else ""
    if trunc.get("triggered"):
        how = (f"truncation ran ({_e(trunc.get('reason'))}): {int(trunc.get('initial_tokens', 0)):,} &rarr; "
               f"{int(trunc.get('final_tokens', 0)):,} tokens, target {int(trunc.get('target', 0)):,}")
    else:
        how = "no truncation: the context fits"
    return (f'<p class="summary"><b>{budget.total_tokens:,}</b> of {budget.available_tokens:,} available tokens '
            f"({budget.utilization_rate:.1%}){over}; {how}; {len(result.sections)} sections in the context, "
            f"{len(result.warnings)} warning{'' if len(result.warnings) == 1 else 's'}.</p>")


def _budget(result: BuildResult) -> str:
    pools = {name: row for name, row in result.pools.items() if name != "buffer"}
    if not pools:
        return "<h2>Budget</h2><p>No pools were computed.</p>"
    scale = max([1] + [int(row.get(k, 0) or 0) for row in pools.values() for k in ("share", "use", "final")])
    rows = []
    for name, row in pools.items():
        bars = "".join(_bar(kind, int(row[kind]), scale, name) for kind in ("share", "use", "final") if kind in row)
        detail = ", ".join(f"{k} {int(v):,}" for k, v in row.items() if isinstance(v, (int, float)))
        rows.append(f'<div class="pool" data-pool="{_e(name)}"><div class="name" title="{_e(detail)}">{_e(name)}'
                    f"</div><div>{bars}</div></div>")
    buffer = result.pools.get("buffer", {})
    left = (f"<p>Buffer: {int(buffer.get('remaining', 0)):,} tokens left before truncation, "
            f"{int(buffer.get('final_remaining', 0)):,} after.</p>") if buffer else ""
    legend = ('<p class="legend"><span style="background:#dbe8f7;border:1px solid #7fa7d6"></span>share'
              '<span style="background:#f0a35e"></span>use before truncation'
              '<span style="background:#4a90d9"></span>use after</p>')
    return "<h2>Budget</h2>" + legend + "".join(rows) + left


def _bar(kind: str, tokens: int, scale: int, pool: str) -> str:
    width = 100.0 * tokens / scale
    return (f'<div class="track"><div class="bar {kind}" data-pool="{_e(pool)}" data-kind="{kind}" '
            f'data-tokens="{tokens}" style="width:{width:.4f}%" title="{kind}: {tokens:,} tokens"></div></div>')


def _sections_table(result: BuildResult, lineage: Any) -> str:
    info = _section_info(result, lineage)
    entries: dict[str, list] = {}
    for entry in result.ledger:
        entries.setdefault(entry.section_key, []).append(entry)
    head = ("<tr><th>section</th><th>kind</th><th>tier</th><th class=\"num\">priority</th>"
            "<th class=\"num\">tokens before</th><th class=\"num\">tokens after</th><th>what happened</th>"
            "<th>why</th></tr>")
    rows = []
    for key, steps in entries.items():
        meta = info.get(key, {})
        fate = meta.get("fate") or section_fate((e.action for e in steps), key in result.section_tokens)
        what = " &rarr; ".join(f'<span class="tag">{_e(e.step)}</span>{_e(e.action)} '
                               f"{e.tokens_before:,}&rarr;{e.tokens_after:,}" for e in steps)
        why = "".join(f"<li>{_e(e.reason)}</li>" for e in steps)
        title = meta.get("title", key)
        before, after = steps[0].tokens_before, steps[-1].tokens_after
        cells = [
            (title.lower(), f'<span class="fate-{_e(fate)}">{_e(title)}</span><br><small>{_e(key)}</small>'),
            (meta.get("kind", ""), _e(meta.get("kind", ""))),
            (meta.get("tier", ""), _e(meta.get("tier", ""))),
            (meta.get("priority", 0), _e(meta.get("priority", ""))),
            (before, f"{before:,}"), (after, f"{after:,}"),
            (fate, f"<b>{_e(fate)}</b>: {what}"), ("", f'<ul class="reasons">{why}</ul>'),
        ]
        tds = "".join(f'<td{" class=num" if i in (3, 4, 5) else ""} data-sort="{_e(sort)}">{shown}</td>'
                      for i, (sort, shown) in enumerate(cells))
        rows.append(f'<tr data-key="{_e(key)}">{tds}</tr>')
    return (f"<h2>Sections</h2><p>{len(rows)} sections; click a column to sort.</p>"
            f'<table class="sortable" id="sections"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>')


def _section_info(result: BuildResult, lineage: Any) -> dict[str, dict]:
    """Title, kind, tier, priority and fate of each section: from the lineage graph (dropped
    sections too), else from the final sections."""
    info = {s.key: {"title": s.title, "kind": s.kind, "tier": s.tier, "priority": s.priority} for s in result.sections}
    if lineage is not None:
        for name, attrs in lineage.nodes(data=True):
            if attrs.get("kind") == "section":
                key = name.split(":", 1)[1]
                info[key] = {**info.get(key, {}), "title": attrs.get("label", key), "tier": attrs.get("tier", ""),
                             "priority": attrs.get("priority", 0), "fate": attrs.get("fate", "")}
                if "section_kind" in attrs:
                    info[key]["kind"] = attrs["section_kind"]
    return info


def _lineage(lineage: Any, project_dir: str | os.PathLike | None = None) -> str:
    if lineage is None:
        return ("<h2>Lineage</h2><p>No lineage graph was given: pass "
                "<code>run_nodes([\"build_result\", \"context_lineage\"], ...)</code>'s graph.</p>")
    why = "is not installed"
    dot = dot_program(project_dir)  # absolute PATH entries outside the project; started by that path
    if dot is not None:
        try:
            svg = rendered(lineage_digraph(lineage), "svg", "the report's lineage", dot, project_dir).decode("utf-8")
            svg = svg[svg.index("<svg"):]  # without the XML declaration and DOCTYPE
            return f'<h2>Lineage</h2><div class="lineage">{svg}</div>'
        except OutputWriteError as exc:
            why = f"failed ({_e(str(exc))})"
    return (f"<h2>Lineage</h2><p>graphviz <code>dot</code> {why}: the lineage as a list "
            "(sources &rarr; section &rarr; each ledger entry &rarr; where it went).</p>" + _lineage_list(lineage))


def _lineage_list(lineage: Any) -> str:
    items = []
    for name, attrs in lineage.nodes(data=True):
        if attrs.get("kind") != "section":
            continue
        sources = [lineage.nodes[p].get("label", p) for p in lineage.predecessors(name)
                   if lineage.nodes[p].get("kind") == "source"]
        chain, node = [], name
        while True:
            nexts = [n for n in lineage.successors(node) if lineage.nodes[n].get("kind") in ("step", "mend", "output")]
            if not nexts:
                break
            node = nexts[0]
            chain.append(lineage.nodes[node].get("label", node).replace("\n", " "))
        items.append(f"<li>{_e(', '.join(sources) or 'no source')} &rarr; <b class=\"fate-{_e(attrs.get('fate', ''))}\">"
                     f"{_e(attrs.get('label', name))}</b> [{_e(attrs.get('fate', ''))}] &rarr; "
                     + " &rarr; ".join(_e(c) for c in chain) + "</li>")
    return f'<ul class="lineage-list">{"".join(items)}</ul>'


def _final_context(result: BuildResult) -> str:
    parts = ["<h2>Final context</h2>", f"<p>{len(result.sections)} sections, {result.budget.total_tokens:,} tokens.</p>"]
    for section in result.sections:
        tokens = result.section_tokens.get(section.key, 0)
        parts.append(f'<details class="section" data-key="{_e(section.key)}"><summary>{_e(section.title)} '
                     f"<small>({_e(section.key)}, {tokens:,} tokens)</small></summary><pre>{_e(section.content)}</pre>"
                     "</details>")
    parts.append(f"<details><summary>The whole context as sent</summary><pre>{_e(result.context)}</pre></details>")
    return "".join(parts)


def _position(position: Mapping[str, Any]) -> str:
    if not position:
        return "<h2>Position</h2><p>Not a GSD project: no position.</p>"
    return "<h2>Position</h2>" + _dl(position)


def _dl(mapping: Mapping[str, Any]) -> str:
    rows = []
    for key, value in mapping.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
        shown = f"<pre>{_e(shown)}</pre>" if "\n" in shown else _e(shown)
        rows.append(f"<dt>{_e(key)}</dt><dd>{shown}</dd>")
    return f"<dl>{''.join(rows)}</dl>"


def _disclosure(rows: Iterable[Mapping[str, Any]]) -> str:
    rows = list(rows)
    if not rows:
        return "<h2>Disclosure plan</h2><p>No documents were considered.</p>"
    columns = list(dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(row.get(c, ''))}</td>" for c in columns) + "</tr>" for row in rows)
    loaded = sum(1 for row in rows if row.get("loaded"))
    return (f"<h2>Disclosure plan</h2><p>{loaded} of {len(rows)} documents loaded.</p>"
            f'<table id="disclosure"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def _warnings(warnings: Iterable[str]) -> str:
    warnings = list(warnings)
    if not warnings:
        return "<h2>Warnings</h2><p>None.</p>"
    return "<h2>Warnings</h2><ul class=\"warn\">" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>"

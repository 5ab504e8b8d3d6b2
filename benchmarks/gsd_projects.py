"""GSD fidelity on real projects: the position found, the phase type, the tokens, and what a budget cut.

    python benchmarks/gsd_projects.py [PROJECT_DIR ...] [--phase auto|execute|plan|...]
                                      [--max-tokens N ...] [--details]

Without folders it reads the whole corpus: every project of tests/data/gsd (the conformance
corpus, each with its EXPECTED.yaml) and of ../shared/corpus/planning. Each project is built
through the public API (``ctxengine.build_context``, git and the environment off) at each budget
(default: the project's own, 8,000 and 4,000). One table row per project and budget:

* ``position``: milestone / phase / next plan (or next phase) as the build reports it;
* ``work``: the phase type ``--phase auto`` chose (or the one given) and its phase;
* ``ok``: for a conformance project, whether the position matches EXPECTED.yaml
  (``xfail`` when the expectation names a known gap), "-" elsewhere;
* ``tokens``: the context's tokens / the available tokens;
* ``cut``: the sections truncation summarized, cut or dropped (key, a document's by its file
  name, :action), "-" when none;
* ``warn``: the number of warnings.

A summary follows: projects read, positions right, per budget the median and largest use of the
available tokens, how many builds cut something, and how often the plan section survived whole.
``--details`` also prints each build's sections with their tokens before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE = REPO / "tests" / "data" / "gsd"
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared")) / "corpus" / "planning"
REQUEST = "Continue the current phase: implement the next plan and keep the tests green."
QUIET = {"state.includeGit": False, "state.includeEnvironment": False}
FIELDS = ("milestone", "phase", "folder", "next_plan", "plans_done", "plans_total", "phase_complete",
          "milestone_complete", "next_phase", "work")


def corpus_projects() -> list[Path]:
    """The conformance projects, then the shared corpus's (folders holding a .planning/)."""
    found = []
    for root in (CONFORMANCE, SHARED):
        if root.is_dir():
            found += sorted(p for p in root.iterdir() if (p / ".planning").is_dir())
    return found


def position_text(position: dict) -> str:
    """milestone / phase / next plan (or next phase), "-" outside GSD."""
    if not position or not position.get("phase") and not position.get("milestone"):
        return "-"
    nxt = (f"next {position['plan']}" if position.get("plan") else
           f"next phase {position['next_phase']}" if position.get("next_phase") else
           "complete" if position.get("phase_complete") else "no plan")
    return f"{position.get('milestone') or '-'} / {position.get('phase') or '-'} / {nxt}"


def section_fates(result) -> dict[str, str]:
    """Section key -> summarized, cut, dropped or compacted (the last ledger action wins); whole ones absent."""
    fates: dict[str, str] = {}
    for entry in result.ledger:
        if entry.action in ("summarized", "cut", "dropped", "compacted") and "refilled" not in entry.reason:
            fates[entry.section_key] = entry.action
    return fates


def expected_match(project: Path, result) -> str:
    """ok / WRONG / xfail against the project's EXPECTED.yaml, "-" without one."""
    path = project / "EXPECTED.yaml"
    if not path.is_file():
        return "-"
    from ctxengine.nodes.lib.yamlio import load_yaml

    data = load_yaml(path.read_text(encoding="utf-8"))
    pos = result.as_json()["position"] or {}
    got = {**{k: pos.get(k) for k in FIELDS}, "next_plan": pos.get("plan"), "work": (pos.get("work") or {}).get("type")}
    right = all(got[k] == data["expect"][k] for k in FIELDS)
    return "xfail" if data.get("xfail") else "ok" if right else "WRONG"


def build_row(project: Path, budget: int | None, phase: str | None) -> dict:
    """One build of ``project`` at ``budget`` (None: its own): the table's fields, or the error."""
    import ctxengine

    overrides = dict(QUIET)
    if budget:
        overrides["budget.maxTokens"] = budget
    if phase:
        overrides["disclosure.phase"] = phase
    start = time.perf_counter()
    try:
        result = ctxengine.build_context(str(project), request=REQUEST, overrides=overrides)
    except Exception as exc:  # one broken project is a row with an error, not a crash
        return {"project": project.name, "budget": budget, "error": f"{type(exc).__name__}: {exc}"[:120]}
    data = result.as_json()
    position = data.get("position") or {}
    work = position.get("work") or {}
    return {
        "project": project.name, "budget": budget, "result": result,
        "position": position_text(position),
        "work": f"{work.get('type') or '-'}" + (f" {work['phase']}" if work.get("phase") else ""),
        "ok": expected_match(project, result),
        "tokens": result.budget.total_tokens, "available": result.budget.available_tokens,
        "fates": section_fates(result), "plan_whole": "plan" in {s.key for s in result.sections}
        and "plan" not in section_fates(result), "warnings": len(result.warnings),
        "seconds": time.perf_counter() - start,
    }


def table(rows: list[dict]) -> str:
    """The per-project table, one line per build."""
    head = f"{'project':<40} {'budget':>7} {'position':<34} {'work':<12} {'ok':<5} {'tokens':>15} {'warn':>4}  cut"
    lines = [head, "-" * len(head)]
    for row in rows:
        budget = f"{row['budget']:,}" if row["budget"] else "default"
        if "error" in row:
            lines.append(f"{row['project'][:40]:<40} {budget:>7} ERROR {row['error']}")
            continue
        cut = ", ".join(f"{k.rsplit('/', 1)[-1]}:{v}" for k, v in row["fates"].items()) or "-"
        tokens = f"{row['tokens']:,}/{row['available']:,}"
        lines.append(f"{row['project'][:40]:<40} {budget:>7} {row['position'][:34]:<34} {row['work'][:12]:<12} "
                     f"{row['ok']:<5} {tokens:>15} {row['warnings']:>4}  {cut}")
    return "\n".join(lines)


def summary(rows: list[dict], budgets: list[int | None]) -> str:
    """Projects read, positions right, and per budget the use of the available tokens and the cuts."""
    first = [r for r in rows if r["budget"] == budgets[0] and "error" not in r]
    shared = sum(1 for r in first if r["ok"] == "-")
    marks = [r["ok"] for r in first if r["ok"] != "-"]
    out = [f"projects: {len(first)} ({shared} full copies from the shared corpus; {len(marks)} with an expectation: {marks.count('ok')} right, "
           f"{marks.count('xfail')} known gaps (xfail), {marks.count('WRONG')} wrong); "
           f"errors: {sum(1 for r in rows if 'error' in r)}"]
    works: dict[str, int] = {}
    for r in first:
        works[r["work"].split()[0]] = works.get(r["work"].split()[0], 0) + 1
    out.append("phase type (auto): " + ", ".join(f"{k} {v}" for k, v in sorted(works.items())))
    for budget in budgets:
        done = [r for r in rows if r["budget"] == budget and "error" not in r]
        if not done:
            continue
        use = [r["tokens"] / r["available"] for r in done if r["available"]]
        label = f"{budget:,}" if budget else "default"
        cut = [r for r in done if r["fates"]]
        dropped = sum(1 for r in done for v in r["fates"].values() if v == "dropped")
        out.append(f"budget {label:>7}: tokens median {statistics.median(r['tokens'] for r in done):,.0f}, "
                   f"use of available median {statistics.median(use):.0%} max {max(use):.0%}; "
                   f"{len(cut)}/{len(done)} builds cut something ({dropped} sections dropped); "
                   f"plan section whole in {sum(r['plan_whole'] for r in done)}/"
                   f"{sum(1 for r in done if r['position'] != '-')} GSD builds; "
                   f"median build {statistics.median(r['seconds'] for r in done):.2f}s")
    return "\n".join(out)


def details(row: dict) -> str:
    """Each section of one build with its tokens before and after the cut."""
    result = row["result"]
    before: dict[str, int] = {}
    for entry in result.ledger:  # the first entry of a section has its tokens before any cut
        before.setdefault(entry.section_key, entry.tokens_before)
    lines = [f"## {row['project']} ({row['budget'] or 'default'})"]
    for section in result.sections:
        kept = result.section_tokens.get(section.key, 0)
        lines.append(f"  {section.key:<52} {row['fates'].get(section.key, 'whole'):<10} "
                     f"{before.get(section.key, kept):>7,} -> {kept:>7,}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", type=Path, help="project folders (default: the whole GSD corpus)")
    parser.add_argument("--phase", default=None, help="a GSD phase type (disclosure.phase; default: auto)")
    parser.add_argument("--max-tokens", type=int, action="append", default=None,
                        help="budgets to try (repeatable; default: the project's own, 8000 and 4000)")
    parser.add_argument("--details", action="store_true", help="also print each build's sections")
    args = parser.parse_args()
    projects = args.projects or corpus_projects()
    budgets: list[int | None] = args.max_tokens or [None, 8000, 4000]
    rows = [build_row(project, budget, args.phase) for project in projects for budget in budgets]
    print(table(rows))
    if args.details:
        for row in rows:
            if "error" not in row:
                print(details(row))
    print()
    print(summary(rows, budgets))


if __name__ == "__main__":
    main()

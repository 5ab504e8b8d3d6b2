"""GSD fidelity on real projects: the position found, the tokens, and what survived a budget.

    python benchmarks/gsd_projects.py [PROJECT_DIR ...] [--phase execute|plan|...] [--max-tokens N ...]

Without folders it reads every project of ../shared/corpus/planning. For each project and each
budget (default: the project's own, and 8000) it prints the GSD position (milestone / phase /
next plan, and what decided it), the context's tokens against the available tokens, and per
section what truncation did (kept whole, summarized, cut or dropped), so a reader can check that
the current plan is the last summarizable content to go.
"""

from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "planning"
REQUEST = "Continue the current phase: implement the next plan and keep the tests green."


def position_text(position: dict) -> str:
    """milestone / phase / next plan [source], or "-" outside GSD."""
    if not position:
        return "-"
    plan = position.get("plan") or "none"
    done = f"{position.get('plans_done', 0)}/{position.get('plans_total', 0)} plans done"
    return (f"{position.get('milestone') or '-'} / phase {position.get('phase') or '-'} / next {plan} "
            f"({done}) [{position.get('source')}]")


def section_fates(result) -> dict[str, str]:
    """Section key -> its fate: whole, summarized, cut or dropped (the last ledger action wins)."""
    fates = {section.key: "whole" for section in result.sections}
    for entry in result.ledger:
        if entry.action in ("summarized", "cut", "dropped", "compacted") and "refilled" not in entry.reason:
            fates[entry.section_key] = entry.action
    return fates


def report(project: Path, budgets: list[int | None], phase: str | None) -> None:
    import ctxengine

    for budget in budgets:
        options = {"phase": phase} if phase else {}
        if budget:
            options["max_tokens"] = budget
        result = ctxengine.build_context(project, REQUEST, **options)
        label = f"{budget:,}" if budget else "default"
        print(f"\n## {project.name} (budget {label}{', --phase ' + phase if phase else ''})")
        print(f"position : {position_text(result.position)}")
        print(f"tokens   : {result.budget.total_tokens:,} of {result.budget.available_tokens:,} available "
              f"({result.budget.utilization_rate:.1%})")
        fates = section_fates(result)
        before: dict[str, int] = {}
        for entry in result.ledger:  # the first entry of a section has its tokens before any cut
            before.setdefault(entry.section_key, entry.tokens_before)
        for key, fate in fates.items():
            kept = result.section_tokens.get(key, 0)
            was = before.get(key, kept)
            print(f"  {key:<52} {fate:<10} {was:>7,} -> {kept:>7,}")
        for warning in result.warnings:
            print(f"  warning: {warning[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", type=Path, help="project folders (default: the GSD corpus)")
    parser.add_argument("--phase", default=None, help="a GSD phase type (disclosure.phase)")
    parser.add_argument("--max-tokens", type=int, action="append", default=None,
                        help="budgets to try (repeatable; default: the project's own and 8000)")
    args = parser.parse_args()
    projects = args.projects or sorted(p for p in CORPUS.iterdir() if (p / ".planning").is_dir())
    budgets = args.max_tokens or [None, 8000]
    for project in projects:
        report(project, budgets, args.phase)


if __name__ == "__main__":
    main()

"""The cut at tight budgets on real material: how close the context lands to its target, and
what explains the newest round survives.

    python benchmarks/tight.py [--budgets 2000,4000,8000,16000] [--skip-large]

Material: every real transcript (aider chat histories of ../shared/corpus/sessions, the Claude
Code JSON Lines transcripts of tests/data/claude_code) and every GSD planning folder of
../shared/corpus/planning (plans and reference documents). Each transcript is copied into an
empty temporary project (as .aider.chat.history.md, or named by state.claudeCode.transcript);
git and the environment are off. Each input is built through the public API
(``ctxengine.build_context``) once with a budget that holds everything (the reference) and
then at each budget (``budget.maxTokens``; the answer reserve is the default).

Columns: ``ctx/target``, the context's exact tokens over truncation's own target (the soft
target, or the available tokens), "-" when truncation did not run; ``prompt``: the newest
user prompt's first line is in the context; ``prev``: the prompt of the round before it;
``lines``: the older rounds' summary lines kept ("- Round N" lines, of the rounds before
those two; an older round trimmed inside with its summary's gist, ``[summary: ...]``, into
room a whole-round step left is not counted); ``tasks``: the task names of the next plan kept, of those in the reference, as
the plan section shows them: the entry marked ``- [>]`` (the plan the position names, shown in
full) holds its GSD ``<name>`` elements or its ``Task N: ...`` headings (demoted a few levels);
``defs``: the code definition lines (def,
class, function, export, interface, ...) of fenced code in the reference's plan and
reference sections kept. A within-10% row is marked ``ok``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
SESSIONS = SHARED / "corpus" / "sessions"
PLANNING = SHARED / "corpus" / "planning"
CLAUDE = REPO / "tests" / "data" / "claude_code"
BUDGETS = (2000, 4000, 8000, 16000)
REQUEST = "Continue with the next step."
LARGE = 1_000_000  # bytes: transcripts above this are skipped with --skip-large
BASE = {"state.includeGit": False, "state.includeEnvironment": False}
DEFINITION = re.compile(r"^\s*(?:export\s+|async\s+|pub\s+|public\s+)*(?:def|class|function|interface|type|struct|"
                        r"fn|func|enum|trait|impl|const|let)\b\s*\w")


def materials(skip_large: bool) -> list[tuple[str, Path, dict]]:
    """(name, project folder, overrides) of every real input, each in a fresh temporary project."""
    out = []
    root = Path(tempfile.mkdtemp(prefix="ctx-tight-"))
    for path in sorted(SESSIONS.glob("*.md")) if SESSIONS.is_dir() else ():
        if skip_large and path.stat().st_size > LARGE:
            continue
        project = root / path.stem
        project.mkdir()
        shutil.copyfile(path, project / ".aider.chat.history.md")
        out.append((f"aider {path.name[:28]}", project, {}))
    for path in sorted(CLAUDE.glob("*.jsonl")) if CLAUDE.is_dir() else ():
        project = root / path.stem
        project.mkdir()
        shutil.copyfile(path, project / "transcript.jsonl")
        out.append((f"claude {path.stem[:27]}", project, {"state.claudeCode.transcript": "transcript.jsonl"}))
    for project in sorted(p for p in PLANNING.iterdir() if (p / ".planning").is_dir()) if PLANNING.is_dir() else ():
        out.append((f"gsd {project.name[:30]}", project, {}))
    return out


def reference_facts(result) -> dict:
    """What to look for, from the build that kept everything."""
    facts = {"prompt": None, "prev": None, "older": 0, "tasks": [], "defs": []}
    history = next((s for s in result.sections if s.kind == "history"), None)
    rounds = [r for r in (history.data.get("rounds", ()) if history is not None else ())
              if any(m.role == "user" and m.content.strip() for m in r.messages)]
    prompts = [_first_line(next(m.content for m in r.messages if m.role == "user" and m.content.strip()))
               for r in rounds]
    if prompts:
        facts["prompt"] = prompts[-1]
    if len(prompts) > 1:
        facts["prev"] = prompts[-2]
    facts["older"] = max(0, len(rounds) - 2)
    for section in result.sections:
        if section.kind == "plan":
            facts["tasks"] += next_plan_task_names(section.content)
        if section.kind in ("plan", "reference", "rules"):
            facts["defs"] += [line.strip() for line in _fenced_lines(section.content) if DEFINITION.match(line)]
    facts["tasks"] = list(dict.fromkeys(t for t in facts["tasks"] if t))
    facts["defs"] = list(dict.fromkeys(facts["defs"]))
    return facts


_ENTRY = re.compile(r"^- \[[ x>~]\] ")
_TASK_HEADING = re.compile(r"^\s*#{2,6}[ \t]+(Task[ \t]+\d+\b.*?)[ \t#]*$")


def next_plan_task_names(plan_section: str) -> list[str]:
    """The task names of the next plan as the plan section shows them: in the ``- [>]`` entry
    (the next plan, in full), each GSD ``<name>`` element and each ``Task N: ...`` heading."""
    lines = plan_section.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("- [>] ")), None)
    if start is None:
        return []
    end = next((j for j in range(start + 1, len(lines)) if _ENTRY.match(lines[j]) or re.match(r"^#{1,2} ", lines[j])),
               len(lines))
    block = "\n".join(lines[start + 1:end])
    names = [" ".join(n.split()) for n in re.findall(r"<name>\s*(.*?)\s*</name>", block, re.S)]
    names += [m.group(1) for m in map(_TASK_HEADING.match, lines[start + 1:end]) if m]
    return names


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line[:60]


def _fenced_lines(text: str) -> list[str]:
    lines, fence = [], None
    for line in text.splitlines():
        mark = re.match(r"^\s*(`{3,}|~{3,})", line)
        if mark and (fence is None or mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence)):
            fence = None if fence is not None else mark.group(1)
            continue
        if fence is not None:
            lines.append(line)
    return lines


def measure(name: str, project: Path, overrides: dict, budgets) -> list[dict]:
    import ctxengine

    full = ctxengine.build_context(str(project), request=REQUEST, overrides={**BASE, **overrides,
                                                                             "budget.maxTokens": 2_000_000})
    facts = reference_facts(full)
    rows = []
    for budget in budgets:
        start = time.perf_counter()
        try:
            result = ctxengine.build_context(str(project), request=REQUEST,
                                             overrides={**BASE, **overrides, "budget.maxTokens": budget})
        except Exception as exc:  # a budget the immutable sections alone do not fit, say
            rows.append({"name": name, "budget": budget, "error": str(exc).split(":")[0][:60]})
            continue
        seconds = time.perf_counter() - start
        truncation = result.truncation or {}
        context = result.context
        ratio = (result.budget.total_tokens / truncation["target"]) if truncation.get("triggered") else None
        older = len(re.findall(r"^- Round \d+", context, re.M))
        rows.append({
            "name": name, "budget": budget, "ratio": ratio, "tokens": result.budget.total_tokens,
            "target": truncation.get("target"),
            "prompt": None if facts["prompt"] is None else facts["prompt"] in context,
            "prev": None if facts["prev"] is None else facts["prev"] in context,
            "lines": f"{min(older, facts['older'])}/{facts['older']}" if facts["older"] else "-",
            "tasks": f"{sum(t in context for t in facts['tasks'])}/{len(facts['tasks'])}" if facts["tasks"] else "-",
            "defs": f"{sum(d in context for d in facts['defs'])}/{len(facts['defs'])}" if facts["defs"] else "-",
            "seconds": seconds,
        })
    return rows


def _mark(value) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--skip-large", action="store_true", help=f"skip transcripts over {LARGE:,} bytes")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    print(f"{'input':<40} {'budget':>6} {'ctx/target':>10} {'tokens':>6} {'target':>6} {'prompt':>6} {'prev':>5} "
          f"{'lines':>9} {'tasks':>6} {'defs':>7}")
    within = total = 0
    for name, project, overrides in materials(args.skip_large):
        for row in measure(name, project, overrides, budgets):
            if "error" in row:
                print(f"{row['name']:<40} {row['budget']:>6} error: {row['error']}")
                continue
            ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
            ok = ""
            if row["ratio"] is not None:
                total += 1
                if 0.9 <= row["ratio"] <= 1.0:
                    within += 1
                    ok = " ok"
            print(f"{row['name']:<40} {row['budget']:>6} {ratio:>10}{ok:<3} {row['tokens']:>6} {row['target'] or 0:>6} "
                  f"{_mark(row['prompt']):>6} {_mark(row['prev']):>5} {row['lines']:>9} {row['tasks']:>6} "
                  f"{row['defs']:>7}")
    print(f"\nwithin 10% of the target (0.90-1.00) when truncation ran: {within}/{total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Recall of the code stage on real GSD projects, beside aider's repo map (issue 22 item 5).

    python benchmarks/code_recall.py [--repos /tmp/recall] [--plans 3] [--aider PATH]
                                     [--budgets 4000 8000 16000]

For each executed plan of each repository (a PLAN whose SUMMARY lists the files it changed),
the repository is checked out at the commit before the plan's execution (the parent of the first
commit after the PLAN was added whose subject names the plan id, GSD's ``feat(02-01): ...``).
The ground truth is the SUMMARY's file list (frontmatter ``key-files``/``key_files`` created and
modified, ``files_modified``, and the paths under a "Files Created/Modified" heading) that
already exist at that commit (a file the plan created cannot be shown by anyone).

* **ctxengine**: ``code_sections`` with the code pool set to the budget (``code_pool_tokens``
  overridden), ``--phase execute``, the plan's phase pinned and the position's plan set to the
  plan under test, the request ``Execute plan <id>``. A file counts when either section shows it
  (in full or outlined). Seconds: the code nodes in-process, ``cold`` with the memo emptied (the
  first budget), ``warm`` the best of the other budgets' runs (each parses nothing).
* **aider**: ``aider --show-repo-map --map-tokens N <named files>`` with the files ctxengine's
  ``code_names`` found in the plan (so both get the same names) added to the chat; the chat files
  count as shown (aider sends them in full, outside ``--map-tokens``), the map's files are the
  path lines of its output. No model is called (dummy key, no update check, no analytics).
  Seconds: the whole process (aider's start-up included), ``cold`` with its tags cache deleted,
  ``warm`` the best of the other budgets. Skipped when no aider is given (``--aider`` or the
  ``AIDER`` environment variable); install it into its own venv:
  ``python3.11 -m venv /tmp/aider-venv && /tmp/aider-venv/bin/pip install aider-chat``.

Note what the budgets mean: ctxengine fits the named files *and* the map into N tokens; aider's
N is the map alone, the chat files come on top. "unnamed" is the recall over the ground-truth
files the plan does not name, the part only a map can find.

Preparing the repositories (the only step that needs the network; their code is not committed):

    mkdir -p /tmp/recall && cd /tmp/recall
    for r in ahmetb/kubectl-fields TasosTilsi/Recall Enriquefft/post-shit-now EngramTools/memcp; do
        git clone -q https://github.com/$r "${r#*/}"; done

Every folder under ``--repos`` with a ``.git`` and a ``.planning`` is measured; the benchmark
checks out older commits in them (``git checkout --detach``), so use clones made for it.

Measured 2026-12-02 (``AIDER=/tmp/aider-venv/bin/aider python benchmarks/code_recall.py --plans 3``,
aider-chat 0.86.2 offline, 4 repositories, 12 plans, 61 ground-truth files of which 11 unnamed):
recall 82/85/84% (ctxengine) vs 82/82/85% (aider) at 4k/8k/16k; unnamed 0/18/9% vs 0/0/18%;
mean seconds 0.48 cold, 0.14-0.15 warm (in-process) vs 8.8-10.2 (aider's whole process).
ctxengine lost at 16k on memcp 21-02: the named files shown in full left the map less room than
at 8k, where they were outlined. With the map's floor (``code.mapMinShare`` 0.25), run again
(``python benchmarks/code_recall.py --plans 3``): ctxengine 84/85/85% at 4k/8k/16k, unnamed 9/18/18%.
Again after the graph was joined from packed keys (the same edges, the same ranking), with aider,
on a machine at load 5-6: ctxengine 84/85/85% (unnamed 9/18/18%) vs aider 82/84/85% (0/9/18%);
ctxengine at or above aider in every repository at every budget (kubectl-fields 100% vs 93% at
4k and 8k: an unnamed file aider's map leaves out). Mean seconds: ctxengine 0.57 cold, 0.16-0.17
warm (in-process); aider 15.2 cold, 11.1-11.8 warm (its whole process). Where both miss (memcp
21-02, 7 of 8 unnamed files): four test files and a load-test binary that construct the
``AppState`` the plan extends, ``cli.rs`` (it calls ``store_memory``) and ``lib.rs``; giving the users of a named identifier restart weight (tried at
1, 2 and 4) found none of them and lost a file at 16k, so it was left out.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUTPUTS = ["code_sections", "code_names", "gsd_position"]
QUIET = {"state.includeEnvironment": False, "state.includeSession": False, "budget.maxTokens": 200000}
_FILE_HEADING = re.compile(r"^#+\s.*\bfiles?\b.*\b(created|modified|changed|touched)\b", re.I)
_PATH_TOKEN = re.compile(r"`([^`\s]+)`|^\s*[-*]\s+([^\s`(:,]+)")


@dataclasses.dataclass(frozen=True)
class PlanCase:
    """One executed plan: its id, phase, the commit before its execution and the ground truth."""

    repo: Path
    plan_id: str
    phase: str
    base: str
    truth: tuple[str, ...]
    listed: int  # files the SUMMARY lists (created ones included)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def summary_paths(text: str) -> list[str]:
    """The file paths a GSD SUMMARY lists: frontmatter key-files / key_files (created, modified),
    files_modified / files-modified, and the path tokens under a "Files Created/Modified" heading."""
    found: list[str] = []
    front = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if front:
        try:
            data = yaml.safe_load(front.group(1)) or {}
        except yaml.YAMLError:
            data = {}
        if isinstance(data, dict):
            for key in ("key-files", "key_files"):
                block = data.get(key)
                if isinstance(block, dict):
                    for part in ("created", "modified"):
                        found += [str(x) for x in block.get(part) or () if x]
            for key in ("files_modified", "files-modified"):
                found += [str(x) for x in data.get(key) or () if x]
    inside = False
    for line in text.split("\n"):
        if line.startswith("#"):
            inside = bool(_FILE_HEADING.match(line))
            continue
        if inside:
            for a, b in _PATH_TOKEN.findall(line):
                found.append(a or b)
    paths = []
    for item in found:
        token = item.strip().strip("`").split(" ")[0].strip("`,:;")
        if "/" in token or "." in token:
            paths.append(token.removeprefix("./"))
    return list(dict.fromkeys(paths))


def plan_cases(repo: Path, limit: int, head: str = "HEAD") -> list[PlanCase]:
    """The last ``limit`` executed plans in ``head``'s history with ground truth at their base commit."""
    log = git(repo, "log", "--reverse", "--diff-filter=A", "--format=@%H", "--name-only", head, "--", "*-SUMMARY.md")
    summaries: list[tuple[str, str]] = []
    commit = ""
    for line in log.split("\n"):
        if line.startswith("@"):
            commit = line[1:]
        elif line.strip():
            summaries.append((commit, line.strip()))
    cases: list[PlanCase] = []
    for summary_commit, summary in reversed(summaries):
        if len(cases) >= limit:
            break
        case = _case(repo, summary_commit, summary)
        if case is not None:
            cases.append(case)
    return cases


def _case(repo: Path, summary_commit: str, summary: str) -> PlanCase | None:
    name = summary.rsplit("/", 1)[-1].removesuffix("-SUMMARY.md")
    plan = summary.removesuffix("-SUMMARY.md") + "-PLAN.md"
    match = re.match(r"^(\d+(?:\.\d+)?)-\d+$", name)
    if not match:
        return None
    added = git(repo, "log", "--diff-filter=A", "--format=%H", summary_commit, "--", plan).split()
    if not added:
        return None
    base = None
    for line in git(repo, "log", "--reverse", "--format=%H %s", f"{added[-1]}..{summary_commit}").split("\n"):
        sha, _, subject = line.partition(" ")
        if sha and re.search(rf"\b{re.escape(name)}\b", subject) and sha != summary_commit:
            touched = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "-m", sha).split()
            if any(not p.startswith(".planning/") for p in touched):
                base = git(repo, "rev-parse", f"{sha}^").strip()
                break
    if base is None:
        return None
    listed = summary_paths(git(repo, "show", f"{summary_commit}:{summary}"))
    existing = set(git(repo, "ls-tree", "-r", "--name-only", base).split("\n"))
    truth = tuple(p for p in listed if p in existing and not p.startswith(".planning/"))
    if not truth or plan not in existing:  # some projects delete their PLAN files once executed
        return None
    return PlanCase(repo, name, match.group(1), base, truth, len(listed))


def ctxengine_run(case: PlanCase, budget: int, memo_clear: bool) -> tuple[float, set[str], list[str], str | None]:
    """(seconds, files shown, files named, the plan the position chose) for one budget."""
    from ctxengine import driver
    from ctxengine.api import build_overrides

    overrides = build_overrides(QUIET, phase="execute", phase_number=case.phase)
    request = f"Execute plan {case.plan_id}"
    position = driver.execute(["gsd_position"], str(case.repo), overrides, request, cache=False)["gsd_position"]
    fixed = {"code_pool_tokens": budget}
    if position is not None and position.plan != case.plan_id:
        fixed["gsd_position"] = dataclasses.replace(position, plan=case.plan_id)
    memo = getattr(driver, "MEMO", None)
    if memo_clear and memo is not None:
        memo.clear()
    start = time.perf_counter()
    out = driver.execute(OUTPUTS[:2], str(case.repo), overrides, request, fixed, cache=False)
    seconds = time.perf_counter() - start
    shown = {source.location for section in out["code_sections"] for source in section.sources}
    named = [f.path for f in out["code_names"].files]
    return seconds, shown, named, getattr(position, "plan", None)


def aider_run(aider: str, case: PlanCase, budget: int, named: list[str], cold: bool) -> tuple[float, set[str]]:
    """(seconds, files in chat or map) for ``aider --show-repo-map`` at ``budget``."""
    if cold:
        for cache in case.repo.glob(".aider.tags.cache*"):
            shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "OPENAI_API_KEY": "sk-dummy", "AIDER_ANALYTICS": "false", "AIDER_CHECK_UPDATE": "false"}
    with tempfile.TemporaryDirectory(prefix="aider-hist-") as tmp:
        command = [aider, "--show-repo-map", "--map-tokens", str(budget), "--model", "gpt-4o", "--no-check-update",
                   "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--no-pretty", "--no-fancy-input",
                   "--chat-history-file", f"{tmp}/chat.md", "--input-history-file", f"{tmp}/input",
                   "--llm-history-file", f"{tmp}/llm", *named]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=case.repo, env=env, capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"aider failed ({done.returncode}): {done.stderr[-500:] or done.stdout[-500:]}")
    files = set(git(case.repo, "ls-files").split("\n"))
    mapped = {line.rstrip().removesuffix(":") for line in done.stdout.split("\n") if line and not line[0].isspace()}
    return seconds, (mapped & files) | set(named)


def recall(truth: tuple[str, ...], shown: set[str]) -> tuple[int, int]:
    return sum(1 for p in truth if p in shown), len(truth)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", default=os.environ.get("CODE_RECALL_REPOS", "/tmp/recall"))
    parser.add_argument("--plans", type=int, default=3, help="executed plans per repository (the latest)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[4000, 8000, 16000])
    parser.add_argument("--aider", default=os.environ.get("AIDER"), help="the aider executable (else skipped)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    aider = args.aider if args.aider and shutil.which(args.aider) else None
    if args.aider and not aider:
        print(f"aider: {args.aider} not found; skipped")
    if not Path(args.repos).is_dir():
        print(f"{args.repos}: not a folder; clone the repositories there first (see the docstring)")
        return 1
    repos = sorted(p for p in Path(args.repos).iterdir() if (p / ".git").exists() and (p / ".planning").exists())
    if not repos:
        print(f"no git repositories with .planning under {args.repos}; see the docstring to prepare them")
        return 1
    rows = []
    for repo in repos:
        start_head = git(repo, "rev-parse", "HEAD").strip()
        try:
            cases = plan_cases(repo, args.plans, start_head)
        except subprocess.CalledProcessError as exc:
            print(f"{repo.name}: {exc.stderr.strip()}")
            continue
        try:
            rows += _measure(repo, cases, args.budgets, aider)
        finally:
            git(repo, "checkout", "-q", "--detach", start_head)
    _summary(rows, args.budgets)
    return 0


def _measure(repo: Path, cases: list[PlanCase], budgets: list[int], aider: str | None) -> list[dict]:
    """One row per plan and budget (the repository checked out at each plan's base)."""
    rows = []
    for case in cases:
        git(repo, "checkout", "-q", "--detach", case.base)
        files = len(git(repo, "ls-files").split())
        for i, budget in enumerate(budgets):
            sec, shown, named, chose = ctxengine_run(case, budget, i == 0)
            unnamed = tuple(p for p in case.truth if p not in named)
            row = {"repo": repo.name, "plan": case.plan_id, "files": files, "truth": len(case.truth),
                   "named": sum(1 for p in case.truth if p in named), "budget": budget,
                   "ctx": recall(case.truth, shown), "ctx_un": recall(unnamed, shown), "ctx_s": sec,
                   "chose": chose}
            if aider:
                try:
                    asec, ashown = aider_run(aider, case, budget, named, i == 0)
                    row.update(aider=recall(case.truth, ashown), aider_un=recall(unnamed, ashown), aider_s=asec)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    row["aider_error"] = str(exc)[:300]
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    text = (f"{row['repo']:<16}{row['plan']:>8}{row['files']:>6}{row['budget']:>7}  truth {row['truth']} "
            f"(named {row['named']})  ctxengine {_frac(row['ctx'])} unnamed {_frac(row['ctx_un'])} {row['ctx_s']:.2f}s")
    if "aider" in row:
        text += f"  | aider {_frac(row['aider'])} unnamed {_frac(row['aider_un'])} {row['aider_s']:.2f}s"
    if "aider_error" in row:
        text += f"  | aider error: {row['aider_error']}"
    if row["chose"] != row["plan"]:
        text += f"  (position chose {row['chose']}; set to the plan)"
    return text


def _frac(pair: tuple[int, int]) -> str:
    return f"{pair[0]}/{pair[1]}"


def _summary(rows: list[dict], budgets: list[int]) -> None:
    """Per repository and budget: recall (all, unnamed) and seconds (cold = first budget's run)."""
    print(f"\n{'repo':<16}{'budget':>7} {'ctx recall':>11} {'ctx unnamed':>12} {'ctx s':>7} "
          f"{'aider recall':>13} {'aider unnamed':>14} {'aider s':>8}")
    groups: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["repo"], row["budget"]), []).append(row)
        groups.setdefault(("ALL", row["budget"]), []).append(row)
    for (repo, budget), group in sorted(groups.items(), key=lambda item: (item[0][0] == "ALL", item[0])):
        def share(key: str) -> str:
            pairs = [r[key] for r in group if key in r]
            hit, total = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
            return f"{hit}/{total}={hit / total:.0%}" if total else "-"

        def seconds(key: str) -> str:
            values = [r[key] for r in group if key in r]
            return f"{sum(values) / len(values):.2f}" if values else "-"

        print(f"{repo:<16}{budget:>7} {share('ctx'):>11} {share('ctx_un'):>12} {seconds('ctx_s'):>7} "
              f"{share('aider'):>13} {share('aider_un'):>14} {seconds('aider_s'):>8}")
    print("\nseconds: mean per plan; the first budget's runs are cold (memo emptied / aider's tags cache deleted)")


if __name__ == "__main__":
    raise SystemExit(main())

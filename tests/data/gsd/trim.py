"""Copy a trimmed ``.planning/`` of a real GSD project into tests/data/gsd/<owner__repo>/.

Usage (a maintainer's tool, not run by the tests)::

    python tests/data/gsd/trim.py GIT_DIR COMMIT OWNER/REPO [--full N] [--skeleton]
    python tests/data/gsd/trim.py PROJECT_DIR - OWNER/REPO     # a checked-out copy

Only what decides the position is kept:

* STATE.md and ROADMAP.md (also each ``workstreams/<name>/``'s): whole when small (<= 8 KB), else their skeleton: the
  frontmatter, every heading, checklist item, table row, ``<details>``/``<summary>`` line and
  line naming a phase, plan, milestone or status, plus STATE.md's "Current Position" and
  "Session Continuity" blocks (``--skeleton`` always trims: for licences that ask for
  minimal excerpts);
* config.json;
* every phase folder (``phases/*``, ``milestones/*-phases/*``) with every file name; the
  files the reading never looks at (VERIFICATION, UAT, notes) are left out of folders away
  from the position; the files of the ``--full`` N highest active phase folders (default 3) and of folders whose
  plans lack a SUMMARY get their first lines (frontmatter keys that name the plan, the
  title, the one-liner), every other file is empty.

The expectation (EXPECTED.yaml) is written by hand, by reading the project's files.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

SMALL = 8_000
KEEP_LINE = re.compile(
    r"^\s*(#{1,6}\s|[-*]\s+\[[ xX]\]|\||</?details|<summary|\*\*Plans?\b|Plans?:|Phase\b|Status\b|Milestone\b"
    r"|\*\*(Phase|Plan|Status|Milestone|Current|Last|Stopped|Next|Progress)\b|Stopped at|Last activity|Progress\b|"
    r"Next\b|Resume\b)|Phases?\s+\d+\s*[-–—]|plans? (executed|complete)",
    re.I,
)
PLAN_KEYS = re.compile(r"^(phase|plan|wave|status|one[-_]?liner|title|type|completed):", re.I)
READ_NAME = re.compile(r"(PLAN|SUMMARY|CONTEXT|RESEARCH)\.md$", re.I)
PHASE_FILE = re.compile(r"^(\d+(?:\.\d+)*)-(\d+)-(PLAN|SUMMARY)\.md$")


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True, text=True).stdout


def skeleton(text: str, keep_blocks: tuple[str, ...] = (), rows: bool = True) -> str:
    """The frontmatter, then the lines KEEP_LINE matches (table rows only when ``rows``), and
    whole sections whose heading holds one of ``keep_blocks``."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    if lines and lines[0].strip() == "---":
        end = next((j for j in range(1, len(lines)) if lines[j].strip() == "---"), 0)
        out.extend(lines[: end + 1])
        i = end + 1
    block = False
    for line in lines[i:]:
        heading = re.match(r"^#{1,6}\s+(.*)", line)
        if heading:
            block = any(k in heading.group(1).lower() for k in keep_blocks)
        if block or KEEP_LINE.search(line) and (rows or not line.lstrip().startswith("|")):
            out.append(line)
    return "\n".join(out) + "\n"


def stub(text: str, limit: int = 700) -> str:
    """A phase file's first lines: the frontmatter keys naming the plan, then the body's first lines."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    if lines and lines[0].strip() == "---":
        end = next((j for j in range(1, len(lines)) if lines[j].strip() == "---"), 0)
        kept = [line for line in lines[1:end] if PLAN_KEYS.match(line)]
        if kept:
            out += ["---", *kept, "---"]
        i = end + 1
    body = [line for line in lines[i:] if line.strip()][:8]
    text = "\n".join(out + [""] + body if out else body)
    return (text[:limit].rsplit("\n", 1)[0] if len(text) > limit else text) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("git_dir")
    ap.add_argument("commit")
    ap.add_argument("repo")
    ap.add_argument("--full", type=int, default=3)
    ap.add_argument("--skeleton", action="store_true")
    ap.add_argument("--planning", default=".planning")
    args = ap.parse_args()
    out = Path(__file__).resolve().parent / args.repo.replace("/", "__") / ".planning"
    root = args.planning.rstrip("/")
    if args.commit == "-":  # a checked-out copy (../shared/corpus/planning/<owner__repo>)
        base = Path(args.git_dir)
        names = sorted(str(p.relative_to(base)) for p in (base / root).rglob("*") if p.is_file())

        def show(name: str) -> str:
            return (base / name).read_text(encoding="utf-8", errors="replace")
    else:
        names = [n for n in git(args.git_dir, "ls-tree", "-r", "--name-only", args.commit, root + "/").split("\n") if n]

        def show(name: str) -> str:
            return git(args.git_dir, "show", f"{args.commit}:{name}")
    rel = {n: n[len(root) + 1:] for n in names}

    for name, path in rel.items():
        if path.rsplit("/", 1)[-1] in ("STATE.md", "ROADMAP.md") and (
                "/" not in path or re.match(r"^workstreams/[^/]+/[A-Z]+\.md$", path)):
            text = show(name)
            if args.skeleton or len(text.encode()) > SMALL:
                state = path.endswith("STATE.md")
                blocks = ("current position", "session continuity") if state else ()
                text = skeleton(text, blocks, rows=not state)
        elif path == "config.json":
            text = show(name)
        else:
            continue
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    folders: dict[str, list[str]] = {}
    for name, path in rel.items():
        parts = path.split("/")
        if len(parts) == 3 and parts[0] == "phases" or len(parts) == 4 and parts[0] == "milestones" and parts[1].endswith("-phases"):
            folders.setdefault("/".join(parts[:-1]), []).append(parts[-1])

    def key(folder: str) -> tuple:
        match = re.match(r"(\d+(?:\.\d+)*)", folder.rsplit("/", 1)[-1])
        return tuple(int(p) for p in match.group(1).split(".")) if match else ()

    active = sorted((f for f in folders if f.startswith("phases/") and key(f)), key=key)
    full = set(active[-args.full:]) if args.full else set()
    for folder in active:
        plans = {PHASE_FILE.match(n).group(2): set() for n in folders[folder] if PHASE_FILE.match(n)}
        for n in folders[folder]:
            m = PHASE_FILE.match(n)
            if m:
                plans[m.group(2)].add(m.group(3))
        if any(kinds == {"PLAN"} for kinds in plans.values()) and len(full) < args.full + 6:
            full.add(folder)
    for folder, files in folders.items():
        for n in files:
            if folder not in full and not READ_NAME.search(n):
                continue  # a VERIFICATION, UAT or note in a folder away from the position: the reading never looks at it
            target = out / folder / n
            target.parent.mkdir(parents=True, exist_ok=True)
            text = stub(show(f"{root}/{folder}/{n}")) if folder in full and n.endswith(".md") else ""
            target.write_text(text, encoding="utf-8")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out.parent.name}: {sum(1 for p in out.rglob('*') if p.is_file())} files, {total} bytes")


if __name__ == "__main__":
    main()

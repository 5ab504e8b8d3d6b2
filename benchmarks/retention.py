"""Retention: how much of what matters survives when the context is cut to 25%, 50% and 75%.

    /work/venv/bin/python benchmarks/retention.py [--keep] [--verbose]

Projects. A few projects are generated (seeded, so every run is the same) in a temporary
folder in the article layout (../shared/LAYOUT.md): a core rules document (immutable,
priority 95), project reference documents of priority 70, 60, 40 (discardable) and one
deprecated document (priority 55), a plan with done / in-progress / pending tasks, a JSON
Lines session log with many rounds (tool calls and their results), output instructions in
.planning/config.json, and a user request. Git, the environment and the file tree are off
(deterministic), ``state.maxHistoryRounds`` is above the number of rounds so that the
untruncated context holds every round verbatim, and the model is a cl100k_base one so that
ctxengine counts with the same tokenizer as this benchmark.

Facts. Unique tokens ``FACT-<kind>-<n>-<8 hex>`` are planted inside realistic sentences in
every section kind, each with an importance weight that follows what a good context engine
should keep (see ``WEIGHTS``): the immutable sections (rules, request, output instructions)
weigh most and must all be kept; the in-progress plan task and the newest history rounds
are high; the first paragraphs and key sentences of high-priority reference documents are
medium; old history rounds, low-priority and deprecated documents and completed tasks are
low. Facts sit in varied positions: first paragraphs under headings, key sentences in the
middle of paragraphs with paths and identifiers, bullet lists, document tails, tool output.
A completed plan task shows only its first line in any context (LAYOUT.md), so its facts are
planted on that line. Every planted fact is checked to be in the untruncated context.

Method. Full size = the exact token count of ctxengine's untruncated context (a huge
budget). For each fraction f, ``budget.reserveTokens`` = 1000 and ``budget.maxTokens`` =
1000 + f * full, so the available tokens are f * full; ``budget.softLimit`` = 1 so the soft
trigger does not cut below the hard limit. ctxengine runs through the public API
(``ctxengine.build_context``). Each baseline gets the same input, the sections of the
untruncated build, and must produce a text of at most the same available tokens (exact
cl100k_base count):

* head: the first N tokens of the full context.
* tail: the last N tokens of the full context.
* gsd-8192: GSD-style per-file truncation, each section's content cut to its first 8192
  characters (with a marker), re-rendered with the same templates, then the head kept.
* drop-sections: whole sections dropped from the lowest priority up (ties: the later
  section first) until the re-rendered context fits; if only immutable sections are left
  and it still does not fit, the head is kept.
* langchain-trim: every section but the history kept whole; the session's messages
  (HumanMessage / AIMessage with tool_calls / ToolMessage) trimmed with langchain-core's
  ``trim_messages(strategy="last", start_on="human", token_counter=<tiktoken>)`` to the
  tokens the rest leaves, rendered as ctxengine renders rounds; the trim budget is lowered
  until the re-rendered context fits. When the rest alone does not fit, the context
  without any history is cut from its head (as the head baseline).

Score = the weight of the facts whose token appears in the output over the weight of all
facts (pooled over the projects). Reported per method and fraction, with ctxengine's
utilisation (tokens used / available), whether every immutable fact was kept and whether
every output is within the budget; then PASS/FAIL for the targets: ctxengine best at every
budget, all immutable facts kept, every result within budget, utilisation >= 90%. Facts
ctxengine lost are broken down by section with the ledger steps that acted on it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

FRACTIONS = (0.25, 0.5, 0.75)
RESERVE = 1000
HUGE = 10_000_000
GSD_FILE_CHARS = 8192
UTILISATION_TARGET = 0.90
MODEL = "gpt-4-turbo"  # a cl100k_base model: ctxengine and this benchmark count alike
METHODS = ("ctxengine", "head", "tail", "gsd-8192", "drop-sections", "langchain-trim")
BASE_OVERRIDES = {
    "state.includeGit": False,
    "state.includeEnvironment": False,
    "state.includeFileTree": False,
    "budget.softLimit": 1,
    "budget.reserveTokens": RESERVE,
    "model": MODEL,
}

# ----------------------------------------------------------------------------- weights

#: Importance of a fact by where it is planted.
WEIGHTS = {
    "immutable": 10.0,  # rules, user request, output instructions: must be kept
    "plan-active": 6.0,  # the in-progress task (title and detail)
    "plan-pending": 3.0,
    "plan-intro": 2.0,
    "plan-done": 1.0,
    # reference documents: (lead = first paragraph of the document or a heading, middle = a
    # key sentence inside a paragraph or list, tail = the document's last paragraph)
    "ref70": {"lead": 4.0, "middle": 3.0, "tail": 2.0},
    "ref60": {"lead": 3.0, "middle": 2.0, "tail": 1.5},
    "ref40": {"lead": 1.0, "middle": 0.5, "tail": 0.5},
    "deprecated": {"lead": 1.0, "middle": 0.5, "tail": 0.5},
}


def history_weight(age: int, position: str) -> float:
    """Weight of a history fact by the age of its round (0 = newest) and its position (user
    request, tool output, closing assistant message): the newest rounds weigh most; in older
    rounds the request and the outcome weigh more than raw tool output."""
    base = 6.0 if age == 0 else 5.0 if age == 1 else 4.0 if age == 2 else 2.5 if age <= 5 else 1.5 if age <= 11 else 0.75
    return base * (0.6 if position == "tool" and age >= 3 else 1.0)


# ----------------------------------------------------------------------------- vocabulary

DOMAINS = [
    {
        "product": "invoice export service", "pkg": "ledger",
        "modules": ["export", "render", "tax", "queue", "storage", "api"],
        "things": ["invoice batches", "currency rounding", "the export queue", "PDF rendering", "tax codes",
                   "the retry budget", "the S3 uploader", "customer locales", "credit notes", "late fees"],
        "env": ["EXPORT_QUEUE", "S3_BUCKET", "TAX_TABLE_URL", "PDF_WORKERS", "LEDGER_DSN"],
        "funcs": ["export_batch", "render_invoice", "round_amount", "enqueue_job", "upload_pdf",
                  "resolve_tax_code", "load_locale", "apply_credit_note", "compute_late_fee"],
        "tables": ["invoices", "invoice_lines", "export_jobs", "tax_codes", "credit_notes"],
    },
    {
        "product": "document search indexer", "pkg": "finder",
        "modules": ["crawl", "parse", "index", "rank", "query", "api"],
        "things": ["the crawl frontier", "tokenisation", "the inverted index", "snippet highlighting",
                   "stop words", "shard rebalancing", "the ranking model", "synonym expansion", "deduplication",
                   "the query cache"],
        "env": ["INDEX_DIR", "SHARD_COUNT", "CRAWL_RATE", "RANK_MODEL_PATH", "QUERY_CACHE_TTL"],
        "funcs": ["fetch_page", "tokenize", "add_posting", "merge_segments", "score_hits", "expand_synonyms",
                  "dedupe_docs", "highlight", "rebalance_shards"],
        "tables": ["documents", "postings", "segments", "crawl_queue", "synonyms"],
    },
    {
        "product": "authentication gateway", "pkg": "gatekeeper",
        "modules": ["login", "tokens", "sessions", "mfa", "audit", "api"],
        "things": ["password hashing", "refresh tokens", "the session store", "TOTP enrolment",
                   "rate limiting", "the audit trail", "key rotation", "account lockout", "SSO callbacks",
                   "device fingerprints"],
        "env": ["JWT_SECRET_PATH", "SESSION_TTL", "REDIS_URL", "MFA_ISSUER", "LOCKOUT_THRESHOLD"],
        "funcs": ["verify_password", "issue_tokens", "rotate_refresh", "enrol_totp", "check_rate",
                  "write_audit", "rotate_keys", "lock_account", "handle_sso_callback"],
        "tables": ["users", "sessions", "refresh_tokens", "mfa_devices", "audit_events"],
    },
]

FILLER = [
    "The {module} package owns {thing}; other packages go through the public functions in `{path}`.",
    "`{func}()` is pure: it takes plain dataclasses and returns new ones, so its tests need no fixtures.",
    "Errors raised while handling {thing} are wrapped in a domain exception before they leave the {module} layer.",
    "We log once per job at INFO and once per record at DEBUG, and never log customer data.",
    "The `{table}` table is written only by the {module} layer, inside one transaction per batch.",
    "Configuration comes from environment variables; `{env}` has a safe default for local runs.",
    "A change to {thing} needs a line in CHANGELOG.md and a test that fails without it.",
    "Every network call passes an explicit `timeout={n}` in seconds.",
    "`{path}` lists its public names in `__all__`; everything else in it is private.",
    "The batch size defaults to {n}00 rows and is tuned per environment.",
    "A nightly job re-runs {thing} for the previous day and compares the totals with the live run.",
    "Retries use exponential backoff with jitter and stop after {n} attempts.",
    "Metrics are emitted as `{module}.{func}.duration_ms` and `{module}.{func}.errors`.",
    "Public functions carry type hints and the {module} package is checked by mypy in strict mode.",
    "Fixtures for {thing} live under `tests/fixtures/{module}/` and are generated, not written by hand.",
    "When {thing} is disabled the {module} layer returns an empty result instead of raising.",
    "The {module} layer never imports from `api/`; dependencies point inwards only.",
    "Long-running work for {thing} is moved to the worker pool so request handlers stay under {n}0 ms.",
    "`{func}()` validates its input first and fails fast with a message that names the bad field.",
    "Database access for {thing} goes through the repository in `{path}`, never raw SQL in handlers.",
    "The integration suite for {thing} runs against a disposable database created per test session.",
    "Feature work on {thing} lands behind a flag first and the flag is removed after one release.",
]

FACT_SENTENCES = [
    "The feature flag that guards {thing} is {fact}; it is read once at start-up in `{path}`.",
    "`{func}()` stamps every row it writes to `{table}` with the marker {fact} so the audit job can find it.",
    "Incident {fact} showed that {thing} must be flushed before `{func}()` returns.",
    "In staging `{env}` must be set to {fact}; production reads it from the vault.",
    "The contract test for {thing} is pinned to the fixture {fact} in `{path}`.",
    "Changes to {thing} need a review from the {module} owners quoting ticket {fact}.",
    "The dashboard panel {fact} tracks {thing}; check it after every deploy.",
    "The schema version of `{table}` is {fact}; bump it with every migration.",
    "`{func}()` must reject input without the header {fact}, or {thing} breaks downstream.",
    "The lock that serialises {thing} is named {fact} and lives in `{path}`.",
]

RULE_FACTS = [
    "Never call `{func}()` outside a transaction; the guard constant is {fact}.",
    "Every commit message quotes the work item {fact} until the {module} rewrite ships.",
    "Do not edit `{path}` by hand: it is generated by the tool {fact}.",
    "Secrets for {thing} are read from the vault path {fact}, never from files in the repository.",
]

RULE_PLAIN = [
    "Read the current plan before changing code and work on the task marked in progress.",
    "Keep every change minimal and reversible; one concern per commit.",
    "Every behaviour change comes with a test that fails without it (`pytest -q`).",
    "Do not add a dependency without writing down why in the plan.",
    "Public functions keep their signatures; deprecate before removing.",
    "Never log secrets, tokens or customer data.",
    "Format with `ruff format` and keep `ruff check` clean.",
    "Prefer pure functions; I/O stays at the edges of the {module} layer.",
]

VERBS = ["Add", "Fix", "Refactor", "Speed up", "Document", "Harden", "Test", "Instrument"]


def _title(rng: random.Random, d: dict) -> str:
    return f"{rng.choice(VERBS)} {rng.choice(d['things'])}"


# ----------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Fact:
    token: str
    section: str  # the section key in ctxengine's build
    place: str  # human-readable position
    weight: float
    immutable: bool = False


@dataclass
class Project:
    name: str
    path: Path
    request: str
    facts: list[Fact] = field(default_factory=list)


class _Planter:
    """Makes fact tokens and fills sentence templates with a domain's words."""

    def __init__(self, rng: random.Random, domain: dict, facts: list[Fact]):
        self.rng, self.d, self.facts = rng, domain, facts
        self.counts: dict[str, int] = {}

    def fact(self, kind: str, section: str, place: str, weight: float, immutable: bool = False) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        token = f"FACT-{kind}-{self.counts[kind]}-{self.rng.getrandbits(32):08x}"
        self.facts.append(Fact(token, section, place, weight, immutable))
        return token

    def words(self) -> dict:
        d, rng = self.d, self.rng
        module = rng.choice(d["modules"])
        return {
            "module": module, "thing": rng.choice(d["things"]), "func": rng.choice(d["funcs"]),
            "table": rng.choice(d["tables"]), "env": rng.choice(d["env"]), "n": rng.randint(2, 9),
            "path": f"src/{d['pkg']}/{module}/{rng.choice(d['funcs'])}.py",
        }

    def fill(self, template: str, **extra) -> str:
        return template.format(**{**self.words(), **extra})

    def filler(self, n: int) -> list[str]:
        return [self.fill(self.rng.choice(FILLER)) for _ in range(n)]

    def fact_sentence(self, kind, section, place, weight, immutable=False, templates=FACT_SENTENCES) -> str:
        return self.fill(self.rng.choice(templates), fact=self.fact(kind, section, place, weight, immutable))


# ----------------------------------------------------------------------------- projects

#: Project shapes: history rounds, tool calls per round, tool output lines, and reference
#: documents (file, title, priority, deprecated, headings, paragraphs per heading).
SHAPES = {
    "balanced": {
        "rounds": 24, "calls": (1, 3), "output_lines": (8, 30), "done": 5, "pending": 3,
        "docs": [("architecture.md", "Architecture", 70, False, 4, 3), ("api.md", "API conventions", 60, False, 4, 3),
                 ("style-notes.md", "Style notes", 40, False, 3, 2), ("legacy-deploy.md", "Legacy deployment", 55, True, 3, 2)],
    },
    "history-heavy": {
        "rounds": 40, "calls": (1, 3), "output_lines": (10, 30), "done": 7, "pending": 3,
        "docs": [("architecture.md", "Architecture", 70, False, 3, 2), ("api.md", "API conventions", 60, False, 3, 2),
                 ("style-notes.md", "Style notes", 40, False, 2, 2), ("legacy-deploy.md", "Legacy deployment", 55, True, 2, 2)],
    },
    "docs-heavy": {
        "rounds": 12, "calls": (1, 2), "output_lines": (6, 20), "done": 4, "pending": 4,
        "docs": [("architecture.md", "Architecture", 70, False, 6, 4), ("data-model.md", "Data model", 70, False, 4, 3),
                 ("api.md", "API conventions", 60, False, 5, 3), ("operations.md", "Operations", 60, False, 4, 3),
                 ("style-notes.md", "Style notes", 40, False, 4, 3), ("legacy-deploy.md", "Legacy deployment", 55, True, 4, 3)],
    },
    "tiny": {  # for the smoke test
        "rounds": 6, "calls": (1, 2), "output_lines": (4, 10), "done": 2, "pending": 1,
        "docs": [("architecture.md", "Architecture", 70, False, 2, 2), ("style-notes.md", "Style notes", 40, False, 1, 2),
                 ("legacy-deploy.md", "Legacy deployment", 55, True, 1, 2)],
    },
}
PROJECTS = (("balanced", 11), ("history-heavy", 22), ("docs-heavy", 33))


def _ref_class(priority: int, deprecated: bool) -> str:
    if deprecated:
        return "deprecated"
    return "ref70" if priority >= 70 else "ref60" if priority >= 50 else "ref40"


def _reference_doc(p: _Planter, key: str, title: str, priority: int, deprecated: bool, headings: int,
                   paragraphs: int) -> str:
    rng, w = p.rng, WEIGHTS[_ref_class(priority, deprecated)]
    kind = "dep" if deprecated else f"ref{priority}"
    front = f"---\ntitle: {title}\npriority: {priority}\n" + ("deprecated: true\n" if deprecated else "") + "---\n"
    out = [f"# {title}", " ".join(p.filler(1) + [p.fact_sentence(kind, key, "intro", w["lead"])] + p.filler(2))]
    for h in range(headings):
        out.append(f"## {rng.choice(p.d['things']).capitalize()} ({h + 1})")
        lead = p.filler(rng.randint(0, 1)) + [p.fact_sentence(kind, key, f"heading {h + 1} first paragraph", w["lead"])]
        out.append(" ".join(lead + p.filler(rng.randint(1, 3))))
        middle_at = rng.randrange(1, paragraphs + 1) if paragraphs > 1 and h % 2 == 0 else None
        for k in range(1, paragraphs):
            sentences = p.filler(rng.randint(3, 6))
            if k == middle_at:
                sentences.insert(len(sentences) // 2, p.fact_sentence(kind, key, f"heading {h + 1} middle", w["middle"]))
            out.append(" ".join(sentences))
        if h % 2 == 1:  # a bullet list with a key item in the middle
            items = [f"- {s}" for s in p.filler(rng.randint(3, 5))]
            items.insert(len(items) // 2, "- " + p.fact_sentence(kind, key, f"heading {h + 1} list item", w["middle"]))
            out.append("\n".join(items))
    out.append(" ".join(p.filler(2) + [p.fact_sentence(kind, key, "last paragraph", w["tail"])]))
    return front + "\n\n".join(out) + "\n"


def _plan(p: _Planter, shape: dict) -> tuple[str, str]:
    rng = p.rng
    intro = " ".join(p.filler(1) + [p.fact_sentence("plan", "plan", "intro", WEIGHTS["plan-intro"])] + p.filler(1))
    lines = [f"# Plan: {_title(rng, p.d)}", "", intro, "", "## Tasks"]
    n = 1
    for _ in range(shape["done"]):
        fact = p.fact("plan", "plan", f"T{n} done (first line)", WEIGHTS["plan-done"])
        lines.append(f"- [x] T{n} {_title(rng, p.d)} (ticket {fact})")
        lines += [f"  {s}" for s in p.filler(2)]
        n += 1
    active = n
    fact = p.fact("plan", "plan", f"T{n} in progress (title)", WEIGHTS["plan-active"])
    lines.append(f"- [>] T{n} {_title(rng, p.d)} (ticket {fact})")
    detail = p.filler(1)
    for j in range(2):
        detail.insert(1 + 2 * j, p.fact_sentence("plan", "plan", f"T{n} in progress (detail)", WEIGHTS["plan-active"]))
        detail += p.filler(1)
    lines += [f"  {s}" for s in detail]
    n += 1
    for _ in range(shape["pending"]):
        lines.append(f"- [ ] T{n} {_title(rng, p.d)}")
        lines.append("  " + p.fact_sentence("plan", "plan", f"T{n} pending (detail)", WEIGHTS["plan-pending"]))
        n += 1
    return "\n".join(lines) + "\n", f"T{active}"


def _code_lines(p: _Planter, count: int, fact_line: str | None) -> list[str]:
    rng, d = p.rng, p.d
    lines = []
    for i in range(count):
        f = rng.choice(d["funcs"])
        lines.append(rng.choice([
            f"def {f}(batch: list[Record], *, timeout: float = {rng.randint(2, 30)}.0) -> Result:",
            f"    rows = repo.fetch_{rng.choice(d['tables'])}(limit={rng.randint(10, 500)})",
            "    if not rows:\n        return Result.empty()",
            f"    log.debug(\"{f}: %d rows\", len(rows))",
            f"    settings = load_settings(os.environ.get(\"{rng.choice(d['env'])}\", \"default\"))",
            f"    return {f}_impl(rows, settings)",
            f"# {rng.choice(FILLER).split(';')[0].format(**p.words())}",
        ]))
        if fact_line and i == count // 2:
            lines.append(fact_line)
    return lines


def _tool_output(p: _Planter, tool: str, lines: int, fact: str | None) -> str:
    rng, d = p.rng, p.d
    module = rng.choice(d["modules"])
    if tool == "bash":  # a pytest run
        out = ["============================= test session starts ==============================",
               f"collected {lines * 3} items", ""]
        for i in range(lines):
            out.append(f"tests/{module}/test_{rng.choice(d['funcs'])}.py::test_case_{i} PASSED")
            if fact and i == lines // 2:
                out.append(f"tests/{module}/test_{rng.choice(d['funcs'])}.py::test_marker FAILED")
                out.append(f"E   AssertionError: expected the record tag {fact}, got None")
        out.append(f"========= {1 if fact else 0} failed, {lines * 3 - (1 if fact else 0)} passed in {rng.randint(1, 9)}.{rng.randint(10, 99)}s =========")
        return "\n".join(out)
    if tool == "grep":
        out = []
        for i in range(lines):
            f = rng.choice(d["funcs"])
            out.append(f"src/{d['pkg']}/{rng.choice(d['modules'])}/{f}.py:{rng.randint(5, 400)}:    result = {f}(rows)")
            if fact and i == lines // 2:
                out.append(f"src/{d['pkg']}/{module}/constants.py:{rng.randint(5, 90)}:RECORD_TAG = \"{fact}\"")
        return "\n".join(out)
    fact_line = f"    TAG = \"{fact}\"  # see the plan" if fact else None
    return "\n".join(_code_lines(p, lines, fact_line))


def _session(p: _Planter, shape: dict) -> str:
    rng, d = p.rng, p.d
    rounds = shape["rounds"]
    out = []
    cid = 0
    for r in range(1, rounds + 1):
        age = rounds - r
        w = p.words()
        user_fact = p.fact("history", "history", f"round {r} (age {age}) user request", history_weight(age, "user"))
        user = rng.choice([
            f"{_title(rng, d)} in `{w['path']}`. The reporter referenced case {user_fact}.",
            f"Look at `{w['func']}()`: {w['thing']} misbehaves in staging; the log id is {user_fact}.",
            f"Continue with {w['thing']}; keep the change small and use the branch {user_fact}.",
        ])
        out.append({"round": r, "role": "user", "content": user, "ts": f"2026-11-{1 + r // 10:02d}T{8 + r % 10:02d}:00:00Z"})
        calls = rng.randint(*shape["calls"])
        fact_call = rng.randrange(calls)
        for c in range(calls):
            cid += 1
            tool = rng.choice(["bash", "grep", "read_file"])
            args = {"bash": f"pytest -q tests/{rng.choice(d['modules'])}", "grep": f"rg -n {w['func']} src/",
                    "read_file": w["path"]}[tool]
            say = rng.choice([f"Checking `{w['path']}` first.", "Running the relevant tests.",
                              f"Searching for the callers of `{w['func']}()`.", ""])
            out.append({"round": r, "role": "assistant", "content": say,
                        "tool_calls": [{"id": f"c{cid}", "name": tool, "arguments": args}]})
            fact = p.fact("history", "history", f"round {r} (age {age}) tool output", history_weight(age, "tool")) \
                if c == fact_call else None
            out.append({"round": r, "role": "tool", "call_id": f"c{cid}",
                        "content": _tool_output(p, tool, rng.randint(*shape["output_lines"]), fact)})
        end_fact = p.fact("history", "history", f"round {r} (age {age}) closing message", history_weight(age, "final"))
        out.append({"round": r, "role": "assistant", "content": " ".join([
            f"Done: `{w['func']}()` now handles {w['thing']}.",
            f"I recorded the decision as {end_fact} in the plan notes.",
        ] + p.filler(rng.randint(0, 2)))})
    return "\n".join(json.dumps(m) for m in out) + "\n"


def make_project(root: Path, seed: int, shape_name: str) -> Project:
    """Write one generated project under ``root`` (seeded: same seed, same bytes)."""
    rng = random.Random(seed)
    domain = DOMAINS[seed % len(DOMAINS)]
    shape = SHAPES[shape_name]
    facts: list[Fact] = []
    p = _Planter(rng, domain, facts)
    planning = root / ".planning"
    (planning / "references").mkdir(parents=True, exist_ok=True)
    (planning / "plans" / "current").mkdir(parents=True, exist_ok=True)
    (planning / "sessions" / "current").mkdir(parents=True, exist_ok=True)

    # core rules (immutable)
    rules_key = "ref:.planning/rules.md"
    rules = [p.fill(r) for r in RULE_PLAIN]
    for i, template in enumerate(rng.sample(RULE_FACTS, 3)):
        rules.insert(1 + 3 * i, p.fact_sentence("rules", rules_key, f"rule {2 + 3 * i}", WEIGHTS["immutable"], True,
                                                [template]))
    body = "\n".join(f"{i}. {r}" for i, r in enumerate(rules, 1))
    (planning / "rules.md").write_text(
        f"---\ntitle: Project rules\npriority: 95\n---\n# Project rules\n\n{body}\n", encoding="utf-8")

    project_refs = []
    for file, title, priority, deprecated, headings, paragraphs in shape["docs"]:
        key = f"ref:.planning/references/{file}"
        (planning / "references" / file).write_text(
            _reference_doc(p, key, title, priority, deprecated, headings, paragraphs), encoding="utf-8")
        project_refs.append(f"references/{file}")

    plan, active = _plan(p, shape)
    (planning / "plans" / "current" / "plan.md").write_text(plan, encoding="utf-8")
    (planning / "sessions" / "current" / "session.log").write_text(_session(p, shape), encoding="utf-8")

    instructions = (
        "Answer the user request using the context above. Follow the rules in the System Reference. "
        "When you change code, name each file you touch and keep the change minimal. "
        f"Quote the change ticket {p.fact('instructions', 'instructions', 'output instructions', WEIGHTS['immutable'], True)} "
        "in your summary."
    )
    config = {
        "references": {"core": ["rules.md"], "project": project_refs, "session": []},
        "state": {"includePlan": True, "includeSession": True, "includeGit": False, "includeFileTree": False,
                  "includeEnvironment": False, "maxHistoryRounds": shape["rounds"] + 100},
        "template": "dev",
        "budget": {"maxTokens": 128000, "reserveTokens": RESERVE, "softLimit": 1},
        "model": MODEL,
        "outputInstructions": instructions,
    }
    (planning / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    w = p.words()
    request = (f"Continue with {active}: make `{w['func']}()` handle {w['thing']} without breaking `{w['path']}`. "
               f"Use the job id {p.fact('request', 'request', 'user request', WEIGHTS['immutable'], True)} "
               "when you test against staging.")
    return Project(f"{shape_name}#{seed}", root, request, facts)


# ----------------------------------------------------------------------------- counting, rendering

def counter():
    from ctxengine.nodes.lib.tokens import token_counter_for

    return token_counter_for("cl100k_base")


def _templates(project: Project) -> tuple[str, str, str]:
    """The context template, mode template and escape setting ctxengine renders with."""
    from ctxengine import driver

    out = driver.execute(["context_template", "mode_template", "context_config"], project.path,
                         {**BASE_OVERRIDES, "budget.maxTokens": HUGE}, project.request)
    return out["context_template"], out["mode_template"], out["context_config"]["escape"]


def head_tokens(text: str, n: int) -> str:
    """The longest prefix of ``text`` cut at a token boundary with at most ``n`` tokens."""
    c = counter()
    toks = c.encode(text)
    k = min(n, len(toks))
    while k > 0:
        out = c.decode(toks[:k])
        if c.count(out) <= n:
            return out
        k -= 1
    return ""


def tail_tokens(text: str, n: int) -> str:
    """The longest suffix of ``text`` cut at a token boundary with at most ``n`` tokens."""
    c = counter()
    toks = c.encode(text)
    k = min(n, len(toks))
    while k > 0:
        out = c.decode(toks[len(toks) - k:])
        if c.count(out) <= n:
            return out
        k -= 1
    return ""


# ----------------------------------------------------------------------------- baselines


@dataclass
class Full:
    """The untruncated build and what the baselines need from it."""

    project: Project
    result: object  # BuildResult
    tokens: int
    templates: tuple[str, str, str]

    def render(self, sections) -> str:
        from ctxengine.nodes.lib.layout import render_context

        return render_context(list(sections), *self.templates)


def baseline_head(full: Full, n: int) -> str:
    return head_tokens(full.result.context, n)


def baseline_tail(full: Full, n: int) -> str:
    return tail_tokens(full.result.context, n)


def baseline_gsd(full: Full, n: int) -> str:
    cut = []
    for s in full.result.sections:
        if len(s.content) > GSD_FILE_CHARS:
            s = s.with_content(s.content[:GSD_FILE_CHARS] + f"\n\n[... truncated at {GSD_FILE_CHARS} characters]")
        cut.append(s)
    return head_tokens(full.render(cut), n)


def baseline_drop_sections(full: Full, n: int) -> str:
    c = counter()
    original = list(full.result.sections)
    order = sorted(range(len(original)), key=lambda i: (original[i].priority, -i))
    sections = list(original)
    text = full.render(sections)
    for i in order:
        if c.count(text) <= n or original[i].tier == "immutable":
            break
        sections = [s for s in sections if s.key != original[i].key]
        text = full.render(sections)
    return text if c.count(text) <= n else head_tokens(text, n)


def _lc_messages(history_section):
    """The session's messages as langchain-core messages (id = index into the flat list)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    flat, lc = [], []
    for rnd in history_section.data["rounds"]:
        for m in rnd.messages:
            idx = str(len(flat))
            flat.append(m)
            if m.role == "user":
                lc.append(HumanMessage(m.content, id=idx))
            elif m.role == "assistant":
                calls = [{"id": str(c.get("id")), "name": str(c.get("name", "tool")),
                          "args": {"arguments": c.get("arguments", "")}} for c in m.tool_calls]
                lc.append(AIMessage(m.content, tool_calls=calls, id=idx))
            elif m.role == "tool":
                lc.append(ToolMessage(m.content, tool_call_id=m.call_id or "", id=idx))
            else:
                lc.append(SystemMessage(m.content, id=idx))
    return flat, lc


def _lc_token_counter(messages) -> int:
    """tiktoken (cl100k_base) count of messages: content, tool calls, 3 tokens a message."""
    c = counter()
    total = 0
    for m in messages:
        total += 3 + c.count(m.content if isinstance(m.content, str) else json.dumps(m.content))
        for call in getattr(m, "tool_calls", None) or ():
            total += c.count(call["name"]) + c.count(json.dumps(call["args"]))
    return total


def baseline_langchain(full: Full, n: int) -> str:
    from langchain_core.messages import trim_messages

    from ctxengine.nodes.lib.sessions import render_round
    from ctxengine.nodes.types import Round

    c = counter()
    sections = list(full.result.sections)
    hist = next((s for s in sections if s.kind == "history"), None)
    if hist is None:
        return head_tokens(full.result.context, n)
    rest = [s for s in sections if s is not hist]
    rest_text = full.render(rest)
    rest_tokens = c.count(rest_text)
    if rest_tokens > n:  # the other sections alone do not fit: no history, cut from the head
        return head_tokens(rest_text, n)
    _, lc = _lc_messages(hist)
    rounds = hist.data["rounds"]
    budget = n - rest_tokens
    best = rest_text
    while budget > 0:
        kept = trim_messages(lc, max_tokens=budget, strategy="last", start_on="human",
                             token_counter=_lc_token_counter, allow_partial=False)
        ids = {int(m.id) for m in kept}
        parts, i = [], 0
        for rnd in rounds:
            msgs = tuple(m for j, m in enumerate(rnd.messages, i) if j in ids)
            i += len(rnd.messages)
            if msgs:
                parts.append(render_round(Round(rnd.index, msgs, rnd.lines)))
        if not parts:
            break
        content = (f"Session log {os.path.basename(hist.data.get('source') or 'session.log')}: {len(rounds)} rounds; "
                   f"the last {len(kept)} messages (langchain trim_messages).\n\n" + "\n\n".join(parts))
        text = full.render(rest[: sections.index(hist)] + [hist.with_content(content)] + rest[sections.index(hist):])
        over = c.count(text) - n
        if over <= 0:
            best = text
            break
        budget -= max(over, 1)
    return best


BASELINES = {
    "head": baseline_head,
    "tail": baseline_tail,
    "gsd-8192": baseline_gsd,
    "drop-sections": baseline_drop_sections,
    "langchain-trim": baseline_langchain,
}


# ----------------------------------------------------------------------------- running


@dataclass
class Outcome:
    method: str
    fraction: float
    available: int
    tokens: int
    kept_weight: float
    total_weight: float
    immutable_kept: bool
    lost: list[Fact]
    result: object = None  # the BuildResult for ctxengine
    error: str | None = None
    seconds: float = 0.0
    project: str = ""
    facts: int = 0

    @property
    def within(self) -> bool:
        return self.error is None and self.tokens <= self.available

    @property
    def score(self) -> float:
        return self.kept_weight / self.total_weight if self.total_weight else 0.0


def full_build(project: Project) -> Full:
    """The untruncated build (huge budget) and the templates it renders with."""
    import ctxengine

    result = ctxengine.build_context(project.path, request=project.request,
                                     overrides={**BASE_OVERRIDES, "budget.maxTokens": HUGE})
    tokens = counter().count(result.context)
    return Full(project, result, tokens, _templates(project))


def score_text(text: str, facts: list[Fact]) -> tuple[float, float, bool, list[Fact]]:
    """(kept weight, total weight, every immutable fact kept, lost facts)."""
    lost = [f for f in facts if f.token not in text]
    total = sum(f.weight for f in facts)
    return total - sum(f.weight for f in lost), total, not any(f.immutable for f in lost), lost


def run_ctxengine(project: Project, available: int):
    import ctxengine

    return ctxengine.build_context(project.path, request=project.request,
                                   overrides={**BASE_OVERRIDES, "budget.maxTokens": available + RESERVE})


def evaluate(project: Project, fractions=FRACTIONS) -> tuple[Full, list[Outcome]]:
    """Every method on one project at every fraction of its full size."""
    from ctxengine.nodes.types import CtxEngineError

    full = full_build(project)
    missing = [f for f in project.facts if f.token not in full.result.context]
    if missing:
        raise AssertionError(f"{project.name}: planted facts missing from the untruncated context: "
                             + ", ".join(f"{f.token} ({f.place})" for f in missing))
    c = counter()
    outcomes = []
    for fraction in fractions:
        available = int(fraction * full.tokens)
        start = time.perf_counter()
        try:
            result = run_ctxengine(project, available)
            text, err = result.context, None
        except CtxEngineError as exc:
            result, text, err = None, "", f"{type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - start
        kept, total, imm, lost = score_text(text, project.facts)
        outcomes.append(Outcome("ctxengine", fraction, available, c.count(text), kept, total, imm, lost, result, err,
                                seconds, project.name, len(project.facts)))
        for name, fn in BASELINES.items():
            start = time.perf_counter()
            text = fn(full, available)
            seconds = time.perf_counter() - start
            kept, total, imm, lost = score_text(text, project.facts)
            outcomes.append(Outcome(name, fraction, available, c.count(text), kept, total, imm, lost, None, None,
                                    seconds, project.name, len(project.facts)))
    return full, outcomes


# ----------------------------------------------------------------------------- report


def _of(outcomes: list[Outcome], full: Full) -> list[Outcome]:
    return [o for o in outcomes if o.project == full.project.name]


def _one(outcomes: list[Outcome], method: str, fraction: float) -> Outcome:
    return next(o for o in outcomes if o.method == method and o.fraction == fraction)


def _pooled(outcomes: list[Outcome], method: str, fraction: float, unweighted: bool = False) -> float:
    """Kept weight over total weight, summed over the projects (or kept facts over facts)."""
    rows = [o for o in outcomes if o.method == method and o.fraction == fraction]
    if unweighted:
        total = sum(o.facts for o in rows)
        return sum(o.facts - len(o.lost) for o in rows) / total if total else 0.0
    total = sum(o.total_weight for o in rows)
    return sum(o.kept_weight for o in rows) / total if total else 0.0


def _utilisation(outcomes: list[Outcome], method: str, fraction: float) -> float:
    rows = [o for o in outcomes if o.method == method and o.fraction == fraction]
    return sum(o.tokens for o in rows) / sum(o.available for o in rows)


def _ledger_of(result, key: str) -> str:
    steps = [e for e in result.ledger if e.section_key == key]
    return "; ".join(f"{e.step} {e.action} {e.tokens_before}->{e.tokens_after}" for e in steps) or "(no entry)"


def _ranges(values: list[int]) -> str:
    values = sorted(set(values), reverse=True)
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] - 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(out)


def _role(fact: Fact) -> tuple[str, int | None]:
    """(role, round age) of a fact from where it was planted."""
    m = re.match(r"round \d+ \(age (\d+)\) (user|tool|closing)", fact.place)
    if m:
        return m.group(2), int(m.group(1))
    if "intro" in fact.place or "first paragraph" in fact.place:
        return "lead", None
    if "middle" in fact.place or "list item" in fact.place:
        return "middle", None
    if "last paragraph" in fact.place:
        return "tail", None
    return fact.place, None


def _describe_loss(lost: list[Fact], planted: list[Fact]) -> str:
    """Which facts of one section were lost: history by role and round age, others by role."""
    roles: dict[str, list] = {}
    for fact in lost:
        role, age = _role(fact)
        roles.setdefault(role, []).append(age)
    total: dict[str, int] = {}
    for fact in planted:
        role = _role(fact)[0]
        total[role] = total.get(role, 0) + 1
    parts = []
    for role, ages in roles.items():
        if ages and ages[0] is not None:
            parts.append(f"{role} ages {_ranges(ages)}")
        else:
            parts.append(f"{role} {len(ages)}/{total[role]}")
    return "; ".join(parts)


def report(fulls: list[Full], outcomes: list[Outcome], verbose: bool = False) -> bool:
    """Print the tables, the targets and the analysis of ctxengine's losses; True when all pass."""
    print("Retention: weighted share of planted facts kept, pooled over the projects")
    print(f"(available = f x full tokens, reserveTokens {RESERVE}, budget.softLimit 1, exact cl100k_base counts)\n")
    for f in fulls:
        facts = f.project.facts
        secs = {s.key: f.result.section_tokens.get(s.key, 0) for s in f.result.sections}
        refs = sum(v for k, v in secs.items() if k.startswith("ref:") and k != "ref:.planning/rules.md")
        print(f"  {f.project.name:<17} full {f.tokens:>6} tokens (history {secs.get('history', 0)}, references {refs}, "
              f"plan {secs.get('plan', 0)}, rules {secs.get('ref:.planning/rules.md', 0)}); {len(facts)} facts "
              f"({sum(x.immutable for x in facts)} immutable), weight {sum(x.weight for x in facts):.1f}")
    print()
    pct = [f"{int(f * 100)}%" for f in FRACTIONS]
    head = (f"{'method':<15}" + "".join(f"{p:>7}" for p in pct) + "   " + "".join(f"{'use ' + p:>9}" for p in pct)
            + f"{'within':>9}{'immut.':>9}")
    print(head)
    print("-" * len(head))
    for method in METHODS:
        rows = [o for o in outcomes if o.method == method]
        print(f"{method:<15}" + "".join(f"{_pooled(outcomes, method, f):>7.3f}" for f in FRACTIONS) + "   "
              + "".join(f"{_utilisation(outcomes, method, f):>9.3f}" for f in FRACTIONS)
              + f"{f'{sum(o.within for o in rows)}/{len(rows)}':>9}{f'{sum(o.immutable_kept for o in rows)}/{len(rows)}':>9}")
    print("(use = tokens used / available, pooled; within = outputs within budget; immut. = outputs with every"
          " immutable fact)\n")

    print("Unweighted (every fact counts 1), as a check that the ranking does not hang on the weights:")
    print(f"{'method':<15}" + "".join(f"{p:>7}" for p in pct))
    for method in METHODS:
        print(f"{method:<15}" + "".join(f"{_pooled(outcomes, method, f, True):>7.3f}" for f in FRACTIONS))
    print()

    print("Per project: ctxengine score (utilisation) against the best baseline")
    for full in fulls:
        mine = _of(outcomes, full)
        cells = []
        for f in FRACTIONS:
            ce = _one(mine, "ctxengine", f)
            base = max((o for o in mine if o.fraction == f and o.method != "ctxengine"), key=lambda o: o.score)
            mark = ">=" if ce.score >= base.score else "<"
            cells.append(f"{int(f * 100)}%: {ce.score:.3f} ({ce.tokens / ce.available:.3f}) {mark} {base.method} "
                         f"{base.score:.3f}" if ce.error is None else f"{int(f * 100)}%: ERROR")
        print(f"  {full.project.name:<17} " + " | ".join(cells))
    print()

    ce = [o for o in outcomes if o.method == "ctxengine"]
    rivals = [m for m in METHODS if m != "ctxengine"]
    best_every, lines = True, []
    for f in FRACTIONS:
        rival = max(rivals, key=lambda m: _pooled(outcomes, m, f))
        losing = [fu.project.name for fu in fulls
                  if _one(_of(outcomes, fu), "ctxengine", f).score
                  < max(o.score for o in _of(outcomes, fu) if o.fraction == f and o.method != "ctxengine")]
        good = _pooled(outcomes, "ctxengine", f) >= _pooled(outcomes, rival, f) and not losing
        best_every &= good
        lines.append(f"{int(f * 100)}% {_pooled(outcomes, 'ctxengine', f):.3f} vs {rival} {_pooled(outcomes, rival, f):.3f}"
                     + (f" (loses on {', '.join(losing)})" if losing else ""))
    utils = [o.tokens / o.available for o in ce if o.error is None]
    targets = [
        ("ctxengine best at every budget (pooled and on every project)", best_every, "; ".join(lines)),
        ("every immutable fact kept by ctxengine", all(o.immutable_kept for o in ce),
         f"{sum(o.immutable_kept for o in ce)}/{len(ce)} runs"),
        ("every result within budget", all(o.within for o in outcomes),
         f"ctxengine {sum(o.within for o in ce)}/{len(ce)}, all methods {sum(o.within for o in outcomes)}/{len(outcomes)}"),
        (f"ctxengine uses >= {UTILISATION_TARGET:.0%} of the available budget",
         len(utils) == len(ce) and min(utils) >= UTILISATION_TARGET,
         f"min {min(utils):.3f}" if utils else "no result"),
    ]
    ok_all = True
    for name, good, detail in targets:
        ok_all &= good
        print(f"{'PASS' if good else 'FAIL'}  {name}: {detail}")
    for o in ce:
        if o.error:
            print(f"ERROR ctxengine on {o.project} at {int(o.fraction * 100)}%: {o.error}")
    print()

    print("What ctxengine lost, by section (weight lost / section weight, facts), and the ledger:")
    for full in fulls:
        for o in _of(outcomes, full):
            if o.method != "ctxengine" or o.result is None or not o.lost:
                continue
            print(f"  {full.project.name} at {int(o.fraction * 100)}%: score {o.score:.3f}, "
                  f"{o.total_weight - o.kept_weight:.1f} of {o.total_weight:.1f} lost")
            by_section: dict[str, list[Fact]] = {}
            for fact in o.lost:
                by_section.setdefault(fact.section, []).append(fact)
            for key, lost in sorted(by_section.items(), key=lambda kv: -sum(f.weight for f in kv[1])):
                planted = [f for f in full.project.facts if f.section == key]
                name = key.replace("ref:.planning/references/", "")
                print(f"    {name:<18} {sum(f.weight for f in lost):5.1f}/{sum(f.weight for f in planted):5.1f} "
                      f"({len(lost)}/{len(planted)}) lost: {_describe_loss(lost, planted)}")
                print(f"    {'':<18} ledger: {_ledger_of(o.result, key)}")
                if verbose:
                    for f in lost:
                        print(f"    {'':<18}   {f.weight:5.2f}  {f.token}  {f.place}")
    print()
    times = {m: sum(o.seconds for o in outcomes if o.method == m) for m in METHODS}
    print("seconds (all runs): " + ", ".join(f"{m} {t:.2f}" for m, t in times.items()))
    return ok_all


def run(root: Path, projects=PROJECTS, fractions=FRACTIONS) -> tuple[list[Full], list[Outcome]]:
    fulls, outcomes = [], []
    for shape, seed in projects:
        project = make_project(root / f"{shape}-{seed}", seed, shape)
        full, rows = evaluate(project, fractions)
        fulls.append(full)
        outcomes.extend(rows)
    return fulls, outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the generated projects and print where")
    parser.add_argument("--verbose", action="store_true", help="list every fact ctxengine lost")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ctxengine-retention-"))
    start = time.perf_counter()
    try:
        fulls, outcomes = run(root)
        ok = report(fulls, outcomes, args.verbose)
    finally:
        if args.keep:
            print(f"projects kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The run report: one self-contained HTML page, checked as text and opened in headless Chromium.

The browser test drives Debian's ``chromium`` (installed by .ci/run) through playwright with
``executable_path`` (no browser download); it is skipped only when chromium is absent.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

import ctxengine
from ctxengine.cli import main
from conftest import DEMO

INJECTED_TITLE = "Architecture <img src=x onerror=\"window.__pwned='title'\">"
INJECTED_BODY = "</script><script>window.__pwned='body'</script> and <img src=x onerror=\"window.__pwned='img'\">"
REQUEST = "Fix the login endpoint </script><script>window.__pwned='request'</script>"
BUDGET = {"max_tokens": 2200, "reserve_tokens": 400}  # small enough that sections are dropped, summarized, mended


def _hostile_project(root: Path) -> Path:
    """The demo project with script and onerror payloads in a document's title and body."""
    project = root / "hostile"
    shutil.copytree(DEMO, project)
    arch = project / ".planning" / "references" / "architecture.md"
    text = arch.read_text(encoding="utf-8").replace("title: Architecture", "title: '" + INJECTED_TITLE.replace("'", "''") + "'")
    arch.write_text(text.replace("# Architecture\n", "# Architecture\n\n" + INJECTED_BODY + "\n", 1), encoding="utf-8")
    return project


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    project = _hostile_project(tmp_path_factory.mktemp("report"))
    out = ctxengine.run_nodes(["build_result", "context_lineage"], project, REQUEST, **BUDGET)
    return out["build_result"], out["context_lineage"], ctxengine.report_html(out["build_result"], out["context_lineage"])


def test_the_page_is_self_contained_and_escapes_project_text(built):
    result, _, page = built
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<script") == 1  # ours, with its nonce; the CSP lets nothing else run
    assert re.search(r"script-src 'nonce-[\w-]+'", page) and "default-src 'none'" in page
    assert "window.__pwned" in page  # the payloads are there, as text
    for raw in ("<script>window.__pwned", "<img src=x onerror", "<img src=x"):
        assert raw not in page
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=&#x27;body&#x27;" in page
    assert not re.search(r"<(link|iframe|object|embed)\b", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched from anywhere
    for section in result.sections:  # the final context, section by section, collapsible
        assert f'<details class="section" data-key="{html.escape(section.key)}">' in page
    assert result.truncation["triggered"] and any(e.action == "dropped" for e in result.ledger)


def test_build_report_builds_and_hands_the_result_to_the_page(built, tmp_path):
    """ctxengine.build_report (the API's; viz only draws) gives the page of run_nodes + report_html."""
    project = _hostile_project(tmp_path)
    page = ctxengine.build_report(project, REQUEST, **BUDGET)
    expected = ctxengine.report_html(*built[:2], project_dir=project)

    def without_nonce(text: str) -> str:
        return re.sub(r'nonce[-="]+[\w-]+', "nonce", text)

    assert page.count("<h2>") == 7 and without_nonce(page) == without_nonce(expected)


def test_the_report_has_every_part(built):
    result, _, page = built
    for heading in ("Budget", "Sections", "Lineage", "Final context", "Position", "Disclosure plan", "Warnings"):
        assert f"<h2>{heading}</h2>" in page
    keys = list(dict.fromkeys(e.section_key for e in result.ledger))
    assert re.findall(r'<tr data-key="([^"]+)"', page) == keys  # a row per section, dropped ones too
    for pool in (p for p in result.pools if p != "buffer"):
        assert f'data-pool="{pool}" data-kind="share"' in page
    if shutil.which("dot"):
        assert '<div class="lineage"><svg' in page and "crossref_mending" in page


def test_without_dot_the_lineage_is_a_list(built, monkeypatch, tmp_path):
    result, lineage, _ = built
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on this PATH
    page = ctxengine.report_html(result, lineage)
    assert "<svg" not in page and '<ul class="lineage-list">' in page
    assert page.count("<li>") >= len({e.section_key for e in result.ledger})
    assert "[dropped]" in page and "<img src=x" not in page


def test_report_command_and_build_report(tmp_path, capsys):
    project = _hostile_project(tmp_path)
    target, also = tmp_path / "report.html", tmp_path / "built.html"
    assert main(["report", str(project), "--request", REQUEST, "--max-tokens", "2200", "--reserve-tokens", "400",
                 "-o", str(target)]) == 0
    assert main(["build", str(project), "--request", "x", "--report", str(also), "--format", "json",
                 "-o", str(tmp_path / "out.json")]) == 0
    assert "wrote" in capsys.readouterr().err
    for page in (target.read_text(encoding="utf-8"), also.read_text(encoding="utf-8")):
        assert page.count("<script") == 1 and "<h2>Sections</h2>" in page
    assert main(["report", str(project), "-o", str(tmp_path / "missing" / "r.html")]) == 2
    assert main(["build", str(project), "--report", str(tmp_path / "missing" / "r.html")]) == 2


# ----------------------------------------------------------------------------- in the browser


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    return path


def test_the_page_in_headless_chromium(built, tmp_path):
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    result, _, page_html = built
    report = tmp_path / "report.html"
    report.write_text(page_html, encoding="utf-8")
    problems, requests = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(report.as_uri())
            page.screenshot(path=str(tmp_path / "report.png"))

            # a row per section
            keys = list(dict.fromkeys(e.section_key for e in result.ledger))
            assert page.locator("#sections tbody tr").count() == len(keys)
            # bars sized by tokens: one width per token across every pool and kind
            bars = page.evaluate("""[...document.querySelectorAll('.bar')].map(b =>
                [Number(b.dataset.tokens), b.getBoundingClientRect().width])""")
            sized = [(tokens, width) for tokens, width in bars if tokens > 0]
            assert len(sized) >= 6
            per_token = max(w / t for t, w in sized)
            for tokens, width in sized:
                assert abs(width - tokens * per_token) <= 1.5, (tokens, width, per_token)
            # sorting: click "tokens before", ascending, then descending
            header = page.locator("#sections th", has_text="tokens before")
            column = [h.strip() for h in page.locator("#sections th").all_inner_texts()].index("tokens before")

            def befores() -> list[int]:
                cells = page.locator(f"#sections tbody tr td:nth-child({column + 1})").all()
                return [int(c.get_attribute("data-sort")) for c in cells]

            header.click()
            assert befores() == sorted(befores()) and header.get_attribute("aria-sort") == "ascending"
            header.click()
            assert befores() == sorted(befores(), reverse=True)
            # the injected scripts and handlers never ran; their text is on the page
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert "window.__pwned='request'" in page.locator("body").text_content()  # in a closed <details>
            # collapsible sections open on a click
            first = page.locator("details.section").first
            first.locator("summary").click()
            assert first.evaluate("d => d.open") is True
        finally:
            browser.close()
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert not problems, problems
    assert requests == [report.as_uri()]  # the page alone: no network, no other file

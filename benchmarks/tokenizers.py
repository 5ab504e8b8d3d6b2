"""Token counting backends: tiktoken (the reference) against bpe-openai's Rust counter, for
cl100k_base and o200k_base, in one run.

    python benchmarks/tokenizers.py [--repeat N] [--load-repeat N] [--encoding NAME]

Load time is measured in fresh processes (median of --load-repeat; the imports apart): the engine's
tiktoken encoder with an empty cache (decompress, sha256 check, parse the table, write the pickle
cache) and with the cache warm (what every run after the first pays), the engine's counter as a build
gets it (``token_counter_for`` and a first count: bpe-openai, o200k's bundled table checked by sha256
with an empty cache, remembered with a warm one; no tiktoken), bpe-openai through its package
(``import bpe_openai`` parses every bundled table in Python) and the way the engine loads it (the
extension module alone, ``tokens._bpe_counter``). Count speed is the median of --repeat passes over
prefixes of the 4.1 MB aider transcript of ../shared/corpus/sessions cut to about 10K, 100K and 1M
tokens: tiktoken ``len(encode)``, bpe-openai's ``count`` (its wrapper's ``encode`` refuses more than
200,000 tokens), and the engine's counter (bpe-openai in pieces under 500K characters). Then the
shared token-count vectors (../shared/suites/token_count_vectors) through both backends. Exit 1 when
any count differs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import median_seconds

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXENGINE_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpus" / "sessions" / "aider-repo__chat-history.md"
SIZES = (10_000, 100_000, 1_000_000)

VECTORS = SHARED / "suites" / "token_count_vectors" / "repomix_tokencounter_vectors.json"
ENCODINGS = ("cl100k_base", "o200k_base")


def _loads(encoding: str) -> dict[str, tuple[str, str]]:
    """label: (imports, load) of each way to get a working counter for ``encoding``."""
    engine = ("from ctxengine.nodes.lib import tokens; import tiktoken",
              f"tokens._encoding('{encoding}_offline').encode('x')")
    counter = ("from ctxengine.nodes.lib import tokens", f"tokens.token_counter_for('{encoding}').count('x')")
    return {
        "tiktoken, engine encoder, cold cache": engine,
        "tiktoken, engine encoder, warm cache": engine,
        "bpe-openai get_encoding (package)": ("import bpe_openai", f"bpe_openai.get_encoding('{encoding}').encode_ordinary('x')"),
        "bpe-openai, engine counter (extension)": ("from ctxengine.nodes.lib import tokens",
                                                   f"tokens._bpe_counter('{encoding}_offline')('x')"),
        # what a build pays: the counter (a bundled table checked, by sha256 the first time) and a first count
        "engine token_counter_for + count, cold cache": counter,
        "engine token_counter_for + count, warm cache": counter,
    }


_TIMED = ("import time; t0 = time.perf_counter(); {imports}; t1 = time.perf_counter(); {load}; "
          "print(t1 - t0, time.perf_counter() - t1)")


def load_seconds(label: str, imports: str, load: str, repeat: int) -> tuple[float, float]:
    """Median (import, load) seconds of an encoder in a fresh process."""
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cold:
            env = dict(os.environ)
            if "cold" in label:
                env["CTXENGINE_CACHE_DIR"] = cold
            out = subprocess.run([sys.executable, "-c", _TIMED.format(imports=imports, load=load)], env=env,
                                 check=True, capture_output=True, text=True).stdout
        times.append(tuple(float(x) for x in out.strip().splitlines()[-1].split()))
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def prefixes(text: str, encode) -> list[str]:
    """Prefixes of ``text`` holding about each of SIZES tokens (repeating the text when short)."""
    while len(text) < SIZES[-1] * 5:
        text += "\n" + text
    chars_per_token = len(text[:400_000]) / len(encode(text[:400_000]))
    return [text[: int(size * chars_per_token)] for size in SIZES]


def load_table(encoding: str, repeat: int) -> None:
    load_seconds("warm-up", *_loads(encoding)["tiktoken, engine encoder, warm cache"], 1)  # fills the pickle cache
    print(f"{encoding + ' counter, fresh process':<44} {'import ms':>10} {'load ms':>8}")
    print("-" * 64)
    for label, (imports, load) in _loads(encoding).items():
        t_import, t_load = load_seconds(label, imports, load, repeat)
        print(f"{label:<44} {t_import * 1000:>10.0f} {t_load * 1000:>8.0f}")


def speed_table(encoding: str, text: str, repeat: int) -> bool:
    """Count speed of both backends at each of SIZES; True when every count agrees."""
    import bpe_openai

    from ctxengine.nodes.lib import tokens

    tik = tokens._encoding(f"{encoding}_offline")
    rust = tokens._bpe_counter(f"{encoding}_offline")
    assert rust is not None, "bpe-openai's extension did not load"
    wrapper = bpe_openai.get_encoding(encoding)
    print(f"\n{encoding}: {'tokens':>9} {'MB':>6} {'tiktoken ms':>12} {'bpe-openai ms':>14} {'ratio':>6} "
          f"{'engine ms':>10} {'wrapper ms':>11}  same count")
    print("-" * 96)
    all_same = True
    for piece in prefixes(text, lambda t: tik.encode(t, disallowed_special=())):
        n_tik = len(tik.encode(piece, disallowed_special=()))
        n_rust = rust(piece)
        n_engine = tokens.exact_count(f"{encoding}_offline", piece)
        t_tik = median_seconds(lambda: len(tik.encode(piece, disallowed_special=())), repeat)
        t_rust = median_seconds(lambda: rust(piece), repeat)
        t_engine = median_seconds(lambda: tokens.exact_count(f"{encoding}_offline", piece), repeat)
        if n_tik <= 200_000:  # the wrapper's encode (what a tiktoken drop-in would call) has a 200K limit
            wrap = f"{median_seconds(lambda: len(wrapper.encode_ordinary(piece)), repeat) * 1000:>11.1f}"
        else:
            wrap = f"{'(limit)':>11}"
        same = n_tik == n_rust == n_engine
        all_same &= same
        print(f"{'':<12}{n_tik:>9} {len(piece.encode()) / 1e6:>6.2f} {t_tik * 1000:>12.1f} {t_rust * 1000:>14.1f} "
              f"{t_rust / t_tik:>6.2f} {t_engine * 1000:>10.1f} {wrap}  {'yes' if same else f'NO ({n_rust}, {n_engine})'}")
    return all_same


def vector_rows() -> bool:
    """The shared token-count vectors through both backends; True when all agree (and with the file)."""
    from ctxengine.nodes.lib import tokens

    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))["vectors"]
    print(f"\n{'shared vectors':<16} {'vectors':>8} {'tiktoken = bpe-openai':>22} {'= the file':>11}")
    print("-" * 60)
    all_same = True
    for encoding, key in (("cl100k_base", "cl100k_base_tiktoken"), ("o200k_base", "o200k_base_upstream")):
        tik = tokens._encoding(f"{encoding}_offline")
        rust = tokens._bpe_counter(f"{encoding}_offline")
        same = sum(len(tik.encode(v["text"], disallowed_special=())) == rust(v["text"]) for v in vectors)
        listed = [v for v in vectors if v.get(key) is not None]
        matches = sum(rust(v["text"]) == v[key] for v in listed)
        all_same &= same == len(vectors) and matches == len(listed)
        print(f"{encoding:<16} {len(vectors):>8} {same:>22} {f'{matches}/{len(listed)}':>11}")
    return all_same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--load-repeat", type=int, default=3)
    parser.add_argument("--encoding", choices=(*ENCODINGS, "both"), default="both")
    args = parser.parse_args()
    if not CORPUS.is_file():
        print(f"no transcript at {CORPUS}", file=sys.stderr)
        return 2
    encodings = ENCODINGS if args.encoding == "both" else (args.encoding,)
    for encoding in encodings:
        load_table(encoding, args.load_repeat)
        print()
    text = CORPUS.read_text(encoding="utf-8", errors="replace")
    all_same = all([speed_table(encoding, text, args.repeat) for encoding in encodings])
    all_same &= vector_rows()
    print(f"\ncounts identical everywhere: {'yes' if all_same else 'NO'}")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())

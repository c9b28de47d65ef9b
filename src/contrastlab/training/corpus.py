"""The training corpus, tokenised once per (tokenizer, max_length, corpus) and cached on disk.

Every training cell of a backbone reads the same cache file. The cache key covers everything that
changes the token ids: the tokenizer's serialised pipeline (vocabulary, normaliser, special tokens),
``max_length`` and the corpus file's SHA-256. The file is written atomically under a lock, so concurrent
jobs wait for the first writer instead of tokenising again. A cache file that cannot be read (cut short,
corrupted) is derived data: it is rebuilt, with one line saying so.

Layout (``.npz``): ``ids`` (all token ids, concatenated; uint16 when the vocabulary fits) and
``offsets`` (int64, ``n + 1`` entries): sentence ``i`` is ``ids[offsets[i]:offsets[i + 1]]``, with
special tokens, truncated to ``max_length``. One line of the corpus file is one sentence (the trailing
newline removed, nothing else), as SimCSE's ``datasets`` text loader reads it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contrastlab.artifacts import sha256_file
from contrastlab.paths import atomic_write, inter_process_lock

CACHE_FORMAT = 1
TOKENIZE_CHUNK = 10_000


class CorpusChangedError(ValueError):
    """The training corpus is not the one its data marker (``corpus.ready.json``) records."""


def check_corpus_marker(corpus_path: str | Path, marker: str | Path) -> str:
    """The sha256 of the corpus ``corpus_path``, held to the one its data marker ``marker`` recorded when
    the corpus rule made it: a file changed since (edited, cut, written again by another run) raises
    :class:`CorpusChangedError`, so that no cell trains on other text than the marker, and the cells'
    params, say. A marker that records no digest is not held."""
    recorded = json.loads(Path(marker).read_text(encoding="utf-8")).get("sha256")
    found = sha256_file(corpus_path)
    if recorded and found != recorded:
        raise CorpusChangedError(
            f"the corpus {corpus_path} changed since {marker} was written (sha256 {found[:16]}, recorded "
            f"{recorded[:16]}); rerun the corpus rule (snakemake --forcerun corpus) and then this cell"
        )
    return found


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """Stable hash of everything in a tokenizer that decides the ids it produces."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # truncation/padding are per-call state, not part of the vocabulary
        spec = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
        text = json.dumps(spec, sort_keys=True)
    else:  # slow tokenizer: the vocabulary and special tokens decide the ids
        text = json.dumps([sorted(tokenizer.get_vocab().items()), tokenizer.all_special_tokens])
    payload = f"{type(tokenizer).__name__}\n{text}"
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def read_sentences(path: str | Path) -> list[str]:
    """The corpus, one sentence per line, trailing newline removed."""
    with open(path, encoding="utf-8", newline="\n") as handle:
        return [line[:-1] if line.endswith("\n") else line for line in handle]


@dataclass(frozen=True)
class TokenizedCorpus:
    """Token ids of every corpus sentence (see the module docstring for the layout)."""

    ids: np.ndarray
    offsets: np.ndarray
    key: str

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, rows: np.ndarray, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Dynamically padded ``(input_ids, attention_mask)`` int64 CPU tensors for sentences ``rows``."""
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        lengths = ends - starts
        width = int(lengths.max())
        input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
        mask = np.arange(width)[None, :] < lengths[:, None]
        input_ids[mask] = self.ids[(starts[:, None] + np.arange(width)[None, :])[mask]]
        return torch.from_numpy(input_ids), torch.from_numpy(mask.astype(np.int64))


def cache_key(tokenizer: Any, max_length: int, corpus_sha: str) -> str:
    """Key of one cache file: tokenizer pipeline + max_length + corpus content + cache format."""
    text = f"v{CACHE_FORMAT}|{tokenizer_fingerprint(tokenizer)}|{max_length}|{corpus_sha}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tokenize_sentences(tokenizer: Any, sentences: list[str], max_length: int, progress: bool = False):
    """``(ids, offsets)`` arrays for ``sentences`` (truncated to ``max_length``, special tokens added)."""
    from tqdm.auto import tqdm

    lengths = np.zeros(len(sentences), dtype=np.int64)
    pieces: list[np.ndarray] = []
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.int32
    chunks = range(0, len(sentences), TOKENIZE_CHUNK)
    for start in tqdm(chunks, desc="tokenising corpus", unit="chunk", disable=not progress):
        encoded = tokenizer(
            sentences[start : start + TOKENIZE_CHUNK], truncation=True, max_length=max_length
        )["input_ids"]
        lengths[start : start + len(encoded)] = [len(row) for row in encoded]
        pieces.append(np.fromiter((t for row in encoded for t in row), dtype=dtype))
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)
    return ids, offsets


def load_tokenized_corpus(
    corpus_path: str | Path,
    tokenizer: Any,
    max_length: int,
    cache_dir: str | Path,
    *,
    progress: bool = False,
    corpus_sha256: str | None = None,
) -> tuple[TokenizedCorpus, Path]:
    """Load the cached token ids of ``corpus_path``, tokenising and caching them on first use.

    ``corpus_sha256``: the corpus file's digest where the caller has it (None: computed here). Returns
    the corpus and the cache file's path (``<cache_dir>/<corpus stem>.<key>.tokens.npz``). A cache
    file that cannot be read is rebuilt, and one ``contrastlab:`` line on stderr names it.
    """
    corpus_path = Path(corpus_path)
    if not corpus_path.is_file():
        raise FileNotFoundError(f"training corpus {corpus_path} does not exist")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = cache_key(tokenizer, max_length, corpus_sha256 or sha256_file(corpus_path))
    path = cache_dir / f"{corpus_path.stem}.{key}.tokens.npz"
    found, _ = _read_cache(path, key)  # the usual case: a finished cache (written whole, by a rename)
    if found is not None:
        return found, path
    # Two jobs wanting the same cache build it once: the second waits, then reads it. The lock works on
    # shared storage without flock too (paths.inter_process_lock).
    with inter_process_lock(cache_dir / f".{path.name}.lock"):
        found, problem = _read_cache(path, key)
        if found is None:
            if problem:  # derived data: rebuilt rather than failing every job of this tokenizer (K5)
                print(
                    f"contrastlab: tokenised-corpus cache {path} {problem}; rebuilding it from the corpus",
                    file=sys.stderr,
                    flush=True,
                )
            ids, offsets = tokenize_sentences(tokenizer, read_sentences(corpus_path), max_length, progress)
            with atomic_write(path, fsync=True) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, ids=ids, offsets=offsets)
            found, problem = _read_cache(path, key)
            if found is None:
                raise OSError(f"tokenised-corpus cache {path} {problem} right after it was written")
    return found, path


def _read_cache(path: Path, key: str) -> tuple[TokenizedCorpus | None, str | None]:
    """``(the cached corpus, None)``; ``(None, None)`` when there is no cache yet; ``(None, why)`` when the
    file cannot be read (cut short, corrupted, not our layout)."""
    if not path.exists():
        return None, None
    try:
        with np.load(path) as data:
            ids, offsets = data["ids"], data["offsets"]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
        return None, f"cannot be read ({type(error).__name__}: {' '.join(str(error).split())})"
    if offsets.ndim != 1 or len(offsets) == 0 or offsets[-1] != len(ids):
        return None, "cannot be read (its offsets do not cover its ids)"
    return TokenizedCorpus(ids=ids, offsets=offsets, key=key), None

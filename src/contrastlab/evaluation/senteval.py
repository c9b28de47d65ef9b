"""SentEval-protocol evaluation (protocol.md §4): STS12-16, STS-B, SICK-R, and seven transfer tasks.

A re-implementation of SentEval's protocol as SimCSE runs it, not a copy of its code: the data are read
as SentEval reads them (:mod:`contrastlab.senteval.tasks`: the same sentences reach ``encode``); STS is
the same computation (cosine, Spearman; STS12-16 pooled over sub-datasets); the transfer probe
(:mod:`contrastlab.evaluation.probe`) replicates SentEval's cross-validation and training step for step,
batched: 0.00 points off on the reference encoder.

Every unique sentence of the requested tasks is encoded in one ``encode`` call (the STS-B sentences of
alignment/uniformity not among them in a second), optionally through an on-disk embedding cache shared
by STS and transfer tasks. The workflow splits a checkpoint's evaluation there: :func:`encode_checkpoint`
fills the cache in a GPU job (rule ``encode``), :func:`evaluate_checkpoint` fits the probes from it in a
CPU job (rule ``evaluate``), same numbers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.models import load_backbone, make_encoder, pick_device
from contrastlab.paths import atomic_write, write_text
from contrastlab.provenance import run_metadata
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import Pairs, load_sts_pairs, load_tasks, task_sentences
from contrastlab.training.runtime import device_name

__all__ = [
    "ENCODING_RECORD",
    "EmbeddingCache",
    "alignment_uniformity",
    "encode_checkpoint",
    "evaluate",
    "evaluate_checkpoint",
    "read_encoding",
]

Encode = Callable[[list[str]], np.ndarray]
Lookup = Callable[[list[str]], np.ndarray]

#: The transfer probe (protocol.md §4, :mod:`contrastlab.evaluation.probe`), as every metrics file names
#: it: SentEval's early-stopped procedure replicated, which matches its scores (within 0.1 points on the
#: reference encoder).
PROBE = "senteval"


# --- scoring ----------------------------------------------------------------------------------------


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine as SentEval's ``nan_to_num(cosine(u, v))``, but in float64 (SentEval's: float32)."""
    a = np.nan_to_num(a.astype(np.float64))
    b = np.nan_to_num(b.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return np.nan_to_num(sim)


def score_sts(lookup: Lookup, subsets: list[Pairs]) -> float:
    """Spearman x100 of cosine vs gold over all sub-datasets pooled (``['all']['spearman']['all']``)."""
    # Imported here, as the probe below: the encode job imports this module and scores nothing, and
    # scipy.stats and scikit-learn are seconds of every such job's start.
    from scipy.stats import spearmanr

    sims = [_cosine(lookup(p.a), lookup(p.b)) for p in subsets]
    return float(spearmanr(np.concatenate(sims), np.concatenate([p.gold for p in subsets])).statistic) * 100


def transfer_accuracies(lookup: Lookup, task: str, data: Any, mode: str) -> tuple[float, float]:
    """``(devacc, acc)`` in percent: SentEval's two numbers for a transfer task.

    ``acc`` is the test accuracy (protocol.md §4). ``devacc`` is the model-selection accuracy:
    the mean over outer folds of the best inner cross-validation accuracy (MR, CR, SUBJ, MPQA), the
    best k-fold accuracy on train (TREC, MRPC) or the best dev accuracy (SST2). Nie et al.'s
    ``evaluation.py`` prints ``devacc`` under its transfer heading, so Nie 2023 Table 1's TR.Avg is
    the mean of ``devacc``; Li et al. print ``acc``.

    The probe is SentEval's procedure replicated (:mod:`contrastlab.evaluation.probe`), with SimCSE's
    classifier settings for ``mode``: Adam for ``test``, RMSprop for ``fasttest``/``dev``.
    """
    from contrastlab.evaluation import probe as transfer_probe

    probe = {"nclasses": P.NCLASSES[task], "grid": P.L2_GRID, "fitter": transfer_probe.fitter(mode)}
    kfold = {"k": P.KFOLD[mode], "seed": P.SEED}
    if task in P.BINARY_FILES:
        dev, acc = transfer_probe.inner_kfold(lookup(data.sentences), data.labels, **probe, **kfold)
    elif task == "SST2":
        tr, dv, te = data["train"], data["dev"], data["test"]
        train, dev_set, test = lookup(tr.sentences), lookup(dv.sentences), lookup(te.sentences)
        dev, acc = transfer_probe.split_then_test(
            train, tr.labels, dev_set, dv.labels, test, te.labels, **probe
        )
    elif task in ("TREC", "MRPC"):
        tr, te = data["train"], data["test"]
        if task == "TREC":
            train_x, test_x = lookup(tr.sentences), lookup(te.sentences)
        else:  # mrpc.py: np.c_[|u-v|, u*v]
            pairs = [(lookup(split.a), lookup(split.b)) for split in (tr, te)]
            train_x, test_x = (np.concatenate([np.abs(u - v), u * v], axis=1) for u, v in pairs)
        dev, acc = transfer_probe.kfold_then_test(train_x, tr.labels, test_x, te.labels, **probe, **kfold)
    else:
        raise ValueError(f"{task!r} is not a transfer task")
    return float(dev), float(acc)


def lookup_from(sentences: list[str], embeddings: np.ndarray) -> Lookup:
    index = {s: i for i, s in enumerate(sentences)}
    emb = np.asarray(embeddings, dtype=np.float32)

    def lookup(batch: list[str]) -> np.ndarray:
        return emb[[index[s] for s in batch]]

    return lookup


def _check_embeddings(emb: Any, n: int) -> np.ndarray:
    """What ``encode`` returned for ``n`` sentences as float32 [n, d] (a torch tensor, from any device, as
    its values); ValueError in one line, with the fix, unless it is one row of numbers per sentence."""
    if hasattr(emb, "detach"):  # torch: np.asarray refuses a CUDA tensor or one that requires grad
        emb = emb.detach().float().cpu().numpy()
    emb = np.asarray(emb)
    if emb.ndim != 2 or emb.shape[0] != n or not np.issubdtype(emb.dtype, np.number):
        raise ValueError(
            f"encode returned shape {emb.shape} of {emb.dtype}; expected ({n}, d) floats: encode must "
            "return an np.ndarray with one row per sentence it is given"
        )
    return emb.astype(np.float32, copy=False)  # NaN stays: the STS cosine zeroes it as SentEval does


class EmbeddingCache:
    """Embeddings of sentences for one encoder, kept in ``folder`` (``sentences.json`` + ``embeddings.npy``).

    ``key`` names the encoder (e.g. a checkpoint fingerprint + pooling); a cache written for another
    key is ignored and replaced.
    """

    def __init__(self, folder: str | Path, key: str):
        self.folder, self.key = Path(folder), key
        self.sentences: list[str] = []
        self.embeddings: np.ndarray | None = None
        meta = self.folder / "cache.json"
        if meta.exists() and json.loads(meta.read_text())["key"] == key:
            self.sentences = json.loads((self.folder / "sentences.json").read_text(encoding="utf-8"))
            self.embeddings = np.load(self.folder / "embeddings.npy")
            if len(self.embeddings) != len(self.sentences):
                self.sentences, self.embeddings = [], None

    def get(self, sentences: list[str], encode: Encode) -> np.ndarray:
        """Embeddings of ``sentences``, encoding the missing ones in one ``encode`` call."""
        known = {s: i for i, s in enumerate(self.sentences)}
        missing = [s for s in dict.fromkeys(sentences) if s not in known]
        if missing:
            new = _check_embeddings(encode(missing), len(missing))
            self.embeddings = new if self.embeddings is None else np.concatenate([self.embeddings, new])
            self.sentences = self.sentences + missing
            with atomic_write(self.folder / "embeddings.npy") as tmp, open(tmp, "wb") as handle:
                np.save(handle, self.embeddings)  # a handle: np.save would append .npy to a path
            write_text(self.folder / "sentences.json", json.dumps(self.sentences))
            write_text(self.folder / "cache.json", json.dumps({"key": self.key, "n": len(self.sentences)}))
            known = {s: i for i, s in enumerate(self.sentences)}
        if self.embeddings is None:  # nothing asked, nothing cached
            return np.zeros((0, 0), np.float32)
        return self.embeddings[[known[s] for s in sentences]]


def _embed_inputs(
    encode: Encode, sentences: list[str], extra: Iterable[str], cache_dir: str | Path | None, key: str | None
) -> tuple[list[str], np.ndarray]:
    """``sentences`` embedded in one ``encode`` call, then the ``extra`` ones not among them (the STS-B
    split of alignment/uniformity) in a second: the tasks' embeddings do not depend on ``extra``. With
    ``cache_dir``, through its :class:`EmbeddingCache` (read once)."""
    more = sorted(set(extra) - set(sentences), key=lambda s: (len(s), s))
    cache = None if cache_dir is None else EmbeddingCache(cache_dir, key or "encode")

    def embed(batch: list[str]) -> np.ndarray:
        return _check_embeddings(encode(batch), len(batch)) if cache is None else cache.get(batch, encode)

    parts = [embed(batch) for batch in (sentences, more) if batch]  # no tasks: no encode([]) call
    return sentences + more, np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)


def _evaluate(
    encode: Encode,
    data_dir: str | Path,
    tasks: Iterable[str],
    mode: str,
    *,
    cache_dir: str | Path | None = None,
    cache_key: str | None = None,
    extra_sentences: Iterable[str] = (),
) -> dict[str, Any]:
    loaded, sentences = load_tasks(data_dir, tasks, mode)
    start = time.perf_counter()
    sentences, embeddings = _embed_inputs(encode, sentences, extra_sentences, cache_dir, cache_key)
    encode_s = time.perf_counter() - start
    lookup = lookup_from(sentences, embeddings)
    # scores: the STS Spearman and the transfer test accuracy (acc) of every task; devacc: the transfer
    # tasks' model-selection accuracy (transfer_accuracies)
    scores, devacc, seconds = {}, {}, {}
    for task, data in loaded.items():
        start = time.perf_counter()
        if task in P.STS_TASKS:
            scores[task] = score_sts(lookup, data)
        else:
            devacc[task], scores[task] = transfer_accuracies(lookup, task, data, mode)
        seconds[task] = time.perf_counter() - start
    return {"scores": scores, "devacc": devacc, "seconds": seconds, "encode_s": encode_s, "lookup": lookup}


def evaluate(
    encode: Encode,
    data_dir: str | Path,
    tasks: Iterable[str] | None = P.TASKS,
    mode: str = "test",
    *,
    cache_dir: str | Path | None = None,
) -> dict[str, float]:
    """Scores in percent of ``tasks`` under the SentEval protocol (protocol.md §4): STS Spearman x100 not
    rounded, transfer test accuracies rounded to 2 decimals as SentEval returns them.

    ``encode(list[str]) -> [n, d]`` is called once, with every unique sentence the tasks need;
    ``data_dir`` holds ``downstream/``; ``tasks`` as ``P.TASKS`` or ``P.TASK_ALIASES`` (answered under the
    name given; ``None``: all of ``P.TASKS``); ``mode`` is ``test`` (k = 10), ``fasttest`` or ``dev``
    (k = 5; ``dev`` scores STS-B/SICK-R on their dev split). ``cache_dir`` keeps embeddings between calls.
    """
    asked = P.TASKS if tasks is None else (tasks,) if isinstance(tasks, str) else tuple(tasks)
    scores = _evaluate(encode, data_dir, asked, mode, cache_dir=cache_dir)["scores"]
    return {task: scores[P.TASK_ALIASES.get(task, task)] for task in asked}


# --- alignment and uniformity ---------------------------------------------------------------------


def alignment_uniformity(
    encode_or_embeddings: Encode | Lookup, data_dir: str | Path, *, split: str = P.ALIGNMENT_SPLIT
) -> tuple[float, float]:
    """(alignment, uniformity) of L2-normalised embeddings on STS-B ``split`` (protocol.md §4).

    alignment = mean ||z - z'||^2 over pairs with gold >= 4 (``P.ALIGNMENT_MIN_SCORE``); uniformity =
    log mean exp(-t ||z_a - z_b||^2), t = 2 (``P.UNIFORMITY_T``), over all pairs a < b of the split's
    unique sentences. ``encode_or_embeddings`` is any ``list[str] -> [n, d]`` callable (an encoder or a
    lookup).
    """
    pairs = load_sts_pairs(data_dir, "STSBenchmark", split)
    keep = pairs.gold >= P.ALIGNMENT_MIN_SCORE
    unique = sorted(set(pairs.a) | set(pairs.b), key=lambda s: (len(s), s))
    emb = _check_embeddings(encode_or_embeddings(unique), len(unique))
    emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    lookup = lookup_from(unique, emb)
    za, zb = lookup(pairs.a)[keep].astype(np.float64), lookup(pairs.b)[keep].astype(np.float64)
    alignment = float(np.mean(np.sum((za - zb) ** 2, axis=1))) if keep.any() else float("nan")
    return alignment, _uniformity(emb.astype(np.float64), P.UNIFORMITY_T)


def _uniformity(z: np.ndarray, t: float) -> float:
    """log mean_{a<b} exp(-t ||z_a - z_b||^2) for unit rows, in blocks, with a stable log-sum-exp."""
    n = len(z)
    if n < 2:
        return float("nan")
    logs = []
    for start in range(0, n - 1, 1024):
        block = z[start : start + 1024]
        sq = np.maximum(2.0 - 2.0 * block @ z.T, 0.0)  # ||a - b||^2 for unit vectors
        rows, cols = np.indices(sq.shape)
        upper = cols > rows + start
        logs.append(-t * sq[upper])
    values = np.concatenate(logs)
    top = values.max()
    return float(top + np.log(np.mean(np.exp(values - top))))


# --- checkpoints ----------------------------------------------------------------------------------


def checkpoint_fingerprint(model_dir: str | Path, pooling: str, max_length: int | None = None) -> str:
    """Key of a checkpoint's embeddings: its files (names, sizes, mtimes), pooling and max length."""
    model_dir = Path(model_dir).resolve()
    h = hashlib.sha256(f"{model_dir}|{pooling}|{max_length}".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        h.update(f"{path.relative_to(model_dir)}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


#: Keys of a checkpoint's train_summary.json copied into its metrics file (the report's precision list).
TRAINING_KEYS = (
    "precision",
    "requested_precision",
    "tf32_matmul",
    "tf32_conv",
    "dev_pooling",
    "device_name",
    "best_step",
    "best_dev_spearman",  # STS-B dev Spearman of the kept checkpoint: Li Fig. 6's measure (report claims)
    "steps",
)


#: Key of the training block's dev-set rebound of the uniformity loss (:func:`dev_rebound`).
DEV_UNIFORMITY_REBOUND = "dev_uniformity_rebound"


def dev_rebound(evals: list[dict[str, Any]] | None, key: str = "dev_uniformity") -> float | None:
    """How far a dev-set loss rose after its lowest point: its value at the run's last dev evaluation
    minus its minimum over the evaluations (≥ 0; None without two finite values). Nie et al. 2023 §2 and
    Fig. 1c-d read overfitting from dev losses that "first decrease and then increase" under L_a&u and
    L_dcl, where under L_cl they "first decrease and then remain flat" (a rebound near 0).

    >>> dev_rebound([{"dev_uniformity": -2.0}, {"dev_uniformity": -3.5}, {"dev_uniformity": -3.0}])
    0.5
    """
    values = [float(e[key]) for e in evals or [] if e.get(key) is not None and math.isfinite(e[key])]
    return values[-1] - min(values) if len(values) >= 2 else None


def trained_with(model_dir: str | Path) -> dict[str, Any] | None:
    """How a checkpoint was trained (``TRAINING_KEYS`` of its ``train_summary.json``) and its dev-set
    uniformity rebound (:data:`DEV_UNIFORMITY_REBOUND`, from the summary's dev evaluations), or None for
    an unmodified backbone."""
    path = Path(model_dir) / "train_summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    out = {key: summary.get(key) for key in TRAINING_KEYS}
    out[DEV_UNIFORMITY_REBOUND] = dev_rebound(summary.get("evals"))
    return out


def _group_mean(scores: Mapping[str, float], group: tuple[str, ...]) -> float | None:
    return float(np.mean([scores[t] for t in group])) if all(t in scores for t in group) else None


def _lazy_encoder(model_dir: str | Path, *, pooling: str, batch_size: int, device: str | None) -> Encode:
    """:func:`contrastlab.models.make_encoder` of the checkpoint, loaded at the first call only: an
    evaluation whose embeddings are all cached never loads the model (nor touches a GPU)."""

    @functools.cache
    def made() -> Encode:
        model, tokenizer = load_backbone(model_dir, device=device)
        return make_encoder(model, tokenizer, pooling=pooling, batch_size=batch_size)

    return lambda sentences: made()(sentences)


def _refuse_to_encode(model_dir: str | Path, cache_dir: str | Path | None, key: str) -> Encode:
    """An ``encode`` that raises: a probe job must find every embedding where its encoding job put
    them, rather than encode for an hour on a CPU allocation sized for probing."""

    def encode(sentences: list[str]) -> np.ndarray:
        folder = Path(cache_dir) if cache_dir is not None else None
        found = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder and folder.is_dir() else []
        raise ValueError(
            f"{len(sentences)} sentences are missing from the embeddings of {model_dir} in {cache_dir} "
            f"(key {key}; found {', '.join(found) or 'none'}): the checkpoint changed after its encoding "
            "job, or that job encoded other tasks; run that job again (--forcerun encode or "
            "encode_pretrained)"
        )

    return encode


def encode_checkpoint(
    model_dir: str | Path,
    data_dir: str | Path,
    tasks: Iterable[str] = P.TASKS,
    mode: str = "test",
    *,
    cache_dir: str | Path,
    pooling: str = "cls",
    batch_size: int = 128,
    device: str | None = None,
) -> dict[str, Any]:
    """The encoding half of :func:`evaluate_checkpoint`: every sentence it needs for ``tasks`` in
    ``mode`` (and the STS-B pairs of alignment/uniformity), encoded on ``device`` into ``cache_dir`` as
    it would encode them. ``evaluate_checkpoint(..., cache_dir=cache_dir)`` then fits the probes from
    the cache, without loading the model, with the numbers of a single call: a GPU job encodes, a CPU
    job probes. Returns what the encoding was (the job writes it as :data:`ENCODING_RECORD`)."""
    import torch

    stsb = load_sts_pairs(data_dir, "STSBenchmark", P.ALIGNMENT_SPLIT)
    sentences = task_sentences(data_dir, tasks, mode)
    key = checkpoint_fingerprint(model_dir, pooling)
    encode = _lazy_encoder(model_dir, pooling=pooling, batch_size=batch_size, device=device)
    start = time.perf_counter()
    sentences, _ = _embed_inputs(encode, sentences, stsb.a + stsb.b, Path(cache_dir) / key, key)
    encode_s = time.perf_counter() - start
    resolved = pick_device(device)
    return {
        "sentences": len(sentences),
        "encode_s": encode_s,
        "model_dir": str(model_dir),
        "key": key,
        "device": resolved.type,
        "device_name": device_name(resolved),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


#: Written by the encoding job beside the embeddings it encoded (what :func:`encode_checkpoint` returns).
ENCODING_RECORD = "encoding.json"


def read_encoding(cache_dir: str | Path) -> dict[str, Any]:
    """The :data:`ENCODING_RECORD` of an encoding job's ``cache_dir``; ``ValueError`` (one line) when
    it has none, i.e. no encoding job finished there."""
    path = Path(cache_dir) / ENCODING_RECORD
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{path} cannot be read ({type(error).__name__}): the embeddings there were not written by a "
            "finished encoding job; run it again (--forcerun encode or encode_pretrained)"
        ) from None


def evaluate_checkpoint(
    model_dir: str | Path,
    data_dir: str | Path,
    tasks: Iterable[str] = P.TASKS,
    mode: str = "test",
    *,
    pooling: str = "cls",
    batch_size: int = 128,
    device: str | None = None,
    cache_dir: str | Path | None = None,
    encode_missing: bool = True,
) -> dict[str, Any]:
    """Evaluate a Hugging Face checkpoint; returns the metrics-file dict of contracts.md (the transfer
    probe named as :data:`PROBE`).

    The STS-B :data:`~contrastlab.senteval.protocol.ALIGNMENT_SPLIT` (dev) sentences are always encoded
    too (alignment/uniformity; those not among the tasks' in a second ``encode`` call). With
    ``cache_dir``, embeddings live in ``cache_dir/<checkpoint fingerprint>``.
    ``encode_missing=False`` (the probe job after :func:`encode_checkpoint`): sentences missing from
    the cache raise ``ValueError`` instead of being encoded.
    """
    tasks = P.check_tasks(tasks)
    mode = P.check_mode(mode)
    stsb = load_sts_pairs(data_dir, "STSBenchmark", P.ALIGNMENT_SPLIT)
    key = checkpoint_fingerprint(model_dir, pooling)
    if encode_missing:
        encode = _lazy_encoder(model_dir, pooling=pooling, batch_size=batch_size, device=device)
    else:
        encode = _refuse_to_encode(model_dir, cache_dir, key)
    result = _evaluate(
        encode,
        data_dir,
        tasks,
        mode,
        cache_dir=None if cache_dir is None else Path(cache_dir) / key,
        cache_key=key,
        extra_sentences=stsb.a + stsb.b,
    )
    scores, devacc, seconds = result["scores"], result["devacc"], result["seconds"]
    start = time.perf_counter()
    alignment, uniformity = alignment_uniformity(result["lookup"], data_dir, split=P.ALIGNMENT_SPLIT)
    align_s = time.perf_counter() - start
    return {
        "training": trained_with(model_dir),
        "scores": scores,
        "devacc": devacc,
        **{a: _group_mean(devacc if "devacc" in a else scores, g) for a, g in P.AVERAGED.items()},
        "alignment": alignment,
        "uniformity": uniformity,
        "alignment_split": P.ALIGNMENT_SPLIT,
        "mode": mode,
        "pooling": pooling,
        "probe": PROBE,
        "model_dir": str(model_dir),
        "timings": {
            "encode_s": result["encode_s"],
            "sts_s": sum(s for t, s in seconds.items() if t in P.STS_TASKS),
            "transfer_s": sum(s for t, s in seconds.items() if t in P.TRANSFER_TASKS),
            "alignment_s": align_s,
        },
        "task_seconds": seconds,
        "meta": run_metadata(),
    }

"""Unsupervised SimCSE-protocol training of a sentence encoder with any loss of ``contrastlab.losses``.

One call of :func:`train` trains one cell (protocol, loss, backbone, seed) as protocol.md §2 describes:

- each batch of N sentences is encoded twice in one forward pass (rows 2i and 2i+1 are sentence i, as
  in SimCSE); dropout is the only augmentation; the last-layer [CLS] (``<s>``) vector goes through a
  training-only head, and the loss sees ``h1, h2 = view 1, view 2`` ([N, D], float32);
- heads: ``simcse`` = Linear(d, d) + Tanh (SimCSE's ``MLPLayer``), initialised as SimCSE's ``cl_init``
  does through the backbone's ``init_weights``: weight ~ N(0, ``initializer_range``) (0.02 for BERT and
  RoBERTa), bias 0. ``li2024`` (Li et al. 2024's released code) = Linear only for BERT-like backbones,
  Tanh → Linear for RoBERTa-like ones (``config.model_type`` in ``ROBERTA_TYPES``), weight and bias
  both ~ N(0, std 6e-3) (``custom_param_init``), and the whole embedding module (word, position, type
  embeddings and their LayerNorm) frozen;
- AdamW (β 0.9/0.999, eps 1e-8, weight decay 0), lr decays linearly to 0 over the run, no warmup,
  gradient norm clipped to 1.0; truncation to ``max_length`` tokens, dynamic padding; one epoch in an
  order drawn from the seed, the last incomplete batch dropped (a batch of one has no negatives);
- every ``eval_every`` steps and at the last step: STS-B dev Spearman, the best checkpoint kept. The dev
  embedding is ``dev_pooling``: ``cls`` = the raw [CLS] (SimCSE's ``--mlp_only_train``, Li et al.), or
  ``cls_mlp`` = [CLS] through the training head, which is what Nie et al.'s run script selected with
  (it omits ``--mlp_only_train``, so SimCSE's ``cls`` pooler keeps the MLP at dev time). The saved
  checkpoint and the test evaluation always use the raw [CLS]. Step 0 (the backbone before training) is
  evaluated and logged for reference but is never selected.

``grad_accum = k`` splits the encoder's work into k micro-batches without changing the objective: the
loss still sees the whole batch (gradient caching: encode the micro-batches without a graph, take the
loss's gradient with respect to the embeddings, then re-encode each micro-batch with the same dropout
masks (the RNG state is replayed) and back-propagate that gradient). Micro-batching the loss itself
would change the number of negatives, i.e. the method.

Precision (``precision``): ``fp32``; ``bf16`` autocast; ``fp16`` autocast with dynamic loss scaling
(``torch.amp.GradScaler``), which is what SimCSE's ``--fp16`` runs used (CUDA only: on a CPU it
resolves to fp32, recorded in the summary); ``auto`` = bf16 on CUDA, fp32 elsewhere.

Speed: the corpus is tokenised once per tokenizer (``training.corpus``); on CUDA fused AdamW; the
step loop does not synchronise with the device except at logging, evaluation and snapshot steps (the
loss is called with ``with_stats=False`` elsewhere; the NaN guard accumulates on the device).
Resuming: see ``training.state``; on CPU a resumed run is bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import platform
import random
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from contrastlab.losses import build_loss
from contrastlab.models import pick_device
from contrastlab.provenance import run_metadata
from contrastlab.training import geometry
from contrastlab.training import state as st
from contrastlab.training.corpus import load_tokenized_corpus
from contrastlab.training.dev import DevEvaluator

PROTOCOLS = ("simcse", "li2024")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEV_POOLINGS = ("cls", "cls_mlp")
DEV_TASKS = ("STSBenchmark", "SICKRelatedness")
ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")
DEFAULT_CACHE_DIR = Path("resources/cache")
ADAM_BETAS = (0.9, 0.999)  # protocol.md §2 (SimCSE's HF Trainer defaults)
ADAM_EPS = 1e-8
CLIP_NORM = 1.0
LI2024_HEAD_STD = 6e-3  # Li et al.'s custom_param_init: nn.init.normal_(weight and bias, 0, 6e-3)
OutOfMemoryError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


@dataclass(frozen=True)
class TrainSettings:
    """Everything that defines one training run (a flat dict of these is the workflow's params)."""

    loss: str  # a name of contrastlab.losses.LOSSES
    loss_hp: Mapping[str, Any] = field(default_factory=dict)  # build_loss keyword arguments
    protocol: str = "simcse"  # "simcse" or "li2024" (head shape/init, frozen embeddings)
    lr: float = 3e-5  # peak AdamW learning rate, linear decay to 0, no warmup
    batch_size: int = 64  # sentences per optimiser step; the loss sees all of them
    max_length: int = 32  # truncation of training sentences, in tokens (special tokens included)
    epochs: int = 1  # passes over the corpus (reshuffled per epoch)
    max_steps: int | None = None  # stop after this many steps; the lr schedule ends there too
    eval_every: int = 125  # steps between dev evaluations (protocol: 125; Li's RoBERTa runs: 50)
    seed: int = 42  # model head init, dropout masks and data order
    dropout: float = 0.1  # hidden and attention dropout of the backbone (MACL: 0.2)
    precision: str = "auto"  # auto: bf16 autocast on CUDA, fp32 elsewhere; fp32; bf16; fp16 (CUDA)
    grad_accum: int = 1  # encoder micro-batches per step (same objective, less memory)
    log_every: int = 25  # steps between JSONL training lines (the only routine host syncs)
    state_every: int = 250  # steps between resumable snapshots
    max_sentences: int | None = None  # use only the first N corpus sentences
    dev_task: str = "STSBenchmark"  # dev split for model selection
    dev_pooling: str = "cls"  # dev embedding for model selection: raw [CLS], or cls_mlp (through the head)
    # Geometry statistics of a probe set (training.geometry) every N steps; None = off, costs nothing.
    analysis_every: int | None = None
    analysis_sentences: int = 1280  # probe size (Li: 10% held out; batches of analysis_batch)
    analysis_batch: int = 128  # sentences per probe batch (Li: N = 128)
    analysis_holdout: bool = False  # probe = the corpus's last sentences, removed from training (Li)

    def __post_init__(self) -> None:
        object.__setattr__(self, "loss_hp", dict(self.loss_hp))
        choices = {
            "protocol": PROTOCOLS,
            "precision": PRECISIONS,
            "dev_task": DEV_TASKS,
            "dev_pooling": DEV_POOLINGS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        positive = (
            "batch_size",
            "max_length",
            "epochs",
            "eval_every",
            "grad_accum",
            "log_every",
            "state_every",
            "analysis_sentences",
            "analysis_batch",
        )
        for name in positive:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("max_steps", "max_sentences", "analysis_every"):
            if getattr(self, name) is not None and (
                not isinstance(getattr(self, name), int) or getattr(self, name) < 1
            ):
                raise ValueError(f"{name} must be a positive integer or None, got {getattr(self, name)!r}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 (in-batch negatives), got {self.batch_size}")
        if self.grad_accum > self.batch_size:
            raise ValueError(f"grad_accum must be <= batch_size ({self.batch_size}), got {self.grad_accum}")
        if self.analysis_batch < 2 or self.analysis_sentences < self.analysis_batch:
            raise ValueError(
                f"analysis_batch must be >= 2 and <= analysis_sentences ({self.analysis_sentences}), "
                f"got {self.analysis_batch}"
            )
        if not isinstance(self.analysis_holdout, bool):
            raise ValueError(f"analysis_holdout must be true or false, got {self.analysis_holdout!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainSettings:
        """Build from a flat dict; unknown keys raise (naming the valid ones)."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"unknown training setting(s) {', '.join(unknown)}; valid: {', '.join(names)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (dict(v) if isinstance(v := getattr(self, f.name), Mapping) else v)
            for f in dataclasses.fields(self)
        }


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite."""


# ----------------------------------------------------------------------------------------------- helpers


def build_head(
    protocol: str, model_type: str, dim: int, initializer_range: float = 0.02
) -> tuple[nn.Module, str]:
    """The training-only head and a short description of it (see the module docstring).

    ``simcse``: Linear + Tanh, weight ~ N(0, ``initializer_range``), bias 0 (BERT's ``_init_weights``,
    which SimCSE's ``cl_init`` applies to its MLP). ``li2024``: weight and bias ~ N(0, 6e-3).
    Draws from torch's global RNG (seeded by the trainer).
    """
    linear = nn.Linear(dim, dim)
    if protocol == "simcse":
        nn.init.normal_(linear.weight, mean=0.0, std=initializer_range)
        nn.init.zeros_(linear.bias)
        return nn.Sequential(linear, nn.Tanh()), f"linear+tanh(std {initializer_range:g})"
    nn.init.normal_(linear.weight, mean=0.0, std=LI2024_HEAD_STD)
    nn.init.normal_(linear.bias, mean=0.0, std=LI2024_HEAD_STD)
    if model_type in ROBERTA_TYPES:
        return nn.Sequential(nn.Tanh(), linear), "tanh+linear(std 6e-3)"
    return nn.Sequential(linear), "linear(std 6e-3)"


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision a run on ``device`` uses: ``auto`` is bf16 on CUDA (fp32 elsewhere); ``fp16``
    (autocast + loss scaling, SimCSE's ``--fp16``) needs CUDA and is fp32 elsewhere."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision == "fp16" and device.type != "cuda":
        return "fp32"
    return precision


def autocast_for(precision: str, device: torch.device) -> Callable[[], contextlib.AbstractContextManager]:
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return lambda: torch.autocast(device.type, dtype=dtype)
    return contextlib.nullcontext


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({torch.get_num_threads()} threads)"
    return platform.processor() or platform.machine()


def epoch_order(n_sentences: int, seed: int, epoch: int) -> np.ndarray:
    """The sentence order of one epoch (a permutation drawn from ``(seed, epoch)``)."""
    return np.random.default_rng([seed, epoch]).permutation(n_sentences)


def _backbone_fingerprint(backbone_dir: Path) -> str:
    files = sorted(p for p in backbone_dir.iterdir() if p.is_file())
    parts = [(backbone_dir / "config.json").read_text()] + [f"{p.name}:{p.stat().st_size}" for p in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _load_model(backbone_dir: Path, dropout: float) -> nn.Module:
    """The backbone with ``dropout`` as hidden and attention dropout; its config keeps the original values
    (so the saved checkpoint's config is the backbone's)."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(backbone_dir)
    keys = ("hidden_dropout_prob", "attention_probs_dropout_prob")
    if not all(hasattr(config, key) for key in keys):
        raise ValueError(f"backbone {config.model_type!r} has no {' / '.join(keys)}; cannot set the dropout")
    original = {key: getattr(config, key) for key in keys}
    model = AutoModel.from_pretrained(backbone_dir, **dict.fromkeys(keys, dropout))
    for key, value in original.items():  # modules were built with `dropout`; the config reverts
        setattr(model.config, key, value)
    return model


def _embed_pairs(model: nn.Module, head: nn.Module, ids: torch.Tensor, mask: torch.Tensor, autocast):
    """Both dropout views of a batch in one forward pass: ``(h1, h2)``, float32 [N, D]."""
    with autocast():
        cls = model(
            input_ids=ids.repeat_interleave(2, dim=0), attention_mask=mask.repeat_interleave(2, dim=0)
        ).last_hidden_state[:, 0]
        h = head(cls)
    h = h.float().view(ids.shape[0], 2, -1)
    return h[:, 0], h[:, 1]


def _rng_state(device: torch.device) -> torch.Tensor:
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


def _set_rng_state(device: torch.device, state: torch.Tensor) -> None:
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    else:
        torch.set_rng_state(state)


def train_step(model, head, loss_fn, chunks, *, autocast, with_stats: bool, scale=lambda loss: loss):
    """Forward + backward of one batch given as encoder micro-batches ``[(ids, mask), ...]``.

    Returns the loss output and the detached embeddings. With one chunk this is the plain step; with
    more, gradient caching (module docstring) so that the loss sees the whole batch. ``scale`` maps
    the loss to what is back-propagated (fp16's loss scaling; identity otherwise).
    """
    if len(chunks) == 1:
        h1, h2 = _embed_pairs(model, head, *chunks[0], autocast)
        out = loss_fn(h1, h2, with_stats=with_stats)
        scale(out.loss).backward()
        return out, h1.detach(), h2.detach()
    device = chunks[0][0].device
    rng_states, views = [], []
    with torch.no_grad():
        for ids, mask in chunks:
            rng_states.append(_rng_state(device))
            views.append(_embed_pairs(model, head, ids, mask, autocast))
    h1 = torch.cat([v[0] for v in views]).requires_grad_()
    h2 = torch.cat([v[1] for v in views]).requires_grad_()
    out = loss_fn(h1, h2, with_stats=with_stats)
    scale(out.loss).backward()
    sizes = [ids.shape[0] for ids, _ in chunks]
    after = _rng_state(device)
    for (ids, mask), rng, g1, g2 in zip(
        chunks, rng_states, h1.grad.split(sizes), h2.grad.split(sizes), strict=True
    ):
        _set_rng_state(device, rng)
        c1, c2 = _embed_pairs(model, head, ids, mask, autocast)
        torch.autograd.backward([c1, c2], [g1, g2])
    _set_rng_state(device, after)
    return out, h1.detach(), h2.detach()


class JsonlLog:
    """Append-only JSON lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, record: Mapping[str, Any]) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record, default=float) + "\n")

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0


def _save_checkpoint(model: nn.Module, tokenizer: Any, folder: Path) -> None:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _export(state_dir: Path, summary: dict[str, Any], out_dir: Path, log_path: Path) -> None:
    """Copy the best checkpoint (+ train_summary.json) to ``out_dir`` and the log to ``log_path``."""
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(st.best_dir(state_dir, summary["best_step"]), tmp)
    (tmp / "train_summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_log = log_path.with_name(log_path.name + ".partial")
    shutil.copyfile(state_dir / st.LOG_FILE, tmp_log)
    tmp_log.replace(log_path)


def _stats_text(loss_fn, h1: torch.Tensor, h2: torch.Tensor) -> str:
    try:
        return json.dumps(loss_fn(h1, h2, with_stats=True).stats, default=float)
    except Exception as err:  # the message must get out even if the stats themselves fail
        return f"<stats failed: {err}>"


@contextlib.contextmanager
def _hf_progress_bars_off():
    """No "Loading weights" / "Writing model shards" bars at every checkpoint save."""
    from transformers.utils import logging as hf_logging

    were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_on:
            hf_logging.enable_progress_bar()


# -------------------------------------------------------------------------------------------------- train


@_hf_progress_bars_off()
def train(
    settings: TrainSettings,
    *,
    backbone_dir: str | Path,
    corpus_path: str | Path,
    dev_data_dir: str | Path,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    device: str | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train one cell; write the best checkpoint to ``out_dir`` and the JSONL log to ``log_path``.

    ``state_dir`` holds snapshots while training (a rerun resumes from them; deleted on success);
    ``cache_dir`` the tokenised corpus (default ``resources/cache``). Returns the summary written to
    ``out_dir/train_summary.json``: best dev score and step, steps, timings, device, settings, meta.
    """
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer

    started = time.perf_counter()
    backbone_dir, out_dir, log_path, state_dir = map(Path, (backbone_dir, out_dir, log_path, state_dir))
    s = settings
    dev = pick_device(device)
    precision = resolve_precision(s.precision, dev)
    autocast = autocast_for(precision, dev)

    if not (backbone_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"backbone folder {backbone_dir} has no config.json; materialise it first (rule fetch_backbone)"
        )
    tokenizer = AutoTokenizer.from_pretrained(backbone_dir)
    corpus, cache_path = load_tokenized_corpus(
        corpus_path,
        tokenizer,
        s.max_length,
        DEFAULT_CACHE_DIR if cache_dir is None else cache_dir,
        progress=progress,
    )
    tokenize_s = time.perf_counter() - started
    trainable = len(corpus) - (s.analysis_sentences if s.analysis_every and s.analysis_holdout else 0)
    if trainable < 2:
        raise ValueError(
            f"analysis_holdout keeps {s.analysis_sentences} of the corpus's {len(corpus)} sentences "
            "for the probe and leaves nothing to train on; lower analysis_sentences"
        )
    n_sentences = trainable if s.max_sentences is None else min(trainable, s.max_sentences)
    steps_per_epoch = n_sentences // s.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"the corpus has {n_sentences} sentences, fewer than one batch of {s.batch_size}")
    total_steps = s.max_steps if s.max_steps is not None else steps_per_epoch * s.epochs

    random.seed(s.seed)
    np.random.seed(s.seed)
    torch.manual_seed(s.seed)
    model = _load_model(backbone_dir, s.dropout)
    head, head_name = build_head(
        s.protocol,
        model.config.model_type,
        model.config.hidden_size,
        getattr(model.config, "initializer_range", 0.02),
    )
    if s.protocol == "li2024":
        if not hasattr(model, "embeddings"):
            raise ValueError(
                f"protocol li2024 freezes `model.embeddings`, which {type(model).__name__} lacks"
            )
        model.embeddings.requires_grad_(False)
    model.to(dev).train()
    head.to(dev).train()
    params = [p for p in itertools.chain(model.parameters(), head.parameters()) if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params, lr=s.lr, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=0.0, fused=dev.type == "cuda" or None
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: max(0.0, (total_steps - k) / total_steps)
    )
    scaler = torch.amp.GradScaler(dev.type, enabled=precision == "fp16")
    loss_fn = build_loss(s.loss, **s.loss_hp)
    evaluator = DevEvaluator(dev_data_dir, s.dev_task, tokenizer, dev)  # fp32: exact, reproducible selection
    pad_id = tokenizer.pad_token_id
    probe = _analysis_probe(s, corpus, n_sentences, pad_id, dev)
    dev_probe = evaluator.probe_batches(s.analysis_batch, s.analysis_sentences, s.seed) if probe else []

    fingerprint = hashlib.sha256(
        json.dumps(
            [s.to_dict(), _backbone_fingerprint(backbone_dir), corpus.key, n_sentences],
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:16]
    saved = st.load_state(state_dir, fingerprint)
    log = JsonlLog(state_dir / st.LOG_FILE)
    timings = {"train_s": 0.0, "eval_s": 0.0, "state_s": 0.0}
    run_info = {
        "device": str(dev),
        "device_name": device_name(dev),
        "precision": precision,
        "requested_precision": s.precision,
        "dev_pooling": s.dev_pooling,
        "head": head_name,
        "n_sentences": n_sentences,
        "total_steps": total_steps,
        "trainable_params": sum(p.numel() for p in params),
        "corpus": {"path": str(corpus_path), "cache": str(cache_path), "cache_key": corpus.key},
        "backbone_dir": str(backbone_dir),
    }

    def evaluate(at_step: int) -> dict[str, Any]:
        t = time.perf_counter()
        dev_head = head if s.dev_pooling == "cls_mlp" else None
        record = {"event": "eval", "step": at_step, "dev_task": s.dev_task, **evaluator(model, dev_head)}
        timings["eval_s"] += time.perf_counter() - t
        return record

    def analyse(at_step: int) -> None:
        """Geometry statistics of the probe (training.geometry), logged; a forked, (seed, step)-seeded
        RNG draws the probe's dropout masks, so training itself is unchanged."""
        t = time.perf_counter()
        devices = [dev] if dev.type == "cuda" else []
        embed = lambda ids, mask: _embed_pairs(model, head, ids, mask, autocast)  # noqa: E731
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(s.seed * 1_000_003 + at_step)
            stats = geometry.probe_statistics(embed, probe)
            # The dev split's sentences with the same dropout views: Nie's dev-set L_cl.
            dev_stats = geometry.probe_statistics(embed, dev_probe) if dev_probe else {}
        keep = ("l_cl", "align", "uniformity", "d_gap", "cos_pos", "cos_neg")
        dev_part = {f"dev_{k}": dev_stats[k] for k in keep if k in dev_stats}
        log.write({"event": "geometry", "step": at_step, **probe_info, **stats, **dev_part})
        timings["analysis_s"] = timings.get("analysis_s", 0.0) + time.perf_counter() - t

    probe_info = {
        "probe_sentences": sum(ids.shape[0] for ids, _ in probe),
        "probe_heldout": s.analysis_holdout,
    }

    if saved is not None and saved.get("finished"):  # killed while exporting: only the export is left
        summary = saved["summary"]
        _export(state_dir, summary, out_dir, log_path)
        shutil.rmtree(state_dir, ignore_errors=True)
        return summary
    if saved is None:
        st.reset_state_dir(state_dir)
        step, best, best_step, evals, resumed_from = 0, -math.inf, None, [], []
        interval = (0.0, 0)
        log.write({"event": "start", "settings": s.to_dict(), **run_info, "meta": run_metadata()})
        record = evaluate(0)  # the backbone before training: logged, never selected
        evals.append({k: v for k, v in record.items() if k != "event"})
        log.write(record)
        if probe:
            analyse(0)
    else:
        model.load_state_dict(saved["model"])
        head.load_state_dict(saved["head"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        if "scaler" in saved:
            scaler.load_state_dict(saved["scaler"])
        step, best, best_step = saved["step"], saved["best"], saved["best_step"]
        evals, resumed_from = saved["evals"], [*saved["resumed_from"], saved["step"]]
        timings.update(saved["timings"])
        st.prune_best(state_dir, {best_step} if best_step is not None else set())
        st.truncate_log(state_dir, saved["log_offset"])
        log.write({"event": "resume", "step": step})
        st.restore_rng(saved["rng"])
        interval = saved.get("interval", (0.0, 0))  # snapshots written before it was saved: (0, 0)
    del saved

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    bar = tqdm(
        total=total_steps,
        initial=step,
        unit="step",
        desc=f"{s.loss} {backbone_dir.name}",
        disable=not progress,
        mininterval=1.0 if sys.stderr.isatty() else 30.0,
        dynamic_ncols=True,
    )
    loss_sum = torch.full((), interval[0], device=dev)
    first_bad = torch.full((), -1, dtype=torch.long, device=dev)
    interval_steps, interval_t, paused = interval[1], time.perf_counter(), 0.0
    order_epoch, order = -1, np.empty(0, dtype=np.int64)
    micro = min(s.grad_accum, s.batch_size)

    while step < total_steps:
        step += 1
        epoch, position = divmod(step - 1, steps_per_epoch)
        if epoch != order_epoch:
            order_epoch, order = epoch, epoch_order(n_sentences, s.seed, epoch)
        rows = order[position * s.batch_size : (position + 1) * s.batch_size]
        chunks = [_to_device(*corpus.batch(part, pad_id), dev) for part in np.array_split(rows, micro)]
        logging = step % s.log_every == 0 or step == total_steps
        evaluating = step % s.eval_every == 0 or step == total_steps
        snapshot = step % s.state_every == 0 and step < total_steps
        try:
            lr = optimizer.param_groups[0]["lr"]
            out, h1, h2 = train_step(
                model, head, loss_fn, chunks, autocast=autocast, with_stats=logging, scale=scaler.scale
            )
            scaler.unscale_(optimizer)  # clip the true gradients (no-op unless fp16)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, CLIP_NORM)
            scaler.step(optimizer)  # skipped when fp16 gradients overflowed, as HF's Trainer does
            scaler.update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
        except OutOfMemoryError as err:
            raise MemoryError(
                f"out of memory at step {step} on {device_name(dev)} with batch_size {s.batch_size} "
                f"({2 * math.ceil(s.batch_size / micro)} sequences of up to {s.max_length} tokens per "
                f"forward pass); lower batch_size or raise grad_accum (e.g. grad_accum={2 * s.grad_accum}: "
                f"the loss still sees the whole batch, the encoder runs in smaller micro-batches)"
            ) from err
        loss = out.loss.detach()
        loss_sum += loss
        first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), step, first_bad)
        interval_steps += 1
        bar.update(1)

        if logging or evaluating or snapshot or dev.type == "cpu":  # CPU: checking costs nothing
            bad = int(first_bad.item())
            if bad >= 0:
                raise NonFiniteLossError(
                    f"loss {s.loss!r} (hp {json.dumps(s.loss_hp)}) is not finite at step {bad} "
                    f"(detected at step {step}, value now {loss.item()}); loss stats at step {step}: "
                    f"{_stats_text(loss_fn, h1, h2)}. Try a lower lr, precision=fp32, or check the "
                    "hyperparameters."
                )
        if logging:
            now = time.perf_counter()
            elapsed = now - interval_t - paused
            mean_loss, grad = torch.stack([loss_sum / interval_steps, grad_norm.float()]).tolist()
            timings["train_s"] += elapsed
            record = {
                "event": "train",
                "step": step,
                "epoch": epoch,
                "loss": mean_loss,
                "loss_last": loss.item(),
                "lr": lr,
                "grad_norm": grad,
                "stats": dict(out.stats),
                "steps_per_s": interval_steps / elapsed,
                "sentences_per_s": interval_steps * s.batch_size / elapsed,
            }
            log.write(record)
            bar.set_postfix(loss=f"{mean_loss:.4f}", best=f"{best:.2f}" if best_step else "-", refresh=False)
            loss_sum.zero_()
            interval_steps, interval_t, paused = 0, now, 0.0
        pause_t = time.perf_counter()
        if evaluating:
            record = evaluate(step)
            if record["dev_spearman"] > best:
                best, best_step = record["dev_spearman"], step
                st.save_best(state_dir, step, lambda folder: _save_checkpoint(model, tokenizer, folder))
            record.update(best_dev_spearman=best, best_step=best_step)
            evals.append(
                {k: v for k, v in record.items() if k not in ("event", "best_dev_spearman", "best_step")}
            )
            log.write(record)
            if progress:
                bar.write(
                    json.dumps(
                        {k: record[k] for k in ("step", "dev_spearman", "dev_align", "dev_uniformity")}
                    )
                )
        if probe and (step % s.analysis_every == 0 or step == total_steps):
            analyse(step)
        if snapshot:
            t = time.perf_counter()
            payload = {
                "fingerprint": fingerprint,
                "step": step,
                "best": best,
                "best_step": best_step,
                "evals": evals,
                "resumed_from": resumed_from,
                "timings": timings,
                "log_offset": log.offset(),
                "model": model.state_dict(),
                "head": head.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "rng": st.capture_rng(),
                # The log's running interval, so that a resumed run logs the same interval means.
                "interval": (loss_sum.item(), interval_steps),
            }
            st.save_state(
                state_dir, payload, {"step": step, "best_step": best_step, "fingerprint": fingerprint}
            )
            st.prune_best(state_dir, {best_step} if best_step is not None else set())
            timings["state_s"] += time.perf_counter() - t
        paused += time.perf_counter() - pause_t
    bar.close()

    if best_step is None:
        raise NonFiniteLossError(f"no dev evaluation gave a finite {s.dev_task} Spearman; nothing to save")
    timings["total_s"] = time.perf_counter() - started
    timings["tokenize_s"] = tokenize_s
    timings["steps_per_s"] = total_steps / timings["train_s"] if timings["train_s"] else None
    timings["sentences_per_s"] = (
        total_steps * s.batch_size / timings["train_s"] if timings["train_s"] else None
    )
    summary = {
        "best_dev_spearman": best,
        "best_step": best_step,
        "dev_task": s.dev_task,
        "steps": step,
        "evals": evals,
        "timings": timings,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None,
        "resumed_from": resumed_from,
        **run_info,
        "settings": s.to_dict(),
        "meta": run_metadata(),
    }
    keys = ("best_dev_spearman", "best_step", "steps", "timings", "device_name", "peak_gpu_memory_gib")
    log.write({"event": "end", **{k: summary[k] for k in keys}})
    st.save_state(
        state_dir, {"fingerprint": fingerprint, "finished": True, "summary": summary}, {"finished": True}
    )
    st.prune_best(state_dir, {best_step})
    _export(state_dir, summary, out_dir, log_path)
    shutil.rmtree(state_dir, ignore_errors=True)
    return summary


def _analysis_probe(s: TrainSettings, corpus, n_sentences: int, pad_id: int, dev: torch.device) -> list:
    """The probe's ``(input_ids, attention_mask)`` batches on ``dev``: the corpus's last
    ``analysis_sentences`` (held out of training) or, without ``analysis_holdout``, its first ones
    (training sentences, as Nie's train-set curves); [] when the analysis is off."""
    if not s.analysis_every:
        return []
    if s.analysis_holdout:
        rows = np.arange(len(corpus) - s.analysis_sentences, len(corpus))
    else:
        rows = np.arange(min(s.analysis_sentences, n_sentences))
    if len(rows) < s.analysis_batch:
        raise ValueError(
            f"the analysis probe has {len(rows)} sentences, fewer than one batch of {s.analysis_batch}; "
            "lower analysis_batch"
        )
    whole = len(rows) // s.analysis_batch * s.analysis_batch  # full batches only: N fixes the statistics
    return [
        _to_device(*corpus.batch(part, pad_id), dev)
        for part in np.split(rows[:whole], whole // s.analysis_batch)
    ]


def _to_device(
    ids: torch.Tensor, mask: torch.Tensor, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    if device.type != "cuda":
        return ids, mask
    return ids.pin_memory().to(device, non_blocking=True), mask.pin_memory().to(device, non_blocking=True)

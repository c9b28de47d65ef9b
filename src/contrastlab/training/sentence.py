"""Unsupervised SimCSE-protocol training of a sentence encoder with any loss of ``contrastlab.losses``.

One call of :func:`train` trains one cell (protocol, loss, backbone, seed) as protocol.md §2 describes;
the step (heads, both dropout views, ``grad_accum`` micro-batches) is :mod:`.sentence_step`.

- The protocol: the ``simcse`` or ``li2024`` head (``li2024`` freezes the embedding module); AdamW (β
  0.9/0.999, eps 1e-8, no weight decay), the rate decaying linearly to 0, no warmup, gradients clipped
  to norm 1.0; truncation to ``max_length`` tokens, dynamic padding; one epoch in a seeded order, the
  last incomplete batch dropped.
- Model selection: STS-B dev Spearman every ``eval_every`` steps and at the last, the best checkpoint
  kept. The dev embedding is ``dev_pooling``: ``cls`` = the raw [CLS] (SimCSE's ``--mlp_only_train``,
  Li et al.), or ``cls_mlp`` = [CLS] through the head, as Nie et al.'s run script selected. The saved
  checkpoint and the test use the raw [CLS]. Step 0 is evaluated and logged, never selected.

The step never synchronises with the host; where a cell sets nothing,
:func:`~contrastlab.training.capture.for_device` picks the fast path (docs/training-speed.md). On CPU a
resumed run is bit-identical to an uninterrupted one (:mod:`.runtime`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from contrastlab import families
from contrastlab.losses import build_loss
from contrastlab.models import packed
from contrastlab.models.export import write_sentence_transformers_files
from contrastlab.paths import atomic_dir, link_or_copy
from contrastlab.senteval.protocol import CELL_POOLING
from contrastlab.training import capture, loop
from contrastlab.training import state as st
from contrastlab.training.corpus import load_tokenized_corpus
from contrastlab.training.dev import DevEvaluator
from contrastlab.training.events import WandbRun
from contrastlab.training.runtime import (
    NonFiniteLossError,
    TrainingRun,
    build_optimizer,
    epoch_order,
    seed_all,
)
from contrastlab.training.sentence_probe import GeometryProbe
from contrastlab.training.sentence_select import DevSelection
from contrastlab.training.sentence_step import (
    ADAMW,
    CLIP_NORM,
    ROBERTA_TYPES,
    StepParts,
    build_head,
    to_device,
    train_step,
)
from contrastlab.training.settings import Settings, check_against_schema

__all__ = ["NonFiniteLossError", "TrainSettings", "build_head", "train", "train_step", "ROBERTA_TYPES"]

DEFAULT_CACHE_DIR = Path("resources/cache")
#: Settings newer than the snapshot format, at their defaults (left out of the snapshot fingerprint). The
#: device-dependent ones (None: decided by the device, :func:`~contrastlab.training.capture.for_device`)
#: also count as default at the value every run had before they became device-dependent, so that a
#: snapshot written before the upgrade resumes.
LATER_DEFAULTS = {
    "dev_batch_size": frozenset({None, 128}),
    "static_shapes": False,
    "cuda_graph": frozenset({None, False}),
    "compile": False,
    "deterministic": False,
    "padding_free": frozenset({None, False}),
}


@dataclass(frozen=True)
class TrainSettings(Settings):
    """Everything that defines one training run (a flat dict of these is the workflow's params)."""

    TRACK: ClassVar[str] = "sentence"  # families.step_mode's track
    WHAT: ClassVar[str] = "training"
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
    precision: str = "auto"  # precision.CHOICES; auto: bf16 autocast on CUDA (native bf16), fp32 elsewhere
    head_autocast: bool = False  # the head inside bf16/fp16 autocast (SimCSE's --fp16); else fp32
    grad_accum: int = 1  # encoder micro-batches per step (same objective, less memory)
    log_every: int = 25  # steps between JSONL training lines (the only routine host syncs)
    state_every: int | None = 250  # steps between resumable snapshots (None: by time only)
    state_minutes: float | None = None  # minutes between snapshots as well (config.yaml: 10 on GPUs)
    max_sentences: int | None = None  # use only the first N corpus sentences
    dev_task: str = "STSBenchmark"  # dev split for model selection
    dev_pooling: str = "cls"  # dev embedding for model selection: raw [CLS], or cls_mlp (through the head)
    # Geometry statistics of a probe set (training.geometry) every N steps; None = off, costs nothing.
    analysis_every: int | None = None
    analysis_sentences: int = 1280  # probe size (Li: 10% held out; batches of analysis_batch)
    analysis_batch: int = 128  # sentences per probe batch (Li: N = 128)
    analysis_holdout: bool = False  # probe = the corpus's last sentences, removed from training (Li)
    tensorboard: bool = True  # TensorBoard events of the log's records (training.events); no number changes
    # Dev sentences per encoder call, IEEE fp32 either way; None: 512 on CUDA (fewer launches), 128 elsewhere.
    dev_batch_size: int | None = None
    static_shapes: bool = False  # pad every batch to max_length (training.capture); implied by cuda_graph
    # The whole step as one CUDA graph (training.capture); None: on for CUDA wherever the step can be
    # captured (else one line names why and the run is eager), off elsewhere.
    cuda_graph: bool | None = None
    compile: bool = False  # torch.compile the encoder for the training step (its own dropout stream)
    deterministic: bool = False  # deterministic kernels (bit-identical reruns on a GPU; slower)
    # Token-wise layers on the real tokens only (models.packed; the padded model's numbers up to rounding,
    # its own dropout masks). None: on for IEEE fp32 on CUDA with BERT/RoBERTa (instead of the graph).
    padding_free: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "loss_hp", dict(self.loss_hp))
        check_against_schema(self, "training")  # types, choices and bounds: the schema states them once
        if refused := families.sentence_switches_refused(self.to_dict()):
            raise ValueError(refused)
        if self.grad_accum > self.batch_size:
            raise ValueError(f"grad_accum must be <= batch_size ({self.batch_size}), got {self.grad_accum}")
        if self.analysis_sentences < self.analysis_batch:
            raise ValueError(
                f"analysis_batch must be >= 2 and <= analysis_sentences ({self.analysis_sentences}), "
                f"got {self.analysis_batch}"
            )


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


@_hf_progress_bars_off()
def train(
    settings: TrainSettings,
    *,
    backbone_dir: str | Path,
    corpus_path: str | Path,
    corpus_sha256: str | None = None,
    dev_data_dir: str | Path,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    device: str | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    check_every: int | None = None,
    events_dir: str | Path | None = None,
    wandb_run: WandbRun | None = None,
    keep_state: bool = False,
    cell: Any = None,
) -> dict[str, Any]:
    """Train one cell; write the best checkpoint to ``out_dir`` and the JSONL log to ``log_path``.

    ``state_dir`` holds snapshots (a rerun resumes from them), deleted on success unless ``keep_state``
    (:func:`~contrastlab.training.loop.export_outputs`); ``corpus_sha256`` the corpus's digest where the
    job has it (None: hashed here); ``cache_dir`` the tokenised corpus (default ``resources/cache``);
    ``check_every``, ``events_dir`` (default ``<state_dir>.tensorboard``), ``wandb_run`` and ``cell``: as
    :class:`~contrastlab.training.runtime.TrainingRun` takes them. Returns the summary written to
    ``out_dir/train_summary.json``."""
    options = dict(device=device, check_every=check_every, progress=progress, events_dir=events_dir)
    run = TrainingRun.for_settings(settings, state_dir, **options, wandb_run=wandb_run, cell=cell)
    backbone_dir, out_dir, log_path = Path(backbone_dir), Path(out_dir), Path(log_path)
    with capture.deterministic_algorithms(settings.deterministic):
        # The settings decided for the device (``s``); the snapshot fingerprint reads the configured
        # ``settings``, so a snapshot written before a default became device-dependent resumes.
        s, notes = _for_device(settings, run, backbone_dir)  # said once the run's log has begun
        data = _load_corpus(s, backbone_dir, corpus_path, corpus_sha256, cache_dir, run.progress)
        run.phases.mark("data_s")
        model, head, head_name, params = _build_model(s, backbone_dir, run.device)
        optimizer, scheduler = _optimizer(s, run, params, data.total_steps)
        loss_fn = build_loss(s.loss, **s.loss_hp)
        run.phases.mark("model_load_s")
        # Dev evaluation in IEEE fp32 (outside the step's precision): exact, reproducible selection.
        evaluator = DevEvaluator(
            dev_data_dir, s.dev_task, data.tokenizer, run.device, batch_size=s.dev_batch_size
        )
        # Dev batches are sorted by length (little padding to drop): the padded model encodes them either way.
        select = DevSelection(s, run, evaluator, model, head, data.tokenizer)
        analyse = GeometryProbe(s, run, data, evaluator, model, head)
        fingerprint, run_info = _identity(settings, run, data, backbone_dir, corpus_path, head_name, params)
        saved = run.load_snapshot(fingerprint)
        if saved is not None and saved.get("finished"):  # killed while exporting: only the export is left
            export = functools.partial(_export, run.state_dir, saved["summary"], out_dir, log_path)
            loop.export_outputs(run, export, keep_state)
            return saved["summary"]
        parts = StepParts(model, head, loss_fn, optimizer, params, data)  # the encoder decided at prepare()
        track = _SentenceTrack(s, run, parts, scheduler, select, analyse, fingerprint)
        track.desc = f"{s.loss} {backbone_dir.name}"
        start = loop.begin(run, track, saved, run_info, notes)
        del saved
        loop.train_steps(run, track, start)
        return _finish(run, track, data, run_info, out_dir, log_path, keep_state)


class _SentenceTrack(loop.Track):
    """The sentence cell on the shared loop (:mod:`contrastlab.training.loop`): batches of corpus rows in
    the seed's order, the rate decaying per step, STS dev selection and the geometry probe (where
    ``analysis_every`` makes one) as its evaluations, both at step 0 too."""

    items = "sentences"

    def __init__(self, s, run: TrainingRun, parts: StepParts, scheduler, select, analyse, fingerprint):
        self.s, self.run, self.parts, self.scheduler, self.select = s, run, parts, scheduler, select
        self.model, self.loss_fn, self.fingerprint = parts.encoder, parts.loss_fn, fingerprint
        self.graph = None  # captured at prepare() where cuda_graph asks for it
        self.total, self.steps_per_epoch = parts.corpus.total_steps, parts.corpus.steps_per_epoch
        self.stateful = {"model": self.model, "head": parts.head, "optimizer": parts.optimizer}
        self.stateful["scheduler"] = scheduler  # the snapshot's keys in the order they always had
        # at step 0 the backbone before training: logged, never selected
        self.evaluations = [loop.Evaluation(s.eval_every, lambda step, _: select(step), at_start=True)]
        if analyse.probe:
            self.evaluations.append(loop.Evaluation(s.analysis_every, lambda step, _: analyse(step), True))

    def prepare(self, start: int) -> None:
        """The step's encoder (padding-free, compiled or the model) and, where ``cuda_graph`` asks, its
        graph, after a resume (:func:`_capture_step`). Where it cannot be captured the settings say
        ``cuda_graph: false`` and ``compile: false`` and the model itself encodes (a compiled module can
        fail again eagerly)."""
        self.parts = dataclasses.replace(self.parts, encoder=_encoder(self.s, self.model))
        if self.s.cuda_graph:
            self.graph = _capture_step(self.s, self.run, self.parts, start)
            if self.graph is None:
                self.s = dataclasses.replace(self.s, cuda_graph=False, compile=False)
                self.parts = dataclasses.replace(self.parts, encoder=_encoder(self.s, self.model))

    def epoch(self, epoch: int) -> np.ndarray:
        return epoch_order(self.parts.corpus.n_sentences, self.s.seed, epoch)

    def lr(self, logging: bool) -> float:
        lr = self.parts.optimizer.param_groups[0]["lr"]
        # cuda_graph's lr tensor, read before the scheduler refills it
        return lr.item() if logging and torch.is_tensor(lr) else lr

    def step(self, step: int, rows, logging: bool) -> loop.StepOutput:
        out, h1, h2, grad_norm = _step(self.s, self.run, self.parts, rows, step, self.graph)
        self.scheduler.step()
        return loop.StepOutput(out, h1, h2, out.loss.detach(), grad_norm, self.s.batch_size)

    def stats(self, result: loop.StepOutput) -> dict:
        """The loss's stats from the step's embeddings (the numbers the step's own loss call would give,
        computed outside the step, at log steps only)."""
        with torch.no_grad():
            return dict(self.loss_fn(result.h1, result.h2, with_stats=True).stats)

    def logged(self, record) -> None:
        best = f"{self.select.best:.2f}" if self.select.best_step else "-"
        self.run.set_postfix(loss=f"{record['loss']:.4f}", best=best)

    def snapshot(self) -> dict:
        select = self.select
        return {"extra": select.state(), "info": {"best_step": select.best_step}, **select.for_snapshot()}

    def restore(self, saved) -> None:
        self.select.restore(saved)


def _optimizer(s: TrainSettings, run: TrainingRun, params, total: int):
    """AdamW (protocol.md §2) and its schedule, the rate decaying linearly to 0 over ``total`` steps; with
    ``cuda_graph`` fused AdamW keeps its step count and rate on the device (``capturable``)."""
    hp = {"lr": s.lr, **ADAMW}
    if s.cuda_graph:
        hp["capturable"] = True
    optimizer = build_optimizer("adamw", params, run.device, **hp)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: max(0.0, (total - k) / total))
    return optimizer, scheduler


def _for_device(configured: TrainSettings, run: TrainingRun, backbone_dir: Path):
    """The settings decided for the run's device, precision and backbone family
    (:func:`capture.for_device`, which asks :func:`contrastlab.families.step_mode`: the graph, padding-free
    or neither, and the dev batch) and the one-line notes that say so. The backbone's config.json is the
    run's first read of the backbone folder, so a folder not yet materialised is refused here."""
    if not (backbone_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"backbone folder {backbone_dir} has no config.json; materialise it first (rule fetch_backbone)"
        )
    model_type = json.loads((backbone_dir / "config.json").read_text()).get("model_type")
    return capture.for_device(configured, run.device, precision=run.precision.name, model_type=model_type)


def _load_corpus(
    s: TrainSettings, backbone_dir: Path, corpus_path, corpus_sha256, cache_dir, progress: bool
) -> _Corpus:
    from transformers import AutoTokenizer

    t = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(backbone_dir)
    cache = DEFAULT_CACHE_DIR if cache_dir is None else cache_dir
    sentences, cache_path = load_tokenized_corpus(
        corpus_path, tokenizer, s.max_length, cache, progress=progress, corpus_sha256=corpus_sha256
    )
    trainable = len(sentences) - (s.analysis_sentences if s.analysis_every and s.analysis_holdout else 0)
    if trainable < 2:
        raise ValueError(
            f"analysis_holdout keeps {s.analysis_sentences} of the corpus's {len(sentences)} sentences "
            "for the probe and leaves nothing to train on; lower analysis_sentences"
        )
    n_sentences = trainable if s.max_sentences is None else min(trainable, s.max_sentences)
    steps_per_epoch = n_sentences // s.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"the corpus has {n_sentences} sentences, fewer than one batch of {s.batch_size}")
    total_steps = s.max_steps if s.max_steps is not None else steps_per_epoch * s.epochs
    tokenize_s = time.perf_counter() - t
    return _Corpus(tokenizer, sentences, cache_path, n_sentences, steps_per_epoch, total_steps, tokenize_s)


@dataclass
class _Corpus:
    """The tokenised corpus and what the run takes from it."""

    tokenizer: Any
    sentences: Any  # training.corpus.TokenizedCorpus
    cache_path: Path
    n_sentences: int
    steps_per_epoch: int
    total_steps: int
    tokenize_s: float


def _build_model(s: TrainSettings, backbone_dir: Path, device: torch.device):
    """The seeded backbone and head on ``device`` (train mode) and the trainable parameters."""
    seed_all(s.seed)
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
    model.to(device).train()
    head.to(device).train()
    params = [p for p in itertools.chain(model.parameters(), head.parameters()) if p.requires_grad]
    return model, head, head_name, params


def _load_model(backbone_dir: Path, dropout: float) -> nn.Module:
    """The backbone with ``dropout`` as hidden and attention dropout, set through its family's
    ``dropout_keys`` (:data:`contrastlab.families.TEXT_FAMILIES`; BERT's for a family not listed); its
    config keeps the original values (so the saved checkpoint's config is the backbone's)."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(backbone_dir)
    family = families.TEXT_FAMILIES.get(config.model_type)
    keys = family.dropout_keys if family else families.BERT_DROPOUT_KEYS
    if not all(hasattr(config, key) for key in keys):
        raise ValueError(
            f"backbone {config.model_type!r} has no {' / '.join(keys)}; cannot set the dropout (add its "
            "family, with its dropout_keys, to contrastlab.families.TEXT_FAMILIES)"
        )
    original = {key: getattr(config, key) for key in keys}
    model = AutoModel.from_pretrained(backbone_dir, **dict.fromkeys(keys, dropout))
    for key, value in original.items():  # modules were built with `dropout`; the config reverts
        setattr(model.config, key, value)
    return model


def _encoder(s: TrainSettings, model: nn.Module) -> nn.Module:
    """What encodes a batch: the padding-free wrapper (``padding_free``), the compiled model
    (``compile``) or the model itself."""
    if s.padding_free:
        return packed.PaddingFree(model)
    return capture.compiled(model, s.compile)


def _identity(
    s: TrainSettings, run: TrainingRun, data: _Corpus, backbone_dir, corpus_path, head_name, params
):
    """The run's snapshot fingerprint (settings, backbone, corpus) and the description its start record
    and summary carry."""
    identity = (_backbone_fingerprint(backbone_dir), data.sentences.key, data.n_sentences)
    fingerprint = loop.fingerprint(s, LATER_DEFAULTS, *identity)
    run_info = {
        **run.describe(),
        "dev_pooling": s.dev_pooling,
        "head": head_name,
        "n_sentences": data.n_sentences,
        "total_steps": data.total_steps,
        "trainable_params": sum(p.numel() for p in params),
        "corpus": {"path": str(corpus_path), "cache": str(data.cache_path), "cache_key": data.sentences.key},
        "backbone_dir": str(backbone_dir),
    }
    return fingerprint, run_info


def _backbone_fingerprint(backbone_dir: Path) -> str:
    files = sorted(p for p in backbone_dir.iterdir() if p.is_file())
    parts = [(backbone_dir / "config.json").read_text()] + [f"{p.name}:{p.stat().st_size}" for p in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _capture_step(
    s: TrainSettings, run: TrainingRun, parts: StepParts, start: int
) -> capture.CapturedStep | None:
    """The whole step as one CUDA graph, captured after any resume and warmed up on the run's next
    batch; None (named in one line) where it cannot be captured."""
    corpus = parts.corpus
    epoch, position = divmod(start, corpus.steps_per_epoch)
    rows = epoch_order(corpus.n_sentences, s.seed, epoch)[
        position * s.batch_size : (position + 1) * s.batch_size
    ]
    first = _batch(s, corpus, rows, run.device)
    options = dict(head_autocast=s.head_autocast, clip_norm=CLIP_NORM)
    return capture.capture_or_eager(
        lambda: capture.capture_sentence_step(run, train_step, parts.step, first, **options),
        run.note,
        compiled=s.compile,
    )


def _step(s: TrainSettings, run: TrainingRun, parts: StepParts, rows, step: int, graph=None):
    """Forward, backward and the optimiser step of one batch (the corpus rows ``rows``); ``graph``: the
    captured step (cuda_graph). Returns (loss output without stats, h1, h2, grad norm); no host sync
    (tests/training/test_capture.py)."""
    micro = min(s.grad_accum, s.batch_size)
    chunks = [_batch(s, parts.corpus, part, run.device, run.count) for part in np.array_split(rows, micro)]
    # Padded tokens actually run (dynamic padding): make gpu-check's FLOPs count these, not max_length.
    run.count(padded_tokens=sum(ids.numel() for ids, _ in chunks), sentences=len(rows))
    if graph is not None:
        return graph(*chunks[0])
    options = dict(autocast=run.autocast, head_autocast=s.head_autocast, clip_norm=CLIP_NORM)
    try:
        return capture.sentence_update(run, train_step, parts.step, chunks, **options)
    except torch.OutOfMemoryError as err:
        raise MemoryError(
            f"out of memory at step {step} on {run.describe()['device_name']} with batch_size "
            f"{s.batch_size} ({2 * math.ceil(s.batch_size / micro)} sequences of up to {s.max_length} "
            f"tokens per forward pass); lower batch_size or raise grad_accum (e.g. "
            f"grad_accum={2 * s.grad_accum}: the loss still sees the whole batch, the encoder runs in "
            "smaller micro-batches)"
        ) from err


def _batch(s: TrainSettings, data: _Corpus, rows, device: torch.device, count=None):
    """The corpus rows ``rows`` as padded ``(input_ids, attention_mask)`` on ``device``: as wide as their
    longest sentence, or ``max_length`` with ``static_shapes`` or ``cuda_graph``; the real tokens counted
    as ``count(real_tokens=...)`` when given. A ``padding_free`` step's mask stays on the host (its
    gather indices would cost a host sync per forward from a device mask)."""
    pad_id = data.tokenizer.pad_token_id
    ids, mask = data.sentences.batch(rows, pad_id)
    if count is not None:  # counted on the host copy: no device sync
        count(real_tokens=int(mask.sum()))
    if s.static_shapes or s.cuda_graph:
        ids, mask = capture.pad_to_width(ids, mask, s.max_length, pad_id)
    return to_device(ids, mask, device, host_mask=bool(s.padding_free))


def _finish(run: TrainingRun, track: _SentenceTrack, data: _Corpus, run_info, out_dir, log_path, keep_state):
    """Summary, end record, then :func:`~contrastlab.training.loop.finish`. Returns the summary."""
    s, select, total = track.s, track.select, data.total_steps
    if select.best_step is None:
        raise NonFiniteLossError(f"no dev evaluation gave a finite {s.dev_task} Spearman; nothing to save")
    run.wait_for_snapshot()  # the last snapshot on disk before the best checkpoint and the end's writes
    with run.pause("best_write_s"):
        select.write_pending()
    fields = {"best_dev_spearman": select.best, "best_step": select.best_step, "dev_task": s.dev_task}
    fields.update(steps=total, evals=select.evals, eval_seconds=select.seconds)

    def timings(t) -> dict:
        train_s = t["train_s"]
        return {
            "tokenize_s": data.tokenize_s,
            "steps_per_s": total / train_s if train_s else None,
            "sentences_per_s": total * s.batch_size / train_s if train_s else None,
        }

    summary = loop.summarise(run, track, fields, run_info, timings, ("best_dev_spearman", "best_step"))
    st.prune_best(run.state_dir, {select.best_step})
    loop.finish(
        run, track, summary, functools.partial(_export, run.state_dir, summary, out_dir, log_path), keep_state
    )
    return summary


def _export(state_dir: Path, summary: dict[str, Any], out_dir: Path, log_path: Path) -> None:
    """Copy the best checkpoint (+ train_summary.json) to ``out_dir`` (hard links where the file system
    allows) and the log to ``log_path``. The checkpoint is also a sentence-transformers model with the
    cell's evaluation pooling (:data:`~contrastlab.senteval.protocol.CELL_POOLING`), written here so no
    later job touches the output."""
    with atomic_dir(out_dir) as tmp:
        shutil.copytree(st.best_dir(state_dir, summary["best_step"]), tmp, copy_function=link_or_copy)
        (tmp / "train_summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
        write_sentence_transformers_files(tmp, CELL_POOLING)
    loop.copy_log(state_dir, log_path)

"""Contrastive pre-training of an image encoder (protocol.md §3; MACL App. B.3).

Each step of the shared loop (:mod:`.loop`) draws two SimCLR views of a batch on the device
(:class:`.augment.SimCLRAugment`) and trains encoder, head and loss on them (:mod:`.vision_step`). Adam
with MACL's rate rule (lr x batch/256 above 256), weight decay 1e-6, and a constant rate: App. B.3 names
no schedule (our reading, docs/deviations.md). ``auto`` precision is bf16 autocast of the encoder on
CUDA, channels-last there. Only full batches by default (``drop_last``). On CUDA the whole step is one
CUDA graph by default (:mod:`.vision_capture`); OAR's step stays eager.

The OAR study (OAR §4-5) adds a batch of labelled images from a fixed subset (``oar_fraction``,
:func:`~contrastlab.data.images.labelled_subset`) in a second forward pass (its own BatchNorm batch; the
two views share one of 2N, where the authors' code passes each view alone) and the anchor-regression
term (:func:`~contrastlab.losses.oar.oar_loss`) against fixed seeded anchors (saved as
``anchors.safetensors``); SGD with momentum, a cosine rate and no projection head (OAR's 512-d encoder
output) are settings.

Snapshots make a killed job resume to a bit-identical encoder and log on CPU (:mod:`.runtime`). The
encoder written (``encoder.safetensors`` with ``settings.json``) is the last epoch's (``keep: last``:
MACL names no selection) or, with ``keep: best_val_loss``, the epoch of the lowest validation loss on
a held-out ``val_fraction`` (the OAR authors' 80/20 split), recorded as ``kept_epoch``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file, save_file

from contrastlab.artifacts import hash_when_written
from contrastlab.data.images import IMAGE_STATS, load_images, validation_split
from contrastlab.families import vision_settings_refused
from contrastlab.losses import build_loss
from contrastlab.models.device import host_to_device
from contrastlab.models.export import write_torchvision_spec
from contrastlab.models.vision import ProjectionHead, build_encoder
from contrastlab.paths import atomic_dir, link_or_copy
from contrastlab.training import capture, loop
from contrastlab.training import vision_capture as vc
from contrastlab.training.augment import SimCLRAugment, two_views
from contrastlab.training.events import WandbRun
from contrastlab.training.runtime import (
    GeneratorState,
    TrainingRun,
    build_optimizer,
    epoch_order,
    seed_all,
)
from contrastlab.training.settings import Settings, check_against_schema
from contrastlab.training.vision_select import ValSelection
from contrastlab.training.vision_step import OarBatch, OarBatches, train_step

__all__ = [
    "ENCODER_FILE",
    "SETTINGS_FILE",
    "ANCHORS_FILE",
    "OarBatch",
    "VisionTrainSettings",
    "effective_lr",
    "scheduled_lr",
    "load_encoder",
    "load_weights",
    "train_vision",
    "two_views",
]

#: The encoder's weights in ``out_dir``.
ENCODER_FILE = "encoder.safetensors"
SETTINGS_FILE = "settings.json"
#: The OAR anchors [K, D] of an OAR run, beside the encoder (safetensors key ``anchors``).
ANCHORS_FILE = "anchors.safetensors"


#: The settings :class:`~contrastlab.training.augment.SimCLRAugment` takes under their own names.
_AUGMENT_FIELDS = "crop_scale crop_ratio jitter jitter_p gray_p flip_p blur_p blur_sigma blur_kernel".split()
#: Settings newer than the snapshot format, at their defaults (left out of the snapshot fingerprint);
#: ``cuda_graph`` None (decided by the device) counts as default at False, what every run had before it.
LATER_DEFAULTS = {
    "augment_calls": "two",
    "cudnn_benchmark": True,
    "compile": False,
    "cuda_graph": frozenset({None, False}),
}


@dataclass(frozen=True)
class VisionTrainSettings(Settings):
    """Everything that defines one vision cell; defaults are MACL App. B.3's CIFAR-10 setting."""

    TRACK: ClassVar[str] = "vision"  # families.step_mode's track
    WHAT: ClassVar[str] = "vision training"
    dataset: str = "cifar10"  # digits | cifar10 | cifar100
    loss: str = "ntxent"
    loss_hp: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 42
    arch: str = "resnet18"  # models.vision.ARCHS
    stem: str = "cifar"  # 3x3 stride-1 stem, no max-pool (App. B.3)
    width: int = 64  # channels of the first stage (64 = the standard ResNet)
    image_size: int | None = None  # None: the dataset's own (CIFAR 32 as App. B.3, digits 16)
    out_dim: int | None = None  # a final linear layer to this size (OAR §5.2: ResNet-50 -> 512)
    input_size: int | None = None  # the network's input side; None: the images' (OAR §5: 224)
    projection_head: bool = True  # False: the loss sees the encoder's output (OAR §5.1, "used for training")
    head_hidden: int = 512
    head_dim: int = 128  # protocol.md §3: 2-layer MLP head to 128-d
    epochs: int = 200  # App. B.3
    max_steps: int | None = None  # stop early (tests, presets)
    batch_size: int = 256  # App. B.3 / Table B.3 sweep 64-1024
    drop_last: bool = True  # only full batches (the last partial batch of an epoch is skipped)
    optimizer: str = "adam"  # App. B.3: Adam replaces SimCLR's LARS; sgd: OAR §5 (momentum below)
    momentum: float = 0.9  # SGD only (the OAR authors' OAR_model_SimCLR.py)
    lr: float = 1e-3  # App. B.3 base rate ...
    lr_reference_batch: int | None = 256  # ... x batch/256 for batches above 256; None: no scaling
    lr_schedule: str = "constant"  # constant (App. B.3) | cosine: annealed to 0 over `epochs`, per epoch
    weight_decay: float = 1e-6  # App. B.3
    # OAR (§4): the anchor-regression term on a fixed labelled subset; 0 switches it off.
    oar_fraction: float = 0.0  # fraction of the training split whose labels the term uses (OAR: 0.1)
    # The encoder kept: "last" (MACL) or "best_val_loss": the epoch with the lowest contrastive loss on a
    # held-out val_fraction of the training split (the OAR authors: random 20%, ModelCheckpoint on
    # val_loss); the rest is trained on.
    val_fraction: float = 0.0
    keep: str = "last"
    oar_weight: float = 1.0  # weight of the term (the authors add it with weight 1)
    oar_batch_size: int | None = None  # labelled images per step; None: batch_size (the authors' loader)
    precision: str = "auto"  # precision.CHOICES; auto: bf16 on CUDA (native bf16), fp32 on CPU
    head_autocast: bool = False  # the projection head inside bf16/fp16 autocast; else fp32
    channels_last: bool | None = None  # None: on CUDA only (faster convolutions with bf16)
    # The GPU step's speed switches (docs/gpu-defects.md); none changes a CPU run's numbers by default.
    # augment_calls "one" draws both views in one call of 2B images: half the launches, the same
    # distribution of views, other draws for a seed than "two" (each view its own call).
    augment_calls: str = "two"
    cudnn_benchmark: bool = True  # CUDA only: cuDNN times its convolution algorithms once per shape
    compile: bool = False  # torch.compile the encoder and the augmentation's pure half (off: unmeasured)
    # The whole step as one CUDA graph (training.vision_capture); None: decided by capture.for_device.
    cuda_graph: bool | None = None
    # SimCLR's CIFAR augmentations (Chen et al. 2020, App. A; the four types of App. B.3); OAR uses
    # crop_scale (0.8, 1.0) and jitter (0.2, 0.2, 0.2, 0.1) (protocol.md section 3).
    crop_scale: tuple[float, float] = (0.08, 1.0)  # area fraction of the random resized crop
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)  # its aspect-ratio range
    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1)  # brightness, contrast, sat., hue
    jitter_p: float = 0.8
    gray_p: float = 0.2
    flip_p: float = 0.5
    # Gaussian blur after the grayscale (off: MACL App. B.3 lists four augmentations without it). The OAR
    # authors' code blurs with lightly's SimCLRTransform defaults: p 0.5, sigma 0.1-2 (Pillow's radius).
    blur_p: float = 0.0
    blur_sigma: tuple[float, float] = (0.1, 2.0)
    blur_kernel: int | None = None  # None: 2 * ceil(3 * sigma_max) + 1 (13 taps for sigma <= 2)
    log_every: int = 50  # steps between log lines (and progress lines on stderr)
    state_every: int | None = 500  # steps between resumable snapshots (None: by time only)
    state_minutes: float | None = None  # minutes between snapshots as well (config.yaml: 10 on GPUs)
    tensorboard: bool = True  # TensorBoard events of the log's records (training.events); no number changes

    def __post_init__(self) -> None:
        for name in ("crop_scale", "crop_ratio", "jitter", "blur_sigma"):  # YAML and JSON give lists
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        # The schema states types, choices, bounds and lengths; the code what it cannot say.
        check_against_schema(self, "vision_training")
        for name in ("crop_scale", "crop_ratio", "blur_sigma"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name} must be (low, high) with low <= high, got {getattr(self, name)}")
        if self.blur_kernel is not None and self.blur_kernel % 2 == 0:
            raise ValueError(f"blur_kernel must be None or an odd integer >= 1, got {self.blur_kernel}")
        if refused := vision_settings_refused(self.to_dict()):  # the config's check asks the same
            raise ValueError(refused)
        if self.out_dim is not None and self.out_dim < 1:  # not a config key: set from the backbone
            raise ValueError(f"out_dim must be None or >= 1, got {self.out_dim}")
        if self.width < 1:  # not a config key: set from the backbone
            raise ValueError(f"width must be >= 1, got {self.width}")

    def augment(self, size: int, mean, std) -> SimCLRAugment:
        """The training augmentation these settings describe, for images of side ``size``."""
        return SimCLRAugment(
            size, mean=mean, std=std, **{name: getattr(self, name) for name in _AUGMENT_FIELDS}
        )


def effective_lr(settings: VisionTrainSettings) -> float:
    """MACL App. B.3: lr for batches up to the reference, lr x batch / reference above it.

    >>> effective_lr(VisionTrainSettings(batch_size=1024)), effective_lr(VisionTrainSettings(batch_size=64))
    (0.004, 0.001)
    """
    ref = settings.lr_reference_batch
    if ref is None or settings.batch_size <= ref:
        return settings.lr
    return settings.lr * settings.batch_size / ref


def scheduled_lr(settings: VisionTrainSettings, epoch: int) -> float:
    """The rate of ``epoch`` (0-based): :func:`effective_lr`, constant or cosine-annealed to 0 over
    ``settings.epochs`` epochs (``CosineAnnealingLR(T_max=epochs)`` stepped per epoch, the OAR authors'
    schedule).

    >>> s = VisionTrainSettings(lr=1.0, lr_schedule="cosine", epochs=4, lr_reference_batch=None)
    >>> [round(scheduled_lr(s, e), 4) for e in range(4)]
    [1.0, 0.8536, 0.5, 0.1464]
    """
    lr = effective_lr(settings)
    if settings.lr_schedule == "constant":
        return lr
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(epoch, settings.epochs) / settings.epochs))


def train_vision(
    settings: VisionTrainSettings,
    *,
    data_root: str | Path | None,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    device: str | None = None,
    download: bool = False,
    progress: bool = True,
    check_every: int | None = None,
    events_dir: str | Path | None = None,
    wandb_run: WandbRun | None = None,
    cell: Any = None,
    keep_state: bool = False,
) -> dict[str, Any]:
    """Train one vision cell; write the encoder to ``out_dir`` and the JSONL log to ``log_path``.

    ``data_root`` holds the CIFAR folders (unused for digits; ``download`` fetches them when absent).
    ``state_dir`` holds snapshots (a rerun resumes from them), deleted on success unless ``keep_state``;
    ``progress``: a progress bar and one JSON line per log step on stderr; ``check_every``, ``events_dir``,
    ``wandb_run`` and ``cell`` as :class:`~contrastlab.training.runtime.TrainingRun` takes them. Returns the
    summary also written to ``out_dir/settings.json``."""
    options = dict(device=device, check_every=check_every, progress=progress, events_dir=events_dir)
    run = TrainingRun.for_settings(settings, state_dir, **options, wandb_run=wandb_run, cell=cell)
    export = functools.partial(_export, run.state_dir, Path(out_dir), Path(log_path))
    benchmark_was = torch.backends.cudnn.benchmark
    try:
        data = load_images(
            settings.dataset, "train", root=data_root, download=download, image_size=settings.image_size
        )
        n_images, size = len(data.labels), data.images.shape[-1]
        trained = _trained_rows(settings, n_images, run.device)  # None: every image (no validation split)
        n_train = n_images if trained is None else len(trained)
        steps_per_epoch = _steps_per_epoch(settings, n_train)
        total = settings.max_steps if settings.max_steps is not None else steps_per_epoch * settings.epochs
        fingerprint = loop.fingerprint(settings, LATER_DEFAULTS, n_images, size)
        saved = run.load_snapshot(fingerprint)
        if saved is not None and saved.get("finished"):  # trained; its export lost or never accepted
            loop.export_outputs(run, export, keep_state)
            return saved["summary"]
        # the notes said once the run's log has begun
        s, notes = capture.for_device(settings, run.device, n_images=n_train)
        images = data.images.to(run.device)
        run.phases.mark("data_s")
        parts = build_parts(s, run, data, size)
        run.phases.mark("model_load_s")
        run_info = _describe(s, run, parts, n_train, size, steps_per_epoch, total)
        select = None if trained is None else ValSelection(s, run, images, parts)
        track = _VisionTrack(s, run, parts, images, trained, select, total, steps_per_epoch)
        track.fingerprint = fingerprint
        start = loop.begin(run, track, saved, run_info, notes)
        del saved
        loop.train_steps(run, track, start)
        run_info["cuda_graph"] = track.graph is not None
        return _finish(run, track, run_info, export, keep_state)
    finally:
        torch.backends.cudnn.benchmark = benchmark_was  # a process-wide switch: as it was


@dataclass(frozen=True)
class VisionParts:
    """What the image step needs, built once per run (:func:`build_parts`): ``forward_encoder`` is the
    step's (compiled, or ``encoder`` itself, whose weights are saved); ``views`` the augmentation's
    generator; ``oar`` OAR's labelled batches (None without OAR)."""

    encoder: torch.nn.Module
    forward_encoder: torch.nn.Module
    head: torch.nn.Module
    loss_fn: Any
    optimizer: torch.optim.Optimizer
    params: list
    augment: SimCLRAugment
    views: torch.Generator
    oar: OarBatches | None
    memory_format: torch.memory_format

    @property
    def step(self) -> tuple:
        """(forward encoder, head, loss_fn, optimizer, params): the parts one update takes
        (:func:`contrastlab.training.vision_capture.step_body`)."""
        return self.forward_encoder, self.head, self.loss_fn, self.optimizer, self.params

    def stateful(self) -> dict[str, Any]:
        """What a snapshot saves and a resume loads, by name (the views' generator among them)."""
        views = GeneratorState(self.views)
        return {"encoder": self.encoder, "head": self.head, "optimizer": self.optimizer, "views": views}


class _VisionTrack(loop.Track):
    """The image cell on the shared loop (:mod:`contrastlab.training.loop`): batches of images in the
    seed's order (the training rows only, with a validation split), the epoch's rate, and with ``keep:
    best_val_loss`` the validation after every epoch as its evaluation."""

    items = "images"

    def __init__(self, s, run: TrainingRun, parts: VisionParts, images, trained, select, total, per_epoch):
        self.s, self.run, self.parts, self.images, self.trained = s, run, parts, images, trained
        self.select, self.total, self.steps_per_epoch = select, total, per_epoch
        self.loss_fn, self.stateful = parts.loss_fn, parts.stateful()
        self.desc = f"{s.loss} {s.arch} bs{s.batch_size}"
        self.evaluations = [] if select is None else [loop.Evaluation(per_epoch, select)]
        self.n_train = len(images) if trained is None else len(trained)
        self.graph, self._lr = None, scheduled_lr(s, 0)

    def prepare(self, start: int) -> None:
        """The image step as one CUDA graph (``cuda_graph``), captured after any resume's loading; any batch
        of the run's shape warms it up (its effects are undone). Where the step cannot be captured (named
        in one line) the run takes the eager step and the settings say ``cuda_graph: false``, as the
        summary does."""
        if not self.s.cuda_graph:
            return
        s, parts = self.s, self.parts
        self.graph = capture.capture_or_eager(
            lambda: vc.capture_vision_step(
                self.run,
                train_step,
                parts.step,
                parts.augment,
                parts.views,
                self.images[: s.batch_size],
                calls=s.augment_calls,
                memory_format=parts.memory_format,
                head_autocast=s.head_autocast,
            ),
            self.run.note,
        )
        if self.graph is None:
            self.s = dataclasses.replace(s, cuda_graph=False)

    def epoch(self, epoch: int) -> torch.Tensor:
        order = host_to_device(epoch_order(self.n_train, self.s.seed, epoch), self.run.device)
        self._lr = scheduled_lr(self.s, epoch)
        vc.set_lr(self.parts.optimizer, self._lr)
        return order if self.trained is None else self.trained[order]

    def lr(self, logging: bool) -> float:
        return self._lr

    def step(self, step: int, rows, logging: bool) -> loop.StepOutput:
        """One step on the batch of ``rows``: the captured one (``graph``; the loss's stats computed after
        it at log steps) or the eager one, OAR's labelled term included."""
        s, run, parts, batch, oar = self.s, self.run, self.parts, self.images[rows], None
        if self.graph is not None:
            out, h1, h2, grad_norm = self.graph(batch)
            out = vc.with_stats(parts.loss_fn, out, h1, h2) if logging else out
        else:
            with run.step_context():  # OAR's blur (a convolution) too: the step's precision, every step
                oar_batch = (
                    parts.oar.batch(step, self.images, parts.augment, parts.views) if parts.oar else None
                )
                out, h1, h2, oar = train_step(
                    parts.forward_encoder,
                    parts.head,
                    parts.loss_fn,
                    *two_views(parts.augment, batch, parts.views, s.augment_calls),
                    autocast=run.autocast,
                    memory_format=parts.memory_format,
                    with_stats=logging,
                    oar=oar_batch,
                    scale=run.scale,
                    head_autocast=s.head_autocast,
                )
                # No clipping (App. B.3); at log steps an infinite bound measures the norm (grads x 1.0).
                clip = math.inf if logging else None
                grad_norm = run.optimizer_step(parts.optimizer, parts.params, clip_norm=clip)
        loss = out.loss.detach() if oar is None else (out.loss + s.oar_weight * oar).detach()
        return loop.StepOutput(out, h1, h2, loss, grad_norm, len(batch), oar)

    def stats(self, result: loop.StepOutput) -> dict:
        # OAR's mean cosine to the anchors is 1 - the term (OAR §4); with a non-negative encoder output
        # it cannot pass ~0.71 on average (losses.oar.nonnegative_reach).
        oar = result.extra
        return dict(result.out.stats) | (
            {"oar": (v := oar.item()), "anchor_cos": 1.0 - v} if oar is not None else {}
        )

    def logged(self, record) -> None:
        brief = {k: record[k] for k in ("step", "epoch", "loss")}
        self.run.write(json.dumps(brief | {"images_per_s": round(record["images_per_s"], 1)}))
        self.run.set_postfix(loss=f"{record['loss']:.4f}")

    def snapshot(self) -> dict:
        return {"extra": self.select.state() if self.select else {}}

    def restore(self, saved) -> None:
        if self.select is not None:
            self.select.restore(saved)


def _trained_rows(s: VisionTrainSettings, n_images: int, device: torch.device) -> torch.Tensor | None:
    """The training images when a validation split is held out (all but :func:`validation_split`)."""
    if s.val_fraction == 0:
        return None
    keep = torch.ones(n_images, dtype=torch.bool)
    keep[validation_split(n_images, s.val_fraction, s.seed)] = False
    return torch.nonzero(keep).flatten().to(device)


def _steps_per_epoch(s: VisionTrainSettings, n_images: int) -> int:
    if s.drop_last:  # every step sees a full batch of negatives
        steps = n_images // s.batch_size
    else:
        steps = -(-n_images // s.batch_size)
        if n_images % s.batch_size == 1:
            raise ValueError(
                f"drop_last=False with {n_images} images and batch {s.batch_size} leaves a last batch of "
                "one image (no negatives); change batch_size or set drop_last"
            )
    if steps == 0:
        raise ValueError(
            f"{s.dataset} has {n_images} training images, fewer than one batch of {s.batch_size}"
        )
    return steps


def build_parts(s: VisionTrainSettings, run: TrainingRun, data, size: int) -> VisionParts:
    """The run's :class:`VisionParts`, in the order that fixes its random draws: the augmentation, the
    seeded encoder and head, the optimiser, the loss, OAR's anchors, the views' generator. On CUDA,
    channels-last by default and cuDNN's autotuner as ``cudnn_benchmark`` says (off under deterministic
    algorithms)."""
    dev = run.device
    use_channels_last = dev.type == "cuda" if s.channels_last is None else s.channels_last
    memory_format = torch.channels_last if use_channels_last else torch.contiguous_format
    augment = s.augment(s.input_size or size, *IMAGE_STATS[s.dataset])
    encoder, head, loss_dim = _build(s, dev, memory_format)
    forward_encoder = encoder  # the step's encoder; compiled, its state dict stays the plain module's
    if s.compile:
        forward_encoder = torch.compile(encoder)
        augment.apply = torch.compile(augment.apply)  # the pure half; the draws stay eager
    if dev.type == "cuda":  # static shapes (drop_last): cuDNN times its algorithms once per shape
        torch.backends.cudnn.benchmark = capture.cudnn_benchmark(s.cudnn_benchmark)  # deterministic: off
    params = [*encoder.parameters(), *head.parameters()]
    hp = {"momentum": s.momentum} if s.optimizer == "sgd" else {}
    optimizer = build_optimizer(
        s.optimizer, params, dev, lr=scheduled_lr(s, 0), weight_decay=s.weight_decay, **hp
    )
    loss_fn = build_loss(s.loss, **s.loss_hp)
    oar = OarBatches(s, data, loss_dim, dev) if s.oar_fraction > 0 else None
    views = torch.Generator(device=dev).manual_seed(s.seed)  # the augmentations' draws
    return VisionParts(
        encoder, forward_encoder, head, loss_fn, optimizer, params, augment, views, oar, memory_format
    )


def _build(s: VisionTrainSettings, device: torch.device, channels_last) -> tuple:
    """The seeded encoder and head on ``device`` (train mode) and the dimension the loss sees."""
    seed_all(s.seed)
    encoder = build_encoder(s.arch, stem=s.stem, width=s.width, out_dim=s.out_dim)
    if s.projection_head:
        head: torch.nn.Module = ProjectionHead(encoder.feature_dim, s.head_hidden, s.head_dim)
    else:
        head = torch.nn.Identity()
    loss_dim = s.head_dim if s.projection_head else encoder.feature_dim
    encoder.to(device, memory_format=channels_last).train()
    head.to(device).train()
    return encoder, head, loss_dim


def _describe(s, run, parts: VisionParts, n_images, size, steps_per_epoch, total) -> dict:
    """What the run's start record and summary say about it."""
    encoder, params, oar = parts.encoder, parts.params, parts.oar
    return {
        **run.describe(),
        "channels_last": parts.memory_format == torch.channels_last,
        "cuda_graph": s.cuda_graph,  # as decided; at the end, whether the step was captured
        "n_images": n_images,
        "image_size": size,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total,
        "effective_lr": effective_lr(s),
        "input_size": s.input_size or size,
        "feature_dim": encoder.feature_dim,
        "loss_dim": s.head_dim if s.projection_head else encoder.feature_dim,
        "oar_labelled": len(oar.labelled) if oar else 0,
        "trainable_params": sum(p.numel() for p in params),
    }


#: The finished encoder folder inside a cell's state folder, kept until Snakemake accepts the outputs.
EXPORT_DIR = "encoder"


def _finish(run: TrainingRun, track: _VisionTrack, run_info: dict, export, keep_state: bool) -> dict:
    """The summary (``settings.json`` beside the encoder, and the log's end record) and the kept encoder
    written into the state folder, then :func:`~contrastlab.training.loop.finish` (``export``)."""
    s, select, parts = track.s, track.select, track.parts
    if select is not None:
        select.load_kept()  # the encoder of the epoch with the lowest validation loss
    fields = {"steps": track.total, "epochs": track.total / track.steps_per_epoch, "keep": s.keep}
    fields.update(select.summary() if select else {})

    def timings(t) -> dict:
        return {"images_per_s": t.get("timed_items", 0) / t["train_s"] if t["train_s"] else None}

    run.wait_for_snapshot()  # a snapshot still being written must not replace the finished one
    summary = loop.summarise(run, track, fields, run_info, timings)
    kept_head = None if select else parts.head  # the kept epoch's encoder is restored without its head
    anchors = parts.oar.anchors if parts.oar else None
    _write_encoder(run.state_dir / EXPORT_DIR, parts.encoder, summary, anchors, kept_head)
    loop.finish(run, track, summary, export, keep_state)
    return summary


def _export(state_dir: Path, out_dir: Path, log_path: Path) -> None:
    """The finished encoder folder of ``state_dir`` copied to ``out_dir`` (hard links where the file
    system allows) and the log to ``log_path``."""
    with atomic_dir(out_dir) as tmp:
        shutil.copytree(state_dir / EXPORT_DIR, tmp, copy_function=link_or_copy)
    loop.copy_log(state_dir, log_path)


def _write_encoder(
    out_dir: Path,
    encoder: torch.nn.Module,
    summary: dict[str, Any],
    anchors: torch.Tensor | None = None,
    head: torch.nn.Module | None = None,
) -> None:
    """The encoder folder: weights, anchors, ``settings.json``, and what a plain torchvision ResNet needs
    to load them (``torchvision.json``, the projection head; ``models.export.write_torchvision_spec``)."""
    with atomic_dir(out_dir) as tmp:
        tmp.mkdir()
        weights = {k: v.detach().cpu().contiguous() for k, v in encoder.state_dict().items()}
        save_file(weights, str(tmp / ENCODER_FILE))
        hash_when_written(tmp / ENCODER_FILE)  # for the job's record, while the rest is written
        if anchors is not None:
            save_file({"anchors": anchors.detach().cpu().contiguous()}, str(tmp / ANCHORS_FILE))
        (tmp / SETTINGS_FILE).write_text(json.dumps(summary, indent=1, default=float) + "\n")
        s = summary["settings"]
        write_torchvision_spec(
            tmp,
            arch=s["arch"],
            stem=s["stem"],
            width=s["width"],
            out_dim=s.get("out_dim"),
            weights=ENCODER_FILE,
            head=head,
            anchors=ANCHORS_FILE if anchors is not None else None,
        )


def load_encoder(
    out_dir: str | Path, device: str | torch.device = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The trained encoder of ``out_dir`` (eval mode) and its ``settings.json`` summary."""
    out_dir = Path(out_dir)
    summary = json.loads((out_dir / SETTINGS_FILE).read_text())
    s = summary["settings"]
    encoder = build_encoder(s["arch"], stem=s["stem"], width=s["width"], out_dim=s.get("out_dim"))
    encoder.load_state_dict(load_weights(out_dir))
    return encoder.to(device).eval(), summary


def load_weights(out_dir: str | Path) -> dict[str, torch.Tensor]:
    """The encoder state dict saved in ``out_dir`` (``encoder.safetensors``), on the CPU."""
    path = Path(out_dir) / ENCODER_FILE
    if not path.exists():
        raise FileNotFoundError(f"{out_dir}: no encoder weights ({ENCODER_FILE})")
    return load_file(path)

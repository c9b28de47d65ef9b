"""What a cell computes: FLOPs of its training steps, dev evaluations and SentEval encoding, its host
launches and its peak GPU memory, from the config alone (no model is built; Hugging Face configs are read
where present). The model, step by step, and its measured checks: docs/cost.md ("The FLOPs model").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.cost import cards
from contrastlab.cost.backbones import KNOWN_ARCHITECTURES as KNOWN_ARCHITECTURES  # benchmarks/ read it here
from contrastlab.cost.backbones import Transformer, backbone_transformer
from contrastlab.cost.tokens import profile_real_tokens
from contrastlab.data.download import line_count
from contrastlab.families import RESNETS, step_mode
from contrastlab.precision import ACTIVATION_BYTES, ON_CUDA

#: The plan's precision choice "as each cell is configured".
AS_CONFIGURED = "config"

#: Sentences of SimCSE's wiki1m_for_simcse.txt (protocol.md §2).
WIKI1M_SENTENCES = 1_000_000

#: Kernels a padding-free step launches beyond the padded one (forward + backward, counted with a
#: ``TorchDispatchMode``): per layer the re-padding around attention, per step the packing and [CLS] rows.
PADDING_FREE_LAUNCHES_PER_LAYER = 19
PADDING_FREE_LAUNCHES_PER_STEP = 14

#: STS-B dev (protocol.md §4): unique sentences and their tokens with [CLS]/[SEP] (bert-base-uncased's
#: WordPiece on the published files; RoBERTa's BPE gives a few percent more).
STSB_DEV_SENTENCES = 2_909

STSB_DEV_TOKENS = 47_750

#: Tokens of the unique sentences SentEval encodes per task (test mode, not truncated; counted as
#: above); the union over the 14 tasks, shared sentences once, is :data:`SENTEVAL_ALL_TOKENS`.
SENTEVAL_TOKENS = {
    "STS12": 80_670,  # 4_946 sentences
    "STS13": 33_998,  # 2_638 sentences
    "STS14": 87_420,  # 6_351 sentences
    "STS15": 74_857,  # 5_170 sentences
    "STS16": 29_555,  # 1_867 sentences
    "STSBenchmark": 36_681,  # 2_551 sentences
    "SICKRelatedness": 61_295,  # 5_007 sentences
    "MR": 294_551,  # 10_662 sentences
    "CR": 89_854,  # 3_766 sentences
    "SUBJ": 301_930,  # 10_000 sentences
    "MPQA": 49_420,  # 8_241 sentences
    "SST2": 962_786,  # 69_669 sentences
    "TREC": 75_043,  # 5_870 sentences
    "MRPC": 296_026,  # 10_944 sentences
}

SENTEVAL_ALL_TOKENS = 2_153_517

#: Images per split (CIFAR: torchvision's; digits: the 80/20 split of scikit-learn's 1,797).
DATASET_IMAGES = {"cifar10": (50_000, 10_000), "cifar100": (50_000, 10_000), "digits": (1_437, 360)}

NATIVE_SIZE = {"digits": 16, "cifar10": 32, "cifar100": 32}

#: Host-launched kernels (non-view ATen ops; tests/cost/test_plan.py recounts the first three) of an
#: eager image step: one ``SimCLRAugment`` call without blur (whatever the batch), what its blur adds,
#: an encoder's forward + backward and forward alone, and the rest of a MACL step (head, loss, Adam).
AUGMENT_LAUNCHES = 296
BLUR_LAUNCHES = 15
ENCODER_LAUNCHES = {arch: (resnet.launches, resnet.forward_launches) for arch, resnet in RESNETS.items()}
STEP_LAUNCHES = 69
#: A validation batch's launches beyond its augmentation and forward (head, loss, the loss's copy to the
#: host): an estimate, a third of :data:`STEP_LAUNCHES`' head, loss and optimiser.
VALIDATION_LAUNCHES = 23
#: Host-launched kernels of an eager BERT-base training step (12 layers) per precision on CUDA
#: (docs/gpu-speed.md §1.1); other depths scale with their layers.
SENTENCE_STEP_LAUNCHES = {"fp32": 940, "tf32": 940, "bf16": 1460, "fp16": 1470}

#: Image inputs from this side up (OAR's 224 px) are priced at a calibration's ``vision_large`` rates
#: with its augmentation overhead; smaller ones at the ``vision`` rates (docs/cost.md).
LARGE_IMAGE_PX = 128

#: CUDA context, cuBLAS/cuDNN workspaces and allocator slack (an assumption).
FIXED_GPU_GIB = 1.0

GIB = 2**30


# ---------------------------------------------------------------------------------------------- models
def training_step_flops(non_embedding: int, sentences: int, length: int) -> float:
    """``6 · N · tokens`` (Kaplan et al. 2020; N the non-embedding parameters) of one training step over
    ``sentences`` sentences seen twice at ``length`` tokens: the one FLOP model of the plan, ``make
    gpu-check`` and the benchmarks."""
    return 6.0 * non_embedding * sentences * 2 * length


def attention_score_flops(layers: int, hidden: int, sequences: int, width: int) -> int:
    """``12 · layers · sequences · width² · hidden``: attention's two batched products (Q·Kᵀ and the
    probabilities · V, each ``width² · hidden`` multiply-adds per sequence and layer) forward and
    backward, at the padded width whether or not the linear layers are.

    >>> attention_score_flops(12, 768, 1, 32)  # BERT-base, one sequence of 32
    113246208
    """
    return 12 * layers * sequences * width * width * hidden


def sentence_step_flops(model: Transformer, sentences: int, width: int, real: float) -> float:
    """The full FLOPs of one training step over ``sentences`` sentences seen twice, padded to ``width``
    tokens with ``real`` real ones a row: the linear layers at ``real``, attention's products at ``width``."""
    attention = attention_score_flops(model.layers, model.hidden, 2 * sentences, width)
    return training_step_flops(model.non_embedding, sentences, real) + attention


def padding_free_fraction(model: Transformer, width: int, real: float) -> float:
    """The padding-free step's FLOPs over the padded step's (:func:`sentence_step_flops`), rows of
    ``width`` tokens with ``real`` real ones: the plan's factor. BERT-base at wiki1m's 21.9 of 32: 0.690."""
    return sentence_step_flops(model, 1, width, real) / sentence_step_flops(model, 1, width, width)


def padding_free_for(settings: Mapping[str, Any], model_type: str, native_bf16: bool = True) -> bool:
    """Whether a sentence cell trains padding-free on the plan's GPU (:func:`sentence_mode`)."""
    return sentence_mode(settings, model_type, native_bf16).padding_free


def sentence_mode(settings: Mapping[str, Any], model_type: str, native_bf16: bool = True):
    """The step mode (the trainer's :func:`contrastlab.families.step_mode`) of a sentence cell with these
    resolved ``settings`` and a ``model_type`` backbone on the plan's CUDA GPU, at its precision there."""
    precision = _resolved(settings.get("precision"), native_bf16)
    return step_mode(
        settings, track="sentence", device_type="cuda", precision=precision, model_type=model_type
    )


@dataclass(frozen=True)
class VisionForward:
    """An image encoder's (and head's) forward multiply-adds per image, parameters, and the elements
    backward keeps per image (conv and BatchNorm outputs)."""

    macs: int
    params: int
    saved_elements: int


#: Blocks per stage and the block's output expansion (torchvision's BasicBlock and Bottleneck), of each
#: :data:`contrastlab.families.RESNETS`.
RESNET_LAYERS = {arch: (resnet.layers, resnet.expansion) for arch, resnet in RESNETS.items()}


@functools.cache
def vision_forward(
    arch: str, stem: str, width: int, out_dim: int | None, input_size: int, head: tuple[int, int] | None
) -> VisionForward:
    """The forward pass of :func:`contrastlab.models.vision.build_encoder` (and, with ``head`` = (hidden,
    out), the projection head), counted layer by layer without torch as torchvision builds the blocks;
    a test checks the counts against hooks on the real module.

    >>> vision_forward("resnet18", "imagenet", 64, None, 224, None).macs  # torchvision: 1.81G with its fc
    1813561344
    """
    if arch not in RESNET_LAYERS:
        raise ValueError(f"unknown encoder {arch!r}; valid: {', '.join(RESNET_LAYERS)}")
    totals = {"macs": 0, "params": 0, "saved": 0}

    def conv(c_in: int, c_out: int, kernel: int, stride: int, size: int) -> int:
        out = (size + 2 * (kernel // 2) - kernel) // stride + 1
        totals["macs"] += out * out * c_out * c_in * kernel * kernel
        totals["params"] += c_in * c_out * kernel * kernel
        totals["params"] += 2 * c_out  # the BatchNorm after every convolution
        totals["saved"] += 2 * out * out * c_out  # the conv output and the BatchNorm output
        return out

    if stem == "cifar":
        size = conv(3, width, 3, 1, input_size)
    else:
        size = conv(3, width, 7, 2, input_size)
        size = (size + 2 - 3) // 2 + 1  # max-pool 3x3, stride 2, padding 1
    layers, expansion = RESNET_LAYERS[arch]
    inplanes = width
    for index, blocks in enumerate(layers):
        planes = width * 2**index
        for block in range(blocks):
            stride = 2 if index > 0 and block == 0 else 1
            if block == 0 and (stride != 1 or inplanes != planes * expansion):
                conv(inplanes, planes * expansion, 1, stride, size)  # the downsample branch
            if expansion == 1:
                inner = conv(inplanes, planes, 3, stride, size)
                inner = conv(planes, planes, 3, 1, inner)
            else:
                inner = conv(inplanes, planes, 1, 1, size)
                inner = conv(planes, planes, 3, stride, inner)
                inner = conv(planes, planes * expansion, 1, 1, inner)
            size, inplanes = inner, planes * expansion
    features = inplanes
    if out_dim is not None:
        totals["macs"] += features * out_dim
        totals["params"] += features * out_dim + out_dim
        features = out_dim
    if head is not None:  # Linear (no bias) -> BatchNorm1d -> ReLU -> Linear
        hidden, out = head
        totals["macs"] += features * hidden + hidden * out
        totals["params"] += features * hidden + 2 * hidden + hidden * out + out
    return VisionForward(totals["macs"], totals["params"], totals["saved"])


# ------------------------------------------------------------------------------------------- the work
@dataclass(frozen=True)
class CellWork:
    """What one cell computes, independent of the GPU: FLOPs of its training (per step and in all), dev
    evaluations, analysis probes and evaluation; counts of steps, dev evaluations and snapshots; the
    snapshot size; the probes' optimiser steps (vision)."""

    track: str
    precision: str
    steps: int
    step_flops: float
    train_flops: float
    dev_evaluations: int
    dev_flops: float
    analysis_flops: float
    snapshots: int
    snapshot_gib: float
    eval_flops: float
    eval_probe_steps: int
    peak_gib: float
    kind: str
    #: Kernels the host launches per training step, and in all the dev evaluations or validation passes:
    #: an eager step takes at least ``step_launches`` x the calibration's ``<track>_launch`` seconds.
    step_launches: int = 0
    dev_launches: int = 0
    #: The calibration's rates and per-step overhead this cell is priced at (``sentence``, ``vision``,
    #: ``vision_large``: :data:`LARGE_IMAGE_PX`); empty: its track's.
    rates: str = ""
    #: The step runs as one CUDA graph: no host launches per step (the step takes its GPU time).
    graphed: bool = False
    #: Encoder calls of all its dev evaluations (each ``dev_call`` seconds of the calibration).
    dev_calls: int = 0
    #: Images a training step augments (both views; OAR's labelled pass too), which the FLOPs leave out.
    step_images: int = 0
    #: A padding-free sentence step: ``step_flops`` is ``padded_step_flops`` × :func:`padding_free_fraction`;
    #: ``gather_elements`` (sequences × padded width × hidden × layers) prices the re-padding around
    #: attention; ``token_profile``: the corpus's (``wiki1m``; "" where not known).
    padding_free: bool = False
    padded_step_flops: float = 0.0
    gather_elements: float = 0.0
    token_profile: str = ""
    #: The training batch (an image cell's: its packing figures are measured per batch, cost.packing).
    batch: int = 0

    @property
    def rate_class(self) -> str:
        return self.rates or self.track


def _snapshots(steps: int, settings: Mapping[str, Any], default_every: int) -> int:
    """Snapshots a cell writes by its step rule; time-based ones (``state_minutes``) are not counted: a
    BERT-base snapshot every 10 minutes costs well under 1% of the cell."""
    every = settings.get("state_every", default_every)
    return max(0, (steps - 1) // int(every)) if every else 0


def _total_steps(s: Mapping[str, Any], steps_per_epoch: int, default_epochs: int = 1) -> int:
    """The steps a trainer runs: ``max_steps`` when set, else ``epochs`` epochs."""
    if s.get("max_steps") is not None:
        return int(s["max_steps"])
    return steps_per_epoch * int(s.get("epochs", default_epochs))


def schedule_points(steps: int, every: int | None) -> int:
    """Step 0, every ``every``-th step and the last (the trainer's evaluation and analysis points)."""
    if not every:
        return 0
    return 1 + steps // every + (1 if steps % every else 0)


def _resolved(precision: str | None, native_bf16: bool = True) -> str:
    """The cell's precision on the plan's CUDA GPU by the runtime's rule (``ON_CUDA``: ``auto`` is bf16
    on a card with native bf16, else fp32)."""
    return ON_CUDA[native_bf16][precision or "auto"]


def _corpus_sentences(grid: cl_config.Grid) -> int:
    """Training sentences: the fixture's count, the lines of a user's ``data.wiki_path``, else wiki1m's."""
    data = grid.data
    if data.get("fixture"):
        return int(data.get("fixture_corpus_sentences", 2000))
    corpus = Path(data.get("wiki_path") or "")
    if data.get("wiki_path") and corpus.is_file():
        return _line_count(str(corpus.resolve()), corpus.stat().st_mtime_ns)
    return WIKI1M_SENTENCES


@functools.cache
def _line_count(path: str, mtime_ns: int) -> int:
    return line_count(path)


def senteval_tokens(grid: cl_config.Grid) -> float:
    """The tokens one SentEval evaluation encodes: the configured tasks' share of all of them."""
    tasks = grid.options.evaluation.get("tasks") or list(SENTEVAL_TOKENS)
    share = sum(SENTEVAL_TOKENS[t] for t in tasks) / sum(SENTEVAL_TOKENS.values())
    return SENTEVAL_ALL_TOKENS * share


def _settings(
    grid: cl_config.Grid, cell: cl_config.Cell, precision: str, point: cl_search.SearchPoint | None
) -> Mapping[str, Any]:
    """The cell's resolved settings under a precision choice, applied through ``precision_override`` (so
    that it reaches exactly the cells the switch reaches), then a search point's grid values (the order
    point_settings would apply them in; a later stage is priced without its winner, not known yet)."""
    settings = grid.settings(point if point is not None else cell)
    if precision != AS_CONFIGURED:
        settings = cl_config.override_precision(dict(settings), precision)
    return cl_config.apply_overrides(settings, point.grid) if point is not None else settings


def cell_work(
    grid: cl_config.Grid,
    cell: cl_config.Cell,
    precision: str = AS_CONFIGURED,
    point: cl_search.SearchPoint | None = None,
    *,
    model: Transformer | None = None,
    bf16: bool | None = None,
) -> CellWork:
    """The :class:`CellWork` of ``cell`` (or of the search ``point``) under a precision choice (``config``
    or one of :data:`~contrastlab.precision.RESOLVED`). ``model`` (a sentence cell's backbone) and
    ``bf16`` (the card's native bf16) are resolved here unless given (``plan.Priced`` resolves them once)."""
    s = _settings(grid, cell, precision, point)
    bf16 = cards.native_bf16(grid.compute.get("gpu_model")) if bf16 is None else bf16
    if grid.experiment(cell.experiment).track == "vision":
        return _vision_work(grid, cell, s, bf16)
    return _sentence_work(grid, cell, s, model or backbone_transformer(grid, cell.backbone), bf16)


def _sentence_work(
    grid: cl_config.Grid, cell: cl_config.Cell, s: Mapping[str, Any], model: Transformer, bf16: bool
) -> CellWork:
    n = model.non_embedding
    length = int(s.get("max_length", 32))
    sentences = _corpus_sentences(grid)
    analysis_every = s.get("analysis_every")
    probe = int(s.get("analysis_sentences", 1280))
    # the trainer's order: the probe held out of the corpus first, then the cap on what is left
    if analysis_every and s.get("analysis_holdout"):
        sentences -= probe
    if s.get("max_sentences"):
        sentences = min(sentences, int(s["max_sentences"]))
    batch = int(s.get("batch_size", 64))
    steps = _total_steps(s, sentences // batch)
    padded_step_flops = training_step_flops(n, batch, length)
    mode = sentence_mode(s, model.model_type, bf16)
    padding_free = mode.padding_free
    # wiki1m's token profile (a data.wiki_path's too); the fixture is not profiled: its rows priced full
    profile = "" if grid.data.get("fixture") else "wiki1m"
    real = profile_real_tokens(length) if profile else float(length)
    # The padded step's FLOPs at the ratio of the full counts: the calibrated rate is a padded step's
    # 6·N·T over its time, attention's share of that time included.
    fraction = padding_free_fraction(model, length, real) if padding_free else 1.0
    step_flops = padded_step_flops * fraction
    dev_points = schedule_points(steps, int(s.get("eval_every", 125)))
    dev_probe = min(probe, STSB_DEV_SENTENCES) * STSB_DEV_TOKENS / STSB_DEV_SENTENCES
    analysis_flops = schedule_points(steps, analysis_every) * 2.0 * n * 2 * (probe * length + dev_probe)
    precision = _resolved(s.get("precision"), bf16)
    # Korthikanti et al. 2022, Eq. 2: s·b·h·(34 + 5·a·s/h) bytes per layer with 16-bit activations.
    sequences = 2 * batch / int(s.get("grad_accum", 1))
    per_layer = length * sequences * model.hidden * (34 + 5 * model.heads * length / model.hidden)
    activations = model.layers * per_layer * (ACTIVATION_BYTES[precision] // 2)  # Eq. 2 counts 2 bytes
    launches = SENTENCE_STEP_LAUNCHES[precision] * model.layers / 12
    if padding_free:
        launches += PADDING_FREE_LAUNCHES_PER_LAYER * model.layers + PADDING_FREE_LAUNCHES_PER_STEP
    return CellWork(
        track="sentence",
        precision=precision,
        steps=steps,
        step_flops=step_flops,
        train_flops=steps * step_flops,
        dev_evaluations=dev_points,
        dev_flops=dev_points * 2.0 * n * STSB_DEV_TOKENS,
        analysis_flops=analysis_flops,
        snapshots=_snapshots(steps, s, 250),
        snapshot_gib=12 * model.total / GIB,  # fp32 weights and the two Adam moments
        eval_flops=2.0 * n * senteval_tokens(grid),
        eval_probe_steps=0,
        peak_gib=(16 * model.total + activations) / GIB + FIXED_GPU_GIB,
        kind=f"{cell.backbone} batch {batch} {precision}{' padding-free' if padding_free else ''}",
        step_launches=round(launches),
        rates="sentence",
        graphed=mode.graph,
        dev_calls=dev_points * -(-STSB_DEV_SENTENCES // int(mode.dev_batch)),
        padding_free=padding_free,
        padded_step_flops=padded_step_flops,
        gather_elements=2 * batch * length * model.hidden * model.layers if padding_free else 0.0,
        token_profile=profile,
    )


def _probe_steps(evaluation: Mapping[str, Any], n_images: int) -> int:
    """The optimiser steps of an image cell's probes (linear over all ``n_images``, FFN over each label
    fraction) by its experiment's image ``evaluation``."""
    probes = evaluation.get("probes") or ["linear", "knn"]
    steps = 0
    if "linear" in probes:
        linear = evaluation.get("linear") or {}
        steps += int(linear.get("epochs", 100)) * -(-n_images // int(linear.get("batch_size", 128)))
    if "ffn" in probes:
        ffn = evaluation.get("ffn") or {}
        batch = int(ffn.get("batch_size", 32))
        fractions = ffn.get("label_fractions", [0.1, 0.5, 1.0])
        steps += int(ffn.get("epochs", 100)) * sum(-(-int(f * n_images) // batch) for f in fractions)
    return steps


def vision_mode(settings: Mapping[str, Any], n_train: int, native_bf16: bool = True):
    """The step mode (as :func:`sentence_mode`) of an image cell training on ``n_train`` images."""
    precision = _resolved(settings.get("precision"), native_bf16)
    return step_mode(settings, track="vision", device_type="cuda", precision=precision, n_images=n_train)


def _vision_work(grid: cl_config.Grid, cell: cl_config.Cell, s: Mapping[str, Any], bf16: bool) -> CellWork:
    dataset = s["dataset"]
    n_images, n_test = DATASET_IMAGES[dataset]
    # The trainer holds out int(val_fraction x images) for the per-epoch validation
    # (data.images.validation_split) and trains on the rest: OAR's 20% leaves 40,000 of CIFAR's 50,000.
    n_val = int(float(s.get("val_fraction") or 0) * n_images)
    n_train = n_images - n_val
    size = int(s.get("input_size") or s.get("image_size") or NATIVE_SIZE[dataset])
    projection = s.get("projection_head", True)
    head = (int(s.get("head_hidden", 512)), int(s.get("head_dim", 128))) if projection else None
    fwd = vision_forward(s["arch"], s["stem"], int(s["width"]), s.get("out_dim"), size, head)
    batch = int(s.get("batch_size", 256))
    steps_per_epoch = n_train // batch if s.get("drop_last", True) else -(-n_train // batch)
    steps = _total_steps(s, steps_per_epoch, default_epochs=200)
    oar = bool(s.get("oar_fraction"))
    # the labelled subset is drawn from all the images (data.images.labelled_subset)
    labelled = min(int(s.get("oar_batch_size") or batch), int(s["oar_fraction"] * n_images)) if oar else 0
    images = 2 * batch + 2 * labelled
    passes = 2 if oar else 1
    step_flops = 3 * 2.0 * fwd.macs * images
    precision = _resolved(s.get("precision"), bf16)
    # Launches: the augmentation calls (two per pass, one with augment_calls: one), the encoder's
    # forward and backward per pass, the head, loss and optimiser once.
    per_call = AUGMENT_LAUNCHES + (BLUR_LAUNCHES if float(s.get("blur_p") or 0) > 0 else 0)
    calls = 1 if s.get("augment_calls") == "one" else 2
    encoder_launches, forward_launches = ENCODER_LAUNCHES[s["arch"]]
    step_launches = passes * (calls * per_call + encoder_launches) + STEP_LAUNCHES
    # The per-epoch validation (keep: best_val_loss): two views of each held-out image, forward only in
    # IEEE fp32, in batches of batch_size (a last batch of one image is skipped), after every epoch.
    validations = (-(-steps // steps_per_epoch)) if n_val else 0
    val_images = n_val - (1 if n_val % batch == 1 else 0)
    val_batches = -(-val_images // batch) if n_val else 0
    dev_flops = validations * 2 * 2.0 * fwd.macs * val_images
    dev_launches = validations * val_batches * (calls * per_call + forward_launches + VALIDATION_LAUNCHES)
    optimizer_bytes = 16 if s.get("optimizer", "adam") == "adam" else 12
    activations = fwd.saved_elements * images * ACTIVATION_BYTES[precision]
    peak = (optimizer_bytes * fwd.params + activations + n_images * 3 * NATIVE_SIZE[dataset] ** 2) / GIB
    return CellWork(
        track="vision",
        precision=precision,
        steps=steps,
        step_flops=step_flops,
        train_flops=steps * step_flops,
        dev_evaluations=0,  # priced by dev_flops and dev_launches (no sentence evaluator start-up)
        dev_flops=dev_flops,
        analysis_flops=0.0,
        snapshots=_snapshots(steps, s, 500),
        snapshot_gib=optimizer_bytes * fwd.params / GIB,
        eval_flops=2.0 * fwd.macs * (n_images + n_test),
        eval_probe_steps=_probe_steps(grid.experiment(cell.experiment).vision_evaluation, n_images),
        peak_gib=peak + FIXED_GPU_GIB,
        kind=f"{cell.backbone} {size}px batch {batch}{' + OAR pass' if oar else ''} {precision}",
        step_launches=step_launches,
        dev_launches=dev_launches,
        rates="vision_large" if size >= LARGE_IMAGE_PX else "vision",
        # the trainer's captured step (training.vision_capture) launches nothing from the host per step
        graphed=vision_mode(s, n_train, bf16).graph,
        step_images=images,
        batch=batch,
    )

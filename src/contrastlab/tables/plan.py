"""The bill before the first GPU-hour: projected GPU-hours and peak GPU memory of a config's cells.

Projection of a job = its FLOPs ÷ a throughput calibration (achieved TFLOP/s per track and precision)
+ per-job overheads. The plan lists the jobs that hold a GPU: training, the SentEval encoding (rules
``encode``, ``encode_pretrained``) and the vision evaluation; the SentEval probes run in CPU jobs of
their own (rules ``evaluate``, ``evaluate_pretrained``), whose count and hours are stated on one line
(:func:`probe_jobs`). Nothing runs and Snakemake's DAG is not built: the cells come from
:func:`contrastlab.config.cells` and :func:`contrastlab.config.method_settings`, so the plan of
``config.yaml`` takes a few seconds (:func:`make_plan`; ``make plan``, ``scripts/plan.py``).

FLOPs (the usual 2 per multiply-add; attention's score FLOPs, under 1% at 32 tokens, and the losses are
left out):

- sentence training: ``6 × N × tokens`` per step (forward 2, backward 4; Kaplan et al. 2020), N the
  backbone's non-embedding parameters (:func:`transformer_parameters`), tokens = batch_size × 2 dropout
  views × ``max_length`` (32, SimCSE's truncation: only 27% of wiki1m's sentences reach it, 22 tokens
  on average, but every shuffled batch of 64 of the first 11,914 lines holds one that does, so dynamic
  padding pads each batch to 32 and the padding is computed too). Steps = ⌊sentences / batch_size⌋ ×
  epochs (or ``max_steps``); sentences: the corpus (1,000,000 for wiki1m, the fixture's size for the
  demo, a user corpus's lines) less a held-out probe.
- dev evaluations (forward only, ``2 × N × tokens``) at step 0, every ``eval_every`` steps and the
  last: the STS-B dev sentences (:data:`STSB_DEV_TOKENS`); the analysis probe when ``analysis_every``
  is set: two views of ``analysis_sentences`` corpus sentences (32 tokens) and of as many dev
  sentences; the final SentEval encoding (its own GPU job): every unique sentence of the tasks once
  (:data:`SENTEVAL_TOKENS`), in fp32 (the evaluator loads the checkpoint in fp32, no autocast).
- vision training: ``3 × F × images`` per step, F = the encoder's (and head's) forward FLOPs per image
  at the input size (:func:`vision_forward`, layer by layer as the trainer builds the encoder; a test
  checks it against hooks on the real module), images = 2 views × batch_size, plus OAR's labelled
  pass (2 views × its batch); evaluation: one forward of the train and test splits, then the probes'
  small optimiser steps (timed per step).

Peak GPU memory (an estimate): fp32 weights, gradients and the two Adam moments (16 bytes per
parameter; 12 with SGD's momentum), activations (transformers: Korthikanti et al. 2022, ``s·b·h·(34 +
5·a·s/h)`` bytes per layer at 16 bits, doubled in fp32/tf32; ResNets: the conv and BatchNorm outputs
backward keeps), the images kept on the device, and 1 GiB of CUDA context and allocator slack.

Calibration file (JSON; the default ships beside this module, :data:`DEFAULT_CALIBRATION`, and
``make gpu-check`` writes a measured one to :data:`MEASURED_CALIBRATION`, which the plan then
prefers)::

    {
      "format": "contrastlab-calibration/1",
      "measured": true,                       # false: datasheet figures and assumptions
      "device": "NVIDIA H100 80GB HBM3, driver 550.54, torch 2.14.1+cu130",
      "source": "one line: where the numbers come from",
      "achieved_tflops": {                    # TFLOP/s a training step achieves (FLOPs as above)
        "sentence": {"fp32": 31.0, "tf32": 140.0, "bf16": 250.0, "fp16": 250.0},
        "vision": {"bf16": 190.0}             # missing entries: taken from the default, and said so
      },
      "overheads_s": {                        # seconds; missing keys: the default's
        "train_startup": 60, "sentence_step": 0.01, "vision_step": 0.01, "snapshot_per_gib": 2,
        "dev_evaluation": 2, "evaluate_startup": 30,
        "senteval_probe_test": 300, "senteval_probe_fasttest": 120, "senteval_probe_dev": 60,
        "vision_probe_step": 0.002
      },
      "gpu_memory_gib": 80.0,
      "peak_tflops": {...}, "mfu": {...}      # optional, for the reader
    }

:func:`calibration_from_measurements` builds it from measured steps/s (:class:`Measurement`, with the
step's FLOPs from :func:`cell_work`) and :func:`write_calibration` writes it.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.tables.cost import hms, paper_of
from contrastlab.tables.markdown import markdown_table

CALIBRATION_FORMAT = "contrastlab-calibration/1"
#: Shipped default: H100 SXM datasheet peaks × assumed MFU, assumed overheads (its "source" says so).
DEFAULT_CALIBRATION = Path(__file__).with_name("calibration_h100.json")
#: Written by ``make gpu-check`` (relative to the repository root, where make and Snakemake run).
MEASURED_CALIBRATION = Path("results/gpu-check/calibration.json")
TRACKS = ("sentence", "vision")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
#: The precision choices shown side by side (plus the configured one).
SIDE_BY_SIDE = ("fp32", "tf32", "bf16")
AS_CONFIGURED = "config"
#: The evaluators encode in fp32 (checkpoint loaded in fp32, no autocast).
EVALUATION_PRECISION = "fp32"

#: Sentences of SimCSE's wiki1m_for_simcse.txt (protocol.md §2).
WIKI1M_SENTENCES = 1_000_000
#: STS-B dev (protocol.md §4: 1,500 pairs): unique sentences and their tokens with [CLS]/[SEP], counted
#: with bert-base-uncased's WordPiece vocabulary (MiniLM's tokenizer) on the published files
#: (RoBERTa's BPE gives a few percent more).
STSB_DEV_SENTENCES = 2_909
STSB_DEV_TOKENS = 47_750
#: Tokens of the unique sentences the SentEval evaluation encodes per task (test mode; not truncated),
#: counted as above; the union over the 14 tasks is :data:`SENTEVAL_ALL_TOKENS` (shared sentences are
#: encoded once). ``tests/tables/test_plan.py`` recounts them where the SentEval data are at hand.
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
SENTEVAL_ALL_SENTENCES = 134_190
SENTEVAL_ALL_TOKENS = 2_153_517
#: Images per split (CIFAR: torchvision's; digits: the 80/20 split of scikit-learn's 1,797).
DATASET_IMAGES = {"cifar10": (50_000, 10_000), "cifar100": (50_000, 10_000), "digits": (1_437, 360)}
NATIVE_SIZE = {"digits": 16, "cifar10": 32, "cifar100": 32}
#: Hugging Face configs (config.json on the hub) of the backbones config.yaml names: hidden size, layers,
#: intermediate size, attention heads, vocabulary, positions, token types.
KNOWN_ARCHITECTURES = {
    "bert-base-uncased": (768, 12, 3072, 12, 30522, 512, 2),
    "bert-large-uncased": (1024, 24, 4096, 16, 30522, 512, 2),
    "roberta-base": (768, 12, 3072, 12, 50265, 514, 1),
    "roberta-large": (1024, 24, 4096, 16, 50265, 514, 1),
}
#: CUDA context, cuBLAS/cuDNN workspaces and allocator slack (an assumption).
FIXED_GPU_GIB = 1.0
GIB = 2**30


# ---------------------------------------------------------------------------------------------- models
@dataclass(frozen=True)
class Transformer:
    """A BERT-like encoder's shape and parameter counts (``non_embedding`` feeds the FLOPs)."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    non_embedding: int
    total: int
    source: str


def transformer_parameters(
    hidden: int, layers: int, intermediate: int, vocab: int, positions: int, token_types: int
) -> tuple[int, int]:
    """``(non-embedding, total)`` parameters of a BERT/RoBERTa encoder with its pooler.

    Per layer: Q, K, V and output projections ``4h² + 4h``, the feed-forward ``2hi + i + h``, two
    LayerNorms ``4h``; embeddings ``(vocab + positions + token_types)·h + 2h``; pooler ``h² + h``.

    >>> transformer_parameters(768, 12, 3072, 30522, 512, 2)  # bert-base-uncased: 109.48M in all
    (85054464, 109482240)
    """
    per_layer = 4 * hidden * hidden + 4 * hidden + 2 * hidden * intermediate + intermediate + 5 * hidden
    non_embedding = layers * per_layer
    embeddings = (vocab + positions + token_types) * hidden + 2 * hidden
    return non_embedding, non_embedding + embeddings + hidden * hidden + hidden


def _transformer(hidden, layers, intermediate, heads, vocab, positions, types, source) -> Transformer:
    non_embedding, total = transformer_parameters(hidden, layers, intermediate, vocab, positions, types)
    return Transformer(hidden, layers, intermediate, heads, non_embedding, total, source)


def _from_hf_config(path: Path) -> Transformer:
    c = json.loads(path.read_text())
    return _transformer(
        c["hidden_size"],
        c["num_hidden_layers"],
        c["intermediate_size"],
        c.get("num_attention_heads", 12),
        c.get("vocab_size", 30522),
        c.get("max_position_embeddings", 512),
        c.get("type_vocab_size", 2),
        str(path),
    )


def backbone_transformer(config: Mapping[str, Any], alias: str) -> Transformer:
    """The architecture of a sentence backbone, from its config and never by downloading: a known
    Hugging Face id (:data:`KNOWN_ARCHITECTURES`), a materialised or local ``config.json``, a package's
    ``model/config.json``, a ``random`` BertConfig (BertConfig's defaults for keys it leaves out), or,
    failing all, ``params_millions`` taken as the non-embedding count."""
    spec = config["backbones"][alias]
    candidates = [Path(config.get("resources_dir", "resources"), "models", alias, "config.json")]
    if "path" in spec:
        candidates.insert(0, Path(spec["path"], "config.json"))
    if "package" in spec:
        found = importlib.util.find_spec(spec["package"])
        for location in (found.submodule_search_locations or []) if found else []:
            candidates.insert(0, Path(location, "model", "config.json"))
    if spec.get("hf_id") in KNOWN_ARCHITECTURES:
        return _transformer(*KNOWN_ARCHITECTURES[spec["hf_id"]], f"{spec['hf_id']}'s config")
    if "random" in spec:
        r = spec["random"]
        return _transformer(
            r.get("hidden_size", 768),
            r.get("num_hidden_layers", 12),
            r.get("intermediate_size", 3072),
            r.get("num_attention_heads", 12),
            r.get("vocab_size", 30522),
            r.get("max_position_embeddings", 512),
            r.get("type_vocab_size", 2),
            "its random BertConfig",
        )
    for candidate in candidates:
        if candidate.is_file():
            return _from_hf_config(candidate)
    millions = float(spec.get("params_millions", 110))
    n = int(millions * 1e6)
    return Transformer(768, 12, 3072, 12, n, n, "params_millions (no architecture known)")


@dataclass(frozen=True)
class VisionForward:
    """An image encoder's (and head's) forward multiply-adds per image, parameters, and the elements
    backward keeps per image (conv and BatchNorm outputs)."""

    macs: int
    params: int
    saved_elements: int


#: Blocks per stage and the block's output expansion (torchvision's BasicBlock and Bottleneck).
RESNET_LAYERS = {"resnet18": ((2, 2, 2, 2), 1), "resnet50": ((3, 4, 6, 3), 4)}


@functools.cache
def vision_forward(
    arch: str, stem: str, width: int, out_dim: int | None, input_size: int, head: tuple[int, int] | None
) -> VisionForward:
    """The forward pass of :func:`contrastlab.models.vision.build_encoder` (and, with ``head`` = (hidden,
    out), the projection head), counted layer by layer without torch: conv MACs = output positions ×
    out channels × in channels × kernel area, linear MACs = in × out features. The stem is the CIFAR
    3×3 stride-1 conv or torchvision's 7×7 stride-2 conv and max-pool; BasicBlock (ResNet-18) and
    Bottleneck (ResNet-50, the stride on its 3×3 conv) as torchvision builds them. A test checks the
    counts against hooks on the real module.

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


# ---------------------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """Achieved TFLOP/s per track and precision, per-job overheads (seconds), the GPU's memory."""

    achieved_tflops: Mapping[str, Mapping[str, float]]
    overheads_s: Mapping[str, float]
    gpu_memory_gib: float
    device: str
    source: str
    measured: bool
    path: str
    filled_from_default: tuple[str, ...] = ()

    def seconds(self, flops: float, track: str, precision: str) -> float:
        return flops / (self.achieved_tflops[track][precision] * 1e12)

    def describe(self) -> str:
        """One line: which calibration, and whether it was measured."""
        if self.measured:
            text = f"calibration: {self.path}, measured on {self.device}"
        else:
            text = f"calibration: {self.path}: {self.device} datasheet peaks × an assumed MFU, not measured"
        if self.filled_from_default:
            text += f"; from the default: {', '.join(self.filled_from_default)}"
        return text


def _read_calibration(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"calibration {path}: cannot be read as JSON ({error}); fix or delete it") from None
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(
            f"calibration {path}: 'format' must be {CALIBRATION_FORMAT!r}; rewrite it with make gpu-check"
        )
    return data


def load_calibration(path: str | os.PathLike | None = None) -> Calibration:
    """The calibration at ``path``; by default the measured one (:data:`MEASURED_CALIBRATION`) when it
    exists, else the shipped default. Entries a measured file lacks are taken from the default (the
    returned ``filled_from_default`` names them). Raises ``ValueError`` (one line) on a bad file."""
    default = _read_calibration(DEFAULT_CALIBRATION)
    chosen = Path(path) if path is not None else MEASURED_CALIBRATION
    if path is None and not chosen.is_file():
        chosen = DEFAULT_CALIBRATION
    data = default if chosen == DEFAULT_CALIBRATION else _read_calibration(chosen)
    filled: list[str] = []
    achieved: dict[str, dict[str, float]] = {}
    for track in TRACKS:
        achieved[track] = {}
        for precision in PRECISIONS:
            value = (data.get("achieved_tflops") or {}).get(track, {}).get(precision)
            if value is None:
                value = default["achieved_tflops"][track][precision]
                filled.append(f"{track}/{precision}")
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(
                    f"calibration {chosen}: achieved_tflops.{track}.{precision} must be a positive "
                    f"number, got {value!r}"
                )
            achieved[track][precision] = float(value)
    overheads = dict(default["overheads_s"])
    for key, value in (data.get("overheads_s") or {}).items():
        if key not in overheads or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(
                f"calibration {chosen}: overheads_s.{key} must be one of {', '.join(overheads)} with a "
                f"number >= 0, got {value!r}"
            )
        overheads[key] = float(value)
    filled += [f"overheads_s.{k}" for k in default["overheads_s"] if k not in (data.get("overheads_s") or {})]
    return Calibration(
        achieved,
        overheads,
        float(data.get("gpu_memory_gib") or default["gpu_memory_gib"]),
        str(data.get("device") or "unknown device"),
        str(data.get("source") or ""),
        bool(data.get("measured")),
        "the shipped default (contrastlab/tables/calibration_h100.json)"
        if chosen == DEFAULT_CALIBRATION
        else str(chosen),
        tuple(filled) if chosen != DEFAULT_CALIBRATION else (),
    )


@dataclass(frozen=True)
class Measurement:
    """One timed training run: its track, precision, FLOPs of one step (:attr:`CellWork.step_flops`)
    and the steps per second measured (warm, without dev evaluations and snapshots)."""

    track: str
    precision: str
    step_flops: float
    steps_per_s: float

    @property
    def achieved_tflops(self) -> float:
        return self.step_flops * self.steps_per_s / 1e12


def calibration_from_measurements(
    measurements: Iterable[Measurement],
    *,
    device: str,
    source: str,
    overheads_s: Mapping[str, float] | None = None,
    gpu_memory_gib: float | None = None,
) -> dict:
    """The calibration dict (module docstring) of measured runs: per (track, precision) the mean
    achieved TFLOP/s of its measurements; ``overheads_s`` measured per job (missing keys: the
    default's when the plan loads it). A step's time is its FLOPs at the achieved rate plus the
    track's ``<track>_step`` overhead: given one (e.g. timed at a tiny batch), it is taken out of the
    measured step time; not given, it is 0 and the whole step counts as FLOPs."""
    overheads = {f"{track}_step": 0.0 for track in TRACKS} | dict(overheads_s or {})
    grouped: dict[tuple[str, str], list[float]] = {}
    for m in measurements:
        if m.track not in TRACKS or m.precision not in PRECISIONS:
            raise ValueError(
                f"measurement of {m.track}/{m.precision}: track in {TRACKS}, precision in {PRECISIONS}"
            )
        flop_seconds = 1.0 / m.steps_per_s - overheads[f"{m.track}_step"]
        if flop_seconds <= 0:
            raise ValueError(
                f"measurement of {m.track}/{m.precision}: {m.steps_per_s} steps/s leaves no time for the "
                f"FLOPs after the {overheads[f'{m.track}_step']} s step overhead; time a larger batch"
            )
        grouped.setdefault((m.track, m.precision), []).append(m.step_flops / flop_seconds / 1e12)
    achieved: dict[str, dict[str, float]] = {}
    for (track, precision), values in sorted(grouped.items()):
        achieved.setdefault(track, {})[precision] = sum(values) / len(values)
    out: dict[str, Any] = {
        "format": CALIBRATION_FORMAT,
        "measured": True,
        "device": device,
        "source": source,
        "achieved_tflops": achieved,
        "overheads_s": overheads,
    }
    if gpu_memory_gib is not None:
        out["gpu_memory_gib"] = float(gpu_memory_gib)
    return out


def write_calibration(path: str | os.PathLike, calibration: Mapping[str, Any]) -> Path:
    """Write ``calibration`` (from :func:`calibration_from_measurements`) as JSON, after checking that
    :func:`load_calibration` accepts it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(calibration), indent=1, sort_keys=True) + "\n")
    load_calibration(path)
    return Path(path)


# ------------------------------------------------------------------------------------------- the work
@dataclass(frozen=True)
class CellWork:
    """What one cell computes, independent of the GPU: FLOPs of its training (per step and in all),
    of its dev evaluations and analysis probes, and of its evaluation; counts of steps, dev
    evaluations and snapshots; the snapshot size; and the probes' optimiser steps (vision)."""

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


def _snapshots(steps: int, settings: Mapping[str, Any], default_every: int) -> int:
    """Snapshots a cell writes by its step rule. Time-based ones (``state_every: null`` with
    ``state_minutes``, config.yaml's GPU setting) are not counted: a BERT-base snapshot (~1.3 GB) every
    10 minutes costs well under 1% of the cell."""
    every = settings.get("state_every", default_every)
    return max(0, (steps - 1) // int(every)) if every else 0


def _schedule_points(steps: int, every: int | None) -> int:
    """Step 0, every ``every``-th step and the last (the trainer's evaluation and analysis points)."""
    if not every:
        return 0
    return 1 + steps // every + (1 if steps % every else 0)


def _resolved(precision: str | None) -> str:
    return "bf16" if precision in (None, "auto") else precision


def _corpus_sentences(config: Mapping[str, Any]) -> int:
    """Training sentences: the fixture's count, the lines of a user's corpus (``data.wiki_path``, one
    sentence per line, as the trainer reads it), else wiki1m's 1,000,000."""
    data = config.get("data") or {}
    if data.get("fixture"):
        return int(data.get("fixture_corpus_sentences", 2000))
    corpus = Path(data.get("wiki_path") or "")
    if data.get("wiki_path") and corpus.is_file():
        return _line_count(str(corpus.resolve()), corpus.stat().st_mtime_ns)
    return WIKI1M_SENTENCES


@functools.cache
def _line_count(path: str, mtime_ns: int) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def _senteval_tokens(config: Mapping[str, Any]) -> float:
    tasks = (config.get("evaluation") or {}).get("tasks") or list(SENTEVAL_TOKENS)
    share = sum(SENTEVAL_TOKENS[t] for t in tasks) / sum(SENTEVAL_TOKENS.values())
    return SENTEVAL_ALL_TOKENS * share


def _settings(
    config: Mapping[str, Any], cell: cl_config.Cell, precision: str, point: cl_search.SearchPoint | None
) -> dict:
    """The cell's resolved settings under a precision choice (``config``: as configured); the choice
    acts through ``precision_override``, so it reaches exactly the cells the switch reaches. A search
    point's: :func:`contrastlab.search.point_settings` (a later stage's priced at the configured
    settings with its grid values: its winner is not known before the search runs)."""
    chosen = dict(config)
    if precision != AS_CONFIGURED:
        chosen["precision_override"] = precision
    if point is not None:
        return cl_search.point_settings(chosen, point)
    return cl_config.method_settings(chosen, cell.experiment, cell.method, cell.backbone)


def cell_work(
    config: Mapping[str, Any],
    cell: cl_config.Cell,
    precision: str = AS_CONFIGURED,
    point: cl_search.SearchPoint | None = None,
) -> CellWork:
    """The :class:`CellWork` of ``cell`` (or of the search ``point`` it trains) under a precision choice
    (``config`` = its own, or one of :data:`PRECISIONS` through ``precision_override``)."""
    s = _settings(config, cell, precision, point)
    if cl_config.track(config, cell.experiment) == "vision":
        return _vision_work(config, cell, s)
    return _sentence_work(config, cell, s)


def _sentence_work(config: Mapping[str, Any], cell: cl_config.Cell, s: Mapping[str, Any]) -> CellWork:
    model = backbone_transformer(config, cell.backbone)
    n = model.non_embedding
    length = int(s.get("max_length", 32))
    sentences = _corpus_sentences(config)
    if s.get("max_sentences"):
        sentences = min(sentences, int(s["max_sentences"]))
    analysis_every = s.get("analysis_every")
    probe = int(s.get("analysis_sentences", 1280))
    if analysis_every and s.get("analysis_holdout"):
        sentences -= probe
    batch = int(s.get("batch_size", 64))
    steps = sentences // batch * int(s.get("epochs", 1))
    if s.get("max_steps"):
        steps = min(steps, int(s["max_steps"]))
    step_flops = 6.0 * n * batch * 2 * length
    dev_points = _schedule_points(steps, int(s.get("eval_every", 125)))
    dev_flops = dev_points * 2.0 * n * STSB_DEV_TOKENS
    dev_probe = min(probe, STSB_DEV_SENTENCES) * STSB_DEV_TOKENS / STSB_DEV_SENTENCES
    analysis_flops = _schedule_points(steps, analysis_every) * 2.0 * n * 2 * (probe * length + dev_probe)
    precision = _resolved(s.get("precision"))
    # Korthikanti et al. 2022, Eq. 2: s·b·h·(34 + 5·a·s/h) bytes per layer with 16-bit activations.
    sequences = 2 * batch / int(s.get("grad_accum", 1))
    per_layer = length * sequences * model.hidden * (34 + 5 * model.heads * length / model.hidden)
    activations = model.layers * per_layer * (2 if precision in ("fp32", "tf32") else 1)
    peak = (16 * model.total + activations) / GIB + FIXED_GPU_GIB
    return CellWork(
        track="sentence",
        precision=precision,
        steps=steps,
        step_flops=step_flops,
        train_flops=steps * step_flops,
        dev_evaluations=dev_points,
        dev_flops=dev_flops,
        analysis_flops=analysis_flops,
        snapshots=_snapshots(steps, s, 250),
        snapshot_gib=12 * model.total / GIB,  # fp32 weights and the two Adam moments
        eval_flops=2.0 * n * _senteval_tokens(config),
        eval_probe_steps=0,
        peak_gib=peak,
        kind=f"{cell.backbone} batch {batch} {precision}",
    )


def _vision_work(config: Mapping[str, Any], cell: cl_config.Cell, s: Mapping[str, Any]) -> CellWork:
    dataset = s["dataset"]
    n_train, n_test = DATASET_IMAGES[dataset]
    size = int(s.get("input_size") or s.get("image_size") or NATIVE_SIZE[dataset])
    head = (
        (int(s.get("head_hidden", 512)), int(s.get("head_dim", 128)))
        if s.get("projection_head", True)
        else None
    )
    fwd = vision_forward(s["arch"], s["stem"], int(s["width"]), s.get("out_dim"), size, head)
    batch = int(s.get("batch_size", 256))
    steps = (n_train // batch if s.get("drop_last", True) else -(-n_train // batch)) * int(
        s.get("epochs", 200)
    )
    if s.get("max_steps"):
        steps = min(steps, int(s["max_steps"]))
    images = 2 * batch
    if s.get("oar_fraction"):
        images += 2 * min(int(s.get("oar_batch_size") or batch), int(s["oar_fraction"] * n_train))
    step_flops = 3 * 2.0 * fwd.macs * images
    precision = _resolved(s.get("precision"))
    oar_pass = " + OAR pass" if s.get("oar_fraction") else ""
    evaluation = cl_config.vision_evaluation(config, cell.experiment)
    probes = evaluation.get("probes") or ["linear", "knn"]
    probe_steps = 0
    if "linear" in probes:
        linear = evaluation.get("linear") or {}
        probe_steps += int(linear.get("epochs", 100)) * -(-n_train // int(linear.get("batch_size", 128)))
    if "ffn" in probes:
        ffn = evaluation.get("ffn") or {}
        for fraction in ffn.get("label_fractions", [0.1, 0.5, 1.0]):
            probe_steps += int(ffn.get("epochs", 100)) * -(
                -int(fraction * n_train) // int(ffn.get("batch_size", 32))
            )
    optimizer_bytes = 16 if s.get("optimizer", "adam") == "adam" else 12
    activations = fwd.saved_elements * images * (4 if precision in ("fp32", "tf32") else 2)
    peak = (optimizer_bytes * fwd.params + activations + n_train * 3 * NATIVE_SIZE[dataset] ** 2) / GIB
    return CellWork(
        track="vision",
        precision=precision,
        steps=steps,
        step_flops=step_flops,
        train_flops=steps * step_flops,
        dev_evaluations=0,
        dev_flops=0.0,
        analysis_flops=0.0,
        snapshots=_snapshots(steps, s, 500),
        snapshot_gib=optimizer_bytes * fwd.params / GIB,
        eval_flops=2.0 * fwd.macs * (n_train + n_test),
        eval_probe_steps=probe_steps,
        peak_gib=peak + FIXED_GPU_GIB,
        kind=f"{cell.backbone} {size}px batch {batch}{oar_pass} {precision}",
    )


# ------------------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class PlannedJob:
    """One job of the plan: its rule, paper, experiment and cell (``""`` for a Pretrained row), its
    projected GPU seconds per precision choice, and its peak GPU memory estimate (the chosen one)."""

    rule: str
    paper: str
    experiment: str
    cell: str
    seconds: Mapping[str, float]
    peak_gib: float = 0.0
    kind: str = ""
    precision: Mapping[str, str] = field(default_factory=dict)


def _train_seconds(work: CellWork, cal: Calibration) -> float:
    o = cal.overheads_s
    compute = cal.seconds(work.train_flops + work.dev_flops + work.analysis_flops, work.track, work.precision)
    return (
        compute
        + work.steps * o[f"{work.track}_step"]
        + o["train_startup"]
        + work.snapshots * work.snapshot_gib * o["snapshot_per_gib"]
        + work.dev_evaluations * o["dev_evaluation"]
    )


def _eval_seconds(work: CellWork, cal: Calibration) -> float:
    """The GPU job of an evaluation: a sentence cell's encoding (rule ``encode``), or a vision cell's
    encoding and probes (``evaluate_vision``, one job on the GPU)."""
    o = cal.overheads_s
    compute = cal.seconds(work.eval_flops, work.track, EVALUATION_PRECISION)
    if work.track == "vision":
        return compute + o["evaluate_startup"] + work.eval_probe_steps * o["vision_probe_step"]
    return compute + o["evaluate_startup"]


def _probe_seconds(config: Mapping[str, Any], cal: Calibration) -> float:
    """The CPU job of a SentEval evaluation (rules ``evaluate``, ``evaluate_pretrained``): its start-up
    and the probes of the configured mode."""
    mode = (config.get("evaluation") or {}).get("mode", "test")
    return cal.overheads_s["evaluate_startup"] + cal.overheads_s[f"senteval_probe_{mode}"]


def _pretrained_work(config: Mapping[str, Any], backbone: str) -> CellWork:
    """The encoding of a Pretrained row: the backbone's forward over every SentEval sentence."""
    n = backbone_transformer(config, backbone).non_embedding
    return CellWork("sentence", "fp32", 0, 0, 0, 0, 0, 0, 0, 0, 2.0 * n * _senteval_tokens(config), 0, 0, "")


def probe_jobs(config: Mapping[str, Any], calibration: Calibration) -> tuple[int, float]:
    """``(jobs, hours)`` of the SentEval probe jobs, which run on the CPU and so are not in the plan's
    GPU-hours: one per sentence cell and per Pretrained row, each :func:`_probe_seconds` long."""
    sentence = sum(cl_config.track(config, c.experiment) != "vision" for c in cl_config.cells(config))
    jobs = sentence + len(cl_config.pretrained_backbones(config))
    return jobs, jobs * _probe_seconds(config, calibration) / 3600


def make_plan(
    config: Mapping[str, Any],
    calibration: Calibration,
    chosen: str = AS_CONFIGURED,
    searches: bool | None = None,
) -> list[PlannedJob]:
    """Every GPU job of the (validated) config with its projected seconds under each precision choice
    (``config`` and :data:`SIDE_BY_SIDE`, plus ``chosen``); memory and kind are those of ``chosen``.
    A cell's evaluation is its ``encode`` job (sentence cells; their CPU probe jobs are
    :func:`probe_jobs`) or its ``evaluate_vision`` job; a Pretrained row is its ``encode_pretrained``.
    ``searches``: with the searches' jobs (:func:`search_jobs`; default: when they run with the
    default target, ``searches.in_all``)."""
    choices = list(dict.fromkeys([AS_CONFIGURED, *SIDE_BY_SIDE, chosen]))
    if searches is None:
        searches = bool((config.get("searches") or {}).get("in_all"))
    jobs = search_jobs(config, calibration, chosen) if searches else []
    for cell in cl_config.cells(config):
        works = {c: cell_work(config, cell, c) for c in choices}
        vision = works[chosen].track == "vision"
        common = {"paper": paper_of(cell.experiment), "experiment": cell.experiment, "cell": cell.path}
        jobs.append(
            PlannedJob(
                rule="train_vision" if vision else "train",
                seconds={c: _train_seconds(w, calibration) for c, w in works.items()},
                peak_gib=works[chosen].peak_gib,
                kind=works[chosen].kind,
                precision={c: w.precision for c, w in works.items()},
                **common,
            )
        )
        evaluation = _eval_seconds(works[chosen], calibration)
        jobs.append(
            PlannedJob(
                rule="evaluate_vision" if vision else "encode",
                seconds=dict.fromkeys(choices, evaluation),
                precision=dict.fromkeys(choices, EVALUATION_PRECISION),
                **common,
            )
        )
    for backbone, _ in cl_config.pretrained_backbones(config):
        seconds = _eval_seconds(_pretrained_work(config, backbone), calibration)
        jobs.append(
            PlannedJob(
                "encode_pretrained",
                "pretrained",
                "pretrained",
                f"pretrained/{backbone}",
                dict.fromkeys(choices, seconds),
            )
        )
    return jobs


def cell_counts(config: Mapping[str, Any]) -> dict[str, int]:
    """Training cells of a config: ``sentence`` (of which ``figure``: experiments with no paper table,
    the figure sweeps and Li's conjecture runs), ``vision``, ``total``, and ``pretrained`` evaluations.

    README.md's sentence on the full grid is checked against these numbers for config.yaml (a test)."""
    from contrastlab.tables.published import TABLES

    counts = {"sentence": 0, "figure": 0, "vision": 0}
    table_experiments = {}
    for cell in cl_config.cells(config):
        exp = cell.experiment
        if exp not in table_experiments:
            table_experiments[exp] = any(spec.experiment == exp for spec in TABLES.values())
        if cl_config.track(config, exp) == "vision":
            counts["vision"] += 1
        else:
            counts["sentence"] += 1
            counts["figure"] += 0 if table_experiments[exp] else 1
    counts["total"] = counts["sentence"] + counts["vision"]
    counts["pretrained"] = len(cl_config.pretrained_backbones(config))
    return counts


# ----------------------------------------------------------------------------------------- rendering
def _hours(jobs: Sequence[PlannedJob], choice: str) -> str:
    return f"{sum(j.seconds[choice] for j in jobs) / 3600:.2f}"


def _choices(jobs: Sequence[PlannedJob]) -> list[str]:
    return list(jobs[0].seconds) if jobs else [AS_CONFIGURED, *SIDE_BY_SIDE]


def _label(choice: str) -> str:
    return "as configured" if choice == AS_CONFIGURED else f"all {choice}"


def _rows(jobs: Sequence[PlannedJob], key, name: str, extra=None) -> list[dict[str, str]]:
    groups: dict[str, list[PlannedJob]] = {}
    for job in jobs:
        groups.setdefault(key(job), []).append(job)
    rows = []
    for value, group in groups.items():
        row = {name: value, "jobs": str(len(group))}
        if extra:
            row.update(extra(group))
        row.update({f"GPU-h {_label(c)}": _hours(group, c) for c in _choices(jobs)})
        rows.append(row)
    total = {name: "**total**", "jobs": str(len(jobs))}
    if extra:
        total.update(dict.fromkeys(extra(jobs[:1]), ""))
    total.update({f"GPU-h {_label(c)}": _hours(jobs, c) for c in _choices(jobs)})
    return rows + [total]


def _cell_extra(group: Sequence[PlannedJob]) -> dict[str, str]:
    train = [j for j in group if j.rule.startswith("train")]
    return {
        "precision": ", ".join(sorted({j.precision.get(AS_CONFIGURED, "") for j in train})),
        "train (each)": hms(train[0].seconds[AS_CONFIGURED]) if train else "—",
        "peak GPU GiB": f"{max(j.peak_gib for j in train):.1f}" if train else "—",
    }


def _seedless(job: PlannedJob) -> str:
    head, _, seed = job.cell.rpartition("/seed")
    return f"{head}/seed*" if head and seed.isdigit() else job.cell


def plan_lines(
    config: Mapping[str, Any], jobs: Sequence[PlannedJob], calibration: Calibration, chosen: str
) -> list[str]:
    """The plan as Markdown lines: header, per paper, per experiment, per rule, peak memory per cell
    kind, per cell (the seeds of a cell share a row), each with a total."""
    counts = cell_counts(config)
    probes, probe_hours = probe_jobs(config, calibration)
    lines = [
        f"{counts['total']} training cells ({counts['sentence']} sentence, {counts['figure']} of them for "
        f"figures only; {counts['vision']} vision), as many evaluations, {counts['pretrained']} Pretrained "
        "evaluations. A SentEval evaluation is two jobs: the encoding on the GPU (`encode`, "
        "`encode_pretrained`, below) and the probes on the CPU (`evaluate`, `evaluate_pretrained`).",
        "",
        f"Not GPU time: {probes} SentEval probe jobs on the CPU, {probe_hours:.1f} hours in all "
        f"({_probe_seconds(config, calibration):.0f} s each: start-up and probes).",
        "",
        f"Projected GPU-hours: FLOPs ÷ achieved TFLOP/s + overheads ({calibration.describe()}). "
        "Columns: each cell in its configured precision, then every cell that `precision_override` reaches "
        "in fp32, tf32, bf16 (the evaluators encode in fp32 in every column). Unmeasured figures carry "
        "±40% or more; `make gpu-check` measures them.",
        "",
    ]
    sections = [
        ("Per paper", _rows(jobs, lambda j: j.paper, "paper")),
        ("Per experiment (table)", _rows(jobs, lambda j: j.experiment, "experiment")),
        ("Per rule", _rows(jobs, lambda j: j.rule, "rule")),
    ]
    kinds: dict[str, list[PlannedJob]] = {}
    for job in jobs:
        if job.kind:
            kinds.setdefault(job.kind, []).append(job)
    memory = [
        {
            "cell kind": kind,
            "cells": str(len(group)),
            "peak GPU GiB (estimate)": f"{group[0].peak_gib:.1f}",
            "fits": "yes"
            if group[0].peak_gib <= calibration.gpu_memory_gib
            else f"no (> {calibration.gpu_memory_gib:.0f})",
        }
        for kind, group in sorted(kinds.items())
    ]
    sections.append((f"Peak GPU memory per cell kind ({_label(chosen)})", memory))
    sections.append(("Per cell (its seeds in one row)", _rows(jobs, _seedless, "cell", _cell_extra)))
    for title, rows in sections:
        lines += [f"### {title}", ""] + markdown_table(rows, numeric_after_first=True) + [""]
    return lines


def write_plan_csv(path: str | os.PathLike, jobs: Sequence[PlannedJob]) -> Path:
    """One row per job: rule, paper, experiment, cell, projected hours per choice, peak memory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    choices = _choices(jobs)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["rule", "paper", "experiment", "cell", *[f"hours_{c}" for c in choices], "peak_gpu_gib"]
        )
        for j in jobs:
            writer.writerow(
                [
                    j.rule,
                    j.paper,
                    j.experiment,
                    j.cell,
                    *[f"{j.seconds[c] / 3600:.4f}" for c in choices],
                    f"{j.peak_gib:.2f}",
                ]
            )
    return path


def projected_hours(jobs: Sequence[PlannedJob], choice: str = AS_CONFIGURED) -> dict[str, dict[str, float]]:
    """Projected GPU-hours per paper, per rule and per cell (``{"paper": {...}, "rule": ..., "cell":
    ...}``) under one choice, for the report's cost tables."""
    out: dict[str, dict[str, float]] = {"paper": {}, "rule": {}, "cell": {}}
    for job in jobs:
        hours = job.seconds[choice] / 3600
        for key, value in (("paper", job.paper), ("rule", job.rule), ("cell", job.cell)):
            out[key][value] = out[key].get(value, 0.0) + hours
    return out


def total_hours(jobs: Sequence[PlannedJob], choice: str = AS_CONFIGURED) -> float:
    return sum(j.seconds[choice] for j in jobs) / 3600


def plan_report(
    config: Mapping[str, Any],
    chosen: str = AS_CONFIGURED,
    calibration_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    title: str = "",
    echo: bool = True,
) -> list[Path]:
    """Plan a validated config (``make plan``): print it (``echo``) and write ``plan.md`` and
    ``plan.csv`` to ``out_dir`` (default ``<results_dir>/plan``); returns the files written."""
    if chosen != AS_CONFIGURED and chosen not in PRECISIONS:
        raise ValueError(
            f"precision choice must be {AS_CONFIGURED} or one of {', '.join(PRECISIONS)}, got {chosen!r}"
        )
    calibration = load_calibration(calibration_path)
    jobs = make_plan(config, calibration, chosen)
    lines = [
        f"## Projected cost{f' of {title}' if title else ''}",
        "",
        *plan_lines(config, jobs, calibration, chosen),
    ]
    if not (config.get("searches") or {}).get("in_all"):
        lines += search_plan_lines(config, calibration, chosen)
    if echo:
        print("\n".join(lines))
    out = Path(out_dir or Path(config.get("results_dir", "results"), "plan"))
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / "plan.md"
    markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [markdown, write_plan_csv(out / "plan.csv", jobs)]


#: A GPU job's wall-time request (SLURM's ``-t``) when the config sets none: its projection × this
#: margin (a projection is ±40%, and the cluster's GPU may be slower than the calibration's), at least
#: :data:`MINIMUM_RUNTIME_MIN`, and × the attempt (a retry after a timeout asks for more).
RUNTIME_MARGIN = 2.0
MINIMUM_RUNTIME_MIN = 30
#: The request of the jobs the plan does not project (figures, CPU runs with ``resources.gpu: 0``).
FALLBACK_RUNTIME_MIN = {"train": 240, "vision_train": 480, "eval": 60}


def runtime_resource(
    config: Mapping[str, Any], kind: str, rule: str | None, where: Any, calibration: Any
) -> Any:
    """A rule's ``runtime`` resource (minutes): ``resources.<kind>_runtime_min`` when the config sets
    it; for a job the plan projects (``rule``: a cell's or a Pretrained row's, GPU or SentEval probe
    job; not with ``resources.gpu: 0``), a function of the job's wildcards and attempt giving
    :func:`job_runtime_minutes`, ``where(wildcards)`` naming its cell or backbone (keyword arguments)
    and ``calibration()`` the calibration; else :data:`FALLBACK_RUNTIME_MIN`."""
    configured = config["resources"].get(f"{kind}_runtime_min")
    if configured is not None:
        return configured
    if rule is None or not config["resources"].get("gpu"):
        return FALLBACK_RUNTIME_MIN[kind]

    def planned(wildcards: Any, attempt: int) -> int:
        return job_runtime_minutes(config, rule, calibration(), attempt=attempt, **where(wildcards))

    return planned


def job_runtime_minutes(
    config: Mapping[str, Any],
    rule: str,
    calibration: Calibration,
    *,
    cell: cl_config.Cell | None = None,
    backbone: str | None = None,
    attempt: int = 1,
    point: cl_search.SearchPoint | None = None,
) -> int:
    """Minutes to request for one job: ``train``, ``train_vision``, ``encode``, ``evaluate_vision`` of
    ``cell`` or ``encode_pretrained`` of ``backbone`` (GPU jobs), ``evaluate`` or
    ``evaluate_pretrained`` (the SentEval probes, CPU jobs): its projected seconds (as configured) ×
    :data:`RUNTIME_MARGIN` × ``attempt``, at least :data:`MINIMUM_RUNTIME_MIN`."""
    if rule == "encode_pretrained":
        seconds = _eval_seconds(_pretrained_work(config, backbone), calibration)
    elif rule in ("evaluate", "evaluate_pretrained"):
        seconds = _probe_seconds(config, calibration)
    elif rule in ("train", "train_vision"):
        seconds = _train_seconds(cell_work(config, cell, point=point), calibration)
    elif rule in ("encode", "evaluate_vision"):
        seconds = _eval_seconds(cell_work(config, cell), calibration)
    else:
        raise ValueError(f"no projection for rule {rule!r}")
    return max(MINIMUM_RUNTIME_MIN, math.ceil(seconds * RUNTIME_MARGIN * attempt / 60))


# ------------------------------------------------------------------------------------------- searches
def _distance(config: Mapping[str, Any], point: cl_search.SearchPoint, stage: Mapping[str, Any]) -> int:
    """Grid steps between a search point (of ``stage``) and the configured settings: per grid axis, how
    many values lie between the point's and the one nearest the configured value; per move around a
    winner, how many lie between it and no move (× 1 or + 0)."""
    configured = cl_config.method_settings(config, point.experiment, point.method, point.backbone)
    steps = 0
    for axis, value in point.grid.items():
        values = list(stage["grid"][axis])
        target = cl_search.setting_value(configured, axis)
        nearest = min(
            range(len(values)),
            key=lambda i: abs(values[i] - target) if _numbers(values[i], target) else values[i] != target,
        )
        steps += abs(values.index(value) - nearest)
    for axis, (op, amount) in point.around.items():
        moves = list(stage["around"][axis][op])
        neutral = 1.0 if op == "times" else 0.0
        nearest = min(range(len(moves)), key=lambda i: abs(moves[i] - neutral))
        steps += abs(moves.index(amount) - nearest)
    return steps


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def searched_points(
    config: Mapping[str, Any], calibration: Calibration | None = None
) -> list[cl_search.SearchPoint]:
    """The points of the config's searches (:func:`contrastlab.search.search_points`) that each search's
    ``budget_gpu_hours`` pays for, in grid order. The stated trimming order: points nearest the
    configured settings first (:func:`_distance`; ties: earlier stage, then grid order), each at its
    projected training time as configured (a point shared with a configured cell costs nothing); a point
    that would pass the budget is dropped. Raises :class:`~contrastlab.config.ConfigError` when a stage
    of a search keeps no point."""
    points = cl_search.search_points(config)
    kept: list[cl_search.SearchPoint] = []
    for experiment in dict.fromkeys(p.experiment for p in points):
        group = [p for p in points if p.experiment == experiment]
        spec = cl_search.search_spec(config, experiment) or {}
        budget = spec.get("budget_gpu_hours")
        if budget is None:
            kept += group
            continue
        calibration = calibration or load_calibration()
        distances = [_distance(config, p, spec["stages"][p.method][p.stage - 1]) for p in group]
        ranked = sorted(range(len(group)), key=lambda i: (distances[i], group[i].stage, i))
        used, chosen = 0.0, set()
        for i in ranked:
            point = group[i]
            hours = 0.0
            if point.shared_with is None:
                hours = _train_seconds(cell_work(config, point.cell, point=point), calibration) / 3600
            if used + hours <= budget:
                chosen.add(i)
                used += hours
        for (_, backbone, method), stages in cl_search.searches(group).items():
            for stage, members in stages.items():
                if not any(group.index(p) in chosen for p in members):
                    raise cl_config.ConfigError(
                        f"config key experiments.{experiment}.search.budget_gpu_hours: {budget:g} GPU-h "
                        f"leaves stage {stage} of the {method} search on {backbone} without a point; "
                        "raise the budget or shrink the grid"
                    )
        kept += [p for i, p in enumerate(group) if i in chosen]
    return kept


def search_jobs(
    config: Mapping[str, Any], calibration: Calibration, chosen: str = AS_CONFIGURED
) -> list[PlannedJob]:
    """The GPU jobs of the config's searches: each point's training (not the points shared with a
    configured cell) and the encoding of each search's winner (``search_encode``; its probes run on
    the CPU), experiment ``<experiment> (search)``."""
    choices = list(dict.fromkeys([AS_CONFIGURED, *SIDE_BY_SIDE, chosen]))
    points = searched_points(config, calibration)
    jobs = []
    for point in points:
        if point.shared_with is not None:
            continue
        works = {c: cell_work(config, point.cell, c, point=point) for c in choices}
        jobs.append(
            PlannedJob(
                rule="train",
                paper=paper_of(point.experiment),
                experiment=f"{point.experiment} (search)",
                cell=point.cell.path,
                seconds={c: _train_seconds(w, calibration) for c, w in works.items()},
                peak_gib=works[chosen].peak_gib,
                kind=works[chosen].kind,
                precision={c: w.precision for c, w in works.items()},
            )
        )
    for (experiment, backbone, method), stages in cl_search.searches(points).items():
        first = stages[1][0]
        work = cell_work(config, first.cell, point=first)
        # the winner's encoding on the GPU (its probes: a CPU job, search_evaluate)
        seconds = _eval_seconds(work, calibration)
        jobs.append(
            PlannedJob(
                rule="search_encode",
                paper=paper_of(experiment),
                experiment=f"{experiment} (search)",
                cell=f"{experiment}/{backbone}/{cl_search.searched_method(method)}/seed{first.seed}",
                seconds=dict.fromkeys(choices, seconds),
                precision=dict.fromkeys(choices, EVALUATION_PRECISION),
            )
        )
    return jobs


def search_plan_lines(config: Mapping[str, Any], calibration: Calibration, chosen: str) -> list[str]:
    """The searches' cost when they do not run with the default target (``searches.in_all: false``):
    one row per search experiment and per rule, with totals ([] without searches)."""
    jobs = search_jobs(config, calibration, chosen)
    if not jobs:
        return []
    points = searched_points(config, calibration)
    shared = sum(1 for p in points if p.shared_with is not None)
    lines = [
        "### Hyperparameter searches (`make search`; not in the default target)",
        "",
        f"{len(points)} search points ({shared} of them configured cells, trained once), "
        f"{sum(1 for j in jobs if j.rule == 'search_encode')} winners evaluated on the test sets. A later "
        "stage's points are priced at the configured settings with their grid values (their winner is not "
        "known before the search runs).",
        "",
    ]
    lines += markdown_table(_rows(jobs, lambda j: j.experiment, "search"), numeric_after_first=True) + [""]
    return lines

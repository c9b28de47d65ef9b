"""Throughput calibration: achieved TFLOP/s per track and precision and the per-job overheads, shipped
(datasheet peaks x assumed utilisation) or measured by ``make gpu-check``; the seconds of a cell's work.

The calibration file's format is in docs/cost.md ("The calibration file"); the default ships beside
this module (:data:`DEFAULT_CALIBRATION`) and ``make gpu-check`` writes a measured one to
:func:`measured_calibration`, which the plan then prefers.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from contrastlab.config import Grid
from contrastlab.cost.cards import DEFAULT_GPU_MODEL, GPU_PEAKS, RUNS_AS, model_of
from contrastlab.cost.flops import CellWork
from contrastlab.paths import Results, write_json
from contrastlab.precision import RESOLVED

CALIBRATION_FORMAT = "contrastlab-calibration/1"

#: The calibrations shipped beside this module, per card (:data:`GPU_PEAKS`' names); each file lists
#: which of its figures are measured and which assumed (docs/cost.md).
SHIPPED_CALIBRATIONS = {
    "H200": Path(__file__).with_name("calibration_h200.json"),
    "H100": Path(__file__).with_name("calibration_h100.json"),
}

#: The default calibration: the shipped file of :data:`DEFAULT_GPU_MODEL`; entries another file lacks
#: are taken from it.
DEFAULT_CALIBRATION = SHIPPED_CALIBRATIONS[DEFAULT_GPU_MODEL]

#: ``make gpu-check``'s preset (``config/gpu-check.yaml``), whose ``results_dir`` holds the measured
#: calibration; package data, so that an installed wheel with no checkout around it finds it too.
GPU_CHECK_PRESET = importlib.resources.files(__package__) / "gpu-check.yaml"


def measured_calibration() -> Path:
    """Where ``make gpu-check`` writes its calibration (its preset's ``results_dir``, relative to the
    working directory); read when asked, not at import (the workflow imports this module at parse)."""
    return Path(Results(yaml.safe_load(GPU_CHECK_PRESET.read_text())["results_dir"]).calibration)


#: The rate classes of a calibration's ``achieved_tflops``: the sentence step, the image step at CIFAR
#: size (MACL's 32 px) and at ImageNet size (OAR's 224 px, :data:`~contrastlab.cost.flops.LARGE_IMAGE_PX`).
TRACKS = ("sentence", "vision", "vision_large")

#: The precision choices shown side by side (plus the configured one).
SIDE_BY_SIDE = ("fp32", "tf32", "bf16")

#: The evaluators encode in fp32 (checkpoint loaded in fp32, no autocast).
EVALUATION_PRECISION = "fp32"

#: The packing figures beside ``packing.speedup`` (sentence cells): the same under an MPS daemon, and of
#: image cells without and with MPS; image figures priced are per batch (:func:`vision_packing_key`).
PACKING_VARIANTS = ("speedup_mps", "vision_speedup", "vision_speedup_mps")
#: An image packing figure's key with the batch it was measured at.
VISION_PACKING_KEY = re.compile(r"vision_speedup(_mps)?_b([1-9][0-9]*)")


def vision_packing_key(mps: bool, batch: int) -> str:
    """The calibration's key of the image packing figures measured at ``batch``, with or without MPS.

    >>> vision_packing_key(False, 64), vision_packing_key(True, 1024)
    ('vision_speedup_b64', 'vision_speedup_mps_b1024')
    """
    return f"vision_speedup{'_mps' if mps else ''}_b{batch}"


# ---------------------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """Achieved TFLOP/s per track and precision, per-job overheads (seconds), the GPU's memory."""

    achieved_tflops: Mapping[str, Mapping[str, float]]
    overheads_s: Mapping[str, float]
    gpu_memory_gib: float
    device: str
    measured: bool
    path: str
    filled_from_default: tuple[str, ...] = ()
    #: precision -> concurrent cells on one GPU -> their summed steps/s over one cell's alone
    packing_speedup: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    packing_measured: bool = False
    packing_source: str = ""
    #: An assumed calibration's entries that are measured figures (``measured_entries`` in the file)
    measured_entries: tuple[str, ...] = ()
    #: A measured calibration's entries that are assumptions (``assumed_entries`` in the file)
    assumed_entries: tuple[str, ...] = ()
    #: Why this calibration (:func:`calibration_for`), e.g. scaled by data-sheet peaks
    note: str = ""
    #: precision -> a padding-free step's measured time over the padded step's at wiki1m's token profile
    padding_free_ratio: Mapping[str, float] = field(default_factory=dict)
    #: :data:`PACKING_VARIANTS` -> precision -> concurrent cells -> speed-up (``packing`` in the file)
    packing_variants: Mapping[str, Mapping[str, Mapping[int, float]]] = field(default_factory=dict)
    #: The parts of ``make gpu-check`` that had not finished when it wrote this file (``missing_parts``)
    missing_parts: tuple[str, ...] = ()

    def seconds(self, flops: float, track: str, precision: str) -> float:
        return flops / (self.achieved_tflops[track][precision] * 1e12)

    def describe(self) -> str:
        """One line: which calibration, and whether it was measured."""
        if self.measured:
            text = f"calibration: {self.path}, measured on {self.device}"
            if self.assumed_entries:
                text += f", except {len(self.assumed_entries)} figures assumed (its assumed_entries)"
        else:
            text = f"calibration: {self.path}: {self.device} datasheet peaks × an assumed MFU, not measured"
            if self.measured_entries:
                text += (
                    f", except {len(self.measured_entries)} figures measured on a GPU (its measured_source)"
                )
        if self.missing_parts:
            text += f"; make gpu-check stopped before its {', '.join(self.missing_parts)} part"
        if self.filled_from_default:
            text += f"; from the default: {', '.join(self.filled_from_default)}"
        return f"{self.note}; {text}" if self.note else text


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a string, a boolean, NaN or infinity, which JSON as
    Python reads it allows)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _bad(path: Path, key: str, must: str, value: Any, after: str = "") -> ValueError:
    """The one-line error of a calibration entry ``key`` that is not what it ``must`` be."""
    return ValueError(f"calibration {path}: {key} must be {must}, got {value!r}{after}")


def _read_calibration(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"calibration {path} does not exist; name a file make gpu-check wrote") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"calibration {path}: cannot be read as JSON ({error}); fix or delete it") from None
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(
            f"calibration {path}: 'format' must be {CALIBRATION_FORMAT!r}; rewrite it with make gpu-check"
        )
    return data


def load_calibration(path: str | os.PathLike | None = None) -> Calibration:
    """The calibration at ``path``; by default the measured one (:func:`measured_calibration`) when it
    exists, else the shipped default. Entries a file lacks are taken from the default (its
    ``filled_from_default`` names them). Raises ``ValueError`` (one line) on a bad file."""
    default = _read_calibration(DEFAULT_CALIBRATION)
    chosen = Path(path) if path is not None else measured_calibration()
    if path is None and not chosen.is_file():
        chosen = DEFAULT_CALIBRATION
    data = default if chosen == DEFAULT_CALIBRATION else _read_calibration(chosen)
    filled: list[str] = []
    achieved: dict[str, dict[str, float]] = {}
    for track in TRACKS:
        for precision in RESOLVED:
            value = (data.get("achieved_tflops") or {}).get(track, {}).get(precision)
            if value is None:
                value = default["achieved_tflops"][track][precision]
                filled.append(f"{track}/{precision}")
            if not _finite(value) or value <= 0:
                must = "a positive finite number of TFLOP/s"
                again = "; fix it or run make gpu-check again"
                raise _bad(chosen, f"achieved_tflops.{track}.{precision}", must, value, again)
            achieved.setdefault(track, {})[precision] = float(value)
    overheads = dict(default["overheads_s"])
    for key, value in (data.get("overheads_s") or {}).items():
        if key not in overheads or not _finite(value) or value < 0:
            must = f"one of {', '.join(overheads)} with a finite number of seconds >= 0"
            raise _bad(chosen, f"overheads_s.{key}", must, value)
        overheads[key] = float(value)
    filled += [f"overheads_s.{k}" for k in default["overheads_s"] if k not in (data.get("overheads_s") or {})]
    # packing figures are one card's measurement, like the padding-free ratio: never taken from the default
    # file for another (a measured file without them prices every cell on a GPU of its own)
    packing = data.get("packing") or (default["packing"] if chosen == DEFAULT_CALIBRATION else {})
    ratios = _padding_free_ratios(data, default, "sentence/fp32" in filled, chosen)
    shipped = next((m for m, p in SHIPPED_CALIBRATIONS.items() if p == chosen), None)
    memory = data.get("gpu_memory_gib")
    memory = default["gpu_memory_gib"] if memory is None else memory
    if not _finite(memory) or memory <= 0:
        raise _bad(chosen, "gpu_memory_gib", "the GPU's memory as a positive finite number of GiB", memory)
    return Calibration(
        achieved,
        overheads,
        float(memory),
        str(data.get("device") or "unknown device"),
        bool(data.get("measured")),
        f"the shipped {shipped} file (contrastlab/cost/{chosen.name})" if shipped else str(chosen),
        tuple(filled) if chosen != DEFAULT_CALIBRATION else (),
        _packing_speedup(packing, chosen),
        bool(packing.get("measured")),
        str(packing.get("source") or ""),
        tuple(data.get("measured_entries") or ()),
        tuple(data.get("assumed_entries") or ()),
        padding_free_ratio=ratios,
        packing_variants={
            k: f
            for k in [*PACKING_VARIANTS, *(k for k in packing if VISION_PACKING_KEY.fullmatch(str(k)))]
            if (f := _packing_speedup(packing, chosen, k))
        },
        missing_parts=tuple(str(part) for part in data.get("missing_parts") or ()),
    )


def _padding_free_ratios(
    data: Mapping[str, Any], default: Mapping[str, Any], fp32_filled: bool, path: Path
) -> dict[str, float]:
    """The file's ``padding_free_ratio`` per precision, checked. A ratio goes with the fp32 rate it was
    measured against: a file of the default's card that takes that rate from the default (``fp32_filled``)
    takes its ratio too (else the padding-free cells lose a measurement); another card's, never."""
    ratios = data.get("padding_free_ratio") or {}
    if not ratios and fp32_filled and model_of(str(data.get("device"))) == model_of(default["device"]):
        ratios = default.get("padding_free_ratio") or {}
    for precision, value in ratios.items():
        if precision not in RESOLVED or not _finite(value) or not 0 < value <= 2:
            must = f"a precision of {', '.join(RESOLVED)} and a measured step-time ratio in (0, 2]"
            raise _bad(path, f"padding_free_ratio.{precision}", must, value)
    return {precision: float(value) for precision, value in ratios.items()}


def _packing_speedup(
    packing: Mapping[str, Any], path: Path, key: str = "speedup"
) -> dict[str, dict[int, float]]:
    """A calibration's ``packing.<key>`` with integer counts, checked (one line on a bad entry)."""
    out: dict[str, dict[int, float]] = {}
    for precision, by_count in (packing.get(key) or {}).items():
        for count, value in (by_count or {}).items():
            if precision not in RESOLVED or not str(count).isdigit() or not _finite(value) or value <= 0:
                must = f"a precision of {', '.join(RESOLVED)}, a count of cells and a positive number"
                raise _bad(path, f"packing.{key}.{precision}.{count}", must, value)
            out.setdefault(precision, {})[int(count)] = float(value)
    return out


@dataclass(frozen=True)
class Measurement:
    """One timed training run: track, precision, FLOPs of one step and the steps per second measured
    (warm, without dev evaluations and snapshots)."""

    track: str
    precision: str
    step_flops: float
    steps_per_s: float


def calibration_from_measurements(
    measurements: Iterable[Measurement],
    *,
    device: str,
    source: str,
    overheads_s: Mapping[str, float] | None = None,
    gpu_memory_gib: float | None = None,
    packing: Mapping[str, Mapping[str, Mapping[int, float]]] | None = None,
    missing_parts: Sequence[str] = (),
) -> dict:
    """The calibration dict (docs/cost.md) of measured runs: per (track, precision) the mean achieved
    TFLOP/s, each step time less the track's ``<track>_step`` overhead (0 unless in ``overheads_s``);
    ``packing``: measured speed-ups of several cells on one GPU by key (``speedup`` and its variants,
    precision -> count -> speed-up); ``missing_parts``: the parts of ``make gpu-check`` not measured."""
    measurements = list(measurements)
    overheads = {f"{track}_step": 0.0 for track in ("sentence", "vision")}
    if any(m.track == "vision_large" for m in measurements):
        # a measured image step includes its augmentation: no per-image augmentation on top of its rate
        # (without one, the default's rate and its augmentation stay together)
        overheads["vision_large_image"] = 0.0
    overheads |= dict(overheads_s or {})
    grouped: dict[tuple[str, str], list[float]] = {}
    for m in measurements:
        if m.track not in TRACKS or m.precision not in RESOLVED:
            raise ValueError(
                f"measurement of {m.track}/{m.precision}: track in {TRACKS}, precision in {RESOLVED}"
            )
        step_overhead = overheads[f"{m.track.split('_')[0]}_step"]  # vision_large: the vision track's
        flop_seconds = 1.0 / m.steps_per_s - step_overhead
        if flop_seconds <= 0:
            raise ValueError(
                f"measurement of {m.track}/{m.precision}: {m.steps_per_s} steps/s leaves no time for the "
                f"FLOPs after the {step_overhead} s step overhead; time a larger batch"
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
    if written := {key: figures for key, figures in (packing or {}).items() if figures}:
        out["packing"] = _packing_section(source, written)
    if missing_parts:
        out["missing_parts"] = list(missing_parts)
    return out


def _packing_section(source: str, written: Mapping[str, Mapping[str, Mapping[int, float]]]) -> dict[str, Any]:
    """A calibration's ``packing`` of measured figures, counts as strings."""
    return {
        "measured": True,
        "source": f"{source}: 1, 2 and 4 concurrent small cells",
        "speedup": {},
        **{
            key: {p: {str(k): float(v) for k, v in by.items()} for p, by in f.items()}
            for key, f in written.items()
        },
    }


def write_calibration(path: str | os.PathLike, calibration: Mapping[str, Any]) -> Path:
    """Write ``calibration`` as JSON (:func:`~contrastlab.paths.write_json`), then check that
    :func:`load_calibration` accepts it."""
    write_json(path, dict(calibration))
    load_calibration(path)
    return Path(path)


def step_seconds(work: CellWork, cal: Calibration) -> float:
    """Seconds of one training step: the larger of its FLOPs at its rate class's rate and its host
    launches at ``<track>_launch`` each (none for a captured graph), plus ``<track>_step`` and the
    augmentation (``<rate class>_image`` per image). A padding-free step adds ``padding_free_element`` per
    gathered element, or, with a measured ``padding_free_ratio`` and wiki1m's profile, is the padded
    step's FLOP time × that ratio."""
    o = cal.overheads_s
    flop_s = cal.seconds(work.step_flops, work.rate_class, work.precision)
    if work.padding_free:
        ratio = cal.padding_free_ratio.get(work.precision) if work.token_profile == "wiki1m" else None
        if ratio:
            flop_s = cal.seconds(work.padded_step_flops, work.rate_class, work.precision) * ratio
        else:
            flop_s += work.gather_elements * o.get("padding_free_element", 0.0)
    launches = 0.0 if work.graphed else work.step_launches * o.get(f"{work.track}_launch", 0.0)
    augment = work.step_images * o.get(f"{work.rate_class}_image", 0.0)
    return max(flop_s, launches) + o[f"{work.track}_step"] + augment


def train_seconds(work: CellWork, cal: Calibration) -> float:
    """Seconds of a training job: its steps, its dev evaluations or validation passes in fp32 (bounded by
    their launches too), the analysis probe in the cell's precision, start-up, snapshots, and each dev
    evaluation's fixed cost and encoder calls."""
    o = cal.overheads_s
    launch = o.get(f"{work.track}_launch", 0.0)
    rates = work.rate_class
    dev = max(cal.seconds(work.dev_flops, rates, EVALUATION_PRECISION), work.dev_launches * launch)
    return (
        work.steps * step_seconds(work, cal)
        + dev
        + cal.seconds(work.analysis_flops, rates, work.precision)
        + o["train_startup"]
        + work.snapshots * work.snapshot_gib * o["snapshot_per_gib"]
        + work.dev_evaluations * o["dev_evaluation"]
        + work.dev_calls * o.get("dev_call", 0.0)
    )


def eval_seconds(work: CellWork, cal: Calibration) -> float:
    """An evaluation's GPU job (``encode``, ``encode_vision``): its forward FLOPs in fp32 and start-up."""
    return (
        cal.seconds(work.eval_flops, work.rate_class, EVALUATION_PRECISION)
        + cal.overheads_s["evaluate_startup"]
    )


def vision_probe_seconds(work: CellWork, cal: Calibration) -> float:
    """A vision cell's CPU probe job (``evaluate_vision``): start-up, ``vision_probe_step`` a probe step."""
    return cal.overheads_s["evaluate_startup"] + work.eval_probe_steps * cal.overheads_s["vision_probe_step"]


def probe_seconds(grid: Grid, cal: Calibration) -> float:
    """A SentEval CPU probe job (``evaluate``, ``evaluate_pretrained``): start-up and the mode's probes."""
    mode = grid.options.evaluation.get("mode", "test")
    return cal.overheads_s["evaluate_startup"] + cal.overheads_s[f"senteval_probe_{mode}"]


def shipped_calibration(device: str) -> Calibration:
    """The shipped calibration of the card ``device`` names (the default's for another or none)."""
    return load_calibration(SHIPPED_CALIBRATIONS.get(model_of(device) or "", DEFAULT_CALIBRATION))


def calibration_for(gpu_model: str | None, path: str | os.PathLike | None = None) -> Calibration:
    """The calibration a plan for the card ``gpu_model`` (None: :data:`DEFAULT_GPU_MODEL`) prices with:
    ``path`` scaled to the card; else ``make gpu-check``'s file when measured on that card (or none is
    named); else that card's shipped file; else the measured or default one scaled by data-sheet peaks
    (its ``note`` says so). An unknown card stops with one line."""
    if path is not None:
        return for_gpu_model(load_calibration(path), gpu_model)
    model = model_of(gpu_model) if gpu_model else None
    if gpu_model and model is None:
        for_gpu_model(load_calibration(DEFAULT_CALIBRATION), gpu_model)  # raises: the known cards
    measured = measured_calibration()
    base = load_calibration(measured) if measured.is_file() else None
    if base is not None and (model is None or model_of(base.device) == model):
        return base
    if (model or DEFAULT_GPU_MODEL) in SHIPPED_CALIBRATIONS:
        return shipped_calibration(model or DEFAULT_GPU_MODEL)
    base = base or load_calibration(DEFAULT_CALIBRATION)
    note = (
        f"no measured calibration for the {model}: {base.device}'s figures scaled by the data sheets' "
        "peaks (an estimate; make gpu-check measures the card)"
    )
    return replace(for_gpu_model(base, gpu_model), note=note)


def for_gpu_model(calibration: Calibration, gpu_model: str | None) -> Calibration:
    """``calibration`` priced for the card ``gpu_model``: its achieved TFLOP/s scaled per precision by the
    cards' data-sheet peaks (the same fraction of the peak). Unchanged for None or its own card; an
    unknown card stops with one line naming the known ones."""
    if not gpu_model:
        return calibration
    model = model_of(gpu_model)
    if model is None:
        raise ValueError(
            f"resources.gpu_model {gpu_model!r} has no data-sheet peaks here; use one of "
            f"{', '.join(GPU_PEAKS)}, or measure the card with make gpu-check"
        )
    made_on = model_of(calibration.device)
    if made_on == model or made_on is None:
        return calibration
    # a precision the card has no units for runs (and is priced) as the one it runs as
    runs_as = {p: RUNS_AS.get(model, {}).get(p, p) for p in RESOLVED}
    scaled = {
        track: {p: by[runs_as[p]] * GPU_PEAKS[model][p] / GPU_PEAKS[made_on][runs_as[p]] for p in by}
        for track, by in calibration.achieved_tflops.items()
    }
    return replace(
        calibration,
        achieved_tflops=scaled,
        device=f"{model} (scaled from {calibration.device} by data-sheet peaks)",
        measured=False,
    )


def peak_tflops(device_name: str, precision: str) -> tuple[float | None, str]:
    """The dense peak of ``device_name`` (a CUDA device name) for ``precision``, and its source."""
    model = model_of(device_name)
    if model is not None and precision in GPU_PEAKS[model]:
        peaks = GPU_PEAKS[model]
        return peaks[precision], f"{peaks['source']}, dense {precision}"
    return None, f"no data-sheet peak for {device_name!r}"

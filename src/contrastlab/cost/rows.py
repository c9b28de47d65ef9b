"""The shipped calibration files, built from the raw rows a GPU measured, so that each figure can be
rebuilt and checked: ``calibration_h200.json`` from the H200's rows (:func:`read_rows`; with
``--bench``, :func:`bench_figures` of the same card's ``benchmarks/gpu_bench.py`` output replaces the
figures it measured) and ``calibration_h100.json`` from the H100's figures of docs/measured.md, with the
H200's where the H100 measured none. The FLOPs are the plan's (:mod:`contrastlab.cost.flops`); which
figure comes from which row is in docs/cost.md, and each file's ``measured_source`` names it.

``python -m contrastlab.cost.rows ROWS_DIR [--bench GPU_BENCH_JSON]`` rewrites both files;
tests/cost/test_rows.py rebuilds them and compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from statistics import mean
from typing import Any

from contrastlab.cost.backbones import transformer_parameters
from contrastlab.cost.calibration import CALIBRATION_FORMAT, SHIPPED_CALIBRATIONS, write_calibration
from contrastlab.cost.cards import GPU_PEAKS
from contrastlab.cost.flops import (
    AUGMENT_LAUNCHES,
    ENCODER_LAUNCHES,
    SENTENCE_STEP_LAUNCHES,
    STEP_LAUNCHES,
    STSB_DEV_SENTENCES,
    STSB_DEV_TOKENS,
    schedule_points,
    training_step_flops,
    vision_forward,
)
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import RESOLVED

#: What the rows do not carry: gpu-measured.md's header (the machine the rows came from).
H200_MACHINE = {
    "device": "NVIDIA H200",
    "driver": "580.159.04",
    "date": "2026-11-26",
    "project": "19dfe09",
    "gpu_memory_mib": 143_771,
    "rows": "../shared/docs/gpu-h200-2026-11-26/ "
    "(gpu_step.jsonl, trainer_runs.jsonl, vision_throughput.jsonl)",
}

#: The same H200's benchmarks/gpu_bench.py output (2026-11-26, transformers 5.23.0), in this repository.
H200_BENCH = "docs/gpu-runs/h200-2026-11-26/gpu_bench.json"
#: The padfree part of a later gpu_bench run on an H200: the padding-free IEEE-fp32 step's measured time
#: over the padded one's, BERT-base batch 64 at wiki1m's lengths.
H200_PADFREE_BENCH = "docs/gpu-runs/h200-2026-11-26-issue55/run3_gpu_bench.json"
#: The H200's packing rows (benchmarks/gpu_bench.py --parts pack, 2026-11-28; its README says how), and
#: one copy alone, which that run did not time: run 1's bf16 graph cell, the same machine and day.
H200_PACK = "docs/gpu-runs/h200-2026-11-28/pack.json"
H200_PACK_ALONE_STEPS_PER_S = 76.6

#: MACL's bf16/fp16 GPU rate (TFLOP/s), an estimate: its steps are host-bound, so the rows give only a
#: lower bound (the fastest one_call row, 85.1 steps/s × 1.71 TFLOP = 145); the sentence graph ran 160.
MACL_BF16_TFLOPS = 160.0

#: BERT-base's non-embedding parameters (the rows' random ``BertConfig()``), the FLOPs' N.
BERT_BASE = transformer_parameters(768, 12, 3072, 30522, 512, 2)[0]

#: The benchmark's image shapes as :func:`~contrastlab.cost.flops.vision_forward` takes them (config.yaml's
#: MACL and OAR ResNet-18 encoders).
VISION_SHAPES = {
    "macl": ("resnet18", "cifar", 64, None, 32, (512, 128)),
    "oar-resnet18": ("resnet18", "imagenet", 64, None, 224, None),
}

#: Eager launches of a MACL step with two augmentation calls (cost/flops.py's counts: 2 × 296 + 214 + 69).
MACL_LAUNCHES = 2 * AUGMENT_LAUNCHES + ENCODER_LAUNCHES["resnet18"][0] + STEP_LAUNCHES

#: Overheads no row measures: as shipped (assumptions; their meaning: cost/calibration.py).
ASSUMED_OVERHEADS = {
    "train_startup": 60.0,
    "snapshot_per_gib": 2.0,
    "evaluate_startup": 30.0,
    "senteval_probe_test": 300.0,
    "senteval_probe_fasttest": 120.0,
    "senteval_probe_dev": 60.0,
    "vision_probe_step": 0.002,
    # A padding-free step's re-padding around attention (and its dropout masks drawn at the padded
    # shape), seconds per padded element-layer (sequences x width x hidden x layers): a one-off IEEE-fp32
    # probe on an H200 (torch 2.11, docs/cost.md), BERT-base at wiki1m's lengths, packed / padded step
    # 0.764 at batch 64 and 0.771 at 128 against the FLOP model's 0.698 and 0.695: 3.7 and 8.5 ms, i.e.
    # 0.97e-10 and 1.13e-10 s per element. Not in the rows: an assumption until gpu_bench measures it.
    "padding_free_element": 1.0e-10,
}


def read_rows(folder: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The three JSONL files of a measured folder, by name without ``.jsonl``."""
    out = {}
    for name in ("gpu_step", "trainer_runs", "vision_throughput"):
        lines = Path(folder, f"{name}.jsonl").read_text().splitlines()
        out[name] = [json.loads(line) for line in lines if line.strip()]
    return out


def _one(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    """The one row whose fields hold ``match``'s values; a missing or repeated row is an error."""
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if len(found) != 1:
        raise ValueError(f"gpu_bench.json: {len(found)} rows with {match}, expected one")
    return found[0]


def bench_figures(bench: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``benchmarks/gpu_bench.py`` JSON (``{"environment": ..., "rows": [...]}``) gives the
    calibration, from its trainer-default rows: the full BERT-base bf16 cell (graph on, dev batch 512:
    steps/s, seconds per dev evaluation), OAR ResNet-18 224 px batch 128 fp32 and MACL batch 256 bf16
    with two augmentation calls, both with ``cudnn.benchmark`` on (steps/s)."""
    rows = bench["rows"]
    cell = _one(rows, part="cell", precision="bf16", cuda_graph=True, dev_batch_size=512)
    oar = _one(rows, part="oar", precision="fp32", batch_size=128, cudnn_benchmark=True)
    macl = _one(
        rows, part="macl", precision="bf16", batch_size=256, augment_calls="two", cudnn_benchmark=True
    )
    spread = [r for r in rows if r["part"] == "spread" and "graph_steps_per_s" in r]
    return {
        "device": bench["environment"]["device"],
        "spread": {r["precision"]: r["graph_steps_per_s"] for r in spread},
        "transformers": bench["environment"].get("transformers"),
        "cell_steps": cell["steps"],
        "sentence_bf16": cell["steps_per_s"],
        "dev_evaluations": cell["dev_evaluations"],
        "dev_per_eval": cell["dev_s_per_evaluation"],
        "oar_fp32": oar["steps_per_s"],
        "macl_bf16": macl["steps_per_s"],
    }


def read_bench(path: str | Path) -> dict[str, Any]:
    """:func:`bench_figures` of a gpu_bench.json file, with its ``path`` (relative to the repository
    when in it)."""
    path = Path(path).resolve()
    label = path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)
    return bench_figures(json.loads(path.read_text())) | {"path": label}


def _eval_s(row: Mapping[str, Any]) -> float:
    """Seconds per dev evaluation of a trainer run."""
    settings = row["settings"]
    return row["timings"]["eval_s"] / schedule_points(settings["max_steps"], settings["eval_every"])


def _dev_calls(row: Mapping[str, Any]) -> int:
    return -(-STSB_DEV_SENTENCES // row["settings"]["dev_batch_size"])


def _sentence(trainer: list[dict[str, Any]], bench: Mapping[str, Any] | None) -> tuple[dict, dict]:
    """Achieved TFLOP/s per precision (the graph rows; bf16 the bench's full cell where given), the dev
    figures (seconds per evaluation at 512: the bench's cell, else the graph rows' mean; per encoder
    call: bf16 at 128, eager, against bf16 at 512) and the eager step's seconds per launch."""
    graph = [r for r in trainer if r["settings"]["cuda_graph"]]
    bf16 = next(r for r in graph if r["precision"] == "bf16")
    eager = next(r for r in trainer if not r["settings"]["cuda_graph"] and r["precision"] == "bf16")
    steps = {r["precision"]: r["timings"]["steps_per_s"] for r in graph}
    if bench:
        steps["bf16"] = bench["sentence_bf16"]
    t = bf16["timings"]
    flops = training_step_flops(
        BERT_BASE, bf16["settings"]["batch_size"], round(t["padded_tokens"] / t["sentences"])
    )
    dev = {
        "per_eval_512": bench["dev_per_eval"] if bench else mean(_eval_s(r) for r in graph),
        "dev_call": (_eval_s(eager) - _eval_s(bf16)) / (_dev_calls(eager) - _dev_calls(bf16)),
        "calls_512": _dev_calls(bf16),
        "launch": 1 / eager["timings"]["steps_per_s"] / SENTENCE_STEP_LAUNCHES["bf16"],
        "steps": steps,
        "eager_steps": eager["timings"]["steps_per_s"],
    }
    return {p: flops * v / 1e12 for p, v in steps.items()}, dev


def _vision_flops(row: Mapping[str, Any]) -> float:
    fwd = vision_forward(*VISION_SHAPES[row["shape"]])
    images = 2 * row["batch_size"] * (2 if row["oar_pass"] else 1)
    return 3 * 2.0 * fwd.macs * images


def _vision(rows: list[dict[str, Any]], bench: Mapping[str, Any] | None) -> tuple[dict, dict, dict]:
    """OAR's whole-step and net-of-augmentation rates per precision (its channels-last eager rows; fp32
    the bench's cudnn.benchmark row where given), the augmentation per step (the eager rows), MACL's
    launch seconds (the bench's two-call row, else the eager row) and lower-bound bf16 rate."""
    oar = [r for r in rows if r["shape"] == "oar-resnet18" and r["variant"] == "eager"]
    augment = mean(r["augment_share"] / r["steps_per_s"] for r in oar)
    steps = {r["precision"]: r["steps_per_s"] for r in oar} | ({"fp32": bench["oar_fp32"]} if bench else {})
    oar_flops = _vision_flops(oar[0])
    whole = {p: oar_flops * v / 1e12 for p, v in steps.items()}
    net = {p: oar_flops / (1 / v - augment) / 1e12 for p, v in steps.items()}
    macl = [r for r in rows if r["shape"] == "macl"]
    macl_steps = (
        bench["macl_bf16"] if bench else next(r for r in macl if r["variant"] == "eager")["steps_per_s"]
    )
    fastest = max(macl, key=lambda r: r["steps_per_s"])
    extra = {
        "augment_s": augment,
        "augment_images": 2 * oar[0]["batch_size"] * 2,
        "vision_launch": 1 / macl_steps / MACL_LAUNCHES,
        "macl_bf16_lower_bound": _vision_flops(fastest) * fastest["steps_per_s"] / 1e12,
        "oar_steps": steps,
        "macl_steps": macl_steps,
    }
    return whole, net, extra


def _mfu(achieved: Mapping[str, Mapping[str, float]], peaks: Mapping[str, float]) -> dict:
    return {k: {p: round(v / peaks[p], 6) for p, v in by.items()} for k, by in achieved.items()}


def _r(value: float, digits: int = 2) -> float:
    return round(value, digits)


BUILT_BY = (
    "python -m contrastlab.cost.rows ROWS_DIR [--bench GPU_BENCH_JSON] [--padfree GPU_BENCH_JSON] "
    "(contrastlab/cost/rows.py)"
)

#: The H200 file's measured and assumed entries (with or without the bench: the same entries).
H200_MEASURED_ENTRIES = [
    *(f"achieved_tflops.sentence.{p}" for p in RESOLVED),
    *(f"achieved_tflops.vision_large.{p}" for p in ("fp32", "tf32", "bf16")),
    "overheads_s.vision_large_image",
    "overheads_s.sentence_launch",
    "overheads_s.vision_launch",
    "overheads_s.dev_evaluation",
    "overheads_s.dev_call",
    "gpu_memory_gib",
    "packing",
]
H200_ASSUMED_ENTRIES = [
    *(f"achieved_tflops.vision.{p}" for p in RESOLVED),
    "achieved_tflops.vision_large.fp16",
    *(f"overheads_s.{k}" for k in ASSUMED_OVERHEADS),
]


def _h200_figures(rows: Mapping[str, list[dict[str, Any]]], bench: Mapping[str, Any] | None) -> dict:
    """The H200 file's ``achieved_tflops``, ``overheads_s`` and the figures its sources quote (``parts``)."""
    sentence, dev = _sentence(rows["trainer_runs"], bench)
    whole, net, extra = _vision(rows["vision_throughput"], bench)
    if MACL_BF16_TFLOPS < extra["macl_bf16_lower_bound"]:
        raise ValueError(f"MACL's rows ran faster than {MACL_BF16_TFLOPS} TFLOP/s: raise the estimate")
    dev_flop_s = 2.0 * BERT_BASE * STSB_DEV_TOKENS / (sentence["fp32"] * 1e12)
    achieved = {
        "sentence": {p: _r(v) for p, v in sentence.items()},
        "vision": {"fp32": _r(whole["fp32"]), "tf32": _r(whole["tf32"])}
        | dict.fromkeys(("bf16", "fp16"), MACL_BF16_TFLOPS),
        "vision_large": {p: _r(net[p]) for p in ("fp32", "tf32", "bf16")} | {"fp16": _r(net["bf16"])},
    }
    overheads = ASSUMED_OVERHEADS | {
        "sentence_step": 0.0,
        "vision_step": 0.0,
        "vision_large_image": _r(extra["augment_s"] / extra["augment_images"], 9),
        "sentence_launch": _r(dev["launch"], 8),
        "vision_launch": _r(extra["vision_launch"], 8),
        "dev_evaluation": _r(dev["per_eval_512"] - dev_flop_s - dev["calls_512"] * dev["dev_call"], 4),
        "dev_call": _r(dev["dev_call"], 5),
    }
    parts = {"sentence": sentence, "dev": dev, "whole": whole, "net": net, "extra": extra}
    return {"achieved": achieved, "overheads": overheads, "parts": parts}


def calibration_from_rows(
    rows: Mapping[str, list[dict[str, Any]]],
    machine: Mapping[str, Any],
    bench: Mapping[str, Any] | None = None,
) -> dict:
    """The H200 calibration file from :func:`read_rows`' rows, the ``machine``'s facts they lack
    (:data:`H200_MACHINE`) and, where given, the same card's gpu_bench figures (:func:`read_bench`)."""
    if bench and bench["device"] != machine["device"]:
        raise ValueError(f"gpu_bench.json ran on {bench['device']}, the rows on {machine['device']}")
    fig = _h200_figures(rows, bench)
    host = next(r for r in rows["gpu_step"] if r["variant"] == "host")
    peaks = {p: GPU_PEAKS["H200"][p] for p in RESOLVED}
    extra = (
        {"bench": bench["path"], "measured_source": _h200_measured_source(fig["parts"], bench)}
        if bench
        else {}
    )
    return extra | {
        "format": CALIBRATION_FORMAT,
        "measured": True,
        "device": machine["device"],
        "gpu": machine["device"],
        "driver": machine["driver"],
        "torch": host["torch"],
        "date": machine["date"],
        "project": machine["project"],
        "rows": machine["rows"],
        "built_by": BUILT_BY,
        "source": _h200_source(machine, host["torch"], bench, **fig["parts"]),
        "peak_tflops": peaks,
        "mfu": _mfu(fig["achieved"], peaks),
        "achieved_tflops": fig["achieved"],
        "overheads_s": fig["overheads"],
        "gpu_memory_gib": _r(machine["gpu_memory_mib"] / 1024, 1),
        "packing": h200_packing(REPO_ROOT / H200_PACK),
        "measured_entries": list(H200_MEASURED_ENTRIES),
        "assumed_entries": list(H200_ASSUMED_ENTRIES),
    }


def _h200_source(machine, torch_version, bench, sentence, dev, whole, net, extra) -> str:
    """The file's ``source``: where the figures come from, with the figures."""
    s = {p: f"{v:.1f}" for p, v in sentence.items()}
    origin = (
        f"../shared/docs/gpu-measured.md and its raw rows, and {bench['path']} (benchmarks/gpu_bench.py, "
        f"transformers {bench['transformers']}; measured_source: each measured entry's row)"
        if bench
        else "../shared/docs/gpu-measured.md and its raw rows"
    )
    return (
        f"Measured on one {machine['device']} (driver {machine['driver']}, torch {torch_version}, "
        f"{machine['date']}, the project at {machine['project']}; {origin}), "
        "built by contrastlab/cost/rows.py. "
        f"Sentence: the trainer with cuda_graph and dev_batch_size 512, BERT-base batch 64 x 32 tokens: "
        f"fp32 {s['fp32']}, tf32 {s['tf32']}, bf16 {s['bf16']}, fp16 {s['fp16']} TFLOP/s (a graph step "
        "launches nothing from the host). OAR ResNet-18 224 px batch 128 with the labelled pass (eager, "
        f"channels-last): whole step fp32 {whole['fp32']:.1f}, tf32 {whole['tf32']:.1f}, bf16 "
        f"{whole['bf16']:.1f} TFLOP/s; less its augmentation ({extra['augment_s'] * 1e3:.1f} ms a step "
        f"of {extra['augment_images']} images: vision_large_image) the vision_large rates "
        f"{net['fp32']:.1f} / {net['tf32']:.1f} / {net['bf16']:.1f}. MACL (vision, 32 px) is host-bound: "
        f"{extra['vision_launch'] * 1e6:.1f} us per launch; its bf16 GPU rate {MACL_BF16_TFLOPS:.0f} is "
        f"an estimate (lower bound {extra['macl_bf16_lower_bound']:.0f}), its fp32/tf32 OAR's whole-step "
        f"rates (assumed). Dev: {dev['per_eval_512']:.3f} s per STS-B dev evaluation at dev_batch_size "
        f"512, {dev['dev_call'] * 1e3:.1f} ms per extra encoder call (128: 23 calls). Eager sentence step: "
        f"{dev['launch'] * 1e6:.1f} us per launch (cells with cuda_graph: false). Start-up, snapshots "
        "and probes: assumed, as shipped (assumed_entries)."
    )


def _h200_measured_source(parts, bench) -> str:
    """The file's ``measured_source`` where a gpu_bench.json is given: which row each entry comes from."""
    dev, extra = parts["dev"], parts["extra"]
    st, oar = dev["steps"], extra["oar_steps"]
    spread = bench.get("spread") or {}
    gap = max((abs(v / st[p] - 1) for p, v in spread.items() if p != "bf16"), default=0.0)
    return (
        f"achieved_tflops.sentence.bf16: {bench['path']}'s cell row (the full BERT-base bf16 cell through "
        f"the trainer, graph on, dev batch 512: {bench['cell_steps']:,} steps at {st['bf16']:.2f} steps/s). "
        f"sentence.fp32/.tf32/.fp16: trainer_runs.jsonl's cuda_graph rows (1,000 steps: {st['fp32']:.2f} / "
        f"{st['tf32']:.2f} / {st['fp16']:.2f} steps/s; the bench's 50-step spread rows, static shapes "
        f"outside the trainer, within {gap:.1%}). vision_large.fp32 (and vision.fp32, assumed from it): "
        f"the bench's oar row with cudnn.benchmark on, the trainer's default ({oar['fp32']:.3f} steps/s); "
        f"vision_large.tf32/.bf16: vision_throughput.jsonl's eager rows ({oar['tf32']:.3f} / "
        f"{oar['bf16']:.3f} steps/s); vision_large_image: those rows' augment_share x step time, mean of "
        f"fp32/tf32/bf16. dev_evaluation: the bench's cell row, {dev['per_eval_512']:.4f} s per evaluation "
        f"over {bench['dev_evaluations']} (less the dev FLOPs at sentence.fp32 and {dev['calls_512']} x "
        "dev_call); dev_call: trainer_runs.jsonl's eager bf16 row (dev batch 128) against its graph bf16 "
        f"row (512). sentence_launch: trainer_runs.jsonl's eager bf16 row ({dev['eager_steps']:.3f} "
        f"steps/s over {SENTENCE_STEP_LAUNCHES['bf16']:,} launches). vision_launch: the bench's macl row, "
        f"two augmentation calls, cudnn.benchmark on ({extra['macl_steps']:.3f} steps/s over "
        f"{MACL_LAUNCHES} launches). gpu_memory_gib: the card's memory."
    )


#: The H100's measured steps/s (docs/measured.md; each described in :data:`H100_MEASURED_SOURCE`).
H100_MEASURED = {"sentence_fp32": 16.8, "sentence_bf16_eager": 24.1, "macl_bf16": 36.0, "oar_fp32": 4.9}


def h100_calibration(h200: Mapping[str, Any]) -> dict:
    """The H100 file: its measured figures (:data:`H100_MEASURED`) where it has them, else the H200's
    (``h200``; the same data-sheet peaks and SMs), as :data:`H100_SOURCE` says."""
    oar = h200["achieved_tflops"]["vision_large"]
    oar_flops = _vision_flops({"shape": "oar-resnet18", "batch_size": 128, "oar_pass": True})
    augment = h200["overheads_s"]["vision_large_image"] * 2 * 128 * 2
    sentence_fp32 = training_step_flops(BERT_BASE, 64, 32) * H100_MEASURED["sentence_fp32"] / 1e12
    achieved = {
        "sentence": dict(h200["achieved_tflops"]["sentence"]) | {"fp32": _r(sentence_fp32)},
        "vision": dict(h200["achieved_tflops"]["vision"])
        | {"fp32": _r(oar_flops * H100_MEASURED["oar_fp32"] / 1e12)},
        "vision_large": dict(oar)
        | {"fp32": _r(oar_flops / (1 / H100_MEASURED["oar_fp32"] - augment) / 1e12)},
    }
    overheads = dict(h200["overheads_s"]) | {
        "sentence_launch": _r(1 / H100_MEASURED["sentence_bf16_eager"] / SENTENCE_STEP_LAUNCHES["bf16"], 8),
        "vision_launch": _r(1 / H100_MEASURED["macl_bf16"] / MACL_LAUNCHES, 8),
    }
    peaks = {p: GPU_PEAKS["H100"][p] for p in RESOLVED}
    measured = [
        "achieved_tflops.sentence.fp32",
        "achieved_tflops.vision_large.fp32",
        "overheads_s.sentence_launch",
        "overheads_s.vision_launch",
    ]
    return {
        "format": CALIBRATION_FORMAT,
        "measured": False,
        "device": "NVIDIA H100 SXM5 80GB",
        "built_by": h200["built_by"],
        "source": H100_SOURCE,
        "measured_source": H100_MEASURED_SOURCE,
        "peak_tflops": peaks,
        "mfu": _mfu(achieved, peaks),
        "achieved_tflops": achieved,
        "overheads_s": overheads,
        "gpu_memory_gib": 80.0,
        "packing": H100_PACKING,
        "measured_entries": measured,
        "assumed_entries": sorted(
            (
                {f"achieved_tflops.{k}.{p}" for k, by in achieved.items() for p in by}
                | {f"overheads_s.{k}" for k in overheads if not k.endswith("_step")}
            )
            - set(measured)
        ),
    }


H100_SOURCE = (
    "Assumed, except measured_entries: the H200's figures (calibration_h200.json, measured 2026-11-26; the "
    "two cards have the same data-sheet peaks, fp32 67, TF32 495, bf16/fp16 989 dense TFLOP/s) where the "
    "H100 measured none: the graph step's tf32/bf16/fp16 rates (the H100 ran the sentence step eager only; "
    "bf16/fp16 were launch-bound there, tf32 43.3 TFLOP/s at 21 tokens in part too), MACL's GPU rates, OAR's "
    "tf32/bf16, the 224-px augmentation (vision_large_image), the dev evaluation at dev_batch_size 512 "
    "(dev_evaluation, dev_call); start-up, snapshots and probes as the H200 file (assumed there too). "
    "Built by contrastlab/cost/rows.py (h100_calibration)."
)

H100_MEASURED_SOURCE = (
    "docs/measured.md, 'The GPU path': an H100 80GB HBM3, torch 2.11 + CUDA 13.0, 2026-11-24. "
    "achieved_tflops.sentence.fp32: benchmarks/gpu_share.py's single copy of the BERT-base step at batch 64 "
    "x 32 tokens (the plan's FLOPs), 16.8 steps/s = 35.1 TFLOP/s (the trainer's 23.4 steps/s at the 21 "
    "padded tokens of the gpu-check fixture gave 32.5). vision_large.fp32: OAR ResNet-18 224 px batch 128 "
    "with the labelled pass, 4.9 steps/s (5.571 TFLOP a step: 27.3 TFLOP/s whole, the rate vision.fp32 "
    "takes for MACL) less the H200's 15.5 ms of augmentation. sentence_launch: the eager bf16 step, 1/24.1 "
    "s over 1,460 launches = 28.4 us (priced only for cuda_graph: false); vision_launch: MACL batch 256 "
    "bf16, 1/36 s over 875 launches = 31.7 us."
)

#: Several cells per GPU: the H100's figures, measured with eager steps (benchmarks/gpu_share.py), kept
#: as assumed (a graph step keeps the GPU busy, so packed graph cells gain far less); fp16 as bf16.
H100_PACKING = {
    "measured": False,
    "source": "docs/measured.md: benchmarks/gpu_share.py on an H100 80GB HBM3 (2026-11-24), k copies of the "
    "eager BERT-base step at batch 64 x 32 tokens on one GPU: fp32 0.92x with 2 and 4 copies, bf16 1.82x "
    "with 2 and 2.34x with 4 (eager, host-bound steps: a graph step gains far less, gpu-plan.md section 4); "
    "fp16 assumed as bf16, tf32 not measured (priced as if alone)",
    "speedup": {
        "fp32": {"2": 0.92, "4": 0.92},
        "bf16": {"2": 1.82, "4": 2.34},
        "fp16": {"2": 1.82, "4": 2.34},
    },
}


def h200_packing(path: str | Path) -> dict[str, Any]:
    """The H200 file's ``packing`` from its packing rows at ``path``: the summed steps/s of 2 and 4 captured
    bf16 BERT-base copies over one copy's, without MPS (``speedup``) and with (``speedup_mps``)."""
    rows = [r for r in json.loads(Path(path).read_text())["rows"] if r["part"] == "pack" and r["captured"]]
    figures = {
        mps: {
            str(r["pack"]): _r(r["steps_per_s_sum"] / H200_PACK_ALONE_STEPS_PER_S, 3)
            for r in rows
            if r["mps"] is mps
        }
        for mps in (False, True)
    }
    return {
        "measured": True,
        "source": (
            f"gpu-h200-2026-11-28 run 3 ({H200_PACK}): 2 and 4 copies of the captured bf16 BERT-base step "
            "(batch 64, benchmarks/gpu_bench.py --parts pack), each its own process, on one NVIDIA H200, "
            f"over one copy alone ({H200_PACK_ALONE_STEPS_PER_S} steps/s, run 1's bf16 graph cell): MPS off "
            "(speedup) time-sliced, MPS on (speedup_mps). No other step was packed: priced as if alone"
        ),
        "speedup": {"bf16": figures[False]},
        "speedup_mps": {"bf16": figures[True]},
    }


def padding_free_ratio(path: str | Path) -> dict[str, Any]:
    """``padding_free_ratio`` and its source from a gpu_bench.json's padfree fp32 row (the trainer's
    dropout masks: ``draws`` "padded"): the padding-free step's time over the padded eager step's. Only
    fp32: padding-free is on by default for it alone."""
    label = Path(path).resolve().relative_to(REPO_ROOT).as_posix()
    row = _one(json.loads(Path(path).read_text())["rows"], part="padfree", precision="fp32", draws="padded")
    source = (
        f"padding_free_ratio.fp32: {label}'s padfree fp32 row (BERT-base batch 64, wiki1m's lengths, "
        f"{row['steps']} steps: padding-free {row['packed_ms']:.2f} ms against padded eager "
        f"{row['padded_ms']:.2f} ms a step)"
    )
    return {"ratio": {"fp32": _r(row["ratio"], 4)}, "source": source}


def build(
    rows_dir: str | Path, bench: str | Path | None = None, padfree: str | Path | None = None
) -> tuple[dict, dict]:
    """The H200 and H100 files from a rows folder and, optionally, the same H200's gpu_bench.json and one
    with its padfree part (the H100 file takes the H200's ratio, assumed)."""
    h200 = calibration_from_rows(read_rows(rows_dir), H200_MACHINE, read_bench(bench) if bench else None)
    h100 = h100_calibration(h200)
    if padfree:
        measured = padding_free_ratio(padfree)
        h200 = h200 | {
            "padding_free_ratio": measured["ratio"],
            "padding_free_source": measured["source"],
            "measured_entries": [*h200["measured_entries"], "padding_free_ratio.fp32"],
        }
        h100 = h100 | {
            "padding_free_ratio": measured["ratio"],
            "padding_free_source": "assumed: the H200's (" + measured["source"] + ")",
            "assumed_entries": sorted([*h100["assumed_entries"], "padding_free_ratio.fp32"]),
        }
    return h200, h100


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m contrastlab.cost.rows", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("rows_dir", help="the H200's raw rows (../shared/docs/gpu-h200-2026-11-26)")
    parser.add_argument("--bench", default=None, help=f"its benchmarks/gpu_bench.py JSON ({H200_BENCH})")
    parser.add_argument(
        "--padfree", default=None, help=f"a gpu_bench.json with padfree rows ({H200_PADFREE_BENCH})"
    )
    args = parser.parse_args(argv)
    h200, h100 = build(args.rows_dir, args.bench, args.padfree)
    print(write_calibration(SHIPPED_CALIBRATIONS["H200"], h200))
    print(write_calibration(SHIPPED_CALIBRATIONS["H100"], h100))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

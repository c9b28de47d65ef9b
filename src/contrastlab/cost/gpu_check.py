"""The figures of ``make gpu-check`` (config/gpu-check.yaml): per cell steps/s, achieved TFLOP/s, MFU and
peak memory, the resume, evaluation-split and GPU-vs-CPU evaluation checks, and the calibration file
``make plan`` reads.

FLOPs per training step are the plan's (:func:`contrastlab.cost.flops.cell_work`), so that the
calibration written here is in the units ``make plan`` divides by. MFU = achieved FLOP/s ÷ the
device's dense peak for the cell's precision (:data:`contrastlab.cost.calibration.GPU_PEAKS`, vendors'
data sheets; fp32 cells against the non-tensor-core fp32 peak).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contrastlab.cost.calibration import Measurement, calibration_from_measurements, peak_tflops

CALIBRATION_FILE = "calibration.json"
STS_TASKS = ("STS12", "STSBenchmark", "SICKRelatedness")
#: Largest ‖e_gpu − e_cpu‖ / ‖e_cpu‖ of one checkpoint's sentence embeddings, both IEEE fp32. Twelve
#: layers of fp32 rounding stay near 1e-6; TF32 (10-bit products) leaking into evaluation gives about
#: 1e-3, half precision more. Scores are not compared to a tolerance: on the 8-pair STS fixtures one
#: swapped rank moves Spearman by up to 2.4 points, and a relative 1e-6 noise on the CPU's own
#: embeddings already moves the fixture's STS12 by about 1 point.
EMBEDDING_TOLERANCE = 1e-4


def encoding_difference(
    model_dir: str | Path, sentences: list[str], device: str, *, pooling: str = "cls"
) -> float:
    """Largest relative L2 difference between the embeddings of ``sentences`` by the checkpoint at
    ``model_dir`` encoded on ``device`` and on the CPU (the evaluator's encoder, IEEE fp32 on both)."""
    from contrastlab.models import load_backbone, make_encoder

    embeddings = {}
    for where in dict.fromkeys([device, "cpu"]):
        model, tokenizer = load_backbone(model_dir, device=where)
        embeddings[where] = make_encoder(model, tokenizer, pooling=pooling, progress=False)(sentences)
    gap = np.linalg.norm(embeddings[device] - embeddings["cpu"], axis=1)
    return float((gap / np.maximum(np.linalg.norm(embeddings["cpu"], axis=1), 1e-12)).max())


def cell_row(summary: Mapping[str, Any], step_flops: float, kind: str, track: str) -> dict[str, Any]:
    """One row of the report from a cell's training summary and its FLOPs per step."""
    timings = summary["timings"]
    if timings.get("steady_train_s"):  # without each process's first log interval (warm-up)
        steps_per_s = timings["steady_steps"] / timings["steady_train_s"]
    else:
        steps_per_s = summary["steps"] / timings["train_s"] if timings.get("train_s") else None
    max_length = (summary.get("settings") or {}).get("max_length")
    if track == "sentence" and timings.get("sentences") and max_length:
        # The plan counts max_length tokens per sentence; dynamic padding runs fewer (the preset's
        # fixture pads to about 21 of 32): count what ran, or the calibration comes out too fast.
        step_flops *= timings["padded_tokens"] / timings["sentences"] / max_length
    achieved = step_flops * steps_per_s / 1e12 if steps_per_s else None
    peak, source = peak_tflops(summary.get("device_name", ""), summary["precision"])
    return {
        "cell": kind,
        "track": track,
        "step_flops": step_flops,
        "precision": summary["precision"],
        "tf32": bool(summary.get("tf32_matmul")),
        "steps": summary["steps"],
        "steps_per_s": steps_per_s,
        "tflops_per_s": achieved,
        "mfu": achieved / peak if achieved and peak else None,
        "peak_source": source,
        "peak_gpu_memory_gib": summary.get("peak_gpu_memory_gib"),
        "skipped_steps": summary.get("skipped_steps", 0),
        "resumed_from": summary.get("resumed_from", []),
        "startup_s": timings.get("total_s", 0) - timings.get("train_s", 0) - timings.get("eval_s", 0),
        "eval_s": timings.get("eval_s"),
        "evals": len(summary.get("evals", [])) or None,
        "state_s": timings.get("state_s"),
    }


def environment() -> dict[str, Any]:
    """Device, driver, torch and CUDA versions of this machine."""
    env = {
        "host": platform.node(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        env["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        try:
            import subprocess

            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            env["driver"] = "unknown (no nvidia-smi)"
    else:
        env["device"] = "cpu (toy size: no GPU figures)"
    return env


def calibration(rows: Iterable[Mapping[str, Any]], env: Mapping[str, Any]) -> dict[str, Any]:
    """What ``make plan`` reads (:func:`contrastlab.cost.calibration.calibration_from_measurements`): the
    achieved TFLOP/s per track and precision, start-up and dev-evaluation overheads, GPU memory."""

    rows = [r for r in rows if r["steps_per_s"]]
    measured = [
        Measurement(r["track"], r["precision"], step_flops=r["step_flops"], steps_per_s=r["steps_per_s"])
        for r in rows
    ]
    sentence = [r for r in rows if r["track"] == "sentence"]
    evals = [r["eval_s"] / r["evals"] for r in sentence if r.get("eval_s") and r.get("evals")]
    overheads = {"train_startup": max((r["startup_s"] for r in rows), default=0.0)}
    if evals:
        overheads["dev_evaluation"] = sum(evals) / len(evals)
    return calibration_from_measurements(
        measured,
        device=str(env.get("device")),
        source=f"make gpu-check on {env.get('device')} ({env.get('date')})",
        overheads_s=overheads,
        gpu_memory_gib=env.get("gpu_memory_gib"),
    )


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def write_report(
    out_dir: str | Path,
    rows: list[dict[str, Any]],
    env: Mapping[str, Any],
    checks: Mapping[str, Any],
) -> Path:
    """``report.md`` and ``calibration.json`` in ``out_dir``; returns the report's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / CALIBRATION_FILE).write_text(json.dumps(calibration(rows, env), indent=1) + "\n")
    lines = [
        "# GPU check",
        "",
        *(f"- {key}: {value}" for key, value in env.items()),
        "",
        "| cell | precision | TF32 | steps | steps/s | TFLOP/s | MFU | peak GiB | skipped | resumed from |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cell']} | {r['precision']} | {'yes' if r['tf32'] else 'no'} | {r['steps']} | "
            f"{_fmt(r['steps_per_s'], '.2f')} | {_fmt(r['tflops_per_s'], '.1f')} | "
            f"{_fmt(r['mfu'] and 100 * r['mfu'], '.1f')}{'%' if r['mfu'] else ''} | "
            f"{_fmt(r['peak_gpu_memory_gib'], '.2f')} | {r['skipped_steps']} | "
            f"{', '.join(map(str, r['resumed_from'])) or '—'} |"
        )
    lines += ["", "## Checks", ""]
    lines += [f"- {name}: {'PASS' if ok else 'FAIL'} — {what}" for name, (ok, what) in checks.items()]
    lines += [
        "",
        "MFU: achieved FLOP/s (the plan's FLOPs per step, sentence cells at the padded length their batches "
        "really had, x steps/s without each process's first log interval) over the data-sheet dense peak "
        "of the cell's precision (fp32 against the non-tensor-core peak). "
        f"`{CALIBRATION_FILE}` beside this report is what `make plan` reads.",
        "",
    ]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path

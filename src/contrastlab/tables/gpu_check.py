"""The figures of ``make gpu-check`` (config/gpu-check.yaml): per cell steps/s, achieved TFLOP/s, MFU and
peak memory, the resume and GPU-vs-CPU evaluation checks, and the calibration file ``make plan`` reads.

FLOPs per training step are counted by :class:`torch.utils.flop_counter.FlopCounterMode` on one forward
pass of the cell's own shapes (matmuls and convolutions, attention included) times 3 (forward +
backward, the usual 1:2 split). For the sentence cells every sentence is taken at the truncation
length (32 tokens); the corpus pads to each batch's longest sentence, so the sentence MFU is an upper
bound. MFU = achieved FLOP/s ÷ the device's dense peak for the cell's precision (:data:`GPU_PEAKS`,
vendors' data sheets; fp32 cells against the non-tensor-core fp32 peak).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

#: Dense peak TFLOP/s by GPU family and precision, from the vendors' data sheets (no sparsity).
GPU_PEAKS = {
    "H100": {
        "fp32": 66.9,
        "tf32": 494.7,
        "bf16": 989.4,
        "fp16": 989.4,
        "source": "NVIDIA H100 SXM5 data sheet",
    },
    "H200": {
        "fp32": 66.9,
        "tf32": 494.7,
        "bf16": 989.4,
        "fp16": 989.4,
        "source": "NVIDIA H200 SXM data sheet",
    },
    "A100": {
        "fp32": 19.5,
        "tf32": 156.0,
        "bf16": 312.0,
        "fp16": 312.0,
        "source": "NVIDIA A100 SXM data sheet",
    },
}
CALIBRATION_FILE = "calibration.json"
STS_TASKS = ("STS12", "STSBenchmark", "SICKRelatedness")
STS_TOLERANCE = 0.01  # Spearman x 100: the same checkpoint encoded on the GPU and on the CPU


def peak_tflops(device_name: str, precision: str) -> tuple[float | None, str]:
    """The dense peak of ``device_name`` (a CUDA device name) for ``precision``, and its source."""
    for family, peaks in GPU_PEAKS.items():
        if family in device_name and precision in peaks:
            return peaks[precision], f"{peaks['source']}, dense {precision}"
    return None, f"no data-sheet peak for {device_name!r}"


def forward_flops(module: torch.nn.Module, *inputs: Any, **kwargs: Any) -> int:
    """FLOPs of one forward pass of ``module`` on ``inputs`` (FlopCounterMode: matmuls, convolutions)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(*inputs, **kwargs)
    return counter.get_total_flops()


def sentence_step_flops(model_dir: str | Path, batch_size: int, max_length: int, device: str) -> int:
    """Training FLOPs of one step of a sentence cell: 3 x the forward of 2 x ``batch_size`` sentences
    of ``max_length`` tokens through the checkpoint's encoder (the head's share is negligible)."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_dir).to(device).eval()
    ids = torch.randint(1000, model.config.vocab_size, (2 * batch_size, max_length), device=device)
    return 3 * forward_flops(model, input_ids=ids, attention_mask=torch.ones_like(ids))


def vision_step_flops(encoder_dir: str | Path, device: str) -> int:
    """Training FLOPs of one step of a vision cell: 3 x the forward of both views of the batch (and of
    the labelled OAR batch) through the saved encoder at the cell's input size."""
    from contrastlab.training.vision import load_encoder

    encoder, summary = load_encoder(encoder_dir, device)
    s, size = summary["settings"], summary["input_size"]
    images = 2 * s["batch_size"] + (
        2 * (s.get("oar_batch_size") or s["batch_size"]) if s.get("oar_fraction") else 0
    )
    one = forward_flops(encoder, torch.zeros(1, 3, size, size, device=device))
    return 3 * one * images


def cell_row(summary: Mapping[str, Any], step_flops: int, kind: str) -> dict[str, Any]:
    """One row of the report from a cell's training summary and its FLOPs per step."""
    timings = summary["timings"]
    steps_per_s = summary["steps"] / timings["train_s"] if timings.get("train_s") else None
    achieved = step_flops * steps_per_s / 1e12 if steps_per_s else None
    peak, source = peak_tflops(summary.get("device_name", ""), summary["precision"])
    return {
        "cell": kind,
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
    """What ``make plan`` reads: achieved TFLOP/s per track and precision, and per-cell overheads."""
    rows = list(rows)
    out: dict[str, Any] = {
        "source": f"make gpu-check on {env.get('device')} ({env.get('date')})",
        "device": env.get("device"),
        "sentence_tflops": {},
        "vision_tflops": {},
        "overheads_s": {},
    }
    for row in rows:
        if row["tflops_per_s"] is None:
            continue
        track = "vision_tflops" if row["cell"].startswith("vision") else "sentence_tflops"
        out[track][row["precision"]] = row["tflops_per_s"]
    sentence = [r for r in rows if not r["cell"].startswith("vision")]
    if sentence:
        evals = [r["eval_s"] / r["evals"] for r in sentence if r.get("eval_s") and r.get("evals")]
        out["overheads_s"] = {
            "startup": max(r["startup_s"] for r in sentence),
            "dev_eval": sum(evals) / len(evals) if evals else None,
            "snapshot": max((r["state_s"] or 0) for r in sentence),
        }
    return out


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
        "MFU: achieved FLOP/s over the data-sheet dense peak of the cell's precision (fp32 against the "
        "non-tensor-core peak); sentence FLOPs count every sentence at 32 tokens (an upper bound). "
        f"`{CALIBRATION_FILE}` beside this report is what `make plan` reads.",
        "",
    ]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path

"""``make gpu-check``'s figures and report (:mod:`contrastlab.cost.gpu_check` runs the check): per cell
steps/s, achieved TFLOP/s, MFU and peak memory; the per-job overheads measured; the packing speed-ups;
the jobs' wall times against the plan's; and the calibration file ``make plan`` reads, written with
``report.md`` after each part, so that a check cut short leaves what it measured so far.

FLOPs per step are the plan's (:func:`contrastlab.cost.flops.cell_work`), so that the calibration is in
the units ``make plan`` divides by. MFU = achieved FLOP/s ÷ the card's dense data-sheet peak for the
cell's precision (fp32 against the non-tensor-core peak).

The overheads, each what :func:`contrastlab.cost.calibration.train_seconds` charges apart from FLOPs:
``train_startup`` (a training job's wall time less its steps at the steady rate, dev evaluations and
snapshots; mean over the jobs not resumed), ``evaluate_startup`` (an encoding job's wall time less its
encoding), ``snapshot_per_gib`` (snapshot time over count × GiB per snapshot) and ``dev_evaluation`` (the
mean time of the dev evaluations that were not their process's first, less what the plan prices of them:
:func:`dev_work_seconds`; not scaled to STS-B dev's size, whose FLOPs and calls are priced apart).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contrastlab.blocks import Bullets, Heading, Paragraph, Table, to_markdown
from contrastlab.cost.calibration import (
    EVALUATION_PRECISION,
    Calibration,
    Measurement,
    calibration_from_measurements,
    peak_tflops,
    vision_packing_key,
)
from contrastlab.cost.flops import STSB_DEV_SENTENCES, CellWork
from contrastlab.cost.measured import NONE, grouped, known_total, start_text
from contrastlab.paths import Results, write_text

#: The parts of ``make gpu-check``, in order; the report and the calibration are written after each.
PARTS = ("cells", "checks", "packing")
#: The phases a training job records (``phases`` of its summary), in the order of the report's columns.
PHASES = (
    ("interpreter_s", "interpreter"),
    ("imports_s", "imports"),
    ("gpu_claim_s", "GPU claim"),
    ("nvidia_smi_s", "nvidia-smi"),
    ("cuda_driver_s", "cuInit"),
    ("cuda_init_s", "CUDA init"),
    ("model_load_s", "model load"),
    ("data_s", "data"),
    ("first_step_s", "first step"),
    ("steps_s", "steps"),
    ("dev_s", "dev"),
    ("snapshots_s", "snapshots"),
    ("writes_s", "writes"),
    ("after_s", "after summary"),
    ("total_s", "total"),
)
#: The work a trainer times apart from its steps (``timings``), all priced apart by the plan: dev
#: evaluations, image validation passes, the analysis probe.
DEV_TIMINGS = ("eval_s", "val_s", "analysis_s")


def _fmt(value: Any, spec: str) -> str:
    return NONE if value is None else format(value, spec)


def steady_rate(summary: Mapping[str, Any]) -> float | None:
    """Steps/s of a training summary without each process's first log interval (warm-up), or over all
    its steps where the run was too short for a second interval."""
    timings = summary["timings"]
    if timings.get("steady_train_s"):
        return timings["steady_steps"] / timings["steady_train_s"]
    return summary["steps"] / timings["train_s"] if timings.get("train_s") else None


def dev_evaluation_seconds(summary: Mapping[str, Any]) -> list[float]:
    """The seconds (``eval_seconds``, else each ``evals`` record's) of each dev evaluation of a sentence
    summary that was not its process's first (step 0's, the first after each resume), which pay for CUDA's
    first use of the dev shapes and scipy's import."""
    evals = summary.get("evals") or []
    seconds = summary.get("eval_seconds")
    if not seconds or len(seconds) != len(evals):
        seconds = [e.get("seconds") for e in evals]
    steps = [e.get("step") for e in evals if e.get("step") is not None]
    # A process resumed after step r evaluates first after r (the evaluation at r itself, before the
    # snapshot, was the killed process's).
    firsts = {min(steps, default=None)}
    firsts |= {min((s for s in steps if s > r), default=None) for r in summary.get("resumed_from") or ()}
    every = [e.get("step") for e in evals]
    return [float(t) for s, t in zip(every, seconds, strict=True) if t is not None and s not in firsts]


def dev_work_seconds(work: CellWork, calibration: Calibration, sentences: int) -> float:
    """The seconds the plan prices for one dev evaluation of ``sentences`` unique sentences of the cell
    ``work`` besides its fixed cost: their share of an STS-B dev evaluation's FLOPs at the fp32 rate and
    of its encoder calls (at least one) at ``dev_call`` each. Zero without dev evaluations."""
    if not work.dev_evaluations:
        return 0.0
    share = sentences / STSB_DEV_SENTENCES
    flops = work.dev_flops / work.dev_evaluations * share
    calls = math.ceil(work.dev_calls / work.dev_evaluations * share)
    flop_s = calibration.seconds(flops, work.rate_class, EVALUATION_PRECISION)
    return flop_s + calls * calibration.overheads_s.get("dev_call", 0.0)


def cell_row(
    summary: Mapping[str, Any],
    step_flops: float,
    kind: str,
    track: str,
    *,
    snapshots: int = 0,
    snapshot_gib: float = 0.0,
    wall_s: float | None = None,
    dev_work_s: float = 0.0,
) -> dict[str, Any]:
    """One row of the report from a cell's training summary and its FLOPs per step; ``snapshots`` and
    ``snapshot_gib``: the plan's; ``wall_s``: its job's wall time, for its start-up (module docstring);
    ``dev_work_s``: :func:`dev_work_seconds` of the cell."""
    timings = summary["timings"]
    steps_per_s = steady_rate(summary)
    settings = summary.get("settings") or {}
    max_length = settings.get("max_length")
    if track == "sentence" and timings.get("sentences") and max_length:
        # The plan counts max_length tokens per sentence; dynamic padding runs fewer (the preset's
        # fixture pads to about 21 of 32): count what ran, or the calibration comes out too fast.
        # A padding-free step's token-wise work runs on the real tokens (attention's two score
        # products, about 3% of a BERT step at 32 tokens, still at the padded width: left out).
        padding_free = settings.get("padding_free") and timings.get("real_tokens")
        ran = "real_tokens" if padding_free else "padded_tokens"
        step_flops *= timings[ran] / timings["sentences"] / max_length
    achieved = step_flops * steps_per_s / 1e12 if steps_per_s else None
    peak, source = peak_tflops(summary.get("device_name", ""), summary["precision"])
    phases = summary.get("phases") or {}
    dev = phases.get("dev_s", sum(timings.get(k, 0.0) for k in DEV_TIMINGS))
    snapshots_s = phases.get("snapshots_s", timings.get("state_s"))
    # the start-up: the job's time outside its steps at the steady rate, its dev work and its snapshots
    # (module docstring); None for a resumed job or where a figure is missing
    whole = wall_s if wall_s is not None else phases.get("total_s", timings.get("total_s"))
    startup = None
    if not summary.get("resumed_from") and whole is not None and steps_per_s and snapshots_s is not None:
        startup = whole - summary["steps"] / steps_per_s - dev - snapshots_s
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
        "startup_s": startup,
        "dev_eval_s": dev_evaluation_seconds(summary) if track == "sentence" else [],
        "dev_eval_work_s": dev_work_s,
        "snapshots": snapshots,
        "snapshot_gib": snapshot_gib,
        "snapshots_s": snapshots_s,
        "start": summary.get("start"),
        "phases": phases,
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def measured_overheads(
    rows: Iterable[Mapping[str, Any]],
    evaluations: Iterable[Mapping[str, Any]] = (),
) -> dict[str, float]:
    """The ``overheads_s`` the rows (:func:`cell_row`) and the encoding jobs (``evaluations``: ``wall_s`` and
    ``work_s``, its encoding's) measure (module docstring); a figure without a measurement is left out."""
    rows = list(rows)
    out: dict[str, float] = {}
    startup = _mean([r["startup_s"] for r in rows if r.get("startup_s") is not None])
    if startup is not None:
        out["train_startup"] = max(0.0, startup)
    encoding = _mean([e["wall_s"] - e.get("work_s", 0.0) for e in evaluations if e.get("wall_s") is not None])
    if encoding is not None:
        out["evaluate_startup"] = max(0.0, encoding)
    written = [
        (r["snapshots_s"], r["snapshots"] * r["snapshot_gib"])
        for r in rows
        if not r.get("resumed_from") and r.get("snapshots") and r.get("snapshot_gib")
        if r.get("snapshots_s") is not None
    ]
    if written:
        out["snapshot_per_gib"] = sum(s for s, _ in written) / sum(g for _, g in written)
    sentence = [r for r in rows if r["track"] == "sentence"]
    dev = _mean([s - r.get("dev_eval_work_s", 0.0) for r in sentence for s in r["dev_eval_s"]])
    if dev is not None:
        out["dev_evaluation"] = max(0.0, dev)
    return out


def packing_figures(packing: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[int, float]]]:
    """The calibration's packing figures (``speedup``, ``speedup_mps``, an image step's per batch:
    ``vision_speedup_b64``) from the packing series, per the precision the copies ran."""
    figures: dict[str, dict[str, dict[int, float]]] = {}
    for series in packing:
        # an image step's figures by the batch it ran (the plan prices a cell at its own batch only)
        key = f"{'vision_' if series['track'] == 'vision' else ''}speedup{'_mps' if series['mps'] else ''}"
        if series["track"] == "vision" and series.get("batch"):
            key = vision_packing_key(series["mps"], series["batch"])
        for r in series.get("rows") or ():
            if r["k"] > 1:
                precision = r.get("precision") or series["precision"]
                figures.setdefault(key, {}).setdefault(precision, {})[r["k"]] = r["speedup"]
    return figures


def calibration(
    rows: Iterable[Mapping[str, Any]],
    env: Mapping[str, Any],
    *,
    packing: Iterable[Mapping[str, Any]] = (),
    evaluations: Iterable[Mapping[str, Any]] = (),
    missing: Sequence[str] = (),
) -> dict[str, Any]:
    """The calibration ``make plan`` reads: achieved TFLOP/s, :func:`measured_overheads`, GPU memory, the
    packing speed-ups and the ``missing`` parts."""
    rows = [r for r in rows if r["steps_per_s"]]
    measured = [Measurement(r["track"], r["precision"], r["step_flops"], r["steps_per_s"]) for r in rows]
    source = f"make gpu-check on {env.get('device')} ({env.get('date')})"
    return calibration_from_measurements(
        measured,
        device=str(env.get("device")),
        source=source + (f", without its {', '.join(missing)} part" if missing else ""),
        overheads_s=measured_overheads(rows, evaluations),
        gpu_memory_gib=env.get("gpu_memory_gib"),
        packing=packing_figures(packing),
        missing_parts=missing,
    )


def jobs_blocks(jobs: Sequence[Mapping[str, Any]]) -> list:
    """The report's actual-against-plan section: per rule and per job, the wall time beside the plan's
    seconds under each calibration of ``planned`` (label -> seconds), each job's start and start-up, and
    the phases (``jobs``: rule, cell, wall_s, planned, start, phases, startup_s; "—" where missing)."""
    if not jobs:
        return []
    labels = list(dict.fromkeys(label for j in jobs for label in (j.get("planned") or {})))
    plan = [f"plan, {label} (s)" for label in labels]
    per_rule = [
        [
            rule,
            str(len(group)),
            known_total((j.get("wall_s") for j in group), sum, ".1f"),
            *(
                known_total(((j.get("planned") or {}).get(label) for j in group), sum, ".1f")
                for label in labels
            ),
        ]
        for rule, group in grouped(jobs, lambda j: j["rule"]).items()
    ]
    per_job = [
        [
            j["rule"],
            j.get("cell") or NONE,
            start_text(j.get("start")),
            _fmt(j.get("wall_s"), ".1f"),
            *(_fmt((j.get("planned") or {}).get(label), ".1f") for label in labels),
            _fmt(j.get("startup_s"), ".1f"),
        ]
        for j in jobs
    ]
    return [
        Heading(2, "Actual against plan"),
        Paragraph(
            "Each job's wall time (its Snakemake benchmark file) beside the seconds `make plan` gives it "
            "under each calibration (the shipped one of this card, and the one this check wrote: its "
            "start-up, dev-evaluation and snapshot figures come from these jobs)."
        ),
        Table(["rule", "jobs", "actual (s)", *plan], per_rule),
        Table(["rule", "cell", "start", "actual (s)", *plan, "start-up (s)"], per_job),
        *_phase_blocks([j for j in jobs if j.get("phases") or j.get("start")]),
    ]


def _phase_blocks(jobs: Sequence[Mapping[str, Any]]) -> list:
    """Every GPU job's phases (seconds) and the time it waited to be handed over."""
    if not jobs:
        return []
    # the phases PHASES names, then any other a job records (encode_s, ...), before the total
    named = dict(PHASES)
    others = {key: key.removesuffix("_s") for j in jobs for key in j.get("phases") or {} if key not in named}
    columns = [*PHASES[:-1], *others.items(), PHASES[-1]]
    rows = [
        [
            j.get("rule") or NONE,
            j.get("cell") or NONE,
            _fmt((j.get("start") or {}).get("waited_s"), ".2f"),
            *(_fmt((j.get("phases") or {}).get(key), ".2f") for key, _ in columns),
        ]
        for j in jobs
    ]
    return [
        Paragraph(
            "Phases of each GPU job (seconds: a training job's summary's `phases`, an encoding job's "
            "`encoding.phases`; waited: `start.waited_s`):"
        ),
        Table(["rule", "cell", "waited", *(name for _, name in columns)], rows),
    ]


def cells_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The cells' table: rate, achieved TFLOP/s, MFU, peak memory, skipped steps, resumes, start-up."""
    header = "cell precision TF32 steps steps/s TFLOP/s MFU".split() + ["peak GiB", "skipped", "resumed from"]
    return Table(
        [*header, "start-up (s)"],
        [
            [
                r["cell"],
                r["precision"],
                "yes" if r["tf32"] else "no",
                r["steps"],
                _fmt(r["steps_per_s"], ".2f"),
                _fmt(r["tflops_per_s"], ".1f"),
                _fmt(r["mfu"] and 100 * r["mfu"], ".1f") + ("%" if r["mfu"] else ""),
                _fmt(r["peak_gpu_memory_gib"], ".2f"),
                r["skipped_steps"],
                ", ".join(map(str, r["resumed_from"])) or NONE,
                _fmt(r.get("startup_s"), ".1f"),
            ]
            for r in rows
        ],
    )


def packing_blocks(packing: Sequence[Mapping[str, Any]]) -> list:
    """The packing section: per step and with or without MPS, each count's rates, their sum and
    speed-up; a series that failed shows its error."""
    if not packing:
        return []
    rows = []
    for series in packing:
        mps = "yes" if series["mps"] else "no"
        if series.get("error"):
            rows.append([series["step"], NONE, mps, NONE, f"not measured: {series['error']}", "", "", ""])
            continue
        for r in series["rows"]:
            each = ", ".join(f"{rate:.2f}" for rate in r["steps_per_s"])
            mode = r.get("mode", NONE)
            speed = [f"{r['sum']:.2f}", f"{r['speedup']:.2f}x", _fmt(r["peak_gib"], ".2f")]
            rows.append([series["step"], mode, mps, r["k"], each, *speed])
    header = ["step", "mode", "MPS", "cells at once", "steps/s each", "steps/s in all", "speed-up"]
    return [
        Heading(2, "Several small cells per GPU"),
        Paragraph(
            "Concurrent copies of a cell's training step in the mode its cells run (padding-free IEEE fp32, "
            "the captured graph otherwise on CUDA), each a process of its own, timed together, without and "
            "with an MPS daemon; speed-up: their summed steps/s over one copy alone (`resources.gpu_share`; "
            "`make plan` prices packed cells with it)."
        ),
        Table([*header, "peak GiB each"], rows),
    ]


def write_report(
    out_dir: str | Path,
    rows: list[dict[str, Any]],
    env: Mapping[str, Any],
    checks: Mapping[str, Any],
    *,
    packing: Sequence[Mapping[str, Any]] = (),
    dev_sentences: int | None = None,
    evaluations: Iterable[Mapping[str, Any]] = (),
    jobs: Sequence[Mapping[str, Any]] = (),
    missing: Sequence[str] = (),
    price: Callable[[Path], Mapping[tuple[str, str], float]] | None = None,
) -> Path:
    """``calibration.json`` (:func:`calibration`), then ``report.md``, in ``out_dir``, each replaced whole;
    returns the report's path. ``packing``: :func:`~contrastlab.cost.gpu_check.measure_packing`'s series;
    ``dev_sentences``: the unique STS-B dev sentences a dev evaluation encoded; ``jobs``:
    :func:`jobs_blocks`' rows, to which ``price(calibration file)`` (the plan's seconds per (rule, cell))
    adds the file just written's column; ``missing``: the parts of :data:`PARTS` not done yet."""
    out_dir = Path(out_dir)
    measured = calibration(rows, env, packing=packing, evaluations=evaluations, missing=missing)
    calibration_file = Path(Results(out_dir).calibration)
    write_text(calibration_file, json.dumps(measured, indent=1) + "\n")
    if price is not None and jobs:
        here = price(calibration_file)
        jobs = [
            {
                **j,
                "planned": {**(j.get("planned") or {}), "this calibration": here.get((j["rule"], j["cell"]))},
            }
            for j in jobs
        ]
    done = [part for part in PARTS if part not in missing]
    about = [f"{key}: {value}" for key, value in env.items()] + [f"parts done: {', '.join(done) or 'none'}"]
    if missing:
        about.append(f"not done (the check stopped or has not reached them yet): {', '.join(missing)}")
    page = [Heading(1, "GPU check"), Bullets(about), cells_table(rows), *jobs_blocks(jobs)]
    page += [*packing_blocks(packing), Heading(2, "Checks")]
    if "checks" in missing:
        page.append(Paragraph("Not run yet."))
    if checks:
        page.append(
            Bullets([f"{name}: {'PASS' if ok else 'FAIL'} — {what}" for name, (ok, what) in checks.items()])
        )
    page.append(Paragraph(_notes(dev_sentences, calibration_file.name)))
    return write_text(out_dir / "report.md", to_markdown(page))


def _notes(dev_sentences: int | None, calibration_name: str) -> str:
    scaled = (
        f" The dev-evaluation overhead is the cells' time per evaluation of {dev_sentences} sentences "
        "(not their process's first) less those sentences' FLOPs and encoder calls, which the plan "
        f"prices apart at STS-B dev's {STSB_DEV_SENTENCES}: the fixed cost of one evaluation, not scaled."
        if dev_sentences
        else ""
    )
    return (
        "MFU: achieved FLOP/s (the plan's FLOPs per step, sentence cells at the padded length their batches "
        "really had, x steps/s without each process's first log interval) over the data-sheet dense peak "
        "of the cell's precision (fp32 against the non-tensor-core peak). Start-up: a job's wall time less "
        "its steps at that rate, its dev evaluations and its snapshots (what `make plan` charges once per "
        f"job).{scaled} `{calibration_name}` beside this report is what `make plan` reads."
    )

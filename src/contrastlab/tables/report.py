"""The summary page listing every table with how much of it has run and how far ours is from the paper."""

from __future__ import annotations

import json
import os
from pathlib import Path

from contrastlab.tables.assemble import (
    STATUS_FAILED,
    STATUS_NOT_CONFIGURED,
    STATUS_NOT_RUN,
    STATUS_PARTIAL,
    Table,
)
from contrastlab.tables.deviations import deviations, markdown_lines
from contrastlab.tables.markdown import markdown_table
from contrastlab.tables.render import fmt_score


def summarize(table: Table) -> dict[str, str]:
    """Counts and mean/max |Δ| of one table, as display strings."""
    c = table.cells
    counts = c["status"].value_counts()
    if table.spec.kind == "hparams":
        return {
            "cells": str(len(c)),
            "run": "–",
            "partial": "–",
            "not run": "–",
            "not configured": str(int(counts.get(STATUS_NOT_CONFIGURED, 0))),
            "mean abs Δ": "–",
            "max abs Δ": "–",
            "note": f"config vs paper: {counts.get('match', 0)} match, {counts.get('differs', 0)} differ",
        }
    diffs = c["diff"].abs().dropna()
    run = c["status"].isin(["ok", STATUS_PARTIAL])
    toy = int((~c["in_paper"] & run).sum())
    failed = int(counts.get(STATUS_FAILED, 0))
    return {
        "cells": str(len(c)),
        "run": str(int(run.sum())),
        "partial": str(int(counts.get(STATUS_PARTIAL, 0))),
        "not run": str(int(counts.get(STATUS_NOT_RUN, 0))),
        "not configured": str(int(counts.get(STATUS_NOT_CONFIGURED, 0))),
        "mean abs Δ": fmt_score(diffs.mean()) if len(diffs) else "–",
        "max abs Δ": fmt_score(diffs.max()) if len(diffs) else "–",
        "note": f"{len(diffs)} cells compared with the paper"
        + (f"; {toy} cells on backbones not in the paper" if toy else "")
        + (f"; {failed} cells failed (see failed.json beside their metrics)" if failed else ""),
    }


def precision_label(training: dict | None) -> str:
    """How a finished cell ran, from the ``training`` block of its metrics file: the resolved precision
    and, for fp32 runs on CUDA, whether the step's matmuls/convolutions were TF32 (``tf32``) or IEEE.

    >>> precision_label({"precision": "tf32", "tf32_matmul": True, "tf32_conv": True})
    'tf32 (TF32 matmul+conv)'
    >>> precision_label({"precision": "fp32", "tf32_matmul": False, "tf32_conv": False})
    'fp32 (IEEE)'
    """
    if not training or not training.get("precision"):
        return "unknown"
    name = training["precision"]
    flags = [training.get("tf32_matmul"), training.get("tf32_conv")]
    if None in flags:  # metrics written before the switches were recorded
        return name
    if all(flags):
        return f"{name} (TF32 matmul+conv)"
    return f"{name} (IEEE)" if name == "fp32" else name


def precision_rows(config: dict, metrics_root: str | os.PathLike) -> list[dict[str, str]]:
    """One row per (experiment, method): the precision the config gives its cells and the precision
    they ran in (the ``training`` block of their metrics files, :func:`precision_label`; auto and tf32
    run as fp32 off CUDA)."""
    from contrastlab.config import cells, method_settings, track

    rows: dict[tuple[str, str], dict[str, set]] = {}
    for cell in cells({"select": {}, **config}):
        resolved = method_settings({"training": {}, **config}, cell.experiment, cell.method, cell.backbone)
        row = rows.setdefault((cell.experiment, cell.method), {"config": set(), "ran": set(), "cells": set()})
        row["config"].add(resolved.get("precision") or "auto")
        row["cells"].add(cell.backbone)
        name = "vision.json" if track(config, cell.experiment) == "vision" else "senteval.json"
        path = Path(metrics_root) / cell.path / name
        if path.exists():
            row["ran"].add(precision_label(json.loads(path.read_text(encoding="utf-8")).get("training")))
    return [
        {
            "experiment": experiment,
            "method": method,
            "backbones": ", ".join(sorted(r["cells"])),
            "config": ", ".join(sorted(r["config"])),
            "ran in": ", ".join(sorted(r["ran"])) or "not run",
        }
        for (experiment, method), r in rows.items()
    ]


def projected_cost(config: dict) -> tuple[dict | None, str]:
    """The projected GPU-hours of the config's grid as configured (:mod:`contrastlab.tables.plan`) and
    a sentence saying how they were projected; ``(None, <why not>)`` when the calibration cannot be
    read (the report must not fail over it)."""
    from contrastlab.tables import plan

    try:
        calibration = plan.load_calibration()
        jobs = plan.make_plan(config, calibration)
    except (OSError, ValueError, KeyError, TypeError) as error:  # a partial or hand-made config
        return None, f"No projection ({type(error).__name__}: {error})."
    note = (
        f"Projected GPU-h: what each job would take on the calibration's GPU with the precision the config "
        f"gives it (`make plan`: FLOPs ÷ achieved TFLOP/s + overheads; {calibration.describe()}); "
        f"{plan.total_hours(jobs):.1f} GPU-h for the whole grid. Measured GPU-h count only jobs that ran on "
        "a GPU."
    )
    return plan.projected_hours(jobs), note


def write_report(
    built: list[tuple[Table, dict[str, Path]]],
    report_path: Path,
    *,
    metrics_root,
    config: dict | None = None,
    figures: list[dict] | None = None,
    results_dir: str | os.PathLike | None = None,
    sections: list[str] | None = None,
) -> Path:
    """Write the Markdown summary of ``built`` (table, {ext: path}) to ``report_path``; with
    ``config``, also each paper's deviations from the authors' setups and the precision of every cell;
    with ``figures`` (:func:`contrastlab.config.figures`), each figure inline (``figures/<name>.png``
    beside the report) under its caption, with links to its PDF and CSV; with ``results_dir``, what its
    jobs cost (:func:`contrastlab.tables.cost.cost_lines`); ``sections``: Markdown lines put after the
    table list (the comparison tables of the user's losses)."""
    report_path.parent.mkdir(parents=True, exist_ok=True)
    base = report_path.parent

    def link(path: Path, text: str) -> str:
        return f"[{text}]({Path(os.path.relpath(path, base)).as_posix()})"

    rows = []
    for table, paths in built:
        s = summarize(table)
        files = " · ".join(link(paths[ext], ext) for ext in ("csv", "tex"))
        rows.append({"table": link(paths["md"], table.spec.title), **s, "files": files})
    lines = [
        "# Paper tables: published numbers beside ours",
        "",
        f"Generated by `contrastlab.tables` from the metrics files under `{metrics_root}` and the config; "
        "every number below is computed, none typed by hand. Each table puts the paper's number, our mean "
        "± std over seeds and the difference (ours − paper) side by side; cells without a run say "
        "“not run” (or “not configured” outside the config's grid), numbers the paper does not give say "
        "“n/a”. Run = cells with at least one seed; partial = fewer seeds than configured; mean/max abs Δ "
        "over the run cells that have a published number. Hyperparameter tables compare the config with "
        "the paper.",
        "",
    ]
    if rows:
        lines += markdown_table(rows, numeric_after_first=True)
    else:
        lines.append("No tables: the config has no experiment with a paper table.")
    lines.append("")
    lines += sections or []  # e.g. the comparison tables of the user's losses
    if figures:
        lines += ["## Figures", ""]
        for fig in figures:
            stem = base / "figures" / fig["name"]
            files = " · ".join(link(stem.with_name(f"{stem.name}.{ext}"), ext) for ext in ("pdf", "csv"))
            lines += [
                f"### {fig['name']}",
                "",
                f"![{fig['name']}]({Path(os.path.relpath(stem, base)).as_posix()}.png)",
                "",
                f"{fig['caption']} ({files})",
                "",
            ]
    if config is not None:
        lines += [
            "## Deviations from the authors' setups",
            "",
            "Settings in which this config's cells deliberately differ from the paper (and, where the "
            "paper is silent, from the authors' released scripts); everything else follows them "
            "(`docs/deviations.md` for the full reproduction).",
            "",
        ]
        for name, exp in (config.get("experiments") or {}).items():
            lines += [f"### {exp.get('title') or name}", ""] + markdown_lines(deviations(config, name)) + [""]
        lines += [
            "## Precision of every cell",
            "",
            "config: the precision the config resolves for the cells (each paper's own unless "
            "`precision_override` is set); ran in: what the finished cells' training used, with the "
            "fp32 switches of its training step (IEEE or TF32; auto and tf32 run as fp32 off CUDA).",
            "",
        ]
        lines += markdown_table(precision_rows(config, metrics_root)) + [""]
    if results_dir is not None:  # what each job cost, from the run's benchmark files (tables.cost)
        from contrastlab.tables.cost import cost_lines

        projected, note = projected_cost(config) if config is not None else (None, "")
        lines += cost_lines(results_dir, projected, note)
    report_path.write_text("\n".join(lines), encoding="utf-8")
    return report_path

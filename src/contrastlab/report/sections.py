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
from contrastlab.tables.verdicts import LEVEL, chance_expected, noise_note, verdict_counts

#: Verdict counts in the summary table (tables.verdicts): compared cells and each verdict.
VERDICT_KEYS = ("compared", "within noise", "above", "below", "undecided")
#: Summary column: the above + below verdicts expected by chance (tables.verdicts.chance_expected).
CHANCE_KEY = "above/below by chance"


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
            **dict.fromkeys(VERDICT_KEYS, "–"),
            CHANCE_KEY: "–",
            "note": f"config vs paper: {counts.get('match', 0)} match, {counts.get('differs', 0)} differ",
        }
    verdicts = {k: str(v) for k, v in verdict_counts(c).items()} or dict.fromkeys(VERDICT_KEYS, "–")
    tested, expected = chance_expected(c)
    verdicts[CHANCE_KEY] = f"≈{expected:.1f}" if tested else "–"
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
        **verdicts,
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
    patched = config if "training" in config else {"training": {}, **config}  # one dict: resolved once
    for cell in cells({"select": {}, **config}):
        resolved = method_settings(patched, cell.experiment, cell.method, cell.backbone)
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
    """The projected GPU-hours of the config's grid as configured (:mod:`contrastlab.cost.plan`) and
    a sentence saying how they were projected; ``(None, <why not>)`` when the calibration cannot be
    read (the report must not fail over it)."""
    from contrastlab.cost import calibration as cl_calibration
    from contrastlab.cost import plan

    try:
        calibration = cl_calibration.load_calibration()
        jobs = plan.make_plan(config, calibration)
        probes, probe_hours = plan.probe_jobs(config, calibration)
    except (OSError, ValueError, KeyError, TypeError) as error:  # a partial or hand-made config
        return None, f"No projection ({type(error).__name__}: {error})."
    note = (
        f"Projected GPU-h: what each job would take on the calibration's GPU with the precision the config "
        f"gives it (`make plan`: FLOPs ÷ achieved TFLOP/s + overheads; {calibration.describe()}); "
        f"{plan.total_hours(jobs):.1f} GPU-h for the whole grid, and {probes} SentEval probe jobs on the "
        f"CPU ({probe_hours:.1f} h, not GPU time). Measured GPU-h count only jobs that ran on a GPU."
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
    metrics=None,
) -> Path:
    """Write the Markdown summary of ``built`` (table, {ext: path}) to ``report_path``; with
    ``config``, also each paper's deviations from the authors' setups and the precision of every cell;
    with ``figures`` (:func:`contrastlab.figures.catalog.figures`), each figure inline (``figures/<name>.png``
    beside the report) under its caption, with links to its PDF and CSV; with ``results_dir``, what its
    jobs cost (:func:`contrastlab.cost.measured.cost_lines`); ``sections``: Markdown lines put after the
    table list (the comparison tables of the user's losses). With ``config``, the report opens with the
    papers' claims and their verdicts on ``metrics`` (collected from ``metrics_root`` when not given)."""
    report_path.parent.mkdir(parents=True, exist_ok=True)
    base = report_path.parent
    if metrics is None and config is not None:
        from contrastlab.tables.metrics import collect_metrics

        metrics = collect_metrics(metrics_root)

    def link(path: Path, text: str) -> str:
        return f"[{text}]({Path(os.path.relpath(path, base)).as_posix()})"

    rows, noise_lines = [], []
    for table, paths in built:
        if "verdict" in table.cells:
            noise_lines.append(f"- {table.spec.title}: {noise_note(table.cells)}")
        s = summarize(table)
        files = " · ".join(link(paths[ext], ext) for ext in ("csv", "tex"))
        rows.append({"table": link(paths["md"], table.spec.title), **s, "files": files})
    lines = ["# Paper tables: published numbers beside ours", ""]
    if config is not None and metrics is not None:
        pages = {t.spec.name: p["md"] for t, p in built}
        pages.update({f["name"]: base / "figures" / f"{f['name']}.png" for f in figures or []})
        lines += claims_lines(config, metrics, base, pages)
    lines += [
        "## Tables",
        "",
        f"Generated by `contrastlab.tables` from the metrics files under `{metrics_root}` and the config; "
        "every number below is computed, none typed by hand. Each table puts the paper's number, our mean "
        "± std over seeds and the difference (ours − paper) side by side; cells without a run say "
        "“not run” (or “not configured” outside the config's grid), numbers the paper does not give say "
        "“n/a”. Run = cells with at least one seed; partial = fewer seeds than configured; mean/max abs Δ "
        "over the run cells that have a published number. Hyperparameter tables compare the config with "
        "the paper. Compared = run cells with a published number; within noise / above / below / undecided "
        "are their seed-noise verdicts (`contrastlab.tables.verdicts`: our mean against the published "
        "number, with an interval from the pooled seed noise). The intervals are per cell, so a faithful "
        "reproduction still shows some above / below: above/below by chance is how many, the trained "
        f"cells tested against seed noise × {1 - LEVEL:g} (each table's legend gives its ▲ / ▼ beside it).",
        "",
    ]
    if rows:
        lines += markdown_table(rows, numeric_after_first=True)
    else:
        lines.append("No tables: the config has no experiment with a paper table.")
    lines.append("")
    lines += sections or []  # e.g. the comparison tables of the user's losses
    if noise_lines:
        lines += ["Which seed-noise estimate each table uses:", ""] + noise_lines + [""]
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
        from contrastlab.cost.measured import cost_lines

        projected, note = projected_cost(config) if config is not None else (None, "")
        lines += cost_lines(results_dir, projected, note)
    report_path.write_text("\n".join(lines), encoding="utf-8")
    return report_path


def claims_lines(config: dict, metrics, base: Path, pages: dict[str, Path]) -> list[str]:
    """The "Claims" section: one row per paper claim (:mod:`contrastlab.report.claims`) with its verdict,
    the numbers behind it and links to its tables or figures (``pages``: name -> the rendered table's
    Markdown or the figure's PNG; others are named without a link); then how to add seeds to the
    undecided ones only."""
    from contrastlab.report.claims import (
        PAPERS,
        add_seeds_commands,
        evaluate_claims,
        load_claims,
        numbers_text,
        seed_plan,
        verdict_text,
    )

    results = evaluate_claims(metrics, config)
    toy = {e: m for e, m in ((config.get("tables") or {}).get("verdict_stand_ins") or {}).items() if m}
    lines = [
        "## Claims",
        "",
        "Each paper's headline claims (`src/contrastlab/report/claims/<paper>.yaml`, quoted from the paper) "
        "checked on our metrics: reproduced / not reproduced when the difference clears the seed-noise "
        "interval (level 0.95), undecided when it does not (with the seeds per cell that would decide it "
        "at the measured noise), not run when its cells have no metrics. A “comparable or better” claim is "
        "a non-inferiority test at the margin its claim file states and reasons (printed with its "
        "numbers): reproduced only when the interval's lower bound is above −margin, not reproduced when "
        "its upper bound is below −margin, else undecided. A claim of several parts (losses × "
        "backbones) is reproduced only when every part is; it is not reproduced only when a part stays "
        "below its interval after Holm's correction over the claim's parts (one-sided level 0.025 for "
        "the whole claim, not per part: uncorrected, 12 parts with no true gap would read “not "
        "reproduced” about one time in four); a part below its own interval but not after the correction "
        "is undecided. A claim that counts (“12 of the 24 accuracies”) needs that many parts reproduced, "
        "and is not reproduced when fewer are left uncontradicted. Numbers: each run part's contrast ± "
        "the interval's half-width.",
        "",
        "Control: every claim that rests on a paper table is also evaluated on the paper's own "
        "transcribed numbers, as if they were ours (`contrastlab.report.control`, "
        "`tests/report/test_claims_control.py`): each reads reproduced there, except the claims whose "
        "sentence the paper's own tables do not support, which say so beside their verdict.",
        "",
    ]
    untested = [
        f"{load_claims(p)['paper']}: {load_claims(p)['not_regenerated']}"
        for p in PAPERS
        if load_claims(p).get("not_regenerated")
    ]
    if untested:
        lines += [
            "Not tested here (headline results of the papers that this pipeline does not regenerate): "
            + "; ".join(untested)
            + ".",
            "",
        ]
    if toy:
        pairs = ", ".join(dict.fromkeys(f"{t} for {p}" for m in toy.values() for t, p in m.items()))
        lines += [
            f"**Toy numbers**: this run's backbones stand in for the papers' ({pairs}); these verdicts "
            "exercise the code and say nothing about the papers.",
            "",
        ]

    def links(claim) -> str:
        out = []
        for name in claim.get("links") or []:
            if name in pages:
                out.append(f"[{name}]({Path(os.path.relpath(pages[name], base)).as_posix()})")
            else:  # a table or figure this run does not render
                out.append(name)
        return " · ".join(out)

    rows = [
        {
            "paper": r.claim["paper"],
            "claim": r.claim["claim"],
            "verdict": verdict_text(r),
            "numbers": numbers_text(r),
            "where": r.claim["where"],
            "see": links(r.claim),
        }
        for r in results
    ]
    lines += markdown_table(rows) + [""]
    counts = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    lines += [", ".join(f"{v}: {n}" for v, n in counts.items()) + f" (of {len(results)} claims).", ""]
    commands = add_seeds_commands(seed_plan(results, config), configfile="$CONFIG")
    if commands:
        lines += [
            "More seeds for the cells of the undecided claims only, with `CONFIG` set to the preset this "
            "run came from (`make add-seeds CONFIG=<preset>` prints them filled in; the last command "
            "renders the tables and this report again):",
            "",
            *(f"    {command}" for command in commands),  # an indented code block (plain Markdown)
            "",
        ]
    return lines

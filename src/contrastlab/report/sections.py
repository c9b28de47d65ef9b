"""report.md: one section per paper, in the papers' order (Nie 2023, Li 2024, MACL, OAR), each with its
claims and their tally, its tables (a summary row of how much has run and how far ours is from the paper,
then the grid itself), its figures in the paper's own numbering and its deviations; then the user's
losses, the precision of every cell and the cost. report.html (:mod:`.html`) is the same page with a
coloured badge on every verdict."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from contrastlab.artifacts import LOCK_NAME
from contrastlab.config import Grid, paper_of
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import plan
from contrastlab.cost.budget import plan_points
from contrastlab.cost.measured import cost_lines
from contrastlab.papers import bibtex_block
from contrastlab.paths import read_metrics, write_text
from contrastlab.report import power
from contrastlab.report.answer import add_seeds_lines, answer_lines, headline_lines, tally_line, toy_lines
from contrastlab.report.claims import (
    PAPERS,
    UNDECIDED,
    evaluate_claims,
    load_claims,
    numbers_text,
    verdict_text,
)
from contrastlab.stats import LEVEL
from contrastlab.tables.assemble import (
    STATUS_FAILED,
    STATUS_NOT_CONFIGURED,
    STATUS_NOT_RUN,
    STATUS_PARTIAL,
    Table,
)
from contrastlab.tables.deviations import deviations, markdown_lines
from contrastlab.tables.markdown import markdown_table
from contrastlab.tables.metrics import collect_metrics
from contrastlab.tables.render import fmt_score, to_markdown
from contrastlab.tables.verdicts import chance_expected, noise_note, verdict_counts

#: Verdict counts in the summary table: the run cells with a seed-noise verdict (tables.verdicts; a toy
#: backbone's against its stand-in's published number) and each verdict. Not called "compared": the note's
#: "Δ cells" are the run cells with a published number for their own backbone, a different count.
VERDICT_KEYS = ("verdicts", "within noise", "above", "below", "undecided")
#: Summary column: the above + below verdicts expected by chance (tables.verdicts.chance_expected).
CHANCE_KEY = "above/below by chance"


def summarize(table: Table) -> dict[str, str]:
    """Counts and mean/max |Δ| of one table, as display strings. Each word has one meaning: "Δ cells"
    (the note) are run cells with a published number for their own backbone, over which mean/max abs Δ
    are taken; "verdicts" are run cells with a seed-noise verdict, which includes a toy backbone judged
    against the number of the paper backbone it stands in for (it has a verdict but no Δ)."""
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
    counts_by_verdict = verdict_counts(c)
    if counts_by_verdict:
        counts_by_verdict["verdicts"] = counts_by_verdict.pop("compared")
        verdicts = {k: str(counts_by_verdict[k]) for k in VERDICT_KEYS}
    else:
        verdicts = dict.fromkeys(VERDICT_KEYS, "–")
    tested, expected = chance_expected(c)
    verdicts[CHANCE_KEY] = f"≈{expected:.1f}" if tested else "–"
    diffs = c["diff"].abs().dropna()
    run = c["status"].isin(["ok", STATUS_PARTIAL])
    toy = int((~c["in_paper"] & run).sum())
    stand_in = 0
    if "compared_with" in c:  # toy cells judged against the number of the backbone they stand in for
        judged = c["verdict"].isin(VERDICT_KEYS[1:])
        stand_in = int((c["compared_with"].astype(str).str.endswith("(stand-in)") & judged).sum())
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
        "note": f"Δ cells: {len(diffs)} (run, with a published number for their own backbone)"
        + (f"; {toy} cells on backbones not in the paper" if toy else "")
        + (f", {stand_in} of them with a verdict against a stand-in backbone's number" if stand_in else "")
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


def precision_rows(grid: Grid, metrics_root: str | os.PathLike) -> list[dict[str, str]]:
    """One row per (experiment, method): the precision the config gives its cells and the precision
    they ran in (the ``training`` block of their metrics files, :func:`precision_label`; auto and tf32
    run as fp32 off CUDA)."""
    rows: dict[tuple[str, str], dict[str, set]] = {}
    for cell in grid.every_cell():
        resolved = grid.settings(cell)
        row = rows.setdefault((cell.experiment, cell.method), {"config": set(), "ran": set(), "cells": set()})
        row["config"].add(resolved.get("precision") or "auto")
        row["cells"].add(cell.backbone)
        name = "vision.json" if grid.experiment(cell.experiment).track == "vision" else "senteval.json"
        path = Path(metrics_root) / cell.path / name
        if path.exists():
            row["ran"].add(precision_label(read_metrics(path).get("training")))
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


def planned_jobs(grid: Grid) -> list | None:
    """The plan's jobs of ``grid`` (:func:`~contrastlab.cost.plan.make_plan` at the calibration), None
    when the calibration or the config cannot be projected (the report must not fail over it)."""
    try:
        calibration = cl_calibration.load_calibration()
        return plan.make_plan(grid, calibration, points=plan_points(grid, calibration))
    except (OSError, ValueError, KeyError, TypeError):  # a partial or hand-made config
        return None


def projected_cost(grid: Grid) -> tuple[dict | None, str]:
    """The projected GPU-hours of the config's grid as configured (:mod:`contrastlab.cost.plan`) and
    a sentence saying how they were projected; ``(None, <why not>)`` when the calibration cannot be
    read (the report must not fail over it)."""
    try:
        calibration = cl_calibration.load_calibration()
        jobs = plan.make_plan(grid, calibration, points=plan_points(grid, calibration))
        probes, probe_hours = plan.probe_jobs(grid, calibration)
    except (OSError, ValueError, KeyError, TypeError) as error:  # a partial or hand-made config
        return None, f"No projection ({type(error).__name__}: {error})."
    note = (
        f"Projected GPU-h: what each job would take on the calibration's GPU with the precision the config "
        f"gives it (`make plan`: FLOPs ÷ achieved TFLOP/s + overheads; {calibration.describe()}); "
        f"{plan.total_hours(jobs):.1f} GPU-h for the whole grid, and {probes} SentEval probe jobs on the "
        f"CPU ({probe_hours:.1f} h, not GPU time). Measured GPU-h count only jobs that ran on a GPU."
    )
    return plan.projected_hours(jobs), note


#: Figure captions start with their place in the paper ("Nie Fig. 3b:", "OAR Table 2 (synthetic)").
_FIGURE_PLACE = re.compile(r"\b(Fig|Table)\. ?(\d+)([a-z]?)|\b(Table) (\d+)([a-z]?)")


def figure_order(figure: dict) -> tuple:
    """Sort key putting a paper's figures in its own numbering (Fig. 1a, 1b-d, 2a, ..., then tables),
    from the caption's opening words; figures without a number keep their catalogue order, last.

    >>> sorted(["Nie Fig. 3b: x", "OAR Table 2 (synthetic): y", "Nie Fig. 1a: z", "no number"],
    ...        key=lambda c: figure_order({"caption": c}))
    ['Nie Fig. 1a: z', 'Nie Fig. 3b: x', 'OAR Table 2 (synthetic): y', 'no number']
    """
    match = _FIGURE_PLACE.search(figure["caption"].split(":")[0])
    if match is None:
        return (2, 0, "")
    kind, number, letter = (match[1], match[2], match[3]) if match[1] else (match[4], match[5], match[6])
    return (0 if kind == "Fig" else 1, int(number), letter)


def table_block(markdown_page: str) -> list[str]:
    """The first Markdown table of a rendered table page (its grid, without title, source and legend)."""
    lines = markdown_page.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def write_report(
    built: list[tuple[Table, dict[str, Path]]],
    report_path: Path,
    *,
    metrics_root,
    grid: Grid | None = None,
    figures: list[dict] | None = None,
    results_dir: str | os.PathLike | None = None,
    sections: list[str] | None = None,
    searches: dict[str, list[str]] | None = None,
    metrics=None,
    bridge: list[dict[str, str]] | None = None,
) -> Path:
    """Write the Markdown report of ``built`` (table, {ext: path}) to ``report_path``, one section per
    paper in the papers' order (Nie 2023, Li 2024, MACL, OAR), each with its claims and their tally
    (with ``grid``), its tables (the summary row, the grid inline with its verdict markers, and its
    experiments' ``searches``: experiment -> the search table's lines), its figures in the paper's own
    numbering (``figures``: :func:`contrastlab.figures.catalog.figures`, each inline from
    ``figures/<name>.png`` beside the report) and its deviations from the authors' setups (with
    ``grid``). Then ``sections`` (Markdown lines: the comparison tables of the user's losses), the
    figures of no paper, the precision of every cell (with ``grid``) and, with ``results_dir``, what
    the jobs cost (:func:`contrastlab.cost.measured.cost_lines`). Claims are evaluated on ``metrics``
    (collected from ``metrics_root`` when not given). ``grid``: the run's
    :class:`~contrastlab.config.Grid` (its config's claims, deviations and precision). ``bridge``: the
    SentEval-MTEB bridge rows (:func:`contrastlab.tables.bridge.bridge_rows`), each paper's under its
    tables; rows of no paper after the papers."""
    report_path.parent.mkdir(parents=True, exist_ok=True)
    base = report_path.parent
    if metrics is None and grid is not None:
        metrics = collect_metrics(metrics_root)

    def link(path: Path, text: str) -> str:
        return f"[{text}]({Path(os.path.relpath(path, base)).as_posix()})"

    lines = ["# Paper tables: published numbers beside ours", ""]
    per_paper: dict[str | None, list[str]] = {}
    guide = [LAYOUT_TEXT, ""]
    if grid is not None and metrics is not None:
        pages = {t.spec.name: p["md"] for t, p in built}
        pages.update({f["name"]: base / "figures" / f"{f['name']}.png" for f in figures or []})
        headlines = headline_lines([t for t, _ in built], pages, base)
        answer, claims_guide, per_paper = claims_sections(grid, metrics, base, pages, headlines)
        lines += answer
        guide += claims_guide
    # The reading guide, folded below the answer: it is read once, the answer every time.
    guide += ["**Tables.** " + TABLES_TEXT.format(metrics_root=metrics_root), ""]
    if grid is not None and not grid.options.figures:
        guide += ["**Figures.** Left out: the config sets `figures: false`.", ""]
    title = "How to read the claims and tables" if per_paper else "How to read the tables"
    lines += [f'<details markdown="1"><summary>{title}</summary>', "", *guide, "</details>", ""]
    figures = sorted(figures or [], key=figure_order)
    searches = dict(searches or {})
    bridges = _bridge_by_paper(bridge or [])
    lines += _paper_lines(built, figures, searches, per_paper, grid, base, link, bridges)
    lines += bridges.pop(None, [])
    lines += sections or []  # e.g. the comparison tables of the user's losses
    for rest in searches.values():  # searches of experiments of no paper
        lines += rest
    other = [f for f in figures if paper_of(f["name"]) not in PAPERS]
    if other:
        lines += ["## Other figures", ""] + _figure_lines(other, base, link)
    orphans = [(t, p) for t, p in built if paper_of(t.spec.experiment) not in PAPERS]
    if orphans:
        lines += ["## Other tables", ""] + _tables_lines(orphans, link)
    lines += _run_lines(grid, metrics_root, results_dir)
    lines += cite_lines()
    write_text(report_path, "\n".join(lines))  # atomically (paths.atomic_write)
    return report_path


def _paper_lines(
    built: list[tuple[Table, dict[str, Path]]],
    figures: list[dict],
    searches: dict[str, list[str]],
    per_paper: dict[str | None, list[str]],
    grid: Grid | None,
    base: Path,
    link: Callable[[Path, str], str],
    bridges: dict[str | None, list[str]],
) -> list[str]:
    """One section per paper in the papers' order: its claims (``per_paper``), its tables, its
    experiments' searches (taken out of ``searches``) and its checkpoints' SentEval-MTEB bridge (taken
    out of ``bridges``), its figures and its deviations (with ``grid``)."""
    titles = {p: load_claims(p)["paper"] for p in PAPERS}
    experiments = grid.every_experiment if grid is not None else {}
    lines: list[str] = []
    for paper in PAPERS:
        tables = [(t, p) for t, p in built if paper_of(t.spec.experiment) == paper]
        paper_figures = [f for f in figures if paper_of(f["name"]) == paper]
        paper_searches = [e for e in searches if paper_of(e) == paper]
        paper_experiments = [e for e in experiments if paper_of(e) == paper]
        claims = per_paper.get(paper, [])
        if not (claims or tables or paper_figures or paper_searches or paper_experiments or paper in bridges):
            continue
        lines += [f"## {titles[paper]}", "", *claims]
        if tables or paper_searches:
            lines += ["### Tables", ""] + _tables_lines(tables, link)
            for experiment in paper_searches:
                lines += searches.pop(experiment)
        lines += bridges.pop(paper, [])
        if paper_figures:
            lines += ["### Figures", ""] + _figure_lines(paper_figures, base, link)
        if grid is not None and paper_experiments:
            lines += _deviation_lines(grid, paper_experiments)
    return lines


def cite_lines() -> list[str]:
    """The report's last section, "How to cite": the papers' BibTeX (:mod:`contrastlab.papers`,
    which CITATION.cff mirrors) in one ``bibtex`` code block."""
    return [
        "## How to cite",
        "",
        "Cite the papers whose results you use (contrastlab itself: `CITATION.cff` in the repository).",
        "",
        "```bibtex",
        bibtex_block(),
        "```",
        "",
    ]


def _bridge_by_paper(rows: list[dict[str, str]]) -> dict[str | None, list[str]]:
    """The bridge's section per paper of its checkpoints (``<experiment>/…``), a level-3 heading under
    the paper's tables; the rows of no paper under None, a section of their own (level 2)."""
    from contrastlab.tables.bridge import bridge_lines

    by_paper: dict[str | None, list[dict[str, str]]] = {}
    for row in rows:
        paper = paper_of(row["checkpoint"])
        by_paper.setdefault(paper if paper in PAPERS else None, []).append(row)
    return {paper: bridge_lines(own, level=2 if paper is None else 3) for paper, own in by_paper.items()}


def _run_lines(grid: Grid | None, metrics_root, results_dir: str | os.PathLike | None) -> list[str]:
    """The report's closing sections: the precision of every cell (with ``grid``), the inputs, and what
    the jobs cost (with ``results_dir``)."""
    lines: list[str] = []
    if grid is not None:
        lines += [
            "## Precision of every cell",
            "",
            "config: the precision the config resolves for the cells (each paper's own unless "
            "`precision_override` is set); ran in: what the finished cells' training used, with the "
            "fp32 switches of its training step (IEEE or TF32; auto and tf32 run as fp32 off CUDA).",
            "",
        ]
        lines += markdown_table(precision_rows(grid, metrics_root)) + [""]
    lines += input_lines(metrics_root, grid.data.lock_file if grid is not None else LOCK_NAME)
    if results_dir is not None:  # what each job cost, from the run's benchmark files (tables.cost)
        projected, note = projected_cost(grid) if grid is not None else (None, "")
        lines += cost_lines(results_dir, projected, note)
    return lines


def _describe_backbone(record: dict) -> tuple[str, str]:
    source = record.get("source")
    if source == "hf_id":
        return f"`{record.get('hf_id')}`", f"commit `{record.get('revision')}`"
    if source == "package":
        return f"package `{record.get('package')}`", str(record.get("version"))
    if source == "path":
        return f"folder `{record.get('path')}`", f"a copy of `{record['hf_id']}`" if record.get(
            "hf_id"
        ) else ""
    return "random initialisation", f"seed {record.get('seed')}"


def input_rows(metrics_root: str | Path) -> list[dict[str, str]]:
    """One row per distinct input the finished cells read (backbones, corpus, SentEval and image data),
    from the ``meta.inputs`` of every metrics file, with how many cells read it."""
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for path in sorted(Path(metrics_root).rglob("*.json")):
        try:
            inputs = json.loads(path.read_text()).get("meta", {}).get("inputs", {})
        except (OSError, ValueError, AttributeError):
            continue
        for kind, value in sorted(inputs.items()):
            if kind == "backbone":
                what, version = _describe_backbone(value)
                weights = ", ".join(f"{d[:12]}…" for _, d in sorted(value.get("weights_sha256", {}).items()))
                weights = f"sha256 {weights}" if weights else ""
                row = {"input": "backbone", "what": what, "revision or version": version, "digest": weights}
            else:
                sha = value.get("sha256") or value.get("files_sha256")
                digest = (
                    f"sha256 {sha[:16]}"
                    if sha
                    else (f"md5 {value['archive_md5']}" if "archive_md5" in value else "")
                )
                what = value.get(kind) or value.get("images") or kind
                detail = f"{value['lines']:,} lines" if "lines" in value else str(value.get("source", ""))
                row = {"input": kind, "what": str(what), "revision or version": detail, "digest": digest}
            key = (row["input"], json.dumps(row, sort_keys=True))
            seen.setdefault(key, {**row, "cells": "0"})
            seen[key]["cells"] = str(int(seen[key]["cells"]) + 1)
    return list(seen.values())


def input_lines(metrics_root: str | Path, lock: str = LOCK_NAME) -> list[str]:
    """The report's provenance of the inputs: what every finished cell read, and where the lock
    (``lock``: the config's ``artifacts_lock``) is."""
    rows = input_rows(metrics_root)
    if not rows:
        return []
    return [
        "## Inputs",
        "",
        "What the finished cells read, from their metrics files: each backbone's resolved revision (or "
        "package version) and weights' sha256, the corpus's and the evaluation data's digests. Every "
        f"download and hub revision is pinned in `{lock}` (commit it to share these inputs byte for byte).",
        "",
        *markdown_table(rows),
        "",
    ]


#: The reading guide of the tables' summary rows and grids (before the papers' sections).
TABLES_TEXT = (
    "Generated by `contrastlab.tables` from the metrics files under `{metrics_root}` and the config; "
    "every number below is computed, none typed by hand. Each table puts the paper's number, our mean "
    "± std over seeds and the difference Δ (ours − paper) side by side; cells without a run say "
    "“not run” (or “not configured” outside the config's grid), numbers the paper does not give say "
    "“n/a”. In each paper's summary row: run = cells with at least one seed; partial = fewer seeds than "
    "configured; Δ cells = run cells with a published number for their own backbone, and mean/max abs Δ "
    "are over them. Verdicts = run cells with a seed-noise verdict (`contrastlab.tables.verdicts`: our "
    "mean against the published number, with an interval from the pooled seed noise; a toy backbone is "
    "judged against the number of the paper backbone it stands in for, so it has a verdict but no Δ "
    "cell); within noise / above / below / undecided count them. Hyperparameter tables compare the "
    "config with the paper. The intervals are per cell, so a faithful reproduction still shows some "
    "above / below: above/below by chance is how many, the trained cells tested against seed noise × "
    f"{1 - LEVEL:g} (≈ within noise, ▲ above, ▼ below, ? undecided after each Δ in the grids)."
)


def _tables_lines(tables: list[tuple[Table, dict[str, Path]]], link) -> list[str]:
    """A paper's tables: their summary rows, which seed-noise estimate each uses, then each grid inline."""
    if not tables:
        return []
    rows, noise, grids = [], [], []
    for table, paths in tables:
        files = " · ".join(link(paths[ext], ext) for ext in ("csv", "tex"))
        rows.append({"table": link(paths["md"], table.spec.title), **summarize(table), "files": files})
        if "verdict" in table.cells:
            noise.append(f"- {table.spec.title}: {noise_note(table.cells)}")
        # toy backbones labelled with the paper backbone they stand in for, beside its published number
        grid = table_block(to_markdown(table, stand_ins=True))
        if grid:
            grids += [f"#### {table.spec.title}", "", *grid, ""]
    lines = markdown_table(rows, numeric_after_first=True) + [""]
    if noise:
        lines += ["Which seed-noise estimate each table uses:", "", *noise, ""]
    return lines + grids


def _figure_lines(figures: list[dict], base: Path, link) -> list[str]:
    lines = []
    for fig in figures:
        stem = base / "figures" / fig["name"]
        files = " · ".join(link(stem.with_name(f"{stem.name}.{ext}"), ext) for ext in ("pdf", "csv"))
        lines += [
            f"#### {fig['name']}",
            "",
            f"![{fig['name']}]({Path(os.path.relpath(stem, base)).as_posix()}.png)",
            "",
            f"{fig['caption']} ({files})",
            "",
        ]
    return lines


def _deviation_lines(grid: Grid, experiments: list[str]) -> list[str]:
    lines = [
        "### Deviations from the authors' setups",
        "",
        "Settings in which this config's cells deliberately differ from the paper (and, where the "
        "paper is silent, from the authors' released scripts); everything else follows them "
        "(`docs/deviations.md` for the full reproduction).",
        "",
    ]
    for name in experiments:
        exp = grid.experiment(name).spec
        lines += [f"#### {exp.get('title') or name}", ""] + markdown_lines(deviations(grid, name)) + [""]
    return lines


def claims_sections(
    grid: Grid, metrics, base: Path, pages: dict[str, Path], headlines: list[str] | None = None
) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The claims (:mod:`contrastlab.report.claims`) in three pieces: the answer the report opens with
    (:mod:`.answer`: the toy-number warning first, the papers' main numbers beside ours (``headlines``:
    :func:`~.answer.headline_lines`), then per paper one line of counts and the undecided claims' seeds,
    and how to add seeds to the undecided claims only), the reading guide of the claims (folded
    below the answer), and per paper its "Claims" subsection: the tally, then one row per claim with its
    verdict, the numbers behind it and links to its tables or figures (``pages``: name -> the rendered
    table's Markdown or the figure's PNG; others are named without a link)."""
    results = evaluate_claims(metrics, grid)
    toy = {e: m for e, m in grid.options.verdict_stand_ins.items() if m}
    answer = answer_lines(results, lead=toy_lines(toy) + (headlines or [])) + add_seeds_lines(results, grid)
    guide = _claims_guide()

    def links(claim) -> str:
        out = []
        for name in claim.get("links") or []:
            if name in pages:
                out.append(f"[{name}]({Path(os.path.relpath(pages[name], base)).as_posix()})")
            else:  # a table or figure this run does not render
                out.append(name)
        return " · ".join(out)

    # beside each claim these seeds cannot decide: would a perfect reproduction decide it, at what cost
    undecided = [r.claim["id"] for r in results if r.kind == UNDECIDED]
    notes = power.power_notes(undecided, grid, metrics, planned_jobs(grid)) if undecided else {}
    per_paper: dict[str, list[str]] = {}
    for paper in PAPERS:
        own = [r for r in results if r.claim["paper"] == paper]
        if not own:
            continue
        rows = [
            {
                "claim": r.claim["claim"],
                "verdict": verdict_text(r) + (f" ({notes[r.claim['id']]})" if r.claim["id"] in notes else ""),
                "numbers": numbers_text(r),
                "where": r.claim["where"],
                "see": links(r.claim),
            }
            for r in own
        ]
        per_paper[paper] = ["### Claims", "", tally_line(own), "", *markdown_table(rows), ""]
    return answer, guide, per_paper


def _claims_guide() -> list[str]:
    """The reading guide of the claims, with the papers' headline results this pipeline does not test."""
    guide = [CLAIMS_TEXT, "", CONTROL_TEXT, ""]
    untested = [
        f"{load_claims(p)['paper']}: {load_claims(p)['not_regenerated']}"
        for p in PAPERS
        if load_claims(p).get("not_regenerated")
    ]
    if untested:
        guide += [
            "Not tested here (headline results of the papers that this pipeline does not regenerate): "
            + "; ".join(untested)
            + ".",
            "",
        ]
    return guide


LAYOUT_TEXT = (
    "One section per paper, in the papers' order: its claims with their verdicts (a tally above them), "
    "its tables, its figures in the paper's numbering, and where this run deviates from the authors' "
    "setups. Then your own losses, the precision of every cell and the cost."
)
CLAIMS_TEXT = (
    "Each paper's headline claims (`src/contrastlab/report/claims/<paper>.yaml`, quoted from the paper) "
    "checked on our metrics, listed in each paper's section below: reproduced / not reproduced when the "
    "difference clears the seed-noise interval (level 0.95), undecided when it does not (with the seeds "
    "per cell that would decide it at the measured noise), not run when its cells have no metrics. A "
    "“comparable or better” claim is a non-inferiority test at the margin its claim file states and "
    "reasons (printed with its numbers): reproduced only when the interval's lower bound is above "
    "−margin, not reproduced when its upper bound is below −margin, else undecided. A claim of several "
    "parts (losses × backbones) is reproduced only when every part is; it is not reproduced only when a "
    "part stays below its interval after Holm's correction over the claim's parts (one-sided level "
    "0.025 for the whole claim, not per part: uncorrected, 12 parts with no true gap would read “not "
    "reproduced” about one time in four); a part below its own interval but not after the correction "
    "is undecided. A claim that counts (“12 of the 24 accuracies”) needs that many parts reproduced, "
    "and is not reproduced when fewer are left uncontradicted. A claim whose sentence the paper's own "
    "tables do not support reads “paper unsupported” when it is not reproduced here either: counted "
    "apart, since a perfect reproduction reads the same. Numbers: each run part's contrast ± the "
    "interval's half-width. Each paper's tally counts its claims per verdict."
)
CONTROL_TEXT = (
    "Control: every claim that rests on a paper table, or on a number the paper prints in its text, is "
    "also evaluated on the paper's own numbers, as if they were ours (`contrastlab.report.control`, "
    "`tests/report/test_control.py`): each reads reproduced there, except the claims whose "
    "sentence the paper's own tables do not support, which say so beside their verdict. The same "
    "numbers drawn with a stated seed noise check how often the rule gives a faithful run the wrong "
    "verdict (`contrastlab.report.power`, which also says beside each undecided claim what a perfect "
    "reproduction would need). Claims on figures alone have no control: the papers print no numbers "
    "for them."
)

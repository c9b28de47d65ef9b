"""report.md: one section per paper, in the papers' order (Nie 2023, Li 2024, MACL, OAR), each with its
claims and their tally, its tables (a summary row of how much has run and how far ours is from the paper,
then the grid itself), its figures in the paper's own numbering and its deviations; then the user's
losses, the precision of every cell and the cost. report.html (:mod:`.html`) is the same page with a
coloured badge on every verdict."""

from __future__ import annotations

import os
import re
from pathlib import Path

from contrastlab.artifacts import LOCK_NAME
from contrastlab.blocks import (
    Bullets,
    Cell,
    Code,
    Figure,
    Fold,
    Heading,
    Link,
    Paragraph,
    Table,
    Tally,
    Verdict,
    figure_id,
    kind_of,
    literals_of,
    rows_table,
    to_markdown,
)
from contrastlab.config import Grid, paper_of
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import plan
from contrastlab.cost.budget import plan_points
from contrastlab.cost.measured import cost_blocks
from contrastlab.papers import bibtex_block
from contrastlab.paths import write_text
from contrastlab.report import power
from contrastlab.report.answer import answer_blocks, heading, marked, short_title, table_label, verdict_tally
from contrastlab.report.claims import (
    PAPERS,
    UNDECIDED,
    evaluate_claims,
    load_claims,
    numbers_text,
    verdict_parts,
)
from contrastlab.report.html import write_html_report
from contrastlab.report.inputs import input_blocks, precision_blocks
from contrastlab.report.scores import run_identity
from contrastlab.stats import LEVEL
from contrastlab.tables import assemble
from contrastlab.tables.assemble import STATUS_FAILED, STATUS_NOT_CONFIGURED, STATUS_NOT_RUN, STATUS_PARTIAL
from contrastlab.tables.bridge import bridge_blocks
from contrastlab.tables.deviations import COLUMNS as DEVIATION_COLUMNS
from contrastlab.tables.deviations import deviations
from contrastlab.tables.metrics import collect_metrics
from contrastlab.tables.render import fmt_score, grid_rows, stand_in_cells
from contrastlab.tables.verdicts import chance_expected, noise_note, verdict_counts

#: Verdict counts in the summary table: the run cells with a seed-noise verdict (tables.verdicts; a toy
#: backbone's against its stand-in's published number) and each verdict. Not called "compared": the note's
#: "Δ cells" are the run cells with a published number for their own backbone, a different count.
VERDICT_KEYS = ("verdicts", "within noise", "above", "below", "undecided")
#: Summary column: the above + below verdicts expected by chance (tables.verdicts.chance_expected).
CHANCE_KEY = "above/below by chance"


def summarize(table: assemble.Table) -> dict[str, str]:
    """Counts and mean/max |Δ| of one table, as display strings: "Δ cells" (the note) are run cells with a
    published number for their own backbone; "verdicts" are run cells with a seed-noise verdict, a toy
    backbone judged against its stand-in's number included."""
    c = stand_in_cells(table) if table.spec.kind == "hparams" else table.cells  # settings as the grid shows
    counts = c["status"].value_counts()
    if table.spec.kind == "hparams":
        return {
            "cells": str(len(c)),
            **dict.fromkeys(("run", "partial", "not run"), "–"),
            "not configured": str(int(counts.get(STATUS_NOT_CONFIGURED, 0))),
            **dict.fromkeys(("mean abs Δ", "max abs Δ", *VERDICT_KEYS, CHANCE_KEY), "–"),
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
    failed, unscored = int(counts.get(STATUS_FAILED, 0)), int(counts.get(assemble.STATUS_NOT_EVALUATED, 0))
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
        + (f"; {toy} cell{'s' * (toy != 1)} on backbones not in the paper" if toy else "")
        + (f", {stand_in} of them with a verdict against a stand-in backbone's number" if stand_in else "")
        + (f"; {failed} cells failed (see failed.json beside their metrics)" if failed else "")
        + (f"; {unscored} cells not evaluated (their tasks are not in evaluation.tasks)" if unscored else ""),
    }


def planned_jobs(grid: Grid) -> list | None:
    """The plan's jobs of ``grid`` (:func:`~contrastlab.cost.plan.make_plan` at the calibration), None
    when the calibration or the config cannot be projected (the report must not fail over it)."""
    try:
        calibration = cl_calibration.load_calibration()
        return plan.make_plan(grid, calibration, points=plan_points(grid, calibration))
    except (OSError, ValueError, KeyError, TypeError):  # a partial or hand-made config
        return None


def projected_cost(grid: Grid) -> tuple[dict | None, str]:
    """The projected GPU-hours of the config's grid as configured and a sentence saying how they were
    projected; ``(None, <why not>)`` when the calibration cannot be read (the report must not fail)."""
    try:
        calibration = cl_calibration.load_calibration()
        jobs = plan.make_plan(grid, calibration, points=plan_points(grid, calibration))
        probes, probe_hours = plan.probe_jobs(grid, calibration)
        s = "s" * (probes != 1)
    except (OSError, ValueError, KeyError, TypeError) as error:  # a partial or hand-made config
        return None, f"No projection ({type(error).__name__}: {error})."
    note = (
        f"Projected GPU-h: what each job would take on the calibration's GPU with the precision the config "
        f"gives it (`make plan`: FLOPs ÷ achieved TFLOP/s + overheads; {calibration.describe()}); "
        f"{plan.total_hours(jobs):.2f} GPU-h for the whole grid, and {probes} SentEval probe job{s} on the "
        f"CPU ({probe_hours:.2f} h, not GPU time). Measured GPU-h count only jobs that ran on a GPU."
    )
    return plan.projected_hours(jobs), note


def figure_place(caption: str) -> str:
    """A figure's place in its paper, the words its caption opens with before the colon when they name a
    figure or table of the paper ("Nie Fig. 2a", "OAR Table 2 (synthetic)"); "" for a figure of no
    paper's numbering."""
    head, colon, _ = caption.partition(":")
    words = head.split(" ")
    return head if colon and len(words) > 2 and words[1] in ("Fig.", "Table") else ""


def figure_order(figure: dict) -> tuple:
    """Sort key putting a paper's figures in its own numbering (Fig. 1a, 1b-d, 2a, ..., then tables),
    from their place (:func:`figure_place`); figures without one keep their catalogue order, last.

    >>> sorted(["Nie Fig. 3b: x", "OAR Table 2 (synthetic): y", "Nie Fig. 1a: z", "no number"],
    ...        key=lambda c: figure_order({"caption": c}))
    ['Nie Fig. 1a: z', 'Nie Fig. 3b: x', 'OAR Table 2 (synthetic): y', 'no number']
    """
    found = re.match(r"[^ ]* (Fig\.|Table) ([0-9]+)(.?)", figure_place(figure["caption"]))
    if not found:
        return (2, 0, "")
    return (0 if found[1] == "Fig." else 1, int(found[2]), found[3] if found[3].isalpha() else "")


def write_report(
    built: list[tuple[assemble.Table, dict[str, Path]]],
    report_path: Path,
    *,
    metrics_root,
    grid: Grid | None = None,
    results_dir: str | os.PathLike | None = None,
    metrics=None,
    **parts,
) -> Path:
    """Write :func:`report_blocks` of ``built`` (table, {ext: path}; ``parts``: figures, sections,
    searches, bridge, claims) to ``report_path`` and report.html beside it. Returns ``report_path``."""
    report_path.parent.mkdir(parents=True, exist_ok=True)
    if metrics is None and grid is not None:
        metrics = collect_metrics(metrics_root)
    run = {"metrics_root": metrics_root, "grid": grid, "results_dir": results_dir, "metrics": metrics}
    blocks = report_blocks(built, report_path.parent, **run, **parts)
    # the config's names and the paths are text in both renderings, never Markdown or HTML
    literals = literals_of(
        grid.config if grid is not None else None, str(results_dir or ""), str(metrics_root)
    )
    write_text(report_path, to_markdown(blocks, literals))  # atomically (paths.atomic_write)
    write_html_report(blocks, report_path.with_suffix(".html"), literals, title=run_title(results_dir))
    return report_path


def run_title(results_dir: str | os.PathLike | None) -> str | None:
    """The browser tab's title of the report: the run's preset, results folder, commit and date."""
    if results_dir is None:
        return None
    run = run_identity(results_dir)
    return f"contrastlab: {run['preset']}, {run['results']}, {run['commit']}, {run['date']}"


def _title_blocks(results_dir: str | os.PathLike | None) -> tuple[list, list]:
    """The report's title naming the run (:func:`~.scores.run_identity`) and the reading guide's paragraph
    saying it in words, where there is a results folder; the plain title and no paragraph otherwise."""
    if results_dir is None:
        return [Heading(1, "Paper tables: published numbers beside ours")], []
    run = run_identity(results_dir)
    preset, folder, commit, date = run["preset"], run["results"], run["commit"], run["date"]
    # one line on the first screen: the preset and the commit (the browser's tab and the paragraph below
    # name the folder and the date too: run_title)
    sha = commit.split(" ")[0] if run["trained"] else ""
    return [Heading(1, f"Paper tables: {preset}" + (f", {sha}" if sha else ""))], [
        Paragraph(
            f"**This run.** Preset `{preset}`, results folder `{folder}`, commit `{commit}` (its training "
            f"jobs'), last cell finished {date} (UTC). Every score of the run, one row per cell, seed and "
            "task: [tables/scores.csv](tables/scores.csv); every claim's verdict: "
            "[tables/claims.csv](tables/claims.csv)."
        )
    ]


def report_blocks(
    built: list[tuple[assemble.Table, dict[str, Path]]],
    base: Path,
    *,
    metrics_root,
    grid: Grid | None,
    results_dir: str | os.PathLike | None,
    metrics,
    figures: list[dict] | None = None,
    sections: list | None = None,
    searches: dict[str, list] | None = None,
    bridge: list[dict[str, str]] | None = None,
    claims: list | None = None,
) -> list:
    """The report's document (links relative to ``base``): the answer, then one section per paper
    (:func:`_paper_blocks`), the user's losses' ``sections``, what belongs to no paper and the closing
    sections (:func:`_run_blocks`). Claims are evaluated on ``metrics`` in ``grid`` (``claims``: evaluated
    already)."""
    blocks, run_text = _title_blocks(results_dir)
    per_paper: dict[str | None, list] = {}
    guide: list = [*run_text, Paragraph(LAYOUT_TEXT.format(own="your own losses, " if sections else ""))]
    if grid is not None and metrics is not None:
        pages = {t.spec.name: p["md"] for t, p in built}
        pages.update({f["name"]: base / "figures" / f"{f['name']}.png" for f in figures or []})
        tables = [t for t, _ in built]
        answer, claims_guide, per_paper = claims_sections(grid, metrics, base, pages, tables, claims)
        blocks += answer
        guide += claims_guide
    # The reading guide, folded below the answer: it is read once, the answer every time.
    unscored = any((t.cells["status"] == assemble.STATUS_NOT_EVALUATED).any() for t, _ in built)
    note = ", “not evaluated” where `evaluation.tasks` leaves out their task" if unscored else ""
    guide.append(Paragraph("**Tables.** " + TABLES_TEXT.format(metrics_root=metrics_root, unscored=note)))
    if grid is not None and not grid.options.figures:
        guide.append(Paragraph("**Figures.** Left out: the config sets `figures: false`."))
    blocks.append(Fold("How to read the claims and tables" if per_paper else "How to read the tables", guide))
    figures = sorted(figures or [], key=figure_order)
    searches = dict(searches or {})
    bridges = _bridge_by_paper(bridge or [])
    blocks += _paper_blocks(built, figures, searches, per_paper, grid, base, bridges)
    blocks += bridges.pop(None, [])
    blocks += sections or []  # e.g. the comparison tables of the user's losses
    for rest in searches.values():  # searches of experiments of no paper
        blocks += rest
    if other := [f for f in figures if paper_of(f["name"]) not in PAPERS]:
        blocks += [Heading(2, "Other figures"), *_figure_blocks(other, base)]
    if orphans := [(t, p) for t, p in built if paper_of(t.spec.experiment) not in PAPERS]:
        blocks += [Heading(2, "Other tables"), *_tables_blocks(orphans, base)]
    return blocks + _run_blocks(grid, metrics_root, results_dir) + cite_blocks()


def _link(path: Path, text: str, base: Path, anchor: str = "") -> Link:
    """A link to ``path`` relative to the report's folder ``base``; ``anchor``: its place on the page."""
    return Link(text, Path(os.path.relpath(path, base)).as_posix(), anchor)


def _paper_blocks(
    built: list[tuple[assemble.Table, dict[str, Path]]],
    figures: list[dict],
    searches: dict[str, list],
    per_paper: dict[str | None, list],
    grid: Grid | None,
    base: Path,
    bridges: dict[str | None, list],
) -> list:
    """One section per paper in the papers' order: its claims, tables, searches and bridge (each taken
    out of ``searches`` and ``bridges``), figures and deviations."""
    experiments = grid.every_experiment if grid is not None else {}
    blocks: list = []
    for paper in PAPERS:
        tables = [(t, p) for t, p in built if paper_of(t.spec.experiment) == paper]
        paper_figures = [f for f in figures if paper_of(f["name"]) == paper]
        paper_searches = [e for e in searches if paper_of(e) == paper]
        paper_experiments = [e for e in experiments if paper_of(e) == paper]
        claims = per_paper.get(paper, [])
        if not (claims or tables or paper_figures or paper_searches or paper_experiments or paper in bridges):
            continue
        blocks += [Heading(2, heading(paper), id=paper, label=short_title(paper)), *claims]
        if tables or paper_searches:
            blocks += [Heading(3, "Tables"), *_tables_blocks(tables, base)]
            for experiment in paper_searches:
                blocks += searches.pop(experiment)
        blocks += bridges.pop(paper, [])
        if paper_figures:
            blocks += [Heading(3, "Figures"), *_figure_blocks(paper_figures, base)]
        if grid is not None and paper_experiments:
            blocks += _deviation_blocks(grid, paper_experiments)
    return blocks


def cite_blocks() -> list:
    """The report's last section, "How to cite": the papers' BibTeX (:mod:`contrastlab.papers`,
    which CITATION.cff mirrors) in one ``bibtex`` code block."""
    return [
        Heading(2, "How to cite"),
        Paragraph(
            "Cite the papers whose results you use (contrastlab itself: `CITATION.cff` in the repository)."
        ),
        Code([bibtex_block()], language="bibtex"),
    ]


def _bridge_by_paper(rows: list[dict[str, str]]) -> dict[str | None, list]:
    """The bridge's section per paper of its checkpoints (``<experiment>/…``), a level-3 heading under
    the paper's tables; the rows of no paper under None, a section of their own (level 2)."""
    by_paper: dict[str | None, list[dict[str, str]]] = {}
    for row in rows:
        paper = paper_of(row["checkpoint"])
        by_paper.setdefault(paper if paper in PAPERS else None, []).append(row)
    return {p: bridge_blocks(own, level=2 if p is None else 3) for p, own in by_paper.items()}


def _run_blocks(grid: Grid | None, metrics_root, results_dir: str | os.PathLike | None) -> list:
    """The report's closing sections: the precision of every cell (with ``grid``), the inputs and the code
    that made the numbers (:mod:`.inputs`), and what the jobs cost (with ``results_dir``)."""
    blocks = precision_blocks(grid, metrics_root) if grid is not None else []
    lock = grid.data.lock_file if grid is not None else LOCK_NAME
    blocks += input_blocks(metrics_root, lock, results_dir)
    if results_dir is not None:  # what each job cost, from the run's benchmark files (tables.cost)
        projected, note = projected_cost(grid) if grid is not None else (None, "")
        blocks += cost_blocks(results_dir, projected, note)
    return blocks


#: The reading guide of the tables' summary rows and grids (before the papers' sections).
TABLES_TEXT = (
    "Generated by `contrastlab.tables` from the metrics files under `{metrics_root}` and the config; "
    "every number below is computed, none typed by hand. Each table puts the paper's number, our mean "
    "± std over seeds and the difference Δ (ours − paper) side by side; cells without a run say "
    "“not run” (or “not configured” outside the config's grid"
    "{unscored}), numbers the paper does not give say "
    "“n/a”. In each paper's summary row: run = cells with at least one seed; partial = fewer seeds than "
    "configured; Δ cells = run cells with a published number for their own backbone, and mean/max abs Δ "
    "are over them. Verdicts = run cells with a seed-noise verdict (`contrastlab.tables.verdicts`: our "
    "mean against the published number, with an interval from the pooled seed noise; a toy backbone is "
    "judged against the number of the paper backbone it stands in for, so it has a verdict but no Δ "
    "cell); within noise / above / below / undecided count them. Hyperparameter tables compare the "
    "config with the paper (≠ after a setting that differs from the paper's). The intervals are per "
    "cell, so a faithful reproduction still shows some above / below: above/below by chance is how "
    "many, the trained cells tested against seed noise × "
    f"{1 - LEVEL:g} (≈ within noise, ▲ above, ▼ below, ? undecided after each Δ in the grids)."
)


#: Cells of ours the config leaves out, of its grid or of its evaluation.tasks (greyed, folded in the HTML).
UNCONFIGURED = (STATUS_NOT_CONFIGURED, assemble.STATUS_NOT_EVALUATED)


def grid_block(table: assemble.Table) -> Table:
    """A paper table's grid as the report shows it (:func:`contrastlab.tables.render.grid_rows` with its
    stand-ins): cells of :data:`UNCONFIGURED` of kind ``not-configured``, each Δ with its marker."""
    header, labels, texts, records = grid_rows(table, stand_ins=True)
    rows = []
    for row, recs in zip(texts, records, strict=True):
        role, cells = row[labels - 1], list(row)
        for j, rec in enumerate(recs):
            if rec is not None and role in ("ours", "config") and rec["status"] in UNCONFIGURED:
                cells[j] = Cell(row[j], "not-configured")
            elif rec is not None and role == "Δ":
                cells[j] = marked(row[j], rec.get("verdict"))
        rows.append(cells)
    return Table(header, rows, right=labels, labels=labels)


def _tables_blocks(tables: list[tuple[assemble.Table, dict[str, Path]]], base: Path) -> list:
    """A paper's tables: their summary rows, which seed-noise estimate each uses, then each grid inline,
    under its title (its id the table's registry name; listed in the contents from "Table" on)."""
    if not tables:
        return []
    rows, noise, grids = [], [], []
    for table, paths in tables:
        files = [_link(paths["csv"], "csv", base), " · ", _link(paths["tex"], "tex", base)]
        rows.append({"table": _link(paths["md"], table.spec.title, base), **summarize(table), "files": files})
        if "verdict" in table.cells:
            noise.append(f"{table.spec.title}: {noise_note(table.cells)}")
        anchor = table.spec.name.replace("_", "-")
        grids += [Heading(4, table.spec.title, id=anchor, label=table_label(table.spec)), grid_block(table)]
    blocks: list = [rows_table(rows, right=1, left=len(rows[0]) - 2)]  # note and files: text
    if noise:
        blocks += [Paragraph("Which seed-noise estimate each table uses:"), Bullets(noise)]
    return blocks + grids


def _figure_blocks(figures: list[dict], base: Path) -> list:
    blocks = []
    for fig in figures:
        stem = base / "figures" / fig["name"]
        pdf, csv = (_link(stem.with_name(f"{stem.name}.{ext}"), ext, base) for ext in ("pdf", "csv"))
        image = f"{Path(os.path.relpath(stem, base)).as_posix()}.png"
        blocks.append(
            Figure(fig["name"], figure_place(fig["caption"]), image, fig["caption"], [pdf, " · ", csv])
        )
    return blocks


def _deviation_blocks(grid: Grid, experiments: list[str]) -> list:
    blocks: list = [
        Heading(3, "Deviations from the authors' setups"),
        Paragraph(
            "Settings in which this config's cells deliberately differ from the paper (and, where the "
            "paper is silent, from the authors' released scripts); everything else follows them "
            "(`docs/deviations.md` for the full reproduction)."
        ),
    ]
    for name in experiments:
        rows = [{title: d[key] for key, title in DEVIATION_COLUMNS.items()} for d in deviations(grid, name)]
        blocks += [Heading(4, grid.experiment(name).spec.get("title") or name), rows_table(rows)]
    return blocks


def claims_sections(
    grid: Grid,
    metrics,
    base: Path,
    pages: dict[str, Path],
    tables: list[assemble.Table],
    results: list | None = None,
) -> tuple[list, list, dict[str, list]]:
    """The claims as the answer (:func:`.answer.answer_blocks`), their reading guide, and per paper its
    "Claims": the tally, then per claim its verdict, numbers and links (``pages``: name -> its file);
    ``results``: the claims evaluated on ``metrics`` already, else evaluated here."""
    results = evaluate_claims(metrics, grid) if results is None else results
    answer = answer_blocks(results, tables, pages, base, grid)

    def links(claim) -> list:
        out: list = []
        for name in claim.get("links") or []:
            anchor = figure_id(name) if "/" in name else name.replace("_", "-")
            # a table or figure this run does not render is named without a link
            out += [" · ", _link(pages[name], name, base, anchor) if name in pages else Link(name)]
        return out[1:]

    # beside each claim these seeds cannot decide: would a perfect reproduction decide it, at what cost
    undecided = [r.claim["id"] for r in results if r.kind == UNDECIDED]
    notes = power.power_notes(undecided, grid, metrics, planned_jobs(grid)) if undecided else {}
    per_paper: dict[str, list] = {}
    for paper in PAPERS:
        own = [r for r in results if r.claim["paper"] == paper]
        if not own:
            continue
        rows = []
        for r in own:
            word, head, tail = verdict_parts(r)
            note = f" ({notes[r.claim['id']]})" if r.claim["id"] in notes else ""
            rows.append(
                {
                    "claim": r.claim["claim"],
                    "verdict": Verdict(kind_of(word), word, head, tail + note),
                    "numbers": numbers_text(r),
                    "where": r.claim["where"],
                    "see": links(r.claim),
                }
            )
        claims = [Heading(3, "Claims"), Tally("Tally: ", verdict_tally(own), len(own)), rows_table(rows)]
        if not any(paper_of(name) == paper for name in [*grid.every_experiment, *pages]):
            claims.insert(2, Paragraph(NO_EXPERIMENT))  # cpu.yaml's Li, MACL, OAR
        per_paper[paper] = claims
    return answer, _claims_guide(), per_paper


def _claims_guide() -> list:
    """The reading guide of the claims, with the papers' headline results this pipeline does not test."""
    guide = [Paragraph(CLAIMS_TEXT), Paragraph(CONTROL_TEXT)]
    untested = [
        f"{heading(p)}: {load_claims(p)['not_regenerated']}"
        for p in PAPERS
        if load_claims(p).get("not_regenerated")
    ]
    if untested:
        lead = "Not tested here (headline results of the papers that this pipeline does not regenerate)"
        guide.append(Paragraph(f"{lead}: {'; '.join(untested)}."))
    return guide


#: Above the claims of a paper the config has no experiment, table or figure of: why each reads "not
#: configured".
NO_EXPERIMENT = (
    "This config has none of the paper's experiments: its claims read “not configured” here; "
    "`config.yaml` runs them."
)
LAYOUT_TEXT = (
    "One section per paper, in the papers' order: its claims with their verdicts (a tally above them), "
    "its tables, its figures in the paper's numbering, and where this run deviates from the authors' "
    "setups. Then {own}the precision of every cell and the cost."
)
CLAIMS_TEXT = (
    "Each paper's headline claims (`src/contrastlab/report/claims/<paper>.yaml`, quoted from the paper) "
    "checked on our metrics, listed in each paper's section below: reproduced / not reproduced when the "
    "difference clears the seed-noise interval (level 0.95), undecided when it does not (with the seeds "
    "per cell that would decide it at the measured noise), not run when its cells have no metrics (not "
    "configured when no part's cells are all in the config's grid: a rerun of this preset cannot run it). A "
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

"""Render an assembled table as CSV (one row per cell), Markdown and LaTeX (booktabs).

Numbers as in the papers: two decimals (scores are already percent), improvements with the paper's
decimals, hyperparameters in the paper's notation (``1e-5``, ``0.15π``). A cell with no run says
``not run``; a number the paper does not give says ``n/a`` (with the paper's footnote mark).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from contrastlab import blocks
from contrastlab.tables.assemble import (
    BACKBONE_LABELS,
    STATUS_DIVERGED,
    STATUS_FAILED,
    STATUS_NOT_CONFIGURED,
    STATUS_NOT_EVALUATED,
    STATUS_NOT_RUN,
    STATUS_PARTIAL,
    Table,
    param_status,
)
from contrastlab.tables.deviations import deviation_table
from contrastlab.tables.latex import ADDLINESPACE, MIDRULE, Span, latex_table
from contrastlab.tables.verdicts import LEVEL, MARKERS, chance_expected, chance_text, noise_note, runs_text

#: The statuses of a score cell with no number of ours: the cell says its status instead.
NO_SCORE = (STATUS_NOT_RUN, STATUS_NOT_CONFIGURED, STATUS_NOT_EVALUATED, STATUS_FAILED, STATUS_DIVERGED)
NA = "n/a"
NO_DIFF = "–"
#: Beside a best-of-sweep number when the probe diverged at some points of the sweep (OAR Table 3); not
#: :data:`STAND_IN_MARK`'s †, so that each mark keeps one meaning.
DIVERGED_MARK = "‡"


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt_score(x: float) -> str:
    """A score in percent with two decimals, e.g. ``76.04``."""
    return f"{x:.2f}"


def fmt_signed(x: float, decimals: int = 2) -> str:
    """A signed difference, e.g. ``+0.24``, ``-1.50``; a value rounding to zero is ``+0.00``."""
    text = f"{x:+.{decimals}f}"
    return "+" + text[1:] if float(text) == 0 else text


def fmt_param(value: Any, fmt: str, unit: str = "") -> str:
    """A hyperparameter as the paper prints it: ``int`` 64, ``sci`` 1e-5, ``2f`` 0.30, ``g`` 0.1;
    unit ``pi`` appends π."""
    if _nan(value):
        return NA
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if fmt == "int":
        text = str(int(value)) if float(value).is_integer() else f"{value:g}"
    elif fmt == "sci":
        mantissa, exponent = f"{value:.3e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}e{int(exponent)}"
    elif fmt == "2f":
        text = f"{value:.2f}"
    else:
        text = f"{value:g}"
    return text + ("π" if unit == "pi" else "")


# ----------------------------------------------------------------------------- cell texts
def published_text(rec: pd.Series, decimals: int | None = None) -> str:
    if _nan(rec["published"]):
        return NA + rec["mark"]
    text = fmt_score(rec["published"])
    if decimals is not None and not _nan(rec.get("published_improvement")):
        text += f" ({fmt_signed(rec['published_improvement'], decimals)})"
    return text + rec["mark"]


def ours_text(rec: pd.Series, decimals: int | None = None) -> str:
    if rec["status"] in NO_SCORE:
        return rec["status"]
    text = fmt_score(rec["ours_mean"])
    if rec.get("diverged_at"):
        text += DIVERGED_MARK
    if rec["n_seeds"] >= 2:
        text += f" ± {fmt_score(rec['ours_std'])}"
    if rec["status"] == STATUS_PARTIAL:
        text += f" (n={rec['n_seeds']}/{rec['expected_seeds']})"
    if decimals is not None and not _nan(rec.get("ours_improvement")):
        text += f" ({fmt_signed(rec['ours_improvement'], decimals)})"
    return text


#: Mark of a Δ computed against a stand-in backbone's published number (toy runs only).
STAND_IN_MARK = "†"


def diff_text(rec: pd.Series) -> str:
    """Ours − paper with the verdict's marker (≈ within noise, ▲ above, ▼ below, ? undecided); a toy
    backbone compared with its stand-in's published number shows that difference, marked †."""
    marker = MARKERS.get(rec.get("verdict"), "")
    if not _nan(rec["diff"]):
        return f"{fmt_signed(rec['diff'])} {marker}".rstrip()
    if marker and str(rec.get("compared_with", "")).endswith("(stand-in)"):
        return f"{fmt_signed(rec['ours_mean'] - rec['verdict_published'])} {marker}{STAND_IN_MARK}"
    return NO_DIFF


def config_text(rec: pd.Series, fmt: str) -> str:
    if rec["status"] == STATUS_NOT_CONFIGURED:
        return STATUS_NOT_CONFIGURED
    if rec["config"] is None:
        return "unset"
    text = fmt_param(rec["config"], fmt, rec["unit"])
    if rec["config_is_default"]:
        text += " (default)"
    if rec["status"] == "differs":
        text += " ≠"
    return text


# ----------------------------------------------------------------------------- CSV
def to_csv(table: Table) -> str:
    """One row per cell: the published number, ours, the difference and the seed-noise interval as numbers
    (full precision; empty where the cell has none, its ``status`` saying why: not run, not configured,
    failed, diverged), the paper's footnote mark in ``published_mark``. A hyperparameter table keeps the
    paper's notation (``1e-5``, ``0.14π``), its ``config`` empty where the cell is not configured."""
    c = table.cells
    if table.spec.kind == "hparams":
        fmts = [table.formats.get(k, "g") for k in c["key"]]
        out = pd.DataFrame(
            {
                "backbone": c["backbone"],
                "method": c["method"],
                "param": c["key"],
                "published": [
                    fmt_param(v, f, u) + m
                    for v, f, u, m in zip(c["published"], fmts, c["unit"], c["mark"], strict=True)
                ],
                "config": [  # empty where not configured: the status says so
                    "" if s == STATUS_NOT_CONFIGURED else ("unset" if v is None else fmt_param(v, f, u))
                    for v, f, u, s in zip(c["config"], fmts, c["unit"], c["status"], strict=True)
                ],
                "status": c["status"],
            }
        )
    else:
        # numbers stay float columns (empty where there is none), so that pandas reads them as float64
        missing = c["status"].isin(NO_SCORE).to_numpy()

        def number(values: Iterable, *, ours: bool = True) -> list[float]:
            return [
                math.nan if (ours and gone) or _nan(v) else float(v)
                for v, gone in zip(values, missing, strict=True)
            ]

        cols: dict[str, Iterable] = {
            "backbone": c["backbone"],
            "method": c["method"],
            "task": c["key"],
            "published": number(c["published"], ours=False),
            "published_mark": c["mark"],
        }
        if table.improvement_decimals is not None:
            cols["published_improvement"] = number(c["published_improvement"], ours=False)
        cols["ours_mean"] = number(c["ours_mean"])
        cols["ours_std"] = number(c["ours_std"])
        cols["n_seeds"] = c["n_seeds"]
        cols["diff"] = number(c["diff"])
        if table.improvement_decimals is not None:
            cols["ours_improvement"] = number(c["ours_improvement"])
        if "best_at" in c:  # best point of a sweep (OAR Table 3): which value won
            cols["best_at"] = number(c["best_at"])
            cols["diverged_at"] = [
                "" if gone else (v if isinstance(v, str) and v else "none")
                for v, gone in zip(c["diverged_at"], missing, strict=True)
            ]
        cols["status"] = c["status"]
        if "verdict" in c:  # the seed-noise interval and verdict (tables.verdicts)
            cols["noise_std"] = number(c["noise_std"], ours=False)
            cols["noise_df"] = c["noise_df"]
            cols["published_runs"] = c["published_runs"]
            cols["half_width"] = number(c["half_width"], ours=False)
            cols["verdict"] = c["verdict"]
            cols["compared_with"] = c["compared_with"]
        out = pd.DataFrame(cols)
    return out.to_csv(index=False, lineterminator="\n")


# ----------------------------------------------------------------------------- wide layout
def stand_in_cells(table: Table) -> pd.DataFrame:
    """``table.cells`` with each toy backbone labelled with the paper backbone it stands in for ("tiny-bert,
    for BERT-base") and, where the paper has it, that backbone's number as its published one, so its Δ (†)
    (a setting: its ≠) reads as what it is. The CSV keeps "n/a"."""
    c = table.cells
    # only where the table has the backbone stood in for (MACL's RoBERTa Table 3 names no BERT-base)
    stand_ins = {toy: paper for toy, paper in table.stand_ins.items() if (c["backbone"] == paper).any()}
    if not c["backbone"].isin(list(stand_ins)).any():
        return c
    c = c.copy()
    numbers = [col for col in ("published", "published_improvement", "mark") if col in c]
    own = {(r.backbone, r.method, r.key): [getattr(r, n) for n in numbers] for r in c.itertuples()}
    for i, rec in c[c["backbone"].isin(list(stand_ins))].iterrows():
        paper = stand_ins[rec["backbone"]]
        label = f"{rec['backbone']}, for {BACKBONE_LABELS.get(paper, paper)}"
        for place in ("row_group", "col_group", "col"):
            if rec[place] == rec["backbone"]:
                c.at[i, place] = label
        stood_for = own.get((paper, rec["method"], rec["key"]))
        if stood_for is not None and _nan(rec["published"]):
            for name, value in zip(numbers, stood_for, strict=True):
                c.at[i, name] = value
            if table.spec.kind == "hparams" and rec["status"] != STATUS_NOT_CONFIGURED:  # ≠ against it
                c.at[i, "status"] = param_status(rec["config"], c.at[i, "published"])
    return c


#: The legend's words on the statuses a table has only sometimes, each said where a cell has it.
STATUS_NOTES = {
    STATUS_FAILED: "the cell's training or evaluation failed (its failed.json, beside where the metrics "
    "would be, gives the error and the log)",
    STATUS_NOT_EVALUATED: "the cell's task (or one its average needs) is not in the config's "
    "evaluation.tasks; add it there to score it (rerunning alone never fills the cell)",
}


def _legend(table: Table) -> list[str]:
    if table.spec.kind == "hparams":
        return [
            "paper: the published value; config: the value our config resolves for the cell "
            "((default) = the loss's default, ≠ = differs from the paper); "
            f"{STATUS_NOT_CONFIGURED}: the method is not in the config; {NA}: the paper gives no value."
        ]
    seeds = f"{table.n_seeds} seeds" if table.n_seeds is not None else "the seeds run"
    text = (
        f"paper: the published number; ours: mean ± sample std over {seeds} (n=k/N: only k of N seeds "
        f"have run; Pretrained rows are one deterministic evaluation); Δ = ours − paper; "
        f"{STATUS_NOT_RUN}: the config has the cell but no metrics file exists yet; "
        f"{STATUS_NOT_CONFIGURED}: the cell is not in the config's grid; {NA}: the paper gives no number for "
        "the cell."
    )
    if table.improvement_decimals is not None:
        over = ", ".join(f"{k} over {v}" for k, v in table.meta["improvement"]["over"].items())
        text += f" In parentheses: the improvement over the unmodified loss ({over})."
    if (table.cells["status"] == STATUS_DIVERGED).any() or (
        "diverged_at" in table.cells and (table.cells["diverged_at"].fillna("") != "").any()
    ):
        # torch (evaluation.vision): loaded only when a table has a diverged image cell
        from contrastlab.evaluation.vision import FFN_DIVERGENCE

        text += (
            f" {STATUS_DIVERGED}: the FFN diverged at every point of the sweep (no accuracy, never a "
            f"chance-level number); {DIVERGED_MARK}: the best over the points where it did not (the CSV's "
            f"diverged_at lists the others). Diverged means: {FFN_DIVERGENCE}."
        )
    if "verdict" in table.cells:
        text += (
            f" Verdict after Δ: {MARKERS['within noise']} within seed noise, {MARKERS['above']} above or "
            f"{MARKERS['below']} below the paper beyond noise, {MARKERS['undecided']} undecided (no noise "
            "estimate: too few seeds); the interval is t·s·sqrt(1/n + 1/k) for our n seeds and the k runs "
            "behind the published number (level 0.95). " + noise_note(table.cells)
        )
        tested, _ = chance_expected(table.cells)
        if tested:  # per-cell intervals: some ▲/▼ are expected from a faithful reproduction
            text += (
                f" Trained cells tested against seed noise: {chance_text(table.cells)}, i.e. "
                f"{tested} cells × {1 - LEVEL:g} if every one reproduced the paper exactly (no correction "
                "for the table's many cells)."
            )
        against = table.cells["compared_with"].astype(str)
        stood = against[against.str.endswith(" (stand-in)")].str.removesuffix(" (stand-in)")
        if pairs := dict(zip(table.cells.loc[stood.index, "backbone"], stood, strict=True)):
            named = ", ".join(f"{toy} for {BACKBONE_LABELS.get(b, b)}" for toy, b in pairs.items())
            text += (
                f" {STAND_IN_MARK}: a toy backbone compared with its stand-in's published number ({named}; "
                "tables.verdict_stand_ins; toy numbers, the verdict only exercises the code)."
            )
    if runs_text(table.meta):  # k behind each published number, stated or assumed, and where from
        text += " " + runs_text(table.meta)
    present = set(table.cells["status"])
    return [text + "".join(f" {s}: {note}." for s, note in STATUS_NOTES.items() if s in present)]


def _source(table: Table) -> str:
    meta = table.meta
    return (
        f"Source: {meta['paper']['reference']} — {meta['paper']['table']} "
        f"(`{meta['paper']['file']}`). Caption: “{meta['caption'].strip()}”"
    )


def grid_rows(table: Table, *, stand_ins: bool = False) -> tuple[list[str], int, list[list[str]], list[list]]:
    """The table as in the paper, each paper row followed by ours and the difference: its header, how many
    label columns open it, its rows' texts and the cell record behind each text (None under a label);
    ``stand_ins``: each toy backbone labelled with, and beside the published number of, the paper backbone
    it stands in for (:func:`stand_in_cells`)."""
    c = stand_in_cells(table) if stand_ins else table.cells
    rows = list(dict.fromkeys(zip(c["row_group"], c["row"], strict=True)))
    cols = list(dict.fromkeys(zip(c["col_group"], c["col"], strict=True)))
    index = {(r.row_group, r.row, r.col_group, r.col): r for _, r in c.iterrows()}
    d = table.improvement_decimals
    if table.spec.kind == "hparams":
        subrows = [
            (
                "paper",
                lambda r: fmt_param(r["published"], table.formats.get(r["key"], "g"), r["unit"]) + r["mark"],
            ),
            ("config", lambda r: config_text(r, table.formats.get(r["key"], "g"))),
        ]
    else:
        subrows = [
            ("paper", lambda r: published_text(r, d)),
            ("ours", lambda r: ours_text(r, d)),
            ("Δ", diff_text),
        ]
    has_groups = any(rg for rg, _ in rows)
    heads = [f"{cg} {col}".strip() if table.col_groups_are_backbones else col for cg, col in cols]
    first = _label_heads(table, has_groups)
    texts, records, last_group = [], [], None
    for rg, row in rows:
        recs = [index[(rg, row, cg, col)] for cg, col in cols]
        for i, (label, fn) in enumerate(subrows):
            group_cell = [rg if rg != last_group else ""] if has_groups else []
            last_group = rg
            texts.append([*group_cell, row if i == 0 else "", label, *map(fn, recs)])
            records.append([None] * len(first) + recs)
    return first + heads, len(first), texts, records


def to_markdown(table: Table, *, literals: Iterable[str] = ()) -> str:
    """The table's page: its title, source and footnotes, the grid (:func:`grid_rows`), its legend, the
    deviations of this config and the transcription notes; ``literals`` (the config's names,
    :func:`~contrastlab.blocks.literals_of`) shown as text."""
    header, labels, texts, _ = grid_rows(table)
    above = [f"Paper footnote: {note}" for note in table.meta.get("footnotes") or []]
    if table.extra_backbones:
        extra = ", ".join(table.extra_backbones)
        above.append(f"Backbones not in the paper (published numbers n/a): {extra}.")
    page = [
        blocks.Heading(1, table.spec.title),
        blocks.Paragraph(_source(table)),
        blocks.Paragraph("\n".join(above)),  # empty without notes: the grid then stands two lines below
        blocks.Table(header, texts, right=labels),
        *map(blocks.Paragraph, _legend(table)),
        blocks.Paragraph("Where our cells deliberately differ from the authors' setup (this config):"),
        deviation_table(table.deviations),
    ]
    if notes := table.meta.get("notes"):
        page.append(blocks.Paragraph("\n".join(["Transcription notes:", *(f"- {n}" for n in notes)])))
    return blocks.to_markdown(page, literals)


def _label_heads(table: Table, has_groups: bool) -> list[str]:
    """The heads of the label columns: the row group's (where the table has groups), the row's, ""."""
    by_columns = table.meta["layout"]["backbone_axis"] == "columns"
    if table.spec.kind == "hparams":
        group, row = ("Method", "Parameter") if by_columns else ("Backbone", "Method")
    else:
        group, row = "Backbone", "Loss" if table.spec.kind == "steps" else "Method"
    return ([group] if has_groups else []) + [row, ""]


# ----------------------------------------------------------------------------- LaTeX
def to_latex(table: Table) -> str:
    """A ``table`` float with a booktabs ``tabular`` that fits the line (:func:`.latex.latex_table`)."""
    header, labels, texts, _ = grid_rows(table)
    cols = list(dict.fromkeys(zip(table.cells["col_group"], table.cells["col"], strict=True)))
    meta = table.meta
    caption = (
        f"{table.spec.title}. Published: {meta['paper']['reference'].rstrip('.')}, {meta['paper']['table']}. "
        + " ".join(_legend(table))
    )
    # each run of columns under one group
    groups = [Span(cg, len(list(run))) for cg, run in itertools.groupby(cg for cg, _ in cols)]
    head = [header[:labels] + [col for _, col in cols]]
    if any(g.text for g in groups):  # the column groups above, each ruled below
        spans = [g if g.text else "" for g in groups for _ in range(1 if g.text else g.width)]
        head.insert(0, [""] * labels + spans)
    lines: list = []
    n_sub = 2 if table.spec.kind == "hparams" else 3
    # a row-group label column (_label_heads), whose cell is set where a group starts
    has_groups = labels == 3
    for i, text in enumerate(texts):
        if i and i % n_sub == 0:  # a paper row's first line: a rule where its row group starts
            lines.append(MIDRULE if has_groups and text[0] else ADDLINESPACE)
        lines.append(text)
    return latex_table(table.name, "l" * labels + "r" * len(cols), head, lines, caption)

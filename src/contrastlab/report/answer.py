"""The report's first screen, "The answer" (report.md's opening section; :mod:`.sections` writes the rest),
in the order a reader needs it: whether this run's numbers can say anything about the papers at all (a
preset whose backbones stand in for the papers' says so before any count), each paper's main number beside
ours (:func:`headline_lines`, read off the assembled tables), each paper's claims counted by verdict, and
the commands that add seeds to the undecided claims' cells only."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from contrastlab.config import Grid
from contrastlab.report.claims import (
    MAX_SEEDS,
    NOT_REPRODUCED,
    NOT_RUN,
    PAPER_UNSUPPORTED,
    PAPERS,
    REPRODUCED,
    UNDECIDED,
    add_seeds_parts,
    load_claims,
    seed_plan,
)
from contrastlab.tables.assemble import BACKBONE_LABELS, STATUS_NOT_CONFIGURED, Table
from contrastlab.tables.markdown import markdown_table
from contrastlab.tables.render import diff_text, ours_text, published_text


def verdict_tally(results) -> dict[str, int]:
    """How many claims of ``results`` have each verdict, in a fixed order (reproduced, not reproduced,
    paper unsupported, undecided, not run), zeros included (:attr:`ClaimResult.kind`)."""
    kinds = (REPRODUCED, NOT_REPRODUCED, PAPER_UNSUPPORTED, UNDECIDED, NOT_RUN)
    return {kind: sum(r.kind == kind for r in results) for kind in kinds}


def tally_line(results) -> str:
    """``Tally: reproduced 1 · not reproduced 0 · undecided 2 · not run 5 (of 8 claims).`` (report.html
    turns each count into a coloured badge)."""
    counts = verdict_tally(results)
    return "Tally: " + " · ".join(f"{k} {n}" for k, n in counts.items()) + f" (of {len(results)} claims)."


def short_title(paper: str) -> str:
    """The paper's authors and year (its claim file's title up to the year): ``Li, Zhang & Nie 2024``."""
    title = load_claims(paper)["paper"]
    year = re.search(r"\b(?:19|20)\d\d\b", title)
    return title[: year.end()] if year else title


def toy_lines(stand_ins: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The warning that a run's backbones stand in for the papers' (``tables.verdict_stand_ins``:
    experiment -> {toy backbone: paper backbone}), or nothing when none does."""
    pairs = ", ".join(dict.fromkeys(f"{t} for {p}" for m in stand_ins.values() for t, p in m.items()))
    if not pairs:
        return []
    return [
        f"**Toy numbers**: this run's backbones stand in for the papers' ({pairs}); the numbers and "
        "verdicts below exercise the code and say nothing about the papers.",
        "",
    ]


def headline_row(table: Table, headline: Mapping[str, str], link: str) -> dict[str, str]:
    """The paper's main number (``headline``: its claim file's cell ``{table, method, task, backbone}``)
    beside ours, as :mod:`contrastlab.tables.render` writes the table's cells: ours is the cell itself, or
    where the preset leaves the paper's backbone out, the cell of a toy backbone standing in for it
    (:attr:`Table.stand_ins`), named so; Δ is then against the number it stands in for (†). ``link``: the
    rendered table's Markdown, relative to the report."""
    cells = table.cells
    at = cells[(cells["method"] == headline["method"]) & (cells["key"] == headline["task"])]
    paper = at[at["backbone"] == headline["backbone"]]
    if paper.empty:
        raise ValueError(f"{table.name}: the headline {dict(headline)} names no cell of the table")
    paper = paper.iloc[0]
    ours, label = paper, BACKBONE_LABELS.get(paper["backbone"], paper["backbone"])
    toys = [toy for toy, stands in table.stand_ins.items() if stands == headline["backbone"]]
    stand_in = at[at["backbone"].isin(toys) & (at["status"] != STATUS_NOT_CONFIGURED)]
    if paper["status"] == STATUS_NOT_CONFIGURED and not stand_in.empty:
        ours = stand_in.iloc[0]
    name = re.search(r"Tables? [^:]*", table.spec.title)
    decimals = table.improvement_decimals
    return {
        "main number": f"[{name[0] if name else table.name}]({link}): {paper['row']} {paper['col']}, {label}",
        "published": published_text(paper, decimals),
        "ours": ours_text(ours, decimals)
        + (f" ({ours['backbone']}, for {label})" if ours is not paper else ""),
        "Δ": diff_text(ours),
    }


def headline_lines(tables: list[Table], pages: Mapping[str, Path], base: Path) -> list[str]:
    """One row per paper whose claim file names its ``headline`` and whose table this run built:
    :func:`headline_row`, in the papers' order, linked to the table's page (``pages``: name -> its
    Markdown; links relative to ``base``); nothing when no paper's is built."""
    built = {table.name: table for table in tables}
    rows = []
    for paper in PAPERS:
        headline = load_claims(paper).get("headline")
        if headline and headline["table"] in built:
            page = pages.get(headline["table"], base / "tables" / f"{headline['table']}.md")
            link = Path(os.path.relpath(page, base)).as_posix()
            rows.append(
                {"paper": short_title(paper), **headline_row(built[headline["table"]], headline, link)}
            )
    if not rows:
        return []
    lines = markdown_table(rows)
    lines[1] = "|---|---|---:|---:|---:|"  # the numbers right-aligned, as in the grids
    return ["Each paper's main number beside ours:", "", *lines, ""]


def answer_lines(results, lead: list[str] | tuple[str, ...] = ()) -> list[str]:
    """What the report opens with: its heading, then ``lead`` (the toy warning, :func:`toy_lines`, comes
    before any count), then per paper one line of claim counts by verdict (:func:`verdict_tally`), and for
    its undecided claims the seeds per cell that would decide them.

    ``**Nie et al. 2023 …**: reproduced 1 · not reproduced 0 · paper unsupported 0 · undecided 2 · not
    run 7 (of 10 claims). Undecided: 1 needs ≥ 2 seeds per cell to measure the noise, 1 ~5 seeds.``
    """
    lines = ["## The answer", "", *lead]
    for paper in PAPERS:
        own = [r for r in results if r.claim["paper"] == paper]
        if not own:
            continue
        counts = tally_line(own).removeprefix("Tally: ")
        line = f"**{short_title(paper)}**: {counts}"
        undecided = [r.seeds_needed for r in own if r.kind == UNDECIDED]
        if undecided:
            unmeasured = sum(n is None for n in undecided)
            beyond = sum(n is not None and n > MAX_SEEDS for n in undecided)
            within = sorted(n for n in undecided if n is not None and n <= MAX_SEEDS)
            needs = [f"{unmeasured} need ≥ 2 seeds per cell to measure the noise"] if unmeasured else []
            needs += [f"{len(within)} would be decided at ≤ {within[-1]} seeds per cell"] if within else []
            needs += [f"{beyond} need > {MAX_SEEDS} seeds per cell"] if beyond else []
            line += " Undecided: " + ", ".join(needs) + "."
        lines += [line, ""]
    if len([p for p in PAPERS if any(r.claim["paper"] == p for r in results)]) > 1:
        lines += ["All papers: " + tally_line(results).removeprefix("Tally: "), ""]
    return lines


def add_seeds_lines(results, grid: Grid) -> list[str]:
    """The commands that add seeds to the undecided claims' cells only (:func:`~.claims.seed_plan`), as a
    short shell script whose every line shows what sets it apart: the seed lists and the Snakemake command
    line they share first (``SEEDS``, ``run``), then one ``run`` per command of
    :func:`~.claims.add_seeds_commands` with its ``select`` (report.html wraps the block: nothing past the
    box's edge)."""
    plan = seed_plan(results, grid)
    if not plan:
        return []
    return [
        "More seeds for the cells of the undecided claims only, with `CONFIG` set to the preset this "
        "run came from: `run` is the Snakemake command they share, and each line after it picks its cells "
        "(`make add-seeds CONFIG=<preset>` prints the commands written out; the last line renders the "
        "tables and this report again):",
        "",
        '<div class="commands" markdown="1">',  # report.html wraps it (html.py's CSS)
        "",
        *(f"    {line}" for line in add_seeds_script(plan)),  # an indented code block
        "",
        "</div>",
        "",
    ]


def add_seeds_script(plan: list[dict], configfile: str = '"$CONFIG"') -> list[str]:
    """:func:`~.claims.add_seeds_commands` of ``plan`` as the lines of a shell script (bash or zsh) that
    runs the same commands: ``SEEDS`` (the seed lists they share) and ``run`` (the command line they
    share) first, then each command as ``run`` and what it adds."""
    base, experiments, tails = add_seeds_parts(plan, configfile=configfile)
    return [
        f"SEEDS={experiments}",
        f'run() {{ {base} --config "$SEEDS" "$@"; }}',
        *(f"run {tail}" for tail in tails),
    ]

"""The report's first screen, "The answer" (report.md's opening section; :mod:`.sections` writes the rest),
in the order a reader needs it: whether this run's numbers can say anything about the papers at all (a
preset whose backbones stand in for the papers' says so before any count), then one table, each paper's
main number beside ours (read off the assembled tables) and its claims counted by verdict, with the key to
its marks, and the commands that add seeds to the undecided claims' cells only. A change to the first
screen is a change here (report.html renders whatever blocks this module builds)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from contrastlab import papers
from contrastlab.blocks import Cell, Code, Heading, Link, Paragraph, cell_text, kind_of, rows_table
from contrastlab.config import Grid
from contrastlab.config.command_line import CONFIG_WORDS_VARIABLE, CONFIGFILES_VARIABLE
from contrastlab.papers import TableSpec, paper_for
from contrastlab.report.claims import (
    ADD_SEEDS_MAX,
    MAX_SEEDS,
    NOT_CONFIGURED,
    NOT_REPRODUCED,
    NOT_RUN,
    PAPER_UNSUPPORTED,
    PAPERS,
    REPRODUCED,
    UNDECIDED,
    add_seeds_parts,
    load_claims,
    seed_plan,
    undecided_cells,
)
from contrastlab.tables.assemble import BACKBONE_LABELS, STATUS_NOT_CONFIGURED, Table
from contrastlab.tables.render import STAND_IN_MARK, diff_text, ours_text, published_text
from contrastlab.tables.verdicts import MARKERS


def verdict_tally(results) -> dict[str, int]:
    """How many claims of ``results`` have each verdict, in :data:`TALLY_COLUMNS`' order (reproduced, not
    reproduced, paper unsupported, undecided, not run), then not configured; zeros included (``.kind``)."""
    return {kind: sum(r.kind == kind for r in results) for kind in (*TALLY_COLUMNS, NOT_CONFIGURED)}


def heading(paper: str) -> str:
    """The heading of the paper's report section (its record's, :attr:`contrastlab.papers.Paper.heading`):
    ``Nie et al. 2023, On the Inadequacy of … (ICLR)``."""
    return next(record.heading for record in papers.PAPERS if record.prefix == paper)


def short_title(paper: str) -> str:
    """The paper's authors and year (its :func:`heading` up to the year): ``Li, Zhang & Nie 2024``."""
    title = heading(paper)
    year = re.match(r"(.*? )?((?:19|20)\d\d),?(?: |$)", title)
    return (year[1] or "") + year[2] if year else title


def table_label(spec: TableSpec) -> str:
    """A paper table's own title, after its paper's name: ``Table 1: STS.Avg and TR.Avg``."""
    paper = paper_for(spec.experiment)
    return spec.title.removeprefix(f"{paper.name}, ") if paper else spec.title


def toy_blocks(stand_ins: Mapping[str, Mapping[str, str]]) -> list:
    """The warning that a run's backbones stand in for the papers' (``tables.verdict_stand_ins``:
    experiment -> {toy backbone: paper backbone}), or nothing when none does."""
    pairs = ", ".join(dict.fromkeys(f"{t} for {p}" for m in stand_ins.values() for t, p in m.items()))
    if not pairs:
        return []
    return [
        Paragraph(
            f"**Toy numbers**: this run's backbones stand in for the papers' ({pairs}); the numbers and "
            "verdicts below exercise the code and say nothing about the papers. Full run: "
            f"`{FULL_PRESET}`."
        )
    ]


#: The cell kind of the backbone a main number of ours ran on, where a toy stands in for the paper's.
BACKBONE_KIND = "backbone"
#: The preset of the papers' own backbones and grids, the run the toy presets stand in for.
FULL_PRESET = "config.yaml"


def full_run_command(configfile: str = FULL_PRESET, words: str = "") -> str:
    """The shell command that runs (or resumes) every job of the preset ``configfile``, its words quoted
    for the shell: the Snakemake line `make`'s targets run, in the checkout's root; with ``words`` (the
    run's ``--config`` words, quoted: :data:`CONFIG_WORDS_VARIABLE`) after ``--config``."""
    command = shlex.join([".venv/bin/snakemake", "--cores", "all", "--configfile", configfile])
    return f"{command} --config {words}" if words else command


def not_run_text(results, configfile: str | None) -> str:
    """What would run the claims counted "not run" and "not configured" (outside the preset's grid): on the
    full preset (:data:`FULL_PRESET`) its own command, which resumes the run; on any other, or for a claim
    not configured, the full run's command; "" when every claim ran."""
    missing, outside = (sum(r.kind == kind for r in results) for kind in (NOT_RUN, NOT_CONFIGURED))
    counts: list[str] = []
    if missing:
        counts.append(f"Not run: {missing} claims whose cells have no metrics in this run")
    if outside:
        counts.append(f"not configured: {outside} claims whose cells are outside this preset's grid")
    if not counts:
        return ""
    text = "; ".join(counts)
    text = text[0].upper() + text[1:] + "; "
    if configfile == FULL_PRESET and not outside:
        resume = full_run_command(words=os.environ.get(CONFIG_WORDS_VARIABLE, ""))
        return text + f"`{resume}` runs them (it resumes where the run stopped)."
    return (
        text + f"the full run (`{FULL_PRESET}`) trains them all: `{full_run_command()}` (`make plan` first)."
    )


def marked(text: str, verdict: str | None) -> Cell | str:
    """A Δ's ``text`` as a :class:`~contrastlab.blocks.Cell` of its seed-noise ``verdict``'s kind (its
    first word) when it carries that verdict's marker (≈ ▲ ▼ ?), else as it is."""
    marker = MARKERS.get(verdict, "")
    return Cell(text, verdict.split()[0], marker) if marker and marker in text else text


def headline_row(table: Table, headline: Mapping[str, str], link: str) -> dict:
    """The paper's main number (``headline``: ``{table, method, task, backbone}``) beside ours: the cell
    itself or, where the preset leaves the paper's backbone out, its toy stand-in's (Δ then against the
    number it stands in for, †). ``link``: the rendered table's Markdown, which the main number links."""
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
    decimals = table.improvement_decimals
    name = Link(table_label(table.spec).split(":")[0], link, table.name.replace("_", "-"))
    # the toy backbone ours ran, where it stands in: on a line of its own under the number in report.html
    # (the backbone kind's CSS), so that the row keeps its height and the table its 1024 px width
    on = [Cell(f" ({ours['backbone']})", BACKBONE_KIND)] if ours["backbone"] != paper["backbone"] else []
    return {
        "main number": [name, f": {paper['row']} {paper['col']}, {label}"],
        "published": published_text(paper, decimals),
        "ours": [ours_text(ours, decimals), *on] if on else ours_text(ours, decimals),
        "Δ": marked(diff_text(ours), ours.get("verdict")),
    }


def gain_of(table: Table, method: str) -> str:
    """What the improvement in parentheses after ``method``'s numbers in ``table`` is over (its paper's
    subscript): ``mMHE over mhe``, ``w/ MACL over SimCSE``; "" where the table prints none."""
    base = ((table.meta.get("improvement") or {}).get("over") or {}).get(method)
    labels = (table.meta.get("labels") or {}).get("methods") or {}
    return f"{labels.get(method, method)} over {labels.get(base, base)}" if base else ""


#: The answer's claim columns: each verdict, in the tally's order, by its column's header (the claims not
#: configured are counted in the line below the table: a column more would not fit 1024 px).
TALLY_COLUMNS = {
    REPRODUCED: "reproduced",
    NOT_REPRODUCED: "not",
    PAPER_UNSUPPORTED: "unsupported",
    UNDECIDED: "undecided",
    NOT_RUN: "not run",
}
#: The answer's columns of a paper's main number.
MAIN_COLUMNS = ("main number", "published", "ours", "Δ")


def tally_cells(results) -> dict:
    """:func:`verdict_tally` as the answer's claim columns (:data:`TALLY_COLUMNS`): a count above zero in
    its verdict's badge (report.html), a zero plain (no finding)."""
    counts = verdict_tally(results)
    return {TALLY_COLUMNS[v]: Cell(str(counts[v]), kind_of(v)) if counts[v] else "0" for v in TALLY_COLUMNS}


def answer_rows(
    results, tables: list[Table], pages: Mapping[str, Path], base: Path
) -> tuple[list[dict], list]:
    """Per paper with claims or a main number, in order: :func:`headline_row` (linked to ``pages``,
    relative to ``base``) and its claims by verdict; all papers' counts last; and :func:`gain_of`'s texts."""
    built = {table.name: table for table in tables}
    rows, gains = [], []
    for paper in PAPERS:
        own = [r for r in results if r.claim["paper"] == paper]
        headline = load_claims(paper).get("headline")
        main = dict.fromkeys(MAIN_COLUMNS, "–")
        if headline and headline["table"] in built:
            page = pages.get(headline["table"], base / "tables" / f"{headline['table']}.md")
            link = Path(os.path.relpath(page, base)).as_posix()
            main = headline_row(built[headline["table"]], headline, link)
            gain = gain_of(built[headline["table"]], headline["method"])
            gains += [f"{short_title(paper)}: {gain}"] if gain else []
        elif not own:
            continue
        rows.append({"paper": short_title(paper), **main, **tally_cells(own)})
    if len([p for p in PAPERS if any(r.claim["paper"] == p for r in results)]) > 1:
        rows.append({"paper": "All papers", **dict.fromkeys(MAIN_COLUMNS, ""), **tally_cells(results)})
    return rows, gains


def key_text(rows: list[dict], gains: list[str]) -> str:
    """The key to :func:`answer_rows`' table: Δ's seed-noise markers, the stand-in's † (where a row has
    it), what a main number's improvement in parentheses is over (``gains``), the claim columns."""
    text = (
        "Key: Δ = ours − published, with its seed-noise verdict: ≈ within noise, ▲ above, ▼ below the "
        "paper beyond noise, ? undecided (too few seeds to measure the noise)"
    )
    if any(STAND_IN_MARK in cell_text(row["Δ"]) for row in rows):
        text += (
            f"; {STAND_IN_MARK} ours on a toy backbone standing in for the paper's (named above), against "
            "the number the paper gives its backbone"
        )
    if gains:
        text += (
            "; (+…) after a number: its improvement over the unmodified loss, as the paper prints it ("
            + "; ".join(gains)
            + "), ours likewise where both ran"
        )
    return text + (
        "; the claim columns count each paper's claims by verdict (not: not reproduced; unsupported: not "
        "reproduced, and the paper's own tables do not support the claim either), listed in its section."
    )


def undecided_text(results) -> str:
    """What would decide each paper's undecided claims (the seeds per cell, :attr:`ClaimResult.seeds_needed`),
    "" when none is undecided."""
    papers = []
    for paper in PAPERS:
        mine = [r for r in results if r.claim["paper"] == paper and r.kind == UNDECIDED]
        figures = sum(r.claim.get("relation") == "figure_values" for r in mine)
        undecided = [r.seeds_needed for r in mine if r.claim.get("relation") != "figure_values"]
        if not mine:
            continue
        unmeasured = sum(n is None for n in undecided)
        beyond = sum(n is not None and n > MAX_SEEDS for n in undecided)
        within = sorted(n for n in undecided if n is not None and n <= MAX_SEEDS)
        needs = [f"{unmeasured} need ≥ 2 seeds per cell to measure the noise"] if unmeasured else []
        needs += [f"{len(within)} would be decided at ≤ {within[-1]} seeds per cell"] if within else []
        needs += [f"{beyond} need > {MAX_SEEDS} seeds per cell"] if beyond else []
        needs += [f"{figures} within the noise of a figure's numbers"] if figures else []
        papers.append(f"{short_title(paper)}: " + ", ".join(needs))
    return "Undecided claims: " + "; ".join(papers) + "." if papers else ""


def answer_blocks(results, tables: list[Table], pages: Mapping[str, Path], base: Path, grid: Grid) -> list:
    """What the report opens with: its heading, the toy warning before any count, :func:`answer_rows`
    with its key, what would decide the undecided claims and :func:`add_seeds_blocks`."""
    stand_ins = {e: m for e, m in grid.options.verdict_stand_ins.items() if m}
    blocks = [Heading(2, "The answer"), *toy_blocks(stand_ins)]
    rows, gains = answer_rows(results, tables, pages, base)
    if rows:  # the numbers right-aligned, as in the grids
        blocks += [rows_table(rows, right=2), Paragraph(key_text(rows, gains))]
    undecided = undecided_text(results)
    not_run = not_run_text(results, os.environ.get(CONFIGFILES_VARIABLE))
    blocks += [Paragraph(text) for text in (not_run, undecided) if text]
    return blocks + add_seeds_blocks(results, grid)


def add_seeds_blocks(results, grid: Grid, configfile: str | None = None) -> list:
    """The add-seeds script (:func:`add_seeds_script`) with the paragraph that introduces it, for the
    preset's ``configfile`` words (default: :data:`CONFIGFILES_VARIABLE`'s, else ``"$CONFIG"`` to set)."""
    plan = seed_plan(results, grid)
    if not plan:
        return []
    configfile = configfile or os.environ.get(CONFIGFILES_VARIABLE)
    words = os.environ.get(CONFIG_WORDS_VARIABLE, "")
    make = (
        "with this run's `--config` words, which `make add-seeds` cannot pass"
        if words
        else f"`make add-seeds CONFIG={configfile}` prints the commands written out"
    )
    run = "`run` is the Snakemake command they share, and each line after it picks its cells"
    rest = "; the last line renders the tables and this report again"
    beyond = sum((r.seeds_needed or 0) > ADD_SEEDS_MAX for r in results if undecided_cells([r], grid))
    if beyond:  # the claims above that need more seeds than these commands add
        rest += f"; they bring a cell to {ADD_SEEDS_MAX} seeds at most, which leaves {beyond} "
        rest += "of these claims undecided"
    intro = (
        f"More seeds for the cells of the undecided claims only, on this run's preset: {run} ({make}{rest}):"
        if configfile
        else "More seeds for the cells of the undecided claims only, with `CONFIG` set to the preset this "
        f"run came from: {run} (`make add-seeds CONFIG=<preset>` prints the commands written out{rest}):"
    )
    # report.html wraps the script (html.py's CSS)
    return [Paragraph(intro), Code(add_seeds_script(plan, configfile or '"$CONFIG"', words), box="commands")]


def add_seeds_script(plan: list[dict], configfile: str = '"$CONFIG"', words: str = "") -> list[str]:
    """:func:`~.claims.add_seeds_commands` of ``plan`` as a shell script (bash or zsh): the shared ``SEEDS``
    and ``run`` first, then one ``run`` line per command; ``words``: the run's own ``--config`` words
    (quoted), before the seeds' in the same ``--config`` (a second ``--config`` would replace the first)."""
    base, experiments, tails = add_seeds_parts(plan, configfile=configfile)
    return [
        f"SEEDS={experiments}",
        f'run() {{ {base} --config {words + " " if words else ""}"$SEEDS" "$@"; }}',
        *(f"run {tail}" for tail in tails),
    ]

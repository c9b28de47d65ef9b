"""contrastlab.figures.registry: every figure of a paper's record is drawn by the one function its paper's
module registers under its name; the jobs call it by what the figure reads, and no code picks a drawing by
a figure's or a paper's name."""

from __future__ import annotations

import io
import logging
import runpy
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from contrastlab.figures import li2024, registry
from contrastlab.figures.catalog import ANALYTIC_FIGURES, CELL_FIGURES, RECORD_FIGURES
from contrastlab.papers import paper_of
from contrastlab.paths import REPO_ROOT


@pytest.mark.parametrize("name", list(RECORD_FIGURES))
def test_every_record_figure_is_drawn_by_its_papers_module(name):
    figure = registry.drawing(name)
    assert figure.reads == RECORD_FIGURES[name].reads
    assert figure.draw.__module__ == f"contrastlab.figures.{paper_of(name)}"


def test_the_records_give_each_reading_its_figures():
    assert ANALYTIC_FIGURES == {
        "nie2023": ["nie2023/nie2023_fig2a", "nie2023/nie2023_fig2b", "nie2023/nie2023_fig4"],
        "li2024": ["li2024/li2024_fig2", "li2024/li2024_fig10", "li2024/li2024_fig3", "li2024/li2024_fig4"],
    }
    reads = {name: spec.reads for name, spec in CELL_FIGURES.items()}
    assert [name for name, what in reads.items() if what == "metrics"] == [
        "nie2023/align_uniform",
        "nie2023/nie2023_fig3",
    ]
    assert len(reads) == 12 and set(reads.values()) == {"logs", "metrics"}


def test_a_name_no_record_lists_is_refused_with_one_line():
    with pytest.raises(ValueError) as refused:
        registry.figure("li2024/li2024_fig99")(lambda stem, size: [])
    assert str(refused.value) == (
        "contrastlab: @figure('li2024/li2024_fig99') names no figure of a paper's record: add it under "
        "`figures` in src/contrastlab/report/claims/li2024.yaml (docs/adding-a-paper.md)"
    )
    assert "li2024/li2024_fig99" not in registry.FIGURES


def test_a_second_function_under_one_name_is_refused_and_the_first_kept():
    first = registry.drawing("li2024/li2024_fig4").draw
    registry.figure("li2024/li2024_fig4")(first)  # the module imported again: the same function
    with pytest.raises(
        ValueError, match=r"^contrastlab: two functions draw figure 'li2024/li2024_fig4': keep"
    ):
        registry.figure("li2024/li2024_fig4")(lambda stem, size: [])
    assert registry.FIGURES["li2024/li2024_fig4"].draw is first is li2024.fig4


@pytest.mark.parametrize(
    "name, module",
    [
        ("li2024/li2024_fig99", "li2024"),
        ("macl/macl_fig1", "macl"),
        ("smith2025/smith2025_fig1", "smith2025"),
    ],
)
def test_a_figure_no_function_draws_is_named_with_where_to_register_it(name, module):
    """The paper's module imported (Li's), or none there (MACL, a paper not added): the same one line."""
    with pytest.raises(ValueError) as missing:
        registry.drawing(name)
    assert str(missing.value) == (
        f"contrastlab: no function draws figure {name!r}: register one with @figure({name!r}) in "
        f"src/contrastlab/figures/{module}.py (docs/adding-a-paper.md)"
    )


def test_no_code_picks_a_drawing_by_a_figures_or_a_papers_name():
    """A grep over figures/ and scripts/ finds no branch on a figure's or a paper's name."""
    done = subprocess.run(
        [
            "grep",
            "-n",
            r'if name == "\|sm.params.figure ==\|sm.params.paper ==\|if sm.params.figure in',
            *map(str, sorted((REPO_ROOT / "src/contrastlab/figures").glob("*.py"))),
            *map(str, sorted((REPO_ROOT / "scripts").glob("*.py"))),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stdout == "", done.stdout  # grep: no line matched


def test_the_analytic_job_draws_its_papers_figures_from_one_simulation(tmp_path, monkeypatch):
    """scripts/figure_analytic.py as Snakemake runs it: each of Li's analytic figures by its function, in
    its stem (PNG, PDF, CSV), at the config's size; Fig. 2 and 10 plot one Monte-Carlo run."""
    names = ANALYTIC_FIGURES["li2024"]
    outputs = [str(tmp_path / f"{name}.{ext}") for name in names for ext in ("png", "pdf", "csv")]
    snakemake = SimpleNamespace(
        output=outputs,
        params=SimpleNamespace(figures=names, size={"points": 4, "batches": 3}),
        log=[str(tmp_path / "analytic.log")],
        rule="figure_analytic_li2024",
    )
    li2024._gd_frame.cache_clear()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # the script redirects stderr; restored after
    handlers = list(logging.getLogger("contrastlab").handlers)
    try:
        runpy.run_path(
            str(REPO_ROOT / "scripts" / "figure_analytic.py"), init_globals={"snakemake": snakemake}
        )
    finally:
        for handler in set(logging.getLogger("contrastlab").handlers) - set(handlers):
            logging.getLogger("contrastlab").removeHandler(handler)
        if not isinstance(sys.stderr, io.StringIO):
            sys.stderr.close()
    assert li2024._gd_frame.cache_info().misses == 1 and li2024._gd_frame.cache_info().hits == 1
    fig2 = pd.read_csv(tmp_path / "li2024/li2024_fig2.csv")
    fig10 = pd.read_csv(tmp_path / "li2024/li2024_fig10.csv")
    assert set(fig2["loss"]) == {"arccon", "met"} and set(fig10["loss"]) == {"infonce", "mpt"}
    assert len(fig2) == len(fig10) == 2 * 4 * 4  # two losses over the 4 x 4 grid
    assert "figures: wrote 12 files" in (tmp_path / "analytic.log").read_text()

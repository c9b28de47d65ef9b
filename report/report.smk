# Snakemake's own report (snakemake --report report.zip): what flags the results for it, beside its
# description (workflow.rst) and captions. Each table's CSV (rules/tables.smk) and each figure's PNG
# (rules/figures.smk) is filed under its paper (the category) and "Tables" or "Figures" (the subcategory),
# results/report.html under "Report". Flags, not params: they change no job and rerun nothing. Looked up
# when the report is made (the callables), never while the DAG is parsed. Functions only (Snakemake's lint
# wants no functions beside rules), included by rules/figures.smk and rules/tables.smk; they use the
# workflow's names from rules/common.smk (figure_files, FIGURES), hence the noqa.
# ruff: noqa: F821

import functools
import os

from snakemake.io import report

REPORT_CAPTIONS = "../report"  # the captions' folder, relative to rules/


def reported_figure(name):
    """:func:`figure_files` of ``name`` (``<experiment>/<figure>``, may hold the rule's wildcards), its PNG
    flagged for the report: category its paper, subcategory Figures, labelled by its place in the paper."""
    files = figure_files(name)

    def resolved(wildcards):
        return name.format(**dict(wildcards.items()))

    files["png"] = report(
        files["png"],
        caption=f"{REPORT_CAPTIONS}/figure.rst",
        category=lambda wildcards: report_category(resolved(wildcards)),
        subcategory="Figures",
        labels=lambda wildcards: {"figure": figure_label(resolved(wildcards))},
    )
    return files


def reported_tables(paths):
    """The tables' files (:func:`table_outputs`), each CSV flagged for the report: category its paper (the
    comparison tables of the user's losses: "Your losses"), subcategory Tables; the Markdown and LaTeX
    beside it are not flagged (the CSV's caption names them)."""
    return [path if not path.endswith(".csv") else _reported_table(path) for path in paths]


def _reported_table(path):
    name = os.path.basename(path).removesuffix(".csv")
    return report(
        path,
        caption=f"{REPORT_CAPTIONS}/table.rst",
        category=lambda wildcards: report_category(_table_experiment(name)),
        subcategory="Tables",
        labels=lambda wildcards: {"table": _table_label(name)},
    )


def report_category(name):
    """The report's category of an experiment, table or figure name: its paper's name (contrastlab.papers:
    "Nie et al. 2023", "Huang et al. 2023 (MACL)"), else "Your losses"."""
    from contrastlab.config import paper_of

    return _paper_names().get(paper_of(name), "Your losses")


@functools.cache
def _paper_names():
    from contrastlab.papers import PAPERS

    return {paper.prefix: paper.name for paper in PAPERS}  # the name its tables' titles open with


def figure_label(name):
    """A figure's label in the report: its place in the paper as its caption opens ("Nie Fig. 2a"; the
    reading of report.md's figure order), with its experiment where that is not the paper's own ("OAR Fig.
    3 (oar_cifar10)"); else its name ("paradigm/mpt")."""
    from contrastlab.config import paper_of
    from contrastlab.report.sections import figure_order

    figure = next((f for f in FIGURES if f["name"] == name), None)
    if figure is None or figure_order(figure)[0] == 2:  # no "Fig. N" or "Table N" in the opening
        return name
    label = figure["caption"].split(":", 1)[0]
    experiment = figure["experiment"]
    return f"{label} ({experiment})" if experiment and experiment != paper_of(experiment) else label


def _table_experiment(name):
    from contrastlab.tables import TABLES

    return TABLES[name].experiment if name in TABLES else name.removeprefix("search_")


def _table_label(name):
    """A paper table's number and title ("Table 1: STS.Avg and TR.Avg"); else its name ("search_nie2023")."""
    from contrastlab.tables import TABLES

    return TABLES[name].title.split(", ", 1)[1] if name in TABLES else name

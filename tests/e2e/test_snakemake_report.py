"""Snakemake's own report (snakemake --report): a reduced demo's tables, figures and report.html are in its
archive under their papers' categories, and flagging them changes no job."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from .test_dryrun import run_snakemake
from .test_pipeline import reduced_demo, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 9  # a long module: tests/conftest.py starts the highest numbers first

#: The report's category of each paper the reduced demo draws (report/report.smk: as its tables name it).
CATEGORIES = {"nie2023": "Nie et al. 2023", "oar": "OAR 2024"}


@pytest.fixture(scope="module")
def reported_demo(repo_root, tmp_path_factory):
    """The reduced demo of test_pipeline.py run to the end, then ``snakemake --report report.zip`` and a
    dry-run with the same config: the archive's report.html read (its embedded ``categories``,
    ``results`` and ``workflow_desc``), the members, and both commands' output."""
    workdir = tmp_path_factory.mktemp("snakemake-report")
    config = reduced_demo(repo_root, workdir)
    configfile = write(config, workdir / "c.yaml")
    run_snakemake(repo_root, "--configfile", configfile, "--cores", "2")
    archive = workdir / "report.zip"
    report_output = run_snakemake(repo_root, "--configfile", configfile, "--report", str(archive))
    dry_run = run_snakemake(repo_root, "--configfile", configfile, "-n", "--cores", "2")
    with zipfile.ZipFile(archive) as zipped:
        members = {info.filename: info.file_size for info in zipped.infolist()}
        html = zipped.read("report/report.html").decode()
    return SimpleNamespace(
        config=config,
        results=Path(config["results_dir"]),
        members=members,
        categories=embedded(html, "categories"),
        entries=embedded(html, "results"),
        description=embedded(html, "workflow_desc"),
        report_output=report_output,
        dry_run=dry_run,
    )


def embedded(html: str, name: str):
    """The JSON value Snakemake's report.html assigns to ``var <name>`` in its script of that id (the
    bundled libraries have their own ``var results``)."""
    script = html.index(f'<script id="{name.replace("_", "-")}">')
    start = html.index(f"var {name} = ", script) + len(f"var {name} = ")
    return json.JSONDecoder().raw_decode(html, start)[0]


def archived(demo, path: Path) -> int:
    """The size of ``path``'s copy in the archive (report/<data_uri>), asserting it is there."""
    member = f"report/{demo.entries[str(path)]['data_uri']}"
    assert member in demo.members, (member, sorted(demo.members)[:20])
    return demo.members[member]


def test_every_table_csv_is_in_the_archive_under_its_paper_and_tables(reported_demo):
    demo = reported_demo
    # the bridge table (rule mteb's, beside the papers' tables) is no paper's table
    tables = sorted(p for p in (demo.results / "tables").glob("*.csv") if p.stem != "bridge")
    assert {p.stem for p in tables} >= {"nie2023_table1", "nie2023_table2"}, tables
    listed = demo.categories["Nie et al. 2023"]["Tables"]
    assert sorted(listed) == [str(p) for p in tables]
    for path in tables:
        assert archived(demo, path) == path.stat().st_size
    entry = demo.entries[str(demo.results / "tables" / "nie2023_table1.csv")]
    assert entry["labels"] == {"table": "Table 1: STS.Avg and TR.Avg"}
    assert "published number" in entry["caption"] and "Markdown and LaTeX" in entry["caption"]
    assert not any(path.endswith((".md", ".tex")) for path in demo.entries)  # the CSV's caption names them


def test_every_figure_png_is_in_the_archive_under_its_paper_and_figures(reported_demo):
    """Each figure the reduced demo draws (Nie's analytic, log-based and sweep figures, OAR's synthetic
    study), its PNG under its paper's Figures, labelled with its place in the paper."""
    from contrastlab import config as cl_config
    from contrastlab.config import paper_of
    from contrastlab.figures import catalog

    demo = reported_demo
    figures = catalog.figures(cl_config.Grid(cl_config.validate(json.loads(json.dumps(demo.config)))))
    assert {paper_of(f["name"]) for f in figures} == set(CATEGORIES)
    for paper, category in CATEGORIES.items():
        expected = sorted(
            str(demo.results / "figures" / f"{f['name']}.png")
            for f in figures
            if paper_of(f["name"]) == paper
        )
        assert sorted(demo.categories[category]["Figures"]) == expected
        for path in expected:
            assert archived(demo, Path(path)) == Path(path).stat().st_size
    labels = {
        Path(p).stem: demo.entries[p]["labels"]["figure"]
        for p in demo.categories["Nie et al. 2023"]["Figures"]
    }
    assert labels["nie2023_fig2a"] == "Nie Fig. 2a" and labels["training_curves"] == "Nie Fig. 1b-d (in part)"
    synthetic = demo.entries[str(demo.results / "figures" / "oar_synthetic" / "table2.png")]
    assert synthetic["labels"] == {"figure": "OAR Table 2 (synthetic)"}
    assert synthetic["job_properties"]["rule"] == "oar_synthetic"  # the figure's own job, not the tables'
    assert "oar_synthetic" in synthetic["caption"] and "``" not in synthetic["caption"]  # rendered
    assert "javascript:app.showResultInfo" in synthetic["caption"]  # the link to report.html's entry


def test_the_projects_report_html_is_in_the_archive_and_the_description_points_to_it(reported_demo):
    demo = reported_demo
    report = demo.results / "report.html"
    assert demo.categories["Report"] == {"Other": [str(report)]}  # no subcategory
    assert archived(demo, report) == report.stat().st_size
    assert "self-contained" in demo.entries[str(report)]["caption"]
    assert f"{demo.results}/report.html" in demo.description
    assert "Open the project" in demo.description
    assert set(demo.categories) == {*CATEGORIES.values(), "Report"}
    assert "Report created" in demo.report_output, demo.report_output[-2000:]


def test_flagging_changes_no_job_a_finished_run_has_nothing_to_do(reported_demo):
    """report() flags are not params: after the run and its report, the same config dry-runs to nothing."""
    assert "Nothing to be done" in reported_demo.dry_run, reported_demo.dry_run[-3000:]

"""contrastlab.figures.catalog: the figures a config draws, and ``figures: false``."""

from __future__ import annotations

from contrastlab import config as cl_config
from contrastlab.figures import catalog
from contrastlab.report.sections import write_report
from contrastlab.tables.metrics import collect_metrics


def demo_grid(repo_root, **changes) -> cl_config.Grid:
    config = cl_config.load(repo_root / "config" / "demo.yaml")
    return cl_config.Grid({**config, **changes})


def test_figures_false_leaves_only_the_synthetic_study_which_is_a_table(repo_root):
    drawn = {f["name"] for f in catalog.figures(demo_grid(repo_root))}
    assert {"nie2023/nie2023_fig2a", "oar_synthetic/table2"} <= drawn and len(drawn) > 20
    kept = catalog.figures(demo_grid(repo_root, figures=False))
    assert [f["name"] for f in kept] == ["oar_synthetic/table2"]
    assert catalog.figures(demo_grid(repo_root, figures=False, oar_synthetic=None)) == []


def test_the_config_validates_the_switch_and_the_report_says_the_figures_were_left_out(repo_root, tmp_path):
    config = cl_config.load(repo_root / "config" / "demo.yaml")
    cl_config.validate({**config, "figures": False})
    assert "figures" not in config  # no default written: an old config's digest stays as it was
    # the report's figure claims read the results folder's figures: this test's, never the checkout's
    grid = cl_config.Grid({**config, "figures": False, "results_dir": str(tmp_path)})
    read = {"metrics_root": tmp_path / "metrics", "metrics": collect_metrics(tmp_path)}
    report = write_report([], tmp_path / "report.md", grid=grid, figures=[], **read)
    assert "**Figures.** Left out: the config sets `figures: false`." in report.read_text()
    shown = write_report(
        [], tmp_path / "shown.md", grid=demo_grid(repo_root, results_dir=str(tmp_path)), **read
    )
    assert "figures: false" not in shown.read_text()

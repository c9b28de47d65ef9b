"""The headline summary DVC reads (contrastlab.tables.summary): one small JSON of means over seeds."""

from __future__ import annotations

import json

from tables_synthetic import SEEDS, make_config, write_cell, write_synthetic_metrics

from contrastlab.config import Grid
from contrastlab.tables import TABLES, tables_for_config
from contrastlab.tables.summary import summary


def test_summary_holds_the_headline_means_of_the_configured_cells_with_metrics(tmp_path):
    config, metrics_root = make_config(), tmp_path / "results" / "metrics"
    write_synthetic_metrics(metrics_root)
    result = summary(config, metrics_root)
    assert set(result) <= {TABLES[name].experiment for name in tables_for_config(Grid(config))}
    cells = sorted(metrics_root.glob("nie2023/*/*/seed42/senteval.json"))
    assert cells, "the synthetic metrics have Nie cells"
    for cell in cells:
        backbone, method = cell.parts[-4], cell.parts[-3]
        files = [cell.parents[1] / f"seed{seed}" / "senteval.json" for seed in SEEDS]
        values = [json.loads(path.read_text())["sts_avg"] for path in files if path.exists()]
        scores = result["nie2023"][backbone][method]
        assert scores["sts_avg"] == round(sum(values) / len(values), 2)
        assert set(scores) <= {"sts_avg", "tr_avg", "tr_devacc_avg"}
    # a method the config no longer has, and a run with no metrics: left out
    write_cell(metrics_root, "nie2023", "bert-base", "removed_loss")
    assert "removed_loss" not in summary(config, metrics_root)["nie2023"]["bert-base"]
    assert summary(config, metrics_root.parent / "nothing") == {}

"""Li Fig. 6 and Nie Fig. 3 from their sweep cells' logs and metrics."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from contrastlab.config import sweep_points
from contrastlab.figures.sweeps import best_dev_frame, plot_sweep_panels, sweep_metrics_frame

CONFIG = {
    "experiments": {
        "li2024_fig6_tau": {"sweep": {"hp.tau": [0.05, 3.0]}, "methods": {"baseline": {"loss": "paradigm"}}},
        "nie2023_fig3": {"sweep": {"hp.m": [0.1, 0.8]}, "methods": {"mpt": {"loss": "mpt"}}},
    }
}


def _points(experiment: str) -> dict[str, tuple[str, float]]:
    return sweep_points(CONFIG["experiments"][experiment])


def test_sweep_points_name_the_swept_value():
    assert sweep_points(CONFIG["experiments"]["li2024_fig6_tau"]) == {
        "baseline-tau0.05": ("tau", 0.05),
        "baseline-tau3.0": ("tau", 3.0),
    }


def test_best_dev_and_metrics_frames_and_the_plot(tmp_path):
    for tau, dev in ((0.05, [70.0, 81.5, 80.0]), (3.0, [70.0, 55.0])):
        log = tmp_path / f"checkpoints/li2024_fig6_tau/bert-base/baseline-tau{tau}/seed42/train_log.jsonl"
        log.parent.mkdir(parents=True)
        records = [{"event": "start"}] + [
            {"event": "eval", "step": 125 * i, "dev_spearman": s} for i, s in enumerate(dev)
        ]
        log.write_text("\n".join(map(json.dumps, records)))
    for m, sts in ((0.1, 74.0), (0.8, 71.0)):
        path = tmp_path / "metrics/nie2023_fig3/bert-base" / f"mpt-m{m}" / "seed42/senteval.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"sts_avg": sts, "tr_avg": 85.0}))
    dev = best_dev_frame(tmp_path / "checkpoints", "li2024_fig6_tau", _points("li2024_fig6_tau"))
    assert dev.set_index("value")["score"].to_dict() == {0.05: 81.5, 3.0: 70.0}  # the best evaluation
    metrics = sweep_metrics_frame(tmp_path / "metrics", "nie2023_fig3", _points("nie2023_fig3"))
    assert len(metrics) == 4 and metrics[metrics["key"] == "sts_avg"]["score"].tolist() == [74.0, 71.0]
    written = plot_sweep_panels(
        {"weight τ": dev, "margin": metrics}, tmp_path / "fig", ylabel="score", log_x=["weight τ"]
    )
    plotted = pd.read_csv(written[2])
    assert set(plotted["panel"]) == {"weight τ", "margin"} and len(plotted) == 6
    assert written[0].stat().st_size > 10_000
    assert plotted[plotted["panel"] == "weight τ"]["score"].tolist() == pytest.approx([81.5, 70.0])

"""Snakemake entry: a figure over experiments' cells (Li Fig. 6: dev scores; Nie Fig. 3a: metrics and
gaps; the geometry figures of figures.geometry_logs)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures.geometry_logs import LOG_FIGURES, draw, with_gap
from contrastlab.figures.sweeps import best_dev_frame, plot_sweep_panels, sweep_metrics_frame
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    results, stem = Path(sm.params.results), Path(sm.output.png).with_suffix("")
    points = sm.params.points  # experiment -> its sweep points (rules/figures.smk)

    if sm.params.figure in LOG_FIGURES:
        written = draw(sm.params.figure, results, stem, points[LOG_FIGURES[sm.params.figure][0]])
    elif sm.params.figure == "li2024/li2024_fig6":
        titles = {"li2024_fig6_m": "GD margin m", "li2024_fig6_tau": "weight τ", "li2024_fig6_r": "ratio r"}
        panels = {
            titles[e]: best_dev_frame(results / "checkpoints", e, points[e]) for e in sm.params.experiments
        }
        written = plot_sweep_panels(panels, stem, ylabel="STS-B dev Spearman × 100", log_x=["weight τ"])
    else:
        by_m = sweep_metrics_frame(results / "metrics", "nie2023_fig3", points["nie2023_fig3"])
        panels = {
            "MPT margin m": by_m,
            "distance gap d_ij": with_gap(by_m, results / "checkpoints", "nie2023_fig3"),
        }
        labels = {"sts_avg": "STS.Avg", "tr_avg": "TR.Avg"}
        written = plot_sweep_panels(panels, stem, ylabel="score", key_labels=labels)
    print(f"figure: wrote {', '.join(p.name for p in written)}")

"""Snakemake entry: OAR Fig. 2/4 of one experiment from its sweep cells' metrics (contrastlab.figures.oar)."""

from pathlib import Path

from contrastlab.config import vision_evaluation
from contrastlab.figures.oar import lr_sweep_figure
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    config, experiment = sm.params.config, sm.wildcards.experiment
    written = lr_sweep_figure(
        sm.params.metrics_root,
        experiment,
        Path(sm.output.png).with_suffix(""),
        rates=config["experiments"][experiment]["sweep"]["lr"],
        label_fractions=vision_evaluation(config, experiment)
        .get("ffn", {})
        .get("label_fractions", [0.1, 0.5, 1.0]),
    )
    print(f"figure: {len(sm.input.metrics)} metrics files, wrote {', '.join(p.name for p in written)}")

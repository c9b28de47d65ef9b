"""Snakemake entry: OAR Fig. 2/4 of one experiment from its sweep cells' metrics (contrastlab.figures.oar)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.config import Experiment
from contrastlab.figures.oar import lr_sweep_figure
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    experiment = Experiment(sm.wildcards.experiment, sm.params.config)
    written = lr_sweep_figure(
        sm.params.metrics_root,
        experiment.name,
        Path(sm.output.png).with_suffix(""),
        rates=experiment.spec["sweep"]["lr"],
        label_fractions=experiment.vision_evaluation.get("ffn", {}).get("label_fractions", [0.1, 0.5, 1.0]),
    )
    print(f"figure: {len(sm.input.metrics)} metrics files, wrote {', '.join(p.name for p in written)}")

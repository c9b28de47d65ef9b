"""Snakemake entry: OAR Fig. 2/4 of one experiment from its sweep cells' metrics (contrastlab.figures.oar)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures.oar import lr_sweep_figure
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    written = lr_sweep_figure(
        sm.params.metrics_root,
        sm.wildcards.experiment,
        Path(sm.output.png).with_suffix(""),
        rates=sm.params.rates,
        label_fractions=sm.params.label_fractions,
    )
    print(f"figure: {len(sm.input.metrics)} metrics files, wrote {', '.join(p.name for p in written)}")

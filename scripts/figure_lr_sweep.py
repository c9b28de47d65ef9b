"""Snakemake entry: OAR Fig. 2/4 of one experiment from its sweep cells' metrics (contrastlab.figures.oar)."""

from pathlib import Path

from contrastlab.figures.oar import lr_sweep_figure
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    stem = Path(sm.output.png).with_suffix("")
    written = lr_sweep_figure(sm.params.metrics_root, dict(sm.params.config), sm.wildcards.experiment, stem)
    print(f"figure: {len(sm.input.metrics)} metrics files, wrote {', '.join(p.name for p in written)}")

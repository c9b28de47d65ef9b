"""Snakemake entry: the heatmaps of one experiment's hyperparameter searches (contrastlab.figures.search)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures.search import search_figure
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    stem = Path(sm.output.png).with_suffix("")
    written = search_figure(sm.params.results_dir, sm.wildcards.experiment, stem)
    print(f"figure: {len(sm.input.selections)} selections, wrote {', '.join(p.name for p in written)}")

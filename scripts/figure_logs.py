"""Snakemake entry: Nie Fig. 1 from the cells' metrics (alignment/uniformity) or training logs (curves)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures import training_curves as tc
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    stem, experiment = Path(sm.output.png).with_suffix(""), sm.wildcards.experiment
    if sm.rule == "figure_align_uniform":
        written = tc.plot_alignment_uniformity(
            tc.alignment_uniformity_frame(sm.params.metrics_root, experiment), stem
        )
    else:
        written = tc.plot_training_curves(tc.curves_frame(sm.params.checkpoints_root, experiment), stem)
    print(f"figure: wrote {', '.join(p.name for p in written)}")

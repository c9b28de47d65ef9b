"""Snakemake entry: Li et al.'s gradient paradigm (GD, W, R by autograd) of one user loss."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    from contrastlab.figures.paradigm import write_paradigm_figure

    size = dict(sm.params.size)
    stem = Path(sm.output[0]).with_suffix("")
    written = write_paradigm_figure(
        sm.params.loss,
        dict(sm.params.hp),
        stem,
        label=sm.wildcards.method,
        points=size["points"],
        batches=size["batches"],
    )
    print(f"figures: wrote {len(written)} files")

"""Snakemake entry: the analytic (Nie Fig. 2a/2b/4) or simulated (Li Fig. 2/3/10) figures of one paper."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    out_dir = Path(sm.output[0]).parent
    if sm.params.paper == "nie2023":
        from contrastlab.figures.nie2023 import write_figures

        written = write_figures(out_dir)
    else:
        from contrastlab.figures.li2024 import write_figures

        size = dict(sm.params.size)
        written = write_figures(out_dir, points=size["points"], batches=size["batches"])
    missing = sorted(set(map(str, sm.output)) - set(map(str, written)))
    if missing:
        raise RuntimeError(f"figures not written: {missing}")
    print(f"figures: wrote {len(written)} files")

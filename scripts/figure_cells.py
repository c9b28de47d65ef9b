"""Snakemake entry: a paper's figure over its experiments' cells (their training logs, or their metrics and
logs, as its record says), drawn by the function registered under its name (contrastlab.figures.registry)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures.registry import drawing
from contrastlab.paths import Results
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    written = drawing(sm.params.figure).draw(
        Results(sm.params.results),
        Path(sm.output.png).with_suffix(""),
        experiments=list(sm.params.experiments),  # the configured ones of the record's list
        points=dict(sm.params.points),  # experiment -> its sweep points (method -> swept key and value)
    )
    print(f"figure: wrote {', '.join(p.name for p in written)}")

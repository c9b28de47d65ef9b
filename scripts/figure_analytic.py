"""Snakemake entry: the analytic or simulated figures of one paper (no training: Nie Fig. 2a/2b/4, Li Fig.
2/3/4/10), each drawn by the function registered under its name (contrastlab.figures.registry)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures.registry import drawing
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    # each figure's PNG, PDF and CSV, in the order of its names
    stems = list(dict.fromkeys(Path(path).with_suffix("") for path in sm.output))
    written = []
    for name, stem in zip(sm.params.figures, stems, strict=True):
        written += drawing(name).draw(stem, dict(sm.params.size))
    missing = sorted(set(map(str, sm.output)) - set(map(str, written)))
    if missing:
        raise RuntimeError(f"figures not written: {missing}")
    print(f"figures: wrote {len(written)} files")

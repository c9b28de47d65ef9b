"""Snakemake entry of rule ``search_select``: one stage's winner, on dev scores only (contrastlab.search)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.paths import write_json
from contrastlab.search import SearchPoint, stage_selection
from contrastlab.workflow.job import job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    points = [
        SearchPoint(**{**p, "around": {k: tuple(v) for k, v in p["around"].items()}})
        for p in snakemake.params.points
    ]
    selection = stage_selection(points, list(snakemake.input.models))
    for row in selection["points"]:
        print(f"{row['name']}: dev {row['dev']}")
    print(f"winner: {selection['winner']} (dev {selection['winner_dev']})")
    write_json(snakemake.output.selection, selection)

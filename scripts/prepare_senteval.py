"""Snakemake entry: make the SentEval data available (user copy, generated fixture, or download)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.data.acquire import prepare_senteval
from contrastlab.paths import write_json
from contrastlab.workflow.job import job_data_locations, job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    data = snakemake.config["data"]
    where = job_data_locations(snakemake)
    prepare_senteval(
        where["senteval_dir"],
        url=data["senteval_url"],
        downloads=where["downloads"],
        user_copy=bool(data["senteval_dir"]),
        fixture=data["fixture"],
        lock_file=where["lock"],
        resources_dir=snakemake.config["resources_dir"],  # named when it cannot be written
    )
    write_json(snakemake.output[0], dict(snakemake.params.identity))  # what, never where: see data.smk

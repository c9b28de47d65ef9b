"""Snakemake entry: make the training corpus available (user copy, generated demo corpus, or download)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.data.acquire import prepare_corpus
from contrastlab.paths import write_json
from contrastlab.workflow.job import job_data_locations, job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    data = snakemake.config["data"]
    where = job_data_locations(snakemake)
    content = prepare_corpus(
        where["corpus"],
        url=data["wiki_url"],
        downloads=where["downloads"],
        user_copy=bool(data["wiki_path"]),
        fixture=data["fixture"],
        fixture_sentences=data["fixture_corpus_sentences"],
        lock_file=where["lock"],
        expected_lines=data["wiki_lines"],
        expected_sha256=dict(snakemake.params.identity).get("sha256"),  # resolved before any job
        resources_dir=snakemake.config["resources_dir"],  # named when it cannot be written
    )
    print(f"corpus: {content['lines']:,} lines, sha256 {content['sha256']}")
    write_json(snakemake.output[0], content)  # what, never where (the cells' param is the identity)

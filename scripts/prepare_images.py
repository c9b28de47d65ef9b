"""Snakemake entry: make a vision dataset available (scikit-learn's digits, a user's CIFAR copy, or the
download, checked against the published md5 of every file)."""

from contrastlab.data.images import prepare_images
from contrastlab.paths import write_json
from contrastlab.workflow.job import job_data_locations, job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    where = job_data_locations(snakemake)
    prepare_images(
        snakemake.wildcards.dataset,
        where["images"],
        download=not snakemake.config["data"].get("cifar_root"),
        downloads=where["downloads"],
    )
    write_json(snakemake.output[0], dict(snakemake.params.identity))  # what, never where: see data.smk

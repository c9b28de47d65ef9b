"""Snakemake entry: make a vision dataset available (scikit-learn's digits, a user's CIFAR copy, or the
download, checked against the published md5 of every file)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.config.data import DataConfig
from contrastlab.data.images import cifar_source, prepare_images
from contrastlab.paths import write_json
from contrastlab.workflow.job import job_data_locations, job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    where = job_data_locations(snakemake)
    dataset = snakemake.wildcards.dataset
    data = DataConfig(snakemake.config)
    prepare_images(
        dataset,
        where["images"],
        download=not data.user_images_root(dataset),
        downloads=where["downloads"],
        source=cifar_source(dataset, data.cifar_source_spec(dataset)),
        lock_file=where["lock"],
    )
    write_json(snakemake.output[0], dict(snakemake.params.identity))  # what, never where: see data.smk

"""Snakemake entry: make the SentEval data available (user copy, generated fixture, or download)."""

from contrastlab.data.acquire import prepare_senteval
from contrastlab.workflow import job_label, logged_to, write_json

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    p = snakemake.params
    folder = prepare_senteval(
        p.senteval_dir, url=p.url, downloads=p.downloads, user_copy=p.user_copy, fixture=p.fixture
    )
    write_json(snakemake.output[0], {"senteval_dir": str(folder)})

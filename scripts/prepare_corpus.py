"""Snakemake entry: make the training corpus available (user copy, generated demo corpus, or download)."""

from contrastlab.data.acquire import prepare_corpus
from contrastlab.workflow import job_label, logged_to, write_json

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    p = snakemake.params
    path = prepare_corpus(
        p.corpus,
        url=p.url,
        downloads=p.downloads,
        user_copy=p.user_copy,
        fixture=p.fixture,
        fixture_sentences=p.fixture_sentences,
    )
    write_json(snakemake.output[0], {"corpus": str(path)})

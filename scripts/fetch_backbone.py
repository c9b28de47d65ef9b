"""Snakemake entry: materialise one backbone (download, package copy, or random init) as an HF folder."""

from contrastlab.models import materialize_backbone
from contrastlab.workflow.job import job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    alias = snakemake.wildcards.backbone
    out = materialize_backbone(
        snakemake.params.spec,
        snakemake.output[0],
        resolve_alias=lambda other: f"{snakemake.params.models_dir}/{other}",
    )
    print(f"backbone {alias} -> {out}")

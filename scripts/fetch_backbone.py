"""Snakemake entry: materialise one backbone (download, package copy, or random init) as an HF folder."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.models import materialize_backbone
from contrastlab.models.text import backbone_record
from contrastlab.workflow.job import job_data_locations, job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    alias = snakemake.wildcards.backbone
    out = materialize_backbone(
        snakemake.params.spec,
        snakemake.output[0],
        resolve_alias=lambda other: f"{snakemake.params.models_dir}/{other}",
        lock_file=job_data_locations(snakemake)["lock"],
    )
    record = backbone_record(out) or {}
    named = record.get("hf_id") or record.get("package") or record.get("path") or record.get("source")
    print(f"backbone {alias} -> {out} ({named} {record.get('revision') or record.get('version') or ''})")

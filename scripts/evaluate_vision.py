"""Snakemake entry: evaluation of one trained encoder on frozen features.

Linear and kNN probes (MACL App. B.3) or the FFN fine-tuning (OAR §5), as the experiment configures.
"""

import torch

from contrastlab.evaluation.vision import evaluate_encoder
from contrastlab.workflow import (
    failure_record,
    job_data_locations,
    job_device,
    job_label,
    logged_to,
    workflow_run,
    write_json,
)

snakemake = globals()["snakemake"]

record = failure_record(snakemake)
with logged_to(snakemake.log[0], job_label(snakemake), failure_record=record, run=workflow_run(snakemake)):
    device = job_device(snakemake)  # its own GPU (or the CPU with resources.gpu: 0)
    torch.set_num_threads(snakemake.threads)
    evaluation = dict(snakemake.params.evaluation)
    metrics = evaluate_encoder(
        snakemake.input.encoder,
        data_root=job_data_locations(snakemake)["images"],
        batch_size=evaluation["batch_size"],
        probes=list(evaluation.get("probes") or ("linear", "knn")),
        linear=dict(evaluation["linear"]),
        knn=dict(evaluation["knn"]),
        ffn=dict(evaluation.get("ffn") or {}),
        device=device,
    )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

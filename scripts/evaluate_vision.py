"""Snakemake entry: linear and kNN evaluation of one trained encoder on frozen features (MACL App. B.3)."""

import torch

from contrastlab.evaluation.vision import evaluate_encoder
from contrastlab.workflow import failure_record, job_data_locations, job_label, logged_to, write_json

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake), failure_record=failure_record(snakemake)):
    torch.set_num_threads(snakemake.threads)
    evaluation = dict(snakemake.params.evaluation)
    metrics = evaluate_encoder(
        snakemake.input.encoder,
        data_root=job_data_locations(snakemake)["images"],
        batch_size=evaluation["batch_size"],
        linear=dict(evaluation["linear"]),
        knn=dict(evaluation["knn"]),
    )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

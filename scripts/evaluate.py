"""Snakemake entry: SentEval-protocol evaluation of one checkpoint (or unmodified backbone)."""

import torch

from contrastlab.evaluation.senteval import evaluate_checkpoint
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
    metrics = evaluate_checkpoint(
        snakemake.input.model,
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.params.tasks,
        snakemake.params.mode,
        pooling=snakemake.params.pooling,
        batch_size=snakemake.params.batch_size,
        device=device,
    )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

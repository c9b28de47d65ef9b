"""Snakemake entry: SentEval-protocol evaluation of one checkpoint (or unmodified backbone)."""

import torch

from contrastlab.evaluation.senteval import evaluate_checkpoint
from contrastlab.workflow import (
    failure_record,
    job_data_locations,
    job_label,
    logged_to,
    require_requested_gpu,
    workflow_run,
    write_json,
)

snakemake = globals()["snakemake"]

record = failure_record(snakemake)
with logged_to(snakemake.log[0], job_label(snakemake), failure_record=record, run=workflow_run(snakemake)):
    require_requested_gpu(snakemake)  # never evaluate on the CPU of a node whose GPU is broken
    torch.set_num_threads(snakemake.threads)
    metrics = evaluate_checkpoint(
        snakemake.input.model,
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.params.tasks,
        snakemake.params.mode,
        pooling=snakemake.params.pooling,
        batch_size=snakemake.params.batch_size,
    )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

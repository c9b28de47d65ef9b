"""Snakemake entry of rule ``search_evaluate``: the SentEval-protocol evaluation of a search's winner,
read from its last stage's selection (the test scores are computed for this point alone)."""

import json

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
    device = job_device(snakemake)
    torch.set_num_threads(snakemake.threads)
    with open(snakemake.input.selection, encoding="utf-8") as handle:
        selection = json.load(handle)
    metrics = evaluate_checkpoint(
        selection["winner_model"],
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.params.tasks,
        snakemake.params.mode,
        pooling=snakemake.params.pooling,
        batch_size=snakemake.params.batch_size,
        device=device,
    )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    metrics["search"] = {
        key: selection[key] for key in ("winner", "winner_dev", "winner_settings", "metric", "stage")
    }
    print(f"{selection['winner']}:", {task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

"""Snakemake entry: evaluation of one trained encoder on frozen features.

Linear and kNN probes (MACL App. B.3) or the FFN fine-tuning (OAR §5), as the experiment configures.
"""

from contrastlab.evaluation.vision import evaluate_encoder
from contrastlab.paths import write_json
from contrastlab.workflow.job import evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # its own GPU (or the CPU with resources.gpu: 0)
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

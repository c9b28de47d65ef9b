"""Snakemake entry: evaluation of one trained encoder on frozen features.

Linear and kNN probes (MACL App. B.3) or the FFN fine-tuning (OAR §5), as the experiment configures.
"""

from contrastlab.evaluation.vision import diverged_encoder_metrics, evaluate_encoder
from contrastlab.paths import write_json
from contrastlab.training.runtime import diverged_reason
from contrastlab.workflow.job import evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # its own GPU (or the CPU with resources.gpu: 0)
    evaluation = dict(snakemake.params.evaluation)
    probes = list(evaluation.get("probes") or ("linear", "knn"))
    reason = diverged_reason(snakemake.input.encoder)  # a sweep point whose training diverged
    if reason is not None:
        metrics = diverged_encoder_metrics(snakemake.input.encoder, reason, probes, evaluation.get("ffn"))
    else:
        metrics = evaluate_encoder(
            snakemake.input.encoder,
            data_root=job_data_locations(snakemake)["images"],
            batch_size=evaluation["batch_size"],
            probes=probes,
            linear=dict(evaluation["linear"]),
            knn=dict(evaluation["knn"]),
            ffn=dict(evaluation.get("ffn") or {}),
            device=device,
        )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

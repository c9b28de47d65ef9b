"""Snakemake entry: the CPU half of an image evaluation: the linear and kNN probes (MACL App. B.3) or
the FFN on frozen features (OAR §5), as the experiment configures, fitted from the features its
`encode_vision` job wrote (the encoder is never loaded here)."""

from contrastlab.evaluation.vision import (
    DIVERGED_KEY,
    diverged_encoder_metrics,
    load_features,
    probe_features,
)
from contrastlab.paths import write_json
from contrastlab.provenance import run_metadata
from contrastlab.workflow.job import evaluation_job

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # the CPU: the rule asks no GPU (resources.gpu: 0)
    evaluation = dict(snakemake.params.evaluation)
    probes = list(evaluation.get("probes") or ("linear", "knn"))
    features = load_features(snakemake.input.features)
    if DIVERGED_KEY in features:  # a sweep point whose encoder training diverged
        reason = features[DIVERGED_KEY]
        metrics = diverged_encoder_metrics(snakemake.input.encoder, reason, probes, evaluation.get("ffn"))
    else:
        metrics = probe_features(
            features,
            probes=probes,
            linear=dict(evaluation["linear"]),
            knn=dict(evaluation["knn"]),
            ffn=dict(evaluation.get("ffn") or {}),
            device=device,
        )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    metrics["meta"] = run_metadata()  # packages, commit, and the inputs: the images' identity, the encoder's
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)

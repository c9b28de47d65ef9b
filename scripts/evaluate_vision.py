"""Snakemake entry: the CPU half of an image evaluation: the linear and kNN probes (MACL App. B.3) or
the FFN on frozen features (OAR §5), as the experiment configures, fitted from the features its
`encode_vision` job wrote (the encoder is never loaded here)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.evaluation.vision import evaluate_features
from contrastlab.paths import write_json
from contrastlab.provenance import run_metadata
from contrastlab.workflow.job import evaluation_job, log_job_test_scores

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # the CPU: the rule asks no GPU (resources.gpu: 0)
    metrics = evaluate_features(
        snakemake.input.encoder, snakemake.input.features, snakemake.params.evaluation, device=device
    )
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    metrics["meta"] = run_metadata()  # packages, commit, and the inputs: the images' identity, the encoder's
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)
    log_job_test_scores(snakemake, metrics)  # beside the cell's training curves

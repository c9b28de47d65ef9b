"""Snakemake entry: the GPU half of an image evaluation: the frozen features of one trained encoder on
its dataset's train and test splits, written to the job's features file, where the CPU job
`evaluate_vision` fits the probes. An encoder whose training diverged gets a file naming the reason."""

from contrastlab.evaluation.vision import DIVERGED_KEY, encoder_features, save_features
from contrastlab.training.runtime import diverged_reason
from contrastlab.workflow.job import evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # its own GPU (or the CPU with resources.gpu: 0)
    reason = diverged_reason(snakemake.input.encoder)  # a sweep point whose training diverged
    if reason is not None:
        features = {DIVERGED_KEY: reason}
    else:
        features = encoder_features(
            snakemake.input.encoder,
            data_root=job_data_locations(snakemake)["images"],
            batch_size=snakemake.params.batch_size,
            device=device,
        )
        shape, encoding = tuple(features["train_x"].shape), features["encoding"]
        print(f"features {shape} on {encoding['device']}: {encoding['extract_s']:.1f} s")
    save_features(snakemake.output.features, features)

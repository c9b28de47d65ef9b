"""Snakemake entry: the GPU half of an image evaluation: the frozen features of one trained encoder on
its dataset's train and test splits, written to the job's features file, where the CPU job
`evaluate_vision` fits the probes. A point whose training diverged gets a file naming the reason."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.evaluation.vision import DIVERGED_KEY, job_features, save_features
from contrastlab.training.phases import Phases
from contrastlab.workflow.job import evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # its own GPU (or the CPU with resources.gpu: 0)
    phases = Phases()  # from the process's start: interpreter, imports, then the features (training.phases)
    features = job_features(
        snakemake.input.encoder,
        data_root=job_data_locations(snakemake)["images"],
        batch_size=snakemake.params.batch_size,
        device=device,
    )
    if DIVERGED_KEY not in features:
        phases.mark("encode_s")  # the encoder loaded (CUDA started) and both splits' features extracted
        features["encoding"].update(phases.record())
        shape, encoding = tuple(features["train_x"].shape), features["encoding"]
        print(f"features {shape} on {encoding['device']}: {encoding['extract_s']:.1f} s")
    save_features(snakemake.output.features, features)

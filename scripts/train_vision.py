"""Snakemake entry: train one vision cell (protocol.md section 3)."""

from contrastlab.training.vision import VisionTrainSettings, train_vision
from contrastlab.workflow import (
    failure_record,
    job_data_locations,
    job_device,
    job_label,
    logged_to,
    stderr_to_log,
    workflow_run,
)

sm = globals()["snakemake"]
stderr_to_log(sm.log[0])
with logged_to(
    sm.log[0], job_label(sm), append=True, failure_record=failure_record(sm), run=workflow_run(sm)
):
    device = job_device(sm)  # its own GPU (or the CPU with resources.gpu: 0), before CUDA starts
    import torch

    torch.set_num_threads(max(1, sm.threads))
    train_vision(
        VisionTrainSettings.from_dict(dict(sm.params.settings)),
        data_root=job_data_locations(sm)["images"],
        out_dir=sm.output.encoder,
        log_path=sm.output.log_jsonl,
        state_dir=sm.params.state_dir,
        device=device,
    )

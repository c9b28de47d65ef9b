"""Snakemake entry: train one vision cell (protocol.md section 3)."""

import os
import sys

from contrastlab.training.vision import VisionTrainSettings, train_vision
from contrastlab.workflow import failure_record, job_data_locations, job_label, logged_to

sm = globals()["snakemake"]
real_stderr = os.fdopen(os.dup(2), "w", buffering=1)  # for the one-line failure message
log_file = open(sm.log[0], "a", buffering=1)  # noqa: SIM115 (C-level writes go to the log too)
os.dup2(log_file.fileno(), 2)
sys.stderr = real_stderr
with logged_to(sm.log[0], job_label(sm), append=True, failure_record=failure_record(sm)):
    import torch

    torch.set_num_threads(max(1, sm.threads))
    train_vision(
        VisionTrainSettings.from_dict(dict(sm.params.settings)),
        data_root=job_data_locations(sm)["images"],
        out_dir=sm.output.encoder,
        log_path=sm.output.log_jsonl,
        state_dir=sm.params.state_dir,
    )

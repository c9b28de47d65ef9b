"""Snakemake entry: train one vision cell (protocol.md section 3)."""

import shutil

from contrastlab.config import is_sweep_point
from contrastlab.training.runtime import NonFiniteLossError, record_diverged
from contrastlab.training.vision import VisionTrainSettings, train_vision
from contrastlab.workflow.job import events_dir_of, training_job

sm = globals()["snakemake"]
with training_job(sm) as (device, where):
    settings = dict(sm.params.settings)
    try:
        train_vision(
            VisionTrainSettings.from_dict(settings),
            data_root=where["images"],
            out_dir=sm.output.encoder,
            log_path=sm.output.log_jsonl,
            state_dir=sm.params.state_dir,
            device=device,
            events_dir=events_dir_of(sm),
        )
    except NonFiniteLossError as error:
        if not is_sweep_point(sm.config, sm.wildcards["experiment"], sm.wildcards["method"]):
            raise  # a configured cell that diverges is a failure
        # a sweep point that diverges (OAR's rates reach 1) is a result: recorded, evaluated as diverged
        message = " ".join(str(error).split())
        print(f"sweep point: training diverged, recorded: {message}")
        record_diverged(sm.output.encoder, sm.output.log_jsonl, settings, message)
        shutil.rmtree(sm.params.state_dir, ignore_errors=True)

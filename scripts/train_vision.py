"""Snakemake entry: train one vision cell (protocol.md section 3)."""

from contrastlab.training.vision import VisionTrainSettings, train_vision
from contrastlab.workflow.job import events_dir_of, training_job

sm = globals()["snakemake"]
with training_job(sm) as (device, where):
    train_vision(
        VisionTrainSettings.from_dict(dict(sm.params.settings)),
        data_root=where["images"],
        out_dir=sm.output.encoder,
        log_path=sm.output.log_jsonl,
        state_dir=sm.params.state_dir,
        device=device,
        events_dir=events_dir_of(sm),
    )

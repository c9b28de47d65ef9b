"""Train one image cell (protocol.md §3): Snakemake `script:` entry (contrastlab.training.cells)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.training.cells import train_vision_cell
from contrastlab.workflow.job import events_dir_of, training_job, wandb_run_of

sm = globals()["snakemake"]
with training_job(sm) as (device, where):
    train_vision_cell(
        sm.params.settings,
        point=sm.params.is_point,  # a point of the experiment's sweep: its divergence is a result
        data_root=where["images"],
        out_dir=sm.output.encoder,
        log_path=sm.output.log_jsonl,
        state_dir=sm.params.state_dir,
        device=device,
        events_dir=events_dir_of(sm),
        wandb_run=wandb_run_of(sm),
        cell=sm.wildcards,  # its experiment, backbone, method and seed label its HParams session and W&B run
        # removed once Snakemake has accepted the outputs (contrastlab.workflow.finished), not here
        keep_state=True,
    )

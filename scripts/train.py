"""Train one sentence cell (protocol.md §2): Snakemake `script:` entry, or a CLI for debugging (`--help`);
both in contrastlab.training.cells."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.config import Grid, config_digest
from contrastlab.paths import Results
from contrastlab.search import is_point_name, search_points
from contrastlab.training.cells import cli, train_cell
from contrastlab.workflow.job import events_dir_of, training_job, wandb_run_of
from contrastlab.workflow.points import job_point, points_file

if "snakemake" in globals():
    sm = globals()["snakemake"]
    with training_job(sm) as (device, where):
        wc = sm.wildcards
        previous = getattr(sm.input, "search_previous", None)  # the earlier stage's selection, if any
        train_cell(
            sm.params.settings,
            # the point the main process kept for this run (a grid is built only where it kept none)
            point=job_point(
                points_file(Results(sm.config["results_dir"])),
                config_digest(sm.config),
                lambda: search_points(Grid(sm.config)),
                wc["experiment"],
                wc["backbone"],
                wc["method"],
            )
            if is_point_name(wc["method"])
            else None,
            previous_selection=previous[0] if previous else None,
            backbone_dir=sm.input.backbone,
            corpus_path=where["corpus"],
            dev_data_dir=where["senteval_dir"],
            out_dir=sm.output.model,
            log_path=sm.output.log_jsonl,
            state_dir=sm.params.state_dir,
            cache_dir=where["cache"],
            device=device,
            events_dir=events_dir_of(sm),
            wandb_run=wandb_run_of(sm),
            # removed once Snakemake has accepted the outputs (contrastlab.workflow.finished), not here
            keep_state=True,
        )
elif __name__ == "__main__":
    cli()

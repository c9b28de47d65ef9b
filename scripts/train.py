"""Train one sentence cell (protocol.md §2): Snakemake `script:` entry, or a CLI for debugging (`--help`);
both in contrastlab.training.cells."""

from contrastlab.workflow.warm import hand_over

hand_over(
    globals(), cli=True
)  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.training.cells import cli, train_cell
from contrastlab.training.corpus import check_corpus_marker
from contrastlab.workflow.job import events_dir_of, training_job, wandb_run_of

if "snakemake" in globals():
    sm = globals()["snakemake"]
    with training_job(sm) as (device, where):
        digest = None  # the corpus's sha256, computed once: the marker's check, then the cache key
        if getattr(sm.input, "corpus_ready", None):  # the text its marker (and the cell's params) name
            digest = check_corpus_marker(where["corpus"], sm.input.corpus_ready)
        wc = sm.wildcards
        previous = getattr(sm.input, "search_previous", None)  # the earlier stage's selection, if any
        train_cell(
            sm.params.settings,
            point=sm.params.point,  # the search point the cell is, None for a configured cell
            previous_selection=previous[0] if previous else None,
            backbone_dir=sm.input.backbone,
            corpus_path=where["corpus"],
            corpus_sha256=digest,
            dev_data_dir=where["senteval_dir"],
            out_dir=sm.output.model,
            log_path=sm.output.log_jsonl,
            state_dir=sm.params.state_dir,
            cache_dir=where["cache"],
            device=device,
            events_dir=events_dir_of(sm),
            wandb_run=wandb_run_of(sm),
            cell=wc,  # its experiment, backbone, method and seed label its HParams session and W&B run
            # removed once Snakemake has accepted the outputs (contrastlab.workflow.finished), not here
            keep_state=True,
        )
elif __name__ == "__main__":
    cli()

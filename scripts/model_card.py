"""Snakemake entry: the model card (Hugging Face README.md) of one kept sentence checkpoint, from its
training summary, its metrics and the run's data markers (contrastlab.report.cards)."""

from contrastlab.report.cards import write_model_card
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    wc = sm.wildcards
    card = write_model_card(
        sm.output.card,
        experiment=wc["experiment"],
        backbone=wc["backbone"],
        method=wc["method"],
        seed=int(wc["seed"]),
        model_dir=sm.input.model,
        metrics_path=sm.input.metrics,
        markers={"senteval": sm.input.senteval_ready, "corpus": sm.input.corpus_ready},
        base_model=sm.params.base_model,
    )
    print(f"model card: wrote {card}")

"""Snakemake entry: the model card (Hugging Face README.md) of one kept checkpoint, sentence (rule
model_card) or image (rule model_card_vision), from its training summary, its metrics and the run's data
markers (contrastlab.report.cards)."""

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
        markers={name.removesuffix("_ready"): p for name, p in sm.input.items() if name.endswith("_ready")},
        base_model=getattr(sm.params, "base_model", None),
    )
    print(f"model card: wrote {card}")

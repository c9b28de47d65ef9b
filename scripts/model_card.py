"""Snakemake entry: the model card (Hugging Face README.md) of one kept checkpoint, sentence (rule
model_card, with its MTEB ModelMeta beside it) or image (rule model_card_vision), from its training
summary, its metrics, the run's data markers and, where they exist, MTEB's results
(contrastlab.hub.cards, contrastlab.hub.publish)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.hub.cards import write_model_card
from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]


def _data_config(sm):
    """What the card says of the data (fixture, a user's file or a download's URL), read from the config
    rather than params: a corpus is its content, so where it was found reruns nothing."""
    if sm.rule != "model_card":
        return None
    return {k: sm.config["data"].get(k) for k in ("fixture", "wiki_url", "wiki_path", "senteval_url")}


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
        backbones=getattr(sm.params, "backbones", None),
        data_config=_data_config(sm),
        mteb_dir=getattr(sm.params, "mteb_dir", None),
    )
    print(f"model card: wrote {card}")

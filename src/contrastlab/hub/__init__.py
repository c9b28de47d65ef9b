"""Publishing a kept checkpoint on the Hugging Face Hub, outside the run's page: ``cards`` (each kept
checkpoint's model card, sentence and image: the README.md with the published numbers beside ours and the
provenance; rule ``model_card``, ``scripts/model_card.py``) and ``publish`` (the card's front matter and
model-index, MTEB's ``ModelMeta``, the backbone's licence, and the checked upload of ``make publish``,
``scripts/publish.py``). docs/publish.md says what each reader of a published encoder needs."""

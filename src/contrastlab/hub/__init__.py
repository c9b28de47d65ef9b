"""Publishing a kept checkpoint on the Hugging Face Hub, outside the run's page: ``cards`` (a kept
checkpoint's model card, sentence and image: the README.md with the published numbers beside ours and the
provenance, written from its finished files by ``make publish`` and ``make cards``) and ``publish`` (the
card's front matter and model-index, MTEB's ``ModelMeta``, the backbone's licence, and the checked upload
of ``make publish``, ``scripts/publish.py``). docs/publish.md says what each reader of a published encoder
needs."""

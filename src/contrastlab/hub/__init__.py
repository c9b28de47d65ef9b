"""Publishing a kept checkpoint on the Hugging Face Hub, outside the run's page: ``cards`` (a checkpoint's
model card, written from its finished files by ``make publish`` and ``make cards``) and ``publish`` (the
card's metadata, MTEB's ``ModelMeta``, the backbone's licence and the checked upload). docs/publish.md
says what each reader of a published encoder needs."""

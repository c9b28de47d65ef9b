"""The sentence trainer's step (training.sentence_step): gradient caching replays each micro-batch's
dropout masks, so the loss and every gradient are those of one pass over the whole batch."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from contrastlab.losses import build_loss
from contrastlab.training.sentence import _load_model
from contrastlab.training.sentence_step import build_head, embed_pairs, train_step


def test_gradient_caching_replays_the_dropout_masks(tiny_bert, tokenized):
    """train_step with micro-batches = encoding the same micro-batches with a graph (same RNG draws)."""
    tokenizer, cached = tokenized
    chunks = [cached.batch(np.arange(i, i + 8), tokenizer.pad_token_id) for i in (0, 8, 16)]
    model = _load_model(tiny_bert, 0.1).train()
    head, _ = build_head("simcse", "bert", model.config.hidden_size)
    loss_fn = build_loss("infonce")
    params = [*model.parameters(), *head.parameters()]

    torch.manual_seed(0)
    cached_out, _, _ = train_step(
        model, head, loss_fn, chunks, autocast=contextlib.nullcontext, with_stats=False
    )
    cached_grads = [None if p.grad is None else p.grad.clone() for p in params]  # the pooler has none
    for p in params:
        p.grad = None
    torch.manual_seed(0)
    views = [embed_pairs(model, head, ids, mask, contextlib.nullcontext) for ids, mask in chunks]
    direct = loss_fn(torch.cat([v[0] for v in views]), torch.cat([v[1] for v in views]), with_stats=False)
    direct.loss.backward()
    torch.testing.assert_close(cached_out.loss, direct.loss)
    assert sum(g is not None for g in cached_grads) > 10
    for got, want in zip(cached_grads, [p.grad for p in params], strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)

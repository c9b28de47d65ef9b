"""The padding-free forward (contrastlab.models.packed) is the padded transformers model: outputs and
every parameter's gradient in float64, a short fp32 training run, and the dropout draws' distribution."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

from contrastlab.models.packed import pack, packed_embeddings, packed_forward

LENGTHS = (9, 1, 2, 5, 9, 7)  # a full-length row (L = 9), a length-1 and a length-2 row
ARCHS = ("bert", "roberta")


def _model(arch: str, *, dropout: float = 0.0, hidden: int = 32, layers: int = 2, seed: int = 0):
    """A tiny random BertModel or RobertaModel (pad id 1 for RoBERTa, as roberta-base has)."""
    torch.manual_seed(seed)
    sizes = dict(
        vocab_size=100,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=40,
    )
    if arch == "bert":
        return BertModel(BertConfig(**sizes, pad_token_id=0))
    return RobertaModel(RobertaConfig(**sizes, pad_token_id=1, bos_token_id=0, eos_token_id=2))


def _batch(arch: str, lengths=LENGTHS, seed: int = 0):
    """Right-padded random ids [n, L] (the tokenizer's pad id at the padding) and the 2D mask."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(3, 100, (len(lengths), width), generator=g)
    pad = 0 if arch == "bert" else 1
    return torch.where(mask.bool(), ids, torch.full_like(ids, pad)), mask


@pytest.mark.parametrize("arch", ARCHS)
def test_float64_outputs_equal_the_padded_model(arch):
    model = _model(arch).double().eval()
    ids, mask = _batch(arch)
    with torch.no_grad():
        padded = model(ids, attention_mask=mask).last_hidden_state
        out = packed_forward(model, ids, mask, return_padded=True)
    torch.testing.assert_close(out.cls, padded[:, 0], rtol=0, atol=1e-12)
    real = mask.bool()
    torch.testing.assert_close(out.last_hidden_state[real], padded[real], rtol=0, atol=1e-12)
    assert (out.last_hidden_state[~real] == 0).all()


@pytest.mark.parametrize("arch", ARCHS)
def test_float64_gradients_equal_the_padded_models_for_every_parameter(arch):
    padded_model = _model(arch).double().train()  # dropout p = 0: train mode, no draws
    packed_model = copy.deepcopy(padded_model)
    ids, mask = _batch(arch)
    weights = torch.randn(len(LENGTHS), 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (padded_model(ids, attention_mask=mask).last_hidden_state[:, 0] * weights).sum().backward()
    (packed_forward(packed_model, ids, mask).cls * weights).sum().backward()
    pairs = list(zip(padded_model.named_parameters(), packed_model.named_parameters(), strict=True))
    checked = 0
    for (name, a), (_, b) in pairs:
        if name.startswith("pooler."):  # the loss does not read the pooler: no gradient on either side
            assert a.grad is None and b.grad is None, name
            continue
        torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=1e-10, msg=name)
        checked += 1
    assert checked == len(pairs) - 2


def _info_nce(cls: torch.Tensor) -> torch.Tensor:
    """An InfoNCE loss over the two halves of ``cls`` (the two sides of each pair)."""
    z = torch.nn.functional.normalize(cls, dim=-1)
    z1, z2 = z.chunk(2)
    logits = z1 @ z2.T / 0.05
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(z1)))


@pytest.mark.parametrize("arch", ARCHS)
def test_fifty_fp32_adamw_steps_match_the_padded_model_within_rounding(arch):
    padded_model = _model(arch).train()
    packed_model = copy.deepcopy(padded_model)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (padded_model, packed_model)]
    rng = torch.Generator().manual_seed(2)
    for step in range(50):
        lengths = torch.randint(1, 12, (8,), generator=rng).tolist()
        lengths[0] = 12
        # Two different sentences per pair (as supervised pairs): with dropout off, two copies of one
        # sentence would drive the loss to ~0, where fp32 rounding is a large relative error.
        ids, mask = _batch(arch, lengths + lengths, seed=step)
        losses = []
        for model, opt, forward in zip((padded_model, packed_model), opts, ("padded", "packed"), strict=True):
            if forward == "padded":
                cls = model(ids, attention_mask=mask).last_hidden_state[:, 0]
            else:
                cls = packed_forward(model, ids, mask).cls
            loss = _info_nce(cls)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-5), (step, losses)


def test_embedding_dropout_zeroes_real_tokens_at_rate_p():
    """A distribution check: the packed embedding dropout zeroes a fraction p of the real tokens'
    activations (within 5 binomial standard deviations), as the padded model's does."""
    p, hidden = 0.5, 512
    model = _model("bert", dropout=p, hidden=hidden, layers=1).train()
    ids, mask = _batch("bert")
    torch.manual_seed(3)
    with torch.no_grad():
        x = packed_embeddings(model, ids, pack(mask))
    assert x.shape == (sum(LENGTHS), hidden)
    draws = x.numel()
    zeroed = (x == 0).double().mean().item()
    assert abs(zeroed - p) < 5 * math.sqrt(p * (1 - p) / draws), (zeroed, draws)


@pytest.mark.parametrize("arch", ARCHS)
def test_padded_positions_are_never_read_even_with_dropout_on(arch):
    """Changing the ids at padded positions arbitrarily changes nothing, bit for bit, with dropout on
    under the same seed: the packed path neither reads the padding nor draws dropout masks for it."""
    model = _model(arch, dropout=0.5).train()
    ids, mask = _batch(arch)
    other = torch.where(mask.bool(), ids, torch.randint(0, 100, ids.shape))
    assert not torch.equal(ids, other)
    outs = []
    for batch_ids in (ids, other):
        torch.manual_seed(4)
        with torch.no_grad():
            outs.append(packed_forward(model, batch_ids, mask, return_padded=True).last_hidden_state)
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)


def test_left_padding_is_a_one_line_error():
    model = _model("bert")
    ids, mask = _batch("bert")
    with pytest.raises(ValueError, match="right padding"):
        packed_forward(model, ids, mask.flip(1))


def test_a_model_other_than_bert_or_roberta_is_a_one_line_error():
    ids, mask = _batch("bert")
    with pytest.raises(TypeError, match="BertModel and RobertaModel only, got Linear"):
        packed_forward(torch.nn.Linear(2, 2), ids, mask)

"""The padding-free forward (contrastlab.models.packed) is the padded transformers model: outputs and
every parameter's gradient in float64, with dropout off and with the padded model's own dropout draws,
200 fp32 training steps with dropout on, the distribution of the real-token-only draws, and the drop-in
encoder (:class:`PaddingFree`) in the dev evaluation and SentEval encoding."""

from __future__ import annotations

import copy
import dataclasses
import math
import tempfile
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

from contrastlab import families
from contrastlab.models.packed import (
    Packing,
    PaddingFree,
    pack,
    packed_embeddings,
    packed_forward,
    padding_free_default,
    supported,
)
from contrastlab.models.text import attention_bias

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
def test_float64_outputs_and_gradients_equal_the_padded_models_for_every_parameter(arch):
    padded_model = _model(arch).double().train()  # dropout p = 0: train mode, no draws
    packed_model = copy.deepcopy(padded_model)
    ids, mask = _batch(arch)
    padded = padded_model(ids, attention_mask=mask).last_hidden_state
    out = packed_forward(packed_model, ids, mask, return_padded=True)
    torch.testing.assert_close(out.cls, padded[:, 0], rtol=0, atol=1e-12)
    real = mask.bool()
    torch.testing.assert_close(out.last_hidden_state[real], padded[real], rtol=0, atol=1e-12)
    assert (out.last_hidden_state[~real] == 0).all()
    _assert_same_gradients(padded_model, padded[:, 0], packed_model, out.cls)


def _assert_same_gradients(padded_model, padded_cls, packed_model, packed_cls):
    """Back-propagates one random weighting of each model's [CLS] states: every parameter's gradient
    agrees (1e-10 in float64); the pooler's, which the [CLS] state does not read, is absent on both sides."""
    weights = torch.randn(len(LENGTHS), 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (padded_cls * weights).sum().backward()
    (packed_cls * weights).sum().backward()
    pairs = zip(padded_model.named_parameters(), packed_model.parameters(), strict=True)
    skipped = 0
    for (name, a), b in pairs:
        if name.startswith("pooler."):
            assert a.grad is None and b.grad is None, name
            skipped += 1
        else:
            torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=1e-10, msg=name)
    assert skipped == 2, skipped  # the pooler's weight and bias


@pytest.mark.parametrize("arch", ARCHS)
def test_200_fp32_adamw_steps_with_dropout_on_match_the_padded_model_within_rounding(arch):
    """Same seed, InfoNCE, AdamW, dropout on: after 200 steps, losses and weights agree to fp32 rounding."""
    padded_model = _model(arch, dropout=0.1).train()
    packed_model = copy.deepcopy(padded_model)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (padded_model, packed_model)]
    rng = torch.Generator().manual_seed(2)
    worst = 0.0
    for step in range(200):
        lengths = torch.randint(1, 12, (8,), generator=rng).tolist()
        lengths[0] = 12
        ids, mask = _batch(arch, lengths, seed=step)
        ids, mask = ids.repeat_interleave(2, 0), mask.repeat_interleave(2, 0)  # the two views
        losses = []
        for model, opt, forward in zip((padded_model, packed_model), opts, ("padded", "packed"), strict=True):
            torch.manual_seed(1000 + step)
            if forward == "padded":
                cls = model(ids, attention_mask=attention_bias(model, mask)).last_hidden_state[:, 0]
            else:
                cls = packed_forward(model, ids, mask).cls
            z1, z2 = torch.nn.functional.normalize(cls, dim=-1).view(-1, 2, cls.shape[-1]).unbind(1)
            loss = torch.nn.functional.cross_entropy(z1 @ z2.T / 0.05, torch.arange(len(z1)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        worst = max(worst, abs(losses[1] - losses[0]) / abs(losses[0]))
    assert worst < 1e-4, worst
    pairs = zip(padded_model.named_parameters(), packed_model.parameters(), strict=True)
    for (name, a), b in pairs:
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("arch", ARCHS)
def test_with_dropout_on_the_same_seed_gives_the_padded_models_numbers(arch):
    """``dropout_draws="padded"``: every dropout draws the padded model's masks (1e-12 in float64)."""
    padded_model = _model(arch, dropout=0.3).double().train()
    packed_model = copy.deepcopy(padded_model)
    ids, mask = _batch(arch)
    torch.manual_seed(7)
    padded = padded_model(ids, attention_mask=attention_bias(padded_model, mask)).last_hidden_state[:, 0]
    torch.manual_seed(7)
    out = packed_forward(packed_model, ids, mask).cls
    torch.testing.assert_close(out, padded, rtol=0, atol=1e-12)
    _assert_same_gradients(padded_model, padded, packed_model, out)
    torch.manual_seed(8)
    with torch.no_grad():
        other = packed_forward(packed_model, ids, mask).cls
    assert (other - padded.detach()).abs().max() > 1e-3


@pytest.mark.parametrize("draws", ["padded", "packed"])
def test_embedding_dropout_zeroes_real_tokens_at_rate_p(draws):
    """Either way of drawing, embedding dropout zeroes a fraction p of the real tokens (within 5 sigma)."""
    p, hidden = 0.5, 512
    model = _model("bert", dropout=p, hidden=hidden, layers=1).train()
    ids, mask = _batch("bert")
    torch.manual_seed(3)
    with torch.no_grad():
        x = packed_embeddings(model, ids, pack(mask, draws))
    assert x.shape == (sum(LENGTHS), hidden)
    draws = x.numel()
    zeroed = (x == 0).double().mean().item()
    assert abs(zeroed - p) < 5 * math.sqrt(p * (1 - p) / draws), (zeroed, draws)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("draws", ["padded", "packed"])
def test_padded_positions_are_never_read_even_with_dropout_on(arch, draws):
    """Other ids at padded positions change nothing, bit for bit, with dropout on, either way of drawing."""
    model = _model(arch, dropout=0.5).train()
    ids, mask = _batch(arch)
    other = torch.where(mask.bool(), ids, torch.randint(0, 100, ids.shape))
    assert not torch.equal(ids, other)
    outs = []
    for batch_ids in (ids, other):
        torch.manual_seed(4)
        with torch.no_grad():
            out = packed_forward(model, batch_ids, mask, return_padded=True, dropout_draws=draws)
            outs.append(out.last_hidden_state)
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)


def test_left_padding_is_a_one_line_error():
    model = _model("bert")
    ids, mask = _batch("bert")
    with pytest.raises(ValueError, match="right padding"):
        packed_forward(model, ids, mask.flip(1))


def test_a_model_other_than_bert_or_roberta_is_a_one_line_error():
    ids, mask = _batch("bert")
    with pytest.raises(TypeError, match=r"the families marked padding_free \(bert, roberta\), got Linear$"):
        packed_forward(torch.nn.Linear(2, 2), ids, mask)


def test_the_family_table_decides_what_runs_padding_free_and_where_positions_start(monkeypatch):
    """The family table, not a class name, decides what is refused and where positions start."""
    table = dict(families.TEXT_FAMILIES)
    table["bert"] = dataclasses.replace(table["bert"], padding_free=False)
    table["roberta"] = dataclasses.replace(table["roberta"], offset_positions=False)
    monkeypatch.setattr(families, "TEXT_FAMILIES", MappingProxyType(table))
    refused = r"^padding_free supports the families marked padding_free \(roberta\), got bert \(BertModel\); "
    with pytest.raises(TypeError, match=refused + "set padding_free: false$"):
        PaddingFree(_model("bert"))
    assert [t for t in families.TEXT_FAMILIES if supported(t)] == ["roberta"]
    model = _model("roberta").double().eval()
    ids, mask = _batch("roberta")
    with torch.no_grad():
        got = packed_forward(model, ids, mask).cls
        want = model(ids, attention_mask=mask, position_ids=torch.arange(ids.shape[1]).expand_as(ids))
    torch.testing.assert_close(got, want.last_hidden_state[:, 0], rtol=0, atol=1e-12)


def test_padding_free_default_is_ieee_fp32_on_cuda_for_bert_and_roberta_only():
    assert padding_free_default("fp32", "cuda", "bert") and padding_free_default("fp32", "cuda", "roberta")
    assert not padding_free_default("bf16", "cuda", "bert")
    assert not padding_free_default("tf32", "cuda", "bert")
    assert not padding_free_default("fp32", "cpu", "bert")
    assert not padding_free_default("fp32", "cuda", "distilbert")


@pytest.mark.parametrize("arch", ARCHS)
def test_the_drop_in_encoder_returns_the_padded_models_states(arch):
    """:class:`PaddingFree` gives the padded model's states; it shares its parameters and mode, no state."""
    model = _model(arch).double().eval()
    encoder = PaddingFree(model)
    assert list(encoder.parameters()) == list(model.parameters()) and encoder.state_dict() == {}
    ids, mask = _batch(arch)
    with torch.no_grad():
        ref = model(ids, attention_mask=attention_bias(model, mask), output_hidden_states=True)
        out = encoder(input_ids=ids, attention_mask=attention_bias(encoder, mask), output_hidden_states=True)
    real = mask.bool()
    assert len(out.hidden_states) == len(ref.hidden_states) == 3
    for got, want in zip(out.hidden_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(got[real], want[real], rtol=0, atol=1e-12)
    torch.testing.assert_close(out.last_hidden_state[real], ref.last_hidden_state[real], rtol=0, atol=1e-12)
    encoder.train()
    assert model.training


@pytest.mark.parametrize("pooling", ["cls", "avg", "avg_embeddings_and_last", "avg_first_layer_and_last"])
def test_senteval_encoding_through_the_drop_in_encoder_matches(pooling):
    """``make_encoder`` gives the same embeddings through the padding-free wrapper, for each pooling tried."""
    from transformers import BertTokenizerFast

    from contrastlab.models.text import make_encoder

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
    folder = Path(tempfile.mkdtemp())
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(str(folder / "vocab.txt"))
    model = _model("bert").eval()
    sentences = ["w1 w2 w3", "w4", "w5 w6 w7 w8 w9 w10 w11", "w12 w13", "w3 w3 w3 w3"]
    ref = make_encoder(model, tokenizer, pooling=pooling, batch_size=3, progress=False)(sentences)
    got = make_encoder(PaddingFree(model), tokenizer, pooling=pooling, batch_size=3, progress=False)(
        sentences
    )
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6)


# ------------------------------------------------ the gather indices from the host mask (review S3)


def _pack_before_s3(attention_mask):
    """``pack`` as it was before review S3 (``nonzero`` on the mask wherever it lives): the reference."""
    mask = attention_mask.bool()
    n, width = mask.shape
    index = mask.reshape(-1).nonzero().squeeze(1)
    lengths = mask.sum(1)
    first = torch.cumsum(lengths, 0) - lengths
    return Packing(n, width, index, mask[:, None, None, :], first, "padded")


@pytest.mark.parametrize("arch", ARCHS)
def test_given_the_host_mask_the_padding_free_forward_reads_no_device_data(arch):
    """With the host mask no op reads device data (no host sync): on the meta device a read would raise."""
    model = _model(arch, dropout=0.1).train().to("meta")
    encoder = PaddingFree(model)
    ids, mask = _batch(arch)
    ids, mask = ids.repeat_interleave(2, dim=0), mask.repeat_interleave(2, dim=0)  # the step's two views
    out = encoder(input_ids=ids.to("meta"), attention_mask=attention_bias(encoder, mask))
    assert out.last_hidden_state.device.type == "meta"
    assert out.last_hidden_state.shape == (2 * len(LENGTHS), max(LENGTHS), 32)
    with pytest.raises(NotImplementedError, match="nonzero"):  # the device's mask must be read
        encoder(input_ids=ids.to("meta"), attention_mask=mask.to("meta"))


@pytest.mark.parametrize("views", [1, 2])
def test_the_host_built_packing_is_the_one_nonzero_gives(views):
    """The same index, first rows and key mask (dtypes too) as ``nonzero``'s, for one batch and for the
    step's two views of it: every forward and training step through it is the same, bit for bit."""
    _, mask = _batch("bert")
    mask = mask.repeat_interleave(views, dim=0)
    want = _pack_before_s3(mask)
    for got in (pack(mask), pack(mask, device=torch.device("cpu"))):
        assert torch.equal(got.index, want.index) and torch.equal(got.first, want.first)
        assert torch.equal(got.key_mask, want.key_mask) and got.index.dtype == want.index.dtype
        assert (got.first.dtype, got.key_mask.dtype) == (want.first.dtype, want.key_mask.dtype)
    on_meta = pack(mask, device=torch.device("meta"))
    assert {t.device.type for t in (on_meta.index, on_meta.first, on_meta.key_mask)} == {"meta"}
    assert on_meta.index.shape == want.index.shape and on_meta.key_mask.dtype == torch.bool

"""Poolings: which hidden states each reads (issue: the "Pretrained" rows' avg_first_last)."""

from __future__ import annotations

import pytest
import torch

from contrastlab.models import FIRST_LAST_POOLINGS, load_backbone, make_encoder, pool

SENTENCES = ["a man is playing a guitar .", "two dogs run in the snow", "hello"]


@pytest.fixture(scope="module")
def outputs(tiny_bert):
    model, tokenizer = load_backbone(tiny_bert, device="cpu")
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.inference_mode():
        out = model(**batch, output_hidden_states=True)
    return out, batch["attention_mask"], model, tokenizer


def _masked_mean(states, mask):
    m = mask.unsqueeze(-1).float()
    return (states * m).sum(1) / m.sum(1)


@pytest.mark.parametrize(
    ("pooling", "first"), [("avg_embeddings_and_last", 0), ("avg_first_layer_and_last", 1)]
)
def test_the_first_last_poolings_read_their_first_entry_and_the_last_layer(outputs, pooling, first):
    out, mask, _, _ = outputs
    assert len(out.hidden_states) == 3  # embeddings + 2 layers of the tiny BERT
    assert mask[2].sum() < mask.shape[1]  # "hello" is padded: the mean is over its real tokens only
    expected = _masked_mean((out.hidden_states[first] + out.hidden_states[2]) / 2, mask)
    torch.testing.assert_close(pool(out, mask, pooling), expected, rtol=0, atol=0)


def test_the_two_first_last_poolings_differ_and_the_old_ambiguous_name_is_rejected(outputs):
    out, mask, _, _ = outputs
    a = pool(out, mask, "avg_embeddings_and_last")
    b = pool(out, mask, "avg_first_layer_and_last")
    assert (a - b).abs().max() > 1e-3
    assert FIRST_LAST_POOLINGS == {"avg_embeddings_and_last": 0, "avg_first_layer_and_last": 1}
    with pytest.raises(ValueError, match="avg_embeddings_and_last"):
        pool(out, mask, "avg_first_last")


@pytest.mark.parametrize("pooling", sorted(FIRST_LAST_POOLINGS))
def test_encoder_requests_hidden_states(outputs, pooling):
    out, mask, model, tokenizer = outputs
    encoded = make_encoder(model, tokenizer, pooling=pooling, batch_size=2, progress=False)(SENTENCES)
    torch.testing.assert_close(torch.from_numpy(encoded), pool(out, mask, pooling), rtol=1e-5, atol=1e-5)


def _random_bert(attn: str = "sdpa"):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        initializer_range=0.2, attn_implementation=attn,
    )  # fmt: skip
    return BertModel(config)


@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_the_4d_attention_mask_gives_the_2d_masks_outputs_bit_for_bit(padded, dtype):
    from contrastlab.models.text import attention_bias

    model = _random_bert().train()  # dropout on: the same seed draws the same masks both ways
    ids = torch.randint(1, 100, (4, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(4, 9, dtype=torch.long)
    if padded:
        mask[1, 5:] = mask[3, 2:] = 0
    bias = attention_bias(model, mask)
    assert bias.shape == (4, 1, 9, 9) and bias.dtype == torch.bool
    outputs = []
    for m in (mask, bias):
        torch.manual_seed(3)
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            outputs.append(model(input_ids=ids, attention_mask=m).last_hidden_state.float())
    assert torch.equal(*outputs)


def test_attention_bias_keeps_the_2d_mask_where_the_model_builds_no_sdpa_mask():
    from contrastlab.models.text import attention_bias

    mask = torch.ones(2, 3, dtype=torch.long)
    assert attention_bias(_random_bert("eager"), mask) is mask  # eager attention: no sync to avoid
    assert attention_bias(torch.nn.Linear(2, 2), mask) is mask  # no transformers config


def test_a_hub_backbone_offline_and_not_cached_names_its_path_key(tmp_path):
    from contrastlab.models import materialize_backbone
    from contrastlab.models.text import BackboneError

    with pytest.raises(BackboneError) as error:  # HF_HUB_OFFLINE=1 (conftest), nothing cached
        materialize_backbone({"hf_id": "org/absent"}, tmp_path / "bert-base", lock_file=tmp_path / "l.json")
    assert str(error.value) == (
        "could not download org/absent@main: the hub cannot be reached (offline, or HF_HUB_OFFLINE=1) and "
        "the Hugging Face cache does not hold it; to use a copy you have instead, set "
        "backbones.bert-base.path (a local Hugging Face model folder)"
    )

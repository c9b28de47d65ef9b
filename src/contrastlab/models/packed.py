"""A padding-free forward pass for the text families :data:`contrastlab.families.TEXT_FAMILIES` marks
``padding_free`` (transformers' ``BertModel`` and ``RobertaModel``); the design, its tests and its
measurements: docs/training-speed.md, "Padding-free encoder".

:func:`packed_forward` computes ``model(input_ids, attention_mask)``'s last hidden state with every
token-wise layer on the real tokens only, packed ``[tokens, hidden]``; only attention sees the padded
shape (SDPA with the padded keys masked). Guarantees:

- It calls the model's own submodules: the weights, their gradients and the saved folder are the
  ordinary model's.
- With dropout off the real tokens' hidden states are the padded model's up to floating-point
  reordering (tests: 1e-12 in float64, outputs and every gradient).
- ``dropout_draws="padded"`` (the default) draws each dropout mask on the padded shape, in the padded
  forward's order: the same seed gives the same masks; ``"packed"`` draws on the real tokens only (the
  same distribution, other masks).
- Position ids are transformers' (RoBERTa's ``offset_positions``: ``pad_token_id`` + the running count
  of non-pad tokens); the output's padding positions are zeros.
- A host copy of the mask avoids a sync; a device mask's ``nonzero`` syncs once per forward. The token
  count changes every batch, so the step cannot be captured in a CUDA graph.

:class:`PaddingFree` wraps a model as a drop-in encoder; :func:`padding_free_default` is the rule that
turns it on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from contrastlab import families
from contrastlab.models.device import host_to_device

__all__ = [
    "DRAWS",
    "PackedOutput",
    "PaddingFree",
    "Packing",
    "pack",
    "packed_embeddings",
    "packed_forward",
    "padding_free_default",
    "supported",
]

#: ``dropout_draws``: the padded model's own masks ("padded") or draws on the real tokens only ("packed").
DRAWS = ("padded", "packed")


def supported(model_type: str | None) -> bool:
    """Whether :data:`contrastlab.families.TEXT_FAMILIES` marks ``config.model_type`` ``padding_free``."""
    family = families.TEXT_FAMILIES.get(model_type or "")
    return bool(family and family.padding_free)


def _refuse_unsupported(model: torch.nn.Module, who: str, fix: str = "") -> None:
    """One line naming ``model``'s family and class unless it is a base model (``embeddings`` and
    ``encoder``) of a family that runs padding-free (:func:`supported`)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if supported(model_type) and hasattr(model, "embeddings") and hasattr(model, "encoder"):
        return
    got = f"{model_type} ({type(model).__name__})" if model_type else type(model).__name__
    marked = ", ".join(families.text_types("padding_free"))
    raise TypeError(f"{who} supports the families marked padding_free ({marked}), got {got}{fix}")


def padding_free_default(precision: str, device_type: str, model_type: str | None) -> bool:
    """The ``padding_free`` a sentence cell gets when it sets none, by
    :func:`contrastlab.families.step_mode`: on for IEEE fp32 (``precision`` resolved, e.g. ``"fp32"``)
    on a CUDA device with a BERT or RoBERTa backbone, off otherwise (see there for why)."""
    return families.step_mode(
        {}, track="sentence", device_type=device_type, precision=precision, model_type=model_type
    ).padding_free


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a right-padded ``[n, L]`` batch sit.

    ``index``: flat positions ``row * L + column`` of the real tokens, row-major ``[tokens]``;
    ``key_mask``: ``[n, 1, 1, L]`` booleans, True for a real key (what SDPA may attend);
    ``first``: the packed row of each sequence's first ([CLS]) token ``[n]``;
    ``draws``: where dropout masks are drawn (:data:`DRAWS`).
    """

    n: int
    width: int
    index: torch.Tensor
    key_mask: torch.Tensor
    first: torch.Tensor
    draws: str = "padded"

    def scatter(self, packed: torch.Tensor) -> torch.Tensor:
        """``[tokens, d]`` -> ``[n, L, d]`` with zeros at the padding (differentiable)."""
        out = packed.new_zeros(self.n * self.width, packed.shape[-1]).index_copy(0, self.index, packed)
        return out.view(self.n, self.width, -1)

    def gather(self, padded: torch.Tensor) -> torch.Tensor:
        """``[n, L, d]`` -> ``[tokens, d]``: the real positions only."""
        return padded.reshape(self.n * self.width, -1).index_select(0, self.index)

    def dropout(self, module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """``module`` (an ``nn.Dropout``) applied to the packed ``x`` [tokens, d]. With ``draws`` "padded"
        the mask is the one ``module`` draws on ones of the padded ``[n, L, d]`` shape (the same generator
        calls; a kept entry is exactly 1 / (1 - p)), gathered at the real tokens."""
        if not module.training or module.p == 0 or self.draws == "packed":
            return module(x)
        scale = module(x.new_ones(self.n, self.width, x.shape[-1]))
        return x * self.gather(scale)


@dataclass
class PackedOutput:
    """``cls``: the last hidden state of each first token ``[n, hidden]``; ``last_hidden_state``: the
    padded ``[n, L, hidden]`` (zeros at the padding) when asked for, else None; ``hidden_states``: the
    embeddings' and every layer's padded output when asked for (transformers' ``hidden_states``)."""

    cls: torch.Tensor
    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


def _check(model: torch.nn.Module, attention_mask: torch.Tensor, draws: str) -> None:
    """One-line errors for what the packed path does not compute as the padded model would."""
    _refuse_unsupported(model, "packed_forward")
    config = model.config
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        raise ValueError("packed_forward computes a bidirectional encoder; this model is a decoder")
    if draws not in DRAWS:
        raise ValueError(f"dropout_draws must be one of {', '.join(DRAWS)}, got {draws!r}")
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be 2D [n, L], got shape {tuple(attention_mask.shape)}")
    mask = attention_mask.bool()
    if not bool(mask[:, 0].all()) or bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError("packed_forward needs right padding with a first real token in every row")


def pack(attention_mask: torch.Tensor, draws: str = "padded", device: torch.device | None = None) -> Packing:
    """The :class:`Packing` of a right-padded 2D ``attention_mask`` (1 = real token). A host mask's tensors
    reach ``device`` (default: the host) in one non-blocking copy
    (:func:`~contrastlab.models.device.host_to_device`): no host-device sync. A device mask's stay on its
    device, and ``nonzero`` syncs once on CUDA."""
    mask = attention_mask.bool()
    n, width = mask.shape
    index = mask.reshape(-1).nonzero().squeeze(1)
    lengths = mask.sum(1)
    first = torch.cumsum(lengths, 0) - lengths
    if mask.device.type == "cpu":
        target = mask.device if device is None else torch.device(device)
        parts = (index, first, mask.reshape(-1).long())
        buffer = host_to_device(torch.cat(parts), target)  # one copy for the three
        index, first, mask = buffer.split([p.numel() for p in parts])
        mask = mask.view(n, width).bool()
    return Packing(n, width, index, mask[:, None, None, :], first, draws)


def _position_ids(model: torch.nn.Module, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Position ids ``[n, L]`` as the model computes them: 0..L-1 (BERT); for a family with
    ``offset_positions`` (RoBERTa) ``pad_token_id`` + the running count of non-pad ids
    (``create_position_ids_from_input_ids``), counted on the real tokens only, which is the same on them
    under right padding."""
    if families.TEXT_FAMILIES[model.config.model_type].offset_positions:
        padding_idx = model.config.pad_token_id
        real = (input_ids.ne(padding_idx) & mask).long()
        return torch.cumsum(real, 1) * real + padding_idx
    return torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)


def packed_embeddings(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    packing: Packing,
    token_type_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """The embedding block on the real tokens: word + token type + position embeddings, LayerNorm and
    dropout, ``[tokens, hidden]``, in the padded model's order of additions."""
    emb = model.embeddings
    flat = packing.index
    mask = packing.key_mask[:, 0, 0, :]
    ids = input_ids.reshape(-1).index_select(0, flat)
    types = (
        torch.zeros_like(ids) if token_type_ids is None else token_type_ids.reshape(-1).index_select(0, flat)
    )
    positions = _position_ids(model, input_ids, mask).reshape(-1).index_select(0, flat)
    x = emb.word_embeddings(ids) + emb.token_type_embeddings(types)
    x = x + emb.position_embeddings(positions)
    return packing.dropout(emb.dropout, emb.LayerNorm(x))


def _self_attention(attention: torch.nn.Module, x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """Multi-head self-attention of the packed tokens ``x`` [tokens, hidden]: Q/K/V projected on the
    packed tokens, re-padded for SDPA with the padded keys masked, the result packed again. SDPA's
    attention-probability dropout runs at the padded shape, as in the padded model."""
    sa = attention.self
    heads, head_dim = sa.num_attention_heads, sa.attention_head_size
    # One [hidden, 3 hidden] product and one scatter instead of three each: the same sums per output
    # element (each is one row of one weight), fewer launches and a better-shaped GEMM.
    weight = torch.cat([sa.query.weight, sa.key.weight, sa.value.weight])
    bias = torch.cat([sa.query.bias, sa.key.bias, sa.value.bias])
    qkv = packing.scatter(F.linear(x, weight, bias)).view(packing.n, packing.width, 3, heads, head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=packing.key_mask,
        dropout_p=sa.dropout.p if sa.training else 0.0,
        scale=sa.scaling,
    )
    return packing.gather(out.transpose(1, 2).reshape(packing.n, packing.width, heads * head_dim))


def _layer(layer: torch.nn.Module, x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """One encoder layer on the packed tokens, in the padded layer's order (``BertSelfOutput``,
    ``BertIntermediate``, ``BertOutput``; RoBERTa's are the same)."""
    attention = layer.attention
    a = _self_attention(attention, x, packing)
    h = attention.output.LayerNorm(packing.dropout(attention.output.dropout, attention.output.dense(a)) + x)
    ff = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(h))
    return layer.output.LayerNorm(packing.dropout(layer.output.dropout, layer.output.dense(ff)) + h)


def packed_forward(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    token_type_ids: torch.Tensor | None = None,
    return_padded: bool = False,
    output_hidden_states: bool = False,
    dropout_draws: str = "padded",
    check: bool = True,
) -> PackedOutput:
    """:class:`PackedOutput` of ``model`` (a transformers ``BertModel`` or ``RobertaModel``) on a
    right-padded batch, computed padding-free (see the module docstring).

    ``input_ids``, ``attention_mask`` (1 = real, right padding, first token real; on the host it spares
    the forward its host sync, :func:`pack`) and ``token_type_ids`` are ``[n, L]``. Train/eval mode and
    dropout are the model's; ``dropout_draws`` is :data:`DRAWS`. ``check=False`` skips the mask's
    validation (two host syncs for a device mask) for batches right-padded by construction.
    """
    if check:
        _check(model, attention_mask, dropout_draws)
    packing = pack(attention_mask, dropout_draws, input_ids.device)
    x = packed_embeddings(model, input_ids, packing, token_type_ids)
    states = [x] if output_hidden_states else None
    for layer in model.encoder.layer:
        x = _layer(layer, x, packing)
        if states is not None:
            states.append(x)
    cls = x.index_select(0, packing.first)
    hidden = tuple(packing.scatter(h) for h in states) if states is not None else None
    padded = hidden[-1] if hidden is not None else packing.scatter(x) if return_padded else None
    return PackedOutput(cls, padded, hidden)


class PaddingFree(torch.nn.Module):
    """``model`` (BERT or RoBERTa) as a drop-in encoder that runs padding-free: called like the model
    (the ``attention_mask`` 2D or :func:`~contrastlab.models.text.attention_bias`'s 4D one, on the device
    or the host), it returns transformers' ``BaseModelOutput`` of the padded ``last_hidden_state`` (zeros
    at the padding) and, when asked, ``hidden_states``.

    It holds the model without owning it: its ``config`` is the model's, and the trainer keeps
    optimising, saving and loading the model itself (an ordinary transformers folder)."""

    def __init__(self, model: torch.nn.Module, *, dropout_draws: str = "padded", check: bool = False) -> None:
        super().__init__()
        _refuse_unsupported(model, "padding_free", "; set padding_free: false")
        if dropout_draws not in DRAWS:
            raise ValueError(f"dropout_draws must be one of {', '.join(DRAWS)}, got {dropout_draws!r}")
        object.__setattr__(self, "model", model)  # not a submodule: no second copy of its state
        self.dropout_draws, self.check = dropout_draws, check

    @property
    def config(self):
        return self.model.config

    def parameters(self, recurse: bool = True):
        return self.model.parameters(recurse)

    def train(self, mode: bool = True) -> PaddingFree:
        self.model.train(mode)
        return super().train(mode)

    def forward(self, input_ids, attention_mask, token_type_ids=None, output_hidden_states=False, **_):
        from transformers.modeling_outputs import BaseModelOutput

        if attention_mask.dim() == 4:  # attention_bias's [n, 1, L, L]: every query row holds the key mask
            attention_mask = attention_mask[:, 0, 0, :]
        out = packed_forward(
            self.model,
            input_ids,
            attention_mask,
            token_type_ids=token_type_ids,
            return_padded=True,
            output_hidden_states=output_hidden_states,
            dropout_draws=self.dropout_draws,
            check=self.check,
        )
        return BaseModelOutput(last_hidden_state=out.last_hidden_state, hidden_states=out.hidden_states)

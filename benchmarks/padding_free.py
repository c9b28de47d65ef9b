"""The fp32 sentence train step, padded transformers BERT against the padding-free forward (issue 55).

One step is forward + backward of an InfoNCE loss on the [CLS] states of two dropout views of a batch of
``--batch`` random-token sentences (rows of ``--length`` tokens, right-padded; lengths drawn from wiki1m's
profile, ``gpu_bench.WIKI1M_LENGTHS``), at BERT-base width (hidden 768, 12 heads, intermediate 3072) and a
reduced depth (``--layers``, default 2, to keep a CPU run short). The padded path is the trainer's
(``model(ids, attention_mask=attention_bias(...))``), the packed one
``contrastlab.models.packed.packed_forward`` on the same model. The two are timed alternately, each the
median of ``--steps`` steps after ``--warmup``; printed: both medians and packed / padded.

    python benchmarks/padding_free.py                      # CPU, BERT-base width, 2 layers
    python benchmarks/padding_free.py --layers 12          # the full depth
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_bench import WIKI1M_LENGTHS, wiki1m_lengths  # noqa: E402

from contrastlab.models.packed import packed_forward  # noqa: E402
from contrastlab.models.text import attention_bias  # noqa: E402


def batch(n: int, width: int, vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded random ids and the mask ``[2n, width]``: ``n`` sentences with wiki1m's lengths
    (capped at ``width``), each twice (the two dropout views, as SimCSE feeds them)."""
    lengths = np.minimum(wiki1m_lengths(n, seed), width)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    ids = np.random.default_rng(seed).integers(100, vocab, (n, width)) * mask
    ids, mask = torch.from_numpy(ids), torch.from_numpy(mask)
    return ids.repeat(2, 1), mask.repeat(2, 1)


def info_nce(cls: torch.Tensor, tau: float = 0.05) -> torch.Tensor:
    """SimCSE's loss on the two halves of ``cls`` (view 1 of each sentence, then view 2)."""
    z1, z2 = F.normalize(cls, dim=-1).chunk(2)
    return F.cross_entropy(z1 @ z2.T / tau, torch.arange(len(z1)))


def step(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, packed: bool) -> float:
    """Seconds for one forward + backward (gradients cleared first, outside the clock)."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    if packed:
        cls = packed_forward(model, ids, mask).cls
    else:
        cls = model(ids, attention_mask=attention_bias(model, mask)).last_hidden_state[:, 0]
    info_nce(cls).backward()
    return time.perf_counter() - start


def measure(args: argparse.Namespace) -> dict[str, float]:
    """Median step seconds of both paths on one random BERT (train mode, its dropout 0.1)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
    )
    model = BertModel(config, add_pooling_layer=False).train()
    times: dict[bool, list[float]] = {False: [], True: []}
    for i in range(args.warmup + args.steps):
        ids, mask = batch(args.batch, args.length, args.vocab, seed=i)
        for packed in (False, True):
            seconds = step(model, ids, mask, packed)
            if i >= args.warmup:
                times[packed].append(seconds)
    padded, packed = statistics.median(times[False]), statistics.median(times[True])
    real = float(np.dot(np.arange(3, 33).clip(max=args.length), WIKI1M_LENGTHS) / sum(WIKI1M_LENGTHS))
    return {"padded_s": padded, "packed_s": packed, "ratio": packed / padded, "real_tokens": real}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="sentences per step (two views each)")
    parser.add_argument("--length", type=int, default=32, help="padded row length")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    r = measure(args)
    print(
        f"fp32 train step, batch {args.batch} x {args.length} (two views), hidden {args.hidden}, "
        f"{args.layers} layers, {torch.get_num_threads()} threads, median of {args.steps} "
        f"(mean real tokens {r['real_tokens']:.1f} of {args.length})"
    )
    print(f"padded  {r['padded_s'] * 1e3:9.1f} ms")
    print(f"packed  {r['packed_s'] * 1e3:9.1f} ms")
    print(f"ratio   {r['ratio']:9.3f} (packed / padded)")
    return r


if __name__ == "__main__":
    main()

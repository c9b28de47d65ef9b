"""Several small sentence cells on one GPU: the steps/s of k concurrent training processes, k = 1, 2, 4.

A BERT-base cell at batch 64 uses about 3 GB of an 80 GB H100 and is launch-bound (make gpu-check on an
H100: 22 steps/s in fp32 and in bf16 alike), so k cells sharing the GPU may finish sooner than k in a row.
Each copy is its own process, as k Snakemake jobs on one GPU would be, running
``benchmarks/train_throughput.py``'s measured step (the trainer's ``train_step`` and optimiser step, random
weights, fixed length); the copies warm up apart and time their steps together (a barrier). Prints, per
k, each copy's steps/s, their sum, and the speed-up of the sum over one copy alone.

    python benchmarks/gpu_share.py                       # bert-base, batch 64, fp32, k = 1 2 4
    python benchmarks/gpu_share.py --precision bf16 --concurrency 1 2 4 8
    python benchmarks/gpu_share.py --device cpu --arch tiny --concurrency 1 2 --steps 2   # smoke test
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _copy(index: int, args: argparse.Namespace, results) -> None:
    sys.path.insert(0, str(HERE))
    import torch
    import train_throughput as T

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    precision = T.resolve_precision(args.precision, device)
    args.state_dir = Path(args.state_dir) / f"copy{index}"
    args.state_dir.mkdir(parents=True, exist_ok=True)
    row = next(T.measure(args.arch, [args.batch], args, device, precision))
    results.put((index, 1.0 / row["step_s"], row["peak_mem_gib"]))


def run(k: int, args: argparse.Namespace) -> list[tuple[int, float, float | None]]:
    """Steps/s (and peak GiB) of each of ``k`` concurrent copies."""
    ctx = mp.get_context("spawn")
    results, barrier = ctx.Queue(), ctx.Barrier(k)
    copy_args = argparse.Namespace(**{**vars(args), "barrier": barrier})
    procs = [ctx.Process(target=_copy, args=(i, copy_args, results)) for i in range(k)]
    for p in procs:
        p.start()
    rows = [results.get(timeout=args.timeout) for _ in procs]
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise SystemExit(f"a copy failed (exit codes {[p.exitcode for p in procs]})")
    return sorted(rows)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    parser.add_argument("--arch", default="bert-base", help="an architecture of train_throughput.py")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=100, help="timed steps per copy")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per copy")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per copy")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a copy")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--state-dir", type=Path, default=Path("benchmarks/out/state"), help="scratch folder")
    args = parser.parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    # what train_throughput.measure reads besides the above
    args.eval_sentences, args.warmup_batch, args.peak_tflops = 128, None, None
    print(f"{args.arch} batch {args.batch} x {args.seq_len} tokens, {args.precision}, on {args.device}")
    print(f"{'k':>2} {'steps/s each':>28} {'sum':>8} {'speed-up':>9} {'peak GiB each':>14}")
    rows, alone = [], None
    for k in args.concurrency:
        copies = run(k, args)
        rates = [rate for _, rate, _ in copies]
        total = sum(rates)
        alone = alone or (total if k == 1 else None)
        speedup = total / alone if alone else None
        peak = max((m for _, _, m in copies if m is not None), default=None)
        rows.append({"k": k, "steps_per_s": rates, "sum": total, "speedup": speedup, "peak_gib": peak})
        each = " ".join(f"{r:.2f}" for r in rates)
        print(
            f"{k:>2} {each:>28} {total:8.2f} {'—' if speedup is None else f'{speedup:.2f}x':>9} "
            f"{'—' if peak is None else f'{peak:.2f}':>14}",
            flush=True,
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()

"""Micro-benchmark: forward + backward time of every sentence loss, and its ratio to InfoNCE.

    python benchmarks/losses.py [--sizes 64 128 512] [--dim 768] [--repeats 20] [--threads 1]

Runs on CPU and, when available, CUDA. Inputs are random raw [N, D] float32 embeddings with
``requires_grad``; each timing is the median over ``--repeats`` runs of ``loss(h1, h2,
with_stats=False).loss.backward()`` after warm-up. Goal (issue 3): no loss > 3x slower than infonce.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from contrastlab.losses import LOSSES, build_loss


def _time_one(name: str, n: int, dim: int, device: torch.device, repeats: int) -> float:
    g = torch.Generator(device="cpu").manual_seed(0)
    h1 = torch.randn(n, dim, generator=g).to(device).requires_grad_()
    h2 = (h1.detach() + 0.3 * torch.randn(n, dim, generator=g).to(device)).requires_grad_()
    loss_fn = build_loss(name)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = []
    for k in range(repeats + 3):
        h1.grad = h2.grad = None
        sync()
        start = time.perf_counter()
        loss_fn(h1, h2, with_stats=False).loss.backward()
        sync()
        if k >= 3:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 512])
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (the machine is shared)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    worst = 0.0
    for device in devices:
        label = torch.cuda.get_device_name() if device.type == "cuda" else f"cpu, {args.threads} thread(s)"
        print(f"\n## {device.type} ({label}), D = {args.dim}, forward+backward, median of {args.repeats}")
        header = f"{'loss':<16}" + "".join(f"{f'N={n} ms':>12}{'x info':>8}" for n in args.sizes)
        print(header)
        print("-" * len(header))
        results = {
            name: [_time_one(name, n, args.dim, device, args.repeats) for n in args.sizes] for name in LOSSES
        }
        base = results["infonce"]
        for name in LOSSES:
            row = f"{name:<16}"
            for t, b in zip(results[name], base, strict=True):
                worst = max(worst, t / b)
                row += f"{t * 1e3:>12.3f}{t / b:>8.2f}"
            print(row)
    verdict = "OK" if worst <= 3.0 else "SLOWER THAN GOAL"
    print(f"\nworst ratio to infonce: {worst:.2f} (goal <= 3): {verdict}")


if __name__ == "__main__":
    main()

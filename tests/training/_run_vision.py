"""Run train_vision in a subprocess for the kill tests: ``python _run_vision.py SETTINGS WORKDIR [KILL_AT]``
(KILL_AT: the process SIGKILLs itself right after that optimiser step)."""

import json
import os
import signal
import sys

import torch

from contrastlab.training.vision import VisionTrainSettings, train_vision

settings, workdir = json.loads(sys.argv[1]), sys.argv[2]
if len(sys.argv) > 3:
    kill_at, calls = int(sys.argv[3]), [0]

    def dying_after(original):
        def step_then_maybe_die(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return step_then_maybe_die

    torch.optim.Adam.step = dying_after(torch.optim.Adam.step)
    torch.optim.SGD.step = dying_after(torch.optim.SGD.step)
torch.set_num_threads(1)
paths = dict(
    out_dir=f"{workdir}/encoder", log_path=f"{workdir}/train_log.jsonl", state_dir=f"{workdir}/state"
)
train_vision(VisionTrainSettings.from_dict(settings), data_root=None, device="cpu", progress=False, **paths)

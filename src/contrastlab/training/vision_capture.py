"""The image step as one CUDA graph: ``cuda_graph`` of the vision trainer's settings.

MACL's eager image step is hundreds of small kernel launches, so the host sets its pace
(docs/gpu-defects.md, G2). Here the whole step (both views' augmentation draws and augmentations, the
encoder over both views, the head, the loss, the backward and the fused ``capturable`` optimiser step)
is captured once in a :class:`~contrastlab.training.capture.CapturedStep` and replayed per batch; its
only input is the batch of uint8 images.

- The draws: the augmentation generator is registered with the graph, so each replay draws from its
  current Philox state and advances it by the eager step's offsets (the same ops in the same order): a
  replay draws the eager step's views, and a snapshot's generator state resumes a captured run as it
  resumes an eager one.
- One variant for every step: the graph never computes the loss's statistics (:func:`with_stats` does,
  from the step's embeddings after a log step's replay) and measures the gradient norm at every step
  (clipping at an infinite bound multiplies by exactly 1.0, so the parameters do not change).
- The rate: :func:`set_lr` writes each epoch's rate into the tensor the graph reads.

:func:`~contrastlab.training.capture.for_device` decides the switch, as for the sentence step: ``None``
is on for CUDA wherever the step can be captured, off on a CPU. OAR's step (its labelled batch is not a
graph input, and it is GPU-bound), ``compile`` and a partial last batch (``drop_last: false``) stay
eager, each named in one line; ``true`` on a CPU, or with one of these, is a one-line error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import torch

from contrastlab.training.augment import SimCLRAugment, two_views
from contrastlab.training.capture import CapturedStep, prepare_capture, step_state

__all__ = ["capture_vision_step", "set_lr", "step_body", "with_stats"]


def step_body(
    run,
    train_step: Callable,
    parts: tuple,
    augment: SimCLRAugment,
    views: torch.Generator,
    *,
    calls: str,
    memory_format: torch.memory_format,
    head_autocast: bool,
    autocast: Callable | None = None,
) -> Callable[[torch.Tensor], tuple]:
    """The image step as the graph runs it, a function of a batch of images [B, 3, H, W]: two views drawn
    from ``views`` (:func:`~contrastlab.training.augment.two_views`), ``train_step`` (passed in: that
    module imports this one) without statistics, then the optimiser step with the norm measured and the
    gradients left in place. ``parts`` = (encoder, head, loss_fn, optimizer, params). Returns (loss
    output, h1, h2, grad norm); outside a graph it runs eagerly, as the CPU tests check it."""
    encoder, head, loss_fn, optimizer, params = parts
    autocast = autocast or run.autocast

    def body(images: torch.Tensor) -> tuple:
        with run.step_context():
            out, h1, h2, _ = train_step(
                encoder,
                head,
                loss_fn,
                *two_views(augment, images, views, calls),
                autocast=autocast,
                memory_format=memory_format,
                with_stats=False,
                scale=run.scale,
                head_autocast=head_autocast,
            )
            # An infinite bound measures the norm and scales the gradients by 1.0 (the eager log step's way).
            grad_norm = run.optimizer_step(optimizer, params, math.inf, zero_grad=False)
        return out, h1, h2, grad_norm

    return body


def capture_vision_step(
    run,
    train_step: Callable,
    parts: tuple,
    augment: SimCLRAugment,
    views: torch.Generator,
    first: torch.Tensor,
    *,
    calls: str,
    memory_format: torch.memory_format,
    head_autocast: bool,
) -> CapturedStep:
    """:func:`step_body` captured as a :class:`~contrastlab.training.capture.CapturedStep`, ``views``
    registered with the graph; ``first``, a batch of the run's shape, warms it up (its effects, draws
    included, undone). Called with a batch it returns (loss output, h1, h2, grad norm)."""
    encoder, head, _, optimizer, _ = parts
    autocast = prepare_capture(run, optimizer)
    options = dict(calls=calls, memory_format=memory_format, head_autocast=head_autocast)
    body = step_body(run, train_step, parts, augment, views, autocast=autocast, **options)
    zero_grad = functools.partial(optimizer.zero_grad, set_to_none=True)
    state = step_state(run, optimizer, encoder, head)
    return CapturedStep(body, (first,), state, zero_grad, run.device, generators=(views,))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set each group's rate to ``lr``: written in place into a captured step's rate tensor (the graph
    reads that memory; :func:`~contrastlab.training.capture.tensor_lr`), else assigned as a float."""
    for group in optimizer.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def with_stats(loss_fn, out, h1: torch.Tensor, h2: torch.Tensor):
    """``out`` with the statistics ``loss_fn`` gives for the step's embeddings ``h1``, ``h2`` (the eager
    log step's numbers), computed outside the graph, at log steps only."""
    with torch.no_grad():
        stats = loss_fn(h1, h2, with_stats=True).stats
    return dataclasses.replace(out, stats=stats)

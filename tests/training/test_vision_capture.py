"""The image step as one CUDA graph (training.vision_capture). On a CPU: ``None`` decided off, and the
captured step run eagerly is the trainer's eager step bit for bit (views, draws, losses, parameters; the
one-line error of ``cuda_graph: true`` there is in test_capture.py). With CUDA: the replay's draws,
bit-equality under deterministic algorithms, closeness by default, and MACL's step captured by the trainer."""

from __future__ import annotations

import copy
import math
import tempfile

import pytest
import torch

from contrastlab.losses import build_loss
from contrastlab.models.vision import ProjectionHead, build_encoder
from contrastlab.training import capture
from contrastlab.training import vision_capture as vc
from contrastlab.training.augment import two_views
from contrastlab.training.runtime import TrainingRun, build_optimizer
from contrastlab.training.vision import VisionTrainSettings, train_step, train_vision
from tests.training.test_vision import _pair_statistics, _same_distribution

CUDA = torch.device("cuda")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")
MACL_HP = {"tau0": 0.1, "alpha": 0.5, "a0": 0.0, "reweight": True}


def test_an_explicit_graph_that_cannot_capture_the_step_is_one_line():
    with pytest.raises(ValueError, match="needs a CUDA device, but this run is on cpu"):
        capture.for_device(VisionTrainSettings(cuda_graph=True), torch.device("cpu"), n_images=512)
    with pytest.raises(ValueError, match="cannot capture this image step .*OAR.*set cuda_graph: false"):
        capture.for_device(VisionTrainSettings(cuda_graph=True, oar_fraction=0.1), CUDA, n_images=512)


def test_the_default_on_a_cpu_trains_eagerly_and_says_nothing(tmp_path, vision_settings, train_image):
    cell = dict(loss="ntxent", loss_hp={}, head_hidden=16, head_dim=8, batch_size=16, max_steps=2)
    summary = train_image(vision_settings(**cell, log_every=1, state_every=None), tmp_path)
    assert summary["cuda_graph"] is False and summary["settings"]["cuda_graph"] is False  # as decided
    assert '"event": "note"' not in (tmp_path / "train_log.jsonl").read_text()


def test_set_lr_fills_a_graphs_tensor_in_place_and_assigns_a_float():
    param = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.Adam([param], lr=1e-3)
    vc.set_lr(optimizer, 5e-4)
    assert optimizer.param_groups[0]["lr"] == 5e-4  # the eager loop's assignment
    capture.tensor_lr(optimizer, torch.device("cpu"))
    held = optimizer.param_groups[0]["lr"]
    vc.set_lr(optimizer, 2e-4)
    assert optimizer.param_groups[0]["lr"] is held and held.item() == pytest.approx(2e-4)


def test_deterministic_algorithms_keep_the_trainers_cudnn_autotuner_off():
    """cudnn.benchmark is off under deterministic_algorithms, as ``cudnn_benchmark`` asks outside."""
    assert capture.cudnn_benchmark(True) and not capture.cudnn_benchmark(False)
    with capture.deterministic_algorithms():
        assert not capture.cudnn_benchmark(True)
    assert capture.cudnn_benchmark(True)


# -- the graph's step, run eagerly on the CPU, against the trainer's eager step ------------------------


def _parts(device: torch.device, seed: int = 0, loss: str = "macl_vision", hp=MACL_HP):
    torch.manual_seed(seed)
    encoder = build_encoder("resnet18", stem="cifar", width=4).to(device, memory_format=_layout(device))
    encoder.train()
    head = ProjectionHead(encoder.feature_dim, 16, 8).to(device).train()
    params = [*encoder.parameters(), *head.parameters()]
    optimizer = build_optimizer("adam", params, device, lr=1e-3, weight_decay=1e-6)
    return encoder, head, build_loss(loss, **hp), optimizer, params


def _layout(device: torch.device) -> torch.memory_format:
    """The trainer's memory format by device (``channels_last: None``): channels-last on CUDA only."""
    return torch.channels_last if device.type == "cuda" else torch.contiguous_format


def _eager_step(run, parts, augment, images, views, calls, logging):
    """The trainer's eager step (train_vision's loop): stats and the norm at log steps only."""
    encoder, head, loss_fn, optimizer, params = parts
    with run.step_context():
        out, h1, h2, _ = train_step(
            encoder, head, loss_fn, *two_views(augment, images, views, calls), autocast=run.autocast,
            memory_format=_layout(images.device), with_stats=logging, scale=run.scale,
        )  # fmt: skip
        grad_norm = run.optimizer_step(optimizer, params, clip_norm=math.inf if logging else None)
    return out, grad_norm


@pytest.mark.parametrize("calls", ["two", "one"])
def test_the_graphs_step_run_eagerly_is_the_trainers_eager_step_bit_for_bit(tmp_path, calls):
    """The same views, generator advance, losses, statistics and parameters as the eager step."""
    augment = VisionTrainSettings().augment(16, (0.5,) * 3, (0.25,) * 3)
    images = (torch.rand(12, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 255).to(torch.uint8)
    run = TrainingRun(tmp_path, device="cpu", precision="fp32", state_every=None, progress=False)
    eager, graphs = _parts(torch.device("cpu")), _parts(torch.device("cpu"))
    g_eager, g_graph = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    body = vc.step_body(run, train_step, graphs, augment, g_graph, calls=calls,
                        memory_format=torch.contiguous_format, head_autocast=False)  # fmt: skip
    for step in range(1, 5):
        logging = step % 2 == 0
        out, norm = _eager_step(run, eager, augment, images, g_eager, calls, logging)
        got, h1, h2, got_norm = body(images)
        graphs[3].zero_grad(set_to_none=True)  # the graph's backward rewrites them; eagerly, zero them
        assert torch.equal(got.loss, out.loss) and got.stats == {}
        assert torch.equal(g_graph.get_state(), g_eager.get_state())  # the same draws consumed
        if logging:
            assert vc.with_stats(graphs[2], got, h1, h2).stats == out.stats and torch.equal(got_norm, norm)
    for a, b in zip(eager[4], graphs[4], strict=True):
        assert torch.equal(a, b)


def test_the_graphs_step_draws_views_distributed_as_todays():
    """The captured body's views are distributed as today's two-call views (test_vision.py's tests)."""
    augment = VisionTrainSettings().augment(16, (0.5,) * 3, (0.25,) * 3)
    images = (torch.rand(3000, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 255).to(torch.uint8)
    seen = []

    def recording(encoder, head, loss_fn, view1, view2, **kwargs):
        seen.append((view1, view2))
        return None, None, None, None

    run = TrainingRun(tempfile.mkdtemp(), device="cpu", precision="fp32", state_every=None, progress=False)
    run.optimizer_step = lambda *args, **kwargs: None
    body = vc.step_body(run, recording, (None,) * 5, augment, torch.Generator().manual_seed(1), calls="two",
                        memory_format=torch.contiguous_format, head_autocast=False)  # fmt: skip
    body(images)
    expected = two_views(augment, images, torch.Generator().manual_seed(1), "two")
    assert all(torch.equal(a, b) for a, b in zip(seen[0], expected, strict=True))
    today = _pair_statistics(*two_views(augment, images, torch.Generator().manual_seed(2), "two"))
    p_values = _same_distribution(_pair_statistics(*seen[0]), today)
    assert min(p_values.values()) > 1e-3, p_values


# -- CUDA ---------------------------------------------------------------------------------------------


def _cuda_run(precision: str) -> TrainingRun:
    return TrainingRun(tempfile.mkdtemp(), device=CUDA, precision=precision, state_every=None, progress=False)


def _captured_and_eager(precision: str, steps: int, calls: str = "two"):
    """Losses and final parameters of ``steps`` captured and ``steps`` eager steps from the same
    weights, images and generator seed (the same capturable fused Adam, the same channels-last layout
    of weights and inputs, as the trainer has on CUDA), and each generator's state afterwards. Both
    sides must see the same layout: channels-last and contiguous convolutions are other cuDNN kernels,
    which round otherwise (the step-0 losses differed by 0.3% in bf16 with the layouts mixed)."""
    augment = VisionTrainSettings().augment(16, (0.5,) * 3, (0.25,) * 3)
    images = torch.randint(0, 256, (16, 3, 16, 16), dtype=torch.uint8, device=CUDA)
    template = _parts(CUDA)
    results = []
    for graph in (True, False):
        parts = (*copy.deepcopy(template[:2]), template[2])
        params = [*parts[0].parameters(), *parts[1].parameters()]
        optimizer = build_optimizer("adam", params, CUDA, lr=1e-3, weight_decay=1e-6, capturable=True)
        capture.tensor_lr(optimizer, CUDA)  # the same fused Adam either way: its rate a device tensor
        parts = (*parts, optimizer, params)
        run, views = _cuda_run(precision), torch.Generator(device=CUDA).manual_seed(5)
        if graph:
            step = vc.capture_vision_step(run, train_step, parts, augment, views, images, calls=calls,
                                          memory_format=_layout(CUDA), head_autocast=False)  # fmt: skip
            losses = [step(images)[0].loss.clone() for _ in range(steps)]
        else:
            losses = [
                _eager_step(run, parts, augment, images, views, calls, False)[0].loss for _ in range(steps)
            ]
        torch.cuda.synchronize()
        results.append(([x.item() for x in losses], [p.detach().clone() for p in params], views.get_state()))
    return results


@needs_cuda
def test_each_replay_advances_the_registered_generator_as_an_eager_step_does():
    (_, _, captured), (_, _, eager) = _captured_and_eager("bf16", steps=3)
    assert torch.equal(captured, eager)


@needs_cuda
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_the_captured_step_is_bit_equal_to_eager_under_deterministic_algorithms(precision):
    with capture.deterministic_algorithms():
        (graph_losses, graph_params, _), (eager_losses, eager_params, _) = _captured_and_eager(precision, 5)
    assert graph_losses == eager_losses
    assert all(torch.equal(a, b) for a, b in zip(graph_params, eager_params, strict=True))


@needs_cuda
def test_the_captured_step_lies_close_to_eager_in_the_default_mode(monkeypatch):
    """Default mode (autotuner on, nondeterministic kernels): the first loss agrees to bf16 rounding (1e-2),
    later ones within 10% (Adam amplifies sign flips of near-zero gradients), and the captured run trains."""
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)  # the trainer's cudnn_benchmark
    (graph_losses, _, _), (eager_losses, _, _) = _captured_and_eager("bf16", 8)
    assert all(math.isfinite(x) for x in graph_losses + eager_losses)
    assert graph_losses[0] == pytest.approx(eager_losses[0], rel=1e-2)
    assert graph_losses[1:] == pytest.approx(eager_losses[1:], rel=1e-1)
    eager_drop = eager_losses[0] - sum(eager_losses[-4:]) / 4
    assert eager_drop > 0, eager_losses
    assert graph_losses[0] - sum(graph_losses[-4:]) / 4 >= eager_drop / 2, (graph_losses, eager_losses)


@needs_cuda
def test_the_trainer_captures_macls_step_and_snapshots_the_eager_draws(tmp_path, monkeypatch):
    """train_vision on CUDA runs the graph; each snapshot's view generator equals an eager run's."""
    settings = dict(dataset="digits", loss="macl_vision", loss_hp=MACL_HP, width=4, head_hidden=16,
                    head_dim=8, batch_size=32, max_steps=12, log_every=4, state_every=4)  # fmt: skip
    states = {}

    def recording(self, step, fingerprint, stateful, *args, **kwargs):
        states.setdefault(graph, []).append(stateful["views"].state_dict().clone())
        return original(self, step, fingerprint, stateful, *args, **kwargs)

    original = TrainingRun.save_snapshot
    monkeypatch.setattr(TrainingRun, "save_snapshot", recording)
    summaries = {}
    for graph in (None, False):
        work = tmp_path / str(graph)
        summaries[graph] = train_vision(
            VisionTrainSettings(**settings, cuda_graph=graph), data_root=None, out_dir=work / "out",
            log_path=work / "log.jsonl", state_dir=work / "state", device="cuda", progress=False,
        )  # fmt: skip
    assert summaries[None]["cuda_graph"] is True and summaries[False]["cuda_graph"] is False
    assert len(states[None]) == len(states[False]) == 2
    assert all(torch.equal(a, b) for a, b in zip(states[None], states[False], strict=True))

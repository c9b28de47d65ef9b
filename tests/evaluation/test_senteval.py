"""Protocol details of the evaluator on the generated tree, and the probe's objective."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from contrastlab.evaluation import probe
from contrastlab.evaluation import senteval as S
from contrastlab.evaluation.probe import senteval as senteval_probe
from contrastlab.senteval import protocol as P
from contrastlab.senteval import tasks as T
from contrastlab.senteval.tasks import load_sts_pairs, load_sts_subsets
from tests.evaluation.conftest import CountingEncoder


def test_one_encode_call_with_unique_sentences(fixture_dir, encoder):
    scores = S.evaluate(encoder, fixture_dir, None, "fasttest")  # None: every task, as the default
    assert list(scores) == list(P.TASKS)
    assert len(encoder.calls) == 1
    sent = encoder.calls[0]
    assert len(sent) == len(set(sent)) == len(T.task_sentences(fixture_dir, P.TASKS, "fasttest"))
    assert all(0 <= v <= 100 for k, v in scores.items() if k in P.TRANSFER_TASKS)
    # the fixture's labels follow its words; SentEval's early-stopped Adam probe (the default) is far
    # from converged on so few rows
    assert scores["MR"] > 60 and scores["STSBenchmark"] > 50


def test_sts_is_pooled_all_spearman_not_mean(fixture_dir, encoder):
    score = S.evaluate(encoder, fixture_dir, ["STS12"], "test")["STS12"]
    subsets = load_sts_subsets(fixture_dir, "STS12")
    pairs = [(encoder(s.a).astype(np.float64), encoder(s.b).astype(np.float64)) for s in subsets]
    cos = [np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)) for a, b in pairs]
    pooled = spearmanr(np.concatenate(cos), np.concatenate([s.gold for s in subsets])).statistic * 100
    mean = np.mean([spearmanr(c, s.gold).statistic * 100 for c, s in zip(cos, subsets, strict=True)])
    assert score == pytest.approx(pooled, abs=1e-9) and abs(score - mean) > 1e-6


def test_dev_mode_scores_dev_split(fixture_dir, encoder):
    dev = S.evaluate(encoder, fixture_dir, ["STSBenchmark", "SICKRelatedness"], "dev")
    test = S.evaluate(encoder, fixture_dir, ["STSBenchmark", "SICKRelatedness"], "test")
    s1, s2, gold = T.load_sts_split(fixture_dir, "STSBenchmark", "dev")
    want = spearmanr(S._cosine(encoder(s1), encoder(s2)), gold).statistic * 100
    assert dev["STSBenchmark"] == pytest.approx(want) and dev["STSBenchmark"] != test["STSBenchmark"]
    assert set(encoder.calls[0]) == set(s1 + s2) | set(
        sum(T.load_sts_split(fixture_dir, "SICKRelatedness", "dev")[:2], [])
    )


def test_bad_arguments(fixture_dir, encoder):
    with pytest.raises(ValueError, match="unknown SentEval task"):
        S.evaluate(encoder, fixture_dir, ["STS17"], "test")
    with pytest.raises(ValueError, match="unknown mode"):
        S.evaluate(encoder, fixture_dir, ["MR"], "quick")
    with pytest.raises(ValueError, match="expected"):
        S.evaluate(lambda s: np.zeros((1, 3)), fixture_dir, ["MR"], "test")
    assert S.evaluate(encoder, fixture_dir, [], "fasttest") == {}  # no encode([]): a tokenizer may refuse it
    assert not encoder.calls  # refused before any encoding


def test_what_encode_returns_is_taken_or_refused_in_one_line(fixture_dir, encoder):
    torch = pytest.importorskip("torch")
    want = S.evaluate(encoder, fixture_dir, ["STS12"], "test")
    for wrap in (lambda e: e.tolist(), lambda e: torch.tensor(e, requires_grad=True)):  # taken as values
        assert S.evaluate(lambda s, wrap=wrap: wrap(encoder(s)), fixture_dir, ["STS12"], "test") == want
    bad = {
        r"shape \(2, 3\) of float64; expected \(.*, d\) floats: encode must": lambda s: np.zeros((2, 3)),
        r"shape \(.*, 2\) of <U1; expected \(.*, d\) floats: encode must": lambda s: [["a", "b"]] * len(s),
    }
    for message, encode in bad.items():
        with pytest.raises(ValueError, match=message) as info:
            S.evaluate(encode, fixture_dir, ["STS12"], "test")
        assert "\n" not in str(info.value)


def test_protocol_md_task_names_and_one_task_as_a_string(fixture_dir, encoder):
    """protocol.md §4's STS-B and SICK-R are answered under those names; one task may be a string."""
    want = S.evaluate(encoder, fixture_dir, ["STSBenchmark", "SICKRelatedness"], "test").values()
    got = S.evaluate(encoder, fixture_dir, ["STS-B", "SICK-R"], "test")
    assert got == dict(zip(["STS-B", "SICK-R"], want, strict=True))
    assert S.evaluate(encoder, fixture_dir, "STS12", "test").keys() == {"STS12"}


def test_embedding_cache(fixture_dir, encoder, tmp_path):
    first = S.evaluate(encoder, fixture_dir, ["STS12", "MR"], "fasttest", cache_dir=tmp_path)
    again = S.evaluate(encoder, fixture_dir, ["STS12", "MR"], "fasttest", cache_dir=tmp_path)
    assert first == again and len(encoder.calls) == 1
    S.evaluate(encoder, fixture_dir, ["STS12", "CR"], "fasttest", cache_dir=tmp_path)
    assert len(encoder.calls) == 2 and set(encoder.calls[1]).isdisjoint(encoder.calls[0])


def test_alignment_uniformity_matches_definition(fixture_dir, encoder):
    align, unif = S.alignment_uniformity(encoder, fixture_dir)
    pairs = load_sts_pairs(fixture_dir, "STSBenchmark", "dev")  # Nie Fig. 1a's split (§3.1)

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    keep = pairs.gold >= 4
    za = unit(encoder([a for a, k in zip(pairs.a, keep, strict=True) if k]))
    zb = unit(encoder([b for b, k in zip(pairs.b, keep, strict=True) if k]))
    assert align == pytest.approx(np.mean(np.sum((za - zb) ** 2, 1)), rel=1e-5)
    z = unit(encoder(sorted(set(pairs.a) | set(pairs.b)))).astype(np.float64)
    i, j = np.triu_indices(len(z), 1)
    assert unif == pytest.approx(np.log(np.mean(np.exp(-2 * np.sum((z[i] - z[j]) ** 2, 1)))), rel=1e-6)


def test_alignment_keeps_gold_4_and_uniformity_spans_more_than_one_block(monkeypatch):
    """Gold >= 4 (STS-B dev has many 4.0s); all pairs a < b of more sentences than one 1024-row block."""
    names = [f"s{i:04d}" for i in range(1100)]
    gold = np.repeat([4.0, 3.8], 275)
    monkeypatch.setattr(S, "load_sts_pairs", lambda *args: T.Pairs("dev", names[:550], names[550:], gold))
    z = np.random.default_rng(0).standard_normal((1100, 3))
    align, unif = S.alignment_uniformity(S.lookup_from(names, z), "unused")
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    assert align == pytest.approx(np.mean(np.sum((z[:275] - z[550:825]) ** 2, 1)), rel=1e-6)
    i, j = np.triu_indices(1100, 1)
    assert unif == pytest.approx(np.log(np.mean(np.exp(-2 * np.sum((z[i] - z[j]) ** 2, 1)))), rel=1e-6)


def test_mrpc_features_are_the_absolute_difference_then_the_product(monkeypatch, fixture_dir, encoder):
    """... and its score is the probe's test accuracy, not its model-selection (dev) accuracy."""
    seen = []
    monkeypatch.setattr(probe, "kfold_then_test", lambda x, *args, **kwargs: seen.append(x) or (61.0, 62.0))
    assert S.evaluate(encoder, fixture_dir, ["MRPC"], "fasttest") == {"MRPC": 62.0}
    train = T.load_task(fixture_dir, "MRPC", "fasttest")["train"]
    u, v = encoder(train.a), encoder(train.b)
    np.testing.assert_array_equal(seen[0], np.c_[np.abs(u - v), u * v])


def test_evaluate_checkpoint_measures_stsb_dev_after_the_tasks_encoding(
    fixture_dir, encoder, monkeypatch, tmp_path
):
    """Alignment/uniformity on STS-B dev, named in the metrics; its sentences in a second encode call, so
    the tasks' embeddings (and scores) are those of an evaluation without them."""
    monkeypatch.setattr(S, "_lazy_encoder", lambda *args, **kwargs: encoder)
    metrics = S.evaluate_checkpoint(tmp_path, fixture_dir, P.STS_TASKS, "fasttest")
    assert metrics["sts_avg"] == pytest.approx(np.mean([metrics["scores"][t] for t in P.STS_TASKS]))
    measured = (metrics["alignment"], metrics["uniformity"], metrics["alignment_split"])
    dev, test = (S.alignment_uniformity(CountingEncoder(), fixture_dir, split=s) for s in ("dev", "test"))
    assert measured == (*dev, "dev") and dev != test
    assert encoder.calls[0] == T.task_sentences(fixture_dir, P.STS_TASKS, "fasttest")
    pairs = load_sts_pairs(fixture_dir, "STSBenchmark", "dev")
    assert sorted(encoder.calls[1]) == sorted(set(pairs.a + pairs.b) - set(encoder.calls[0]))


def test_inner_kfold_uses_k_and_first_best_l2():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((120, 6))
    y = (X[:, 0] > 0).astype(int)
    fitter = probe.fitter("fasttest")
    dev, test = probe.inner_kfold(X, y, nclasses=2, k=5, grid=P.L2_GRID, seed=P.SEED, fitter=fitter)
    # SentEval's early-stopped probe (fasttest) on a separable toy: well above chance (50; 75.0 here, not
    # converged), rounded as SentEval
    assert 70 <= test <= 100 and round(test, 2) == test
    assert probe.first_best([70.0, 71.5, 71.5, 60.0]) == 1


def test_evaluate_checkpoint_metrics_dict_and_the_encode_and_probe_jobs_numbers(
    fixture_dir, tmp_path, tiny_bert, monkeypatch
):
    """One call's metrics dict, again from its cache, and the same numbers from an encode then a probe job,
    which stops instead of encoding (``encode_missing=False``) when its embeddings are missing."""
    tasks = ["STS12", "STSBenchmark", "SICKRelatedness", "MR", "MRPC"]
    cached = {"cache_dir": tmp_path / "cache", "device": "cpu"}  # the CPU: compared exactly with the jobs'
    single = S.evaluate_checkpoint(tiny_bert, fixture_dir, tasks, "fasttest", **cached)
    assert list(single["scores"]) == tasks
    assert single["sts_avg"] is None and single["tr_avg"] is None  # incomplete groups
    # SentEval's two transfer numbers: test accuracy in scores, model-selection accuracy in devacc.
    assert set(single["devacc"]) == {"MR", "MRPC"} and single["tr_devacc_avg"] is None
    for devacc in (single["devacc"]["MR"], single["devacc"]["MRPC"]):
        assert 0 <= devacc <= 100 and round(devacc, 2) == devacc
    assert np.isfinite(single["alignment"]) and single["uniformity"] < 0
    assert set(single["timings"]) >= {"encode_s", "sts_s", "transfer_s"}
    assert (single["mode"], single["pooling"]) == ("fasttest", "cls")
    assert "torch" in single["meta"]["versions"]
    again = S.evaluate_checkpoint(tiny_bert, fixture_dir, tasks, "fasttest", **cached)
    assert again["scores"] == single["scores"]
    jobs = tmp_path / "jobs"
    encoded = S.encode_checkpoint(tiny_bert, fixture_dir, tasks, "fasttest", cache_dir=jobs, device="cpu")
    assert encoded["sentences"] > 0 and encoded["device"] == "cpu" and encoded["torch"]
    assert encoded["key"] == S.checkpoint_fingerprint(tiny_bert, "cls") and (jobs / encoded["key"]).is_dir()

    def no_model(*args, **kwargs):
        raise AssertionError("the probe job loaded the model")

    monkeypatch.setattr(S, "load_backbone", no_model)  # the probe job reads the cache only
    split = S.evaluate_checkpoint(
        tiny_bert, fixture_dir, tasks, "fasttest", cache_dir=jobs, device="cpu", encode_missing=False
    )
    for key in ("scores", "devacc", "sts_avg", "alignment", "uniformity"):
        assert split[key] == single[key], key
    # a task the encoding job did not encode: one line says what is missing and what to run
    with pytest.raises(ValueError, match=r"sentences are missing from the embeddings of .*--forcerun encode"):
        S.evaluate_checkpoint(
            tiny_bert, fixture_dir, [*tasks, "CR"], "fasttest", cache_dir=jobs, encode_missing=False
        )


def test_transfer_averages_of_both_accuracies(fixture_dir, tmp_path, tiny_bert):
    metrics = S.evaluate_checkpoint(tiny_bert, fixture_dir, P.TRANSFER_TASKS, "fasttest")
    assert set(metrics["devacc"]) == set(P.TRANSFER_TASKS)
    assert metrics["tr_avg"] == pytest.approx(np.mean([metrics["scores"][t] for t in P.TRANSFER_TASKS]))
    assert metrics["tr_devacc_avg"] == pytest.approx(np.mean(list(metrics["devacc"].values())))
    assert metrics["tr_devacc_avg"] != metrics["tr_avg"]


def test_fasttest_uses_the_rmsprop_classifier(monkeypatch, fixture_dir, encoder):
    """The senteval probe gets SimCSE's fasttest classifier in fasttest mode, Adam in test mode."""
    seen = []
    real = senteval_probe.train_probes

    def spy(X, y, fits, l2, nclasses, config=senteval_probe.DEFAULT_CONFIG):
        seen.append(config.optim)
        return real(X, y, fits, l2, nclasses, config)

    monkeypatch.setattr(senteval_probe, "train_probes", spy)
    S.evaluate(encoder, fixture_dir, ["TREC"], "fasttest")
    S.evaluate(encoder, fixture_dir, ["TREC"], "test")
    assert seen == ["rmsprop", "adam"]

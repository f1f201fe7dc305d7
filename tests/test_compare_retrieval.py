"""`qsrank compare` on retrieval data sets: the class-balanced batches, a tiny run that
resumes, and bad config keys of the retrieval sections."""

import importlib.util
from functools import partial

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from qsrank.main import main
from qsrank.pipelines import _runner, compare
from qsrank.pipelines.compare import retrieval

run = partial(_runner.run, compare.SPEC)
resolve = partial(_runner.resolve, compare.SPEC)
report = partial(_runner.report, compare.SPEC)

TINY = {
    "seeds": [0],
    "datasets": ["digits_retrieval", "synthetic_retrieval"],
    "methods": ["untrained", "ap_hinge"],
    "threads": 1,
    "digits_retrieval": {"epochs": 1, "hidden": 0, "dim": 8},
    "synthetic_retrieval": {
        "epochs": 1,
        "classes": 8,
        "per_class": 6,
        "hidden": 8,
        "dim": 4,
        "classes_per_batch": 3,
        "samples_per_class": 3,
    },
}


def test_batches_are_class_balanced_seeded_and_held_out_classes_unseen():
    cfg = resolve(TINY)
    data = retrieval.load_data("digits_retrieval", cfg["digits_retrieval"])
    assert set(data.y_train) == set(range(5)) and set(data.y_test) == set(range(5, 10))
    task = retrieval.Task(data, cfg, "digits_retrieval")
    batches = task.batches(0, 0)
    assert len(batches) == len(data.y_train) // 25
    for idx in batches:
        labels = data.y_train[idx].reshape(5, 5)  # class after class, five of each
        assert (labels == labels[:, :1]).all() and len(set(labels[:, 0])) == 5
        assert len(set(idx)) == 25
    assert all(np.array_equal(a, b) for a, b in zip(batches, task.batches(0, 0)))
    assert not np.array_equal(batches[0], task.batches(1, 0)[0])


def test_tiny_run_tables_and_resume(tmp_path):
    out = run(resolve(TINY), tmp_path / "run", progress=False)
    text = report(out)
    for dataset in TINY["datasets"]:
        assert f"## {dataset}" in text
    assert "| mAP@R " in text and "| Recall@4 " in text and "test AP" not in text
    frame = pd.read_csv(out / "results.csv")
    assert list(frame.columns) == [
        "dataset",
        "method",
        "seed",
        "epoch",
        "steps",
        "map_at_r",
        "recall_at_1",
        "recall_at_4",
        "train_s",
        "loss_ms_per_step",
    ]
    assert len(frame) == 4 and frame[["map_at_r", "recall_at_1"]].stack().between(0, 1).all()
    # the untrained model is the seeded initial one: the exact hinge moves off it
    digits = frame[frame.dataset == "digits_retrieval"].set_index("method")
    assert digits.loc["ap_hinge", "map_at_r"] != digits.loc["untrained", "map_at_r"]
    assert (frame.recall_at_4 >= frame.recall_at_1).all()
    for name in ("figure.png", "summary.csv", "history.csv", "provenance.json"):
        assert (out / name).is_file()
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    run(resolve(TINY), out, progress=False)  # resumes: nothing retrained
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == stamps
    # a change to one data set's section retrains that data set only
    changed = {**TINY, "digits_retrieval": {**TINY["digits_retrieval"], "lr": 0.002}}
    run(resolve(changed), out, progress=False)
    redone = sorted(n for n, t in stamps.items() if (out / "runs" / n).stat().st_mtime_ns != t)
    assert redone == [
        "digits_retrieval__ap_hinge__seed0.json",
        "digits_retrieval__untrained__seed0.json",
    ]


@pytest.mark.parametrize(
    "config, match",
    [
        (
            {"datasets": ["digits_retrieval"], "digits_retrieval": {"classes_per_batch": 1}},
            r"^digits_retrieval.classes_per_batch: expected a value >= 2; got 1$",
        ),
        (
            {"datasets": ["digits_retrieval"], "digits_retrieval": {"samples": 3}},
            r"^unknown config key 'digits_retrieval.samples'; allowed keys in 'digits_retrieval': "
            r"epochs, seconds, lr, classes_per_batch, samples_per_class, hidden, dim, train_classes$",
        ),
        (
            {"datasets": ["digits_retrieval"], "digits_retrieval": {"train_classes": [0, 12]}},
            r"^digits_retrieval.train_classes.1: expected a value <= 9; got 12$",
        ),
        (
            {
                "datasets": ["digits_retrieval"],
                "digits_retrieval": {"train_classes": list(range(9))},
            },
            r"^digits_retrieval: train_classes: expected 2 to 8 digits .*; got 9$",
        ),
        (
            {"datasets": ["synthetic_retrieval"], "synthetic_retrieval": {"classes": 2}},
            r"^synthetic_retrieval.classes: expected a value >= 4; got 2$",
        ),
        pytest.param(
            {
                "datasets": ["synthetic_retrieval"],
                "methods": ["smooth_ap"],
                "synthetic_retrieval": {"samples_per_class": 4},
            },
            r"^synthetic_retrieval: smooth_ap \(pytorch-metric-learning's SmoothAPLoss\) "
            r"needs classes_per_batch equal to samples_per_class; got 8 and 4$",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("pytorch_metric_learning") is None,
                reason="the [compare] extra is not installed",
            ),
        ),
        (
            {"datasets": ["digits"], "methods": ["fastap"]},
            r"^methods: fastap runs on retrieval data sets only, and datasets names none$",
        ),
        ({"options": {"dlm_eps": 0}}, r"^options.dlm_eps: expected a value > 0; got 0$"),
        ({"options": {"dlm_update": "both"}}, r"^options.dlm_update: expected one of"),
    ],
)
def test_bad_config(config, match):
    with pytest.raises(ValueError, match=match):
        resolve(config)


def test_batch_larger_than_the_classes_is_one_line_and_writes_nothing(tmp_path):
    import yaml

    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "experiment": "compare",
                "datasets": ["digits_retrieval"],
                "methods": ["ap_hinge"],
                "digits_retrieval": {"classes_per_batch": 6},
            }
        )
    )
    result = CliRunner().invoke(
        main, ["compare", "--config", str(config), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: digits_retrieval.classes_per_batch is 6; the training classes number 5"
    ]
    assert not (tmp_path / "o").exists()

"""The VOC2007 detection pipeline (Table 5): a tiny run through `qsrank train`, its tables
against its CSVs, identical weights of the exact AP methods, resuming after an interruption,
per-image NMS before detection AP, and config errors."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from qs.data.bags import BagSet
from qs.data.convert import write_synthetic_store
from qs.data.voc2007 import CLASSES, DetectionData, make_voc2007_detection
from qs.estimators import LatentRankSVM
from qs.metrics import voc_detection_ap
from qsrank.main import main
from qsrank.pipelines import _runner
from qsrank.pipelines import voc2007_detection as voc
from qsrank.pipelines.voc2007_detection import tables as voc_tables
from qsrank.pipelines.voc2007_detection import train as voc_train

TINY = {
    "experiment": "voc2007_detection",
    "classes": ["aeroplane", "person"],
    "synthetic": {"scale": 0.01, "boxes_per_image": 6, "n_features": 8},
}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def write_config(path, **changes):
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("voc2007")
    out = root / "run"
    result = invoke("train", "--config", write_config(root / "tiny.yaml"), "--out", out)
    assert result.exit_code == 0, result.output
    return out, result.output


def test_train_writes_table5_and_its_files(tiny_run):
    out, output = tiny_run
    assert f"results: {out}" in output and "# Table 5" in output
    assert {p.name for p in out.iterdir()} >= {
        "table5.md",
        "results.csv",
        "timings.csv",
        "figure.png",
        "figure.pdf",
        "config.yaml",
        "provenance.json",
        "runs",
    }
    timings = pd.read_csv(out / "timings.csv")
    assert list(zip(timings["class"], timings["method"])) == [
        (c, m) for c in TINY["classes"] for m in voc.METHODS
    ]
    assert (timings["lai_calls"] >= 1).all() and (timings["lai_time_s"] > 0).all()
    assert timings["test_ap"].between(0, 1).all()
    provenance = json.loads((out / "provenance.json").read_text())
    assert "not the paper's data" in provenance["data"] and provenance["seed"] == 0
    assert len(provenance["data_sha256"]) == 2


def _md_rows(text, first_cell):
    """The cells of the Markdown table rows whose first cell starts with `first_cell`."""
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]
    return [r for r in rows if r[0].startswith(first_cell)]


def test_table5_matches_the_csvs(tiny_run):
    out, _ = tiny_run
    md = (out / "table5.md").read_text()
    assert "0-1 loss, ours (synthetic)" in md and "AP loss, paper" in md
    results = pd.read_csv(out / "results.csv")
    timings = pd.read_csv(out / "timings.csv").set_index(["class", "method"])
    for _, row in results.iterrows():
        ap_row, lai_row = _md_rows(md, voc.CLASS_NAMES[row["class"]])
        assert ap_row[1:] == [
            f"{row[c]:.2f}" for c in ("ap_0-1", "ap_ap", "paper_ap_0-1", "paper_ap_ap")
        ]
        assert float(ap_row[1]) == pytest.approx(
            100 * timings.loc[(row["class"], "0-1"), "test_ap"], abs=5e-3
        )
        assert float(ap_row[3:5][0]) == voc.PAPER_AP[row["class"]][0]
        yue, qs, auto = (
            timings.loc[(row["class"], m), "lai_time_s"] for m in ("ap", "ap_qs", "ap_auto")
        )
        assert lai_row[1:6] == [
            f"{yue:.4f}",
            f"{qs:.4f}",
            f"{auto:.4f}",
            f"{yue / qs:.1f}",
            f"{yue / auto:.1f}",
        ]
    (mean_ap,) = _md_rows(md, "**mean** (2 classes)")[:1]
    assert mean_ap[1] == f"{results['ap_0-1'].mean():.2f}"
    assert mean_ap[4] == f"{np.mean([voc.PAPER_AP[c][1] for c in TINY['classes']]):.2f}"
    (paper,) = _md_rows(md, "**paper**")
    assert paper[1:4] == ["7.6230", "0.5214", ""] and paper[4] == "14.6"


def test_time_ratios_are_replayed_medians_with_their_range(tiny_run):
    out, _ = tiny_run
    replay = pd.read_csv(out / "replay.csv")
    assert set(replay["round"]) == set(range(7))  # lai_repeats' default
    per_round = replay.groupby(["method", "round"])["lai_time_s"].mean()
    ratio = per_round["ap"] / per_round["ap_qs"]
    r = pd.read_csv(out / "ratios.csv").set_index("ratio").loc["ap / ap_qs"]
    assert (r["replay_median"], r["replay_min"], r["replay_max"]) == pytest.approx(
        (ratio.median(), ratio.min(), ratio.max())
    )
    assert r["paper_total_time"] == pytest.approx(7.623 / 0.5214) and r["n_classes"] == 2
    (row,) = _md_rows((out / "table5.md").read_text(), "Yue / QS")
    assert row[2] == f"{r['replay_median']:.1f} ({r['replay_min']:.1f}-{r['replay_max']:.1f})"


def test_exact_ap_methods_train_identical_weights(tiny_run):
    out, _ = tiny_run
    results = pd.read_csv(out / "results.csv")
    assert results["ap_models_identical"].all()
    assert (
        "trained bit-identical weights for every one of the 2 classes"
        in (out / "table5.md").read_text()
    )
    for cls in TINY["classes"]:
        coefs = [np.load(out / "runs" / f"{cls}__{m}.npz")["coef"] for m in voc.AP_METHODS]
        assert all(np.array_equal(coefs[0], c) for c in coefs[1:])
        assert np.abs(coefs[0]).max() > 0


def test_table_says_when_ap_weights_differ(tiny_run):
    out, _ = tiny_run
    frame = pd.read_csv(out / "timings.csv")
    frame.loc[frame["method"] == "ap_auto", "w_sha256"] = "0" * 64
    line = voc_tables._identical_line(voc.ap_table(frame))
    assert line.startswith("**Warning**") and "aeroplane, person" in line


def test_trainings_stopped_early_are_marked(tiny_run, tmp_path):
    out, _ = tiny_run
    assert "†" not in (out / "table5.md").read_text()  # every tiny training converged
    records = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*__*.json"))]
    for r in records:
        if (r.get("class"), r.get("method")) == ("person", "ap_qs"):
            r["converged"] = False
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    voc.write_tables(tmp_path, [r for r in records if "method" in r], cfg, "synthetic", True)
    md = (tmp_path / "table5.md").read_text()
    ap_row, lai_row = _md_rows(md, "Person")
    assert ap_row[2].endswith(" †") and "†" not in ap_row[1]
    assert lai_row[2].endswith(" †") and "†" not in lai_row[1] + lai_row[3]
    assert "†: 1 training stopped at the iteration cap before converging" in md
    assert "†" not in "".join(_md_rows(md, "Aeroplane")[0])


def test_run_resumes_after_an_interruption(tiny_run, tmp_path, monkeypatch):
    reference, _ = tiny_run
    cfg = _runner.load_config(voc.SPEC, write_config(tmp_path / "tiny.yaml"))
    n_images = voc.load_data(cfg)["trainval"].n_images
    out = tmp_path / "run"
    trained, chosen = [], []
    real_train, real_choose = voc.train_one, voc.choose_C

    def train_one(cfg, name, train, labels, C, scheduler=None, **kw):
        if train.n_images == n_images:  # a final training, not one of a C grid's
            if len(trained) == 3 and stop:
                raise KeyboardInterrupt
            trained.append(name)
        return real_train(cfg, name, train, labels, C, scheduler, **kw)

    def choose_C(cfg, loss, train, labels, cls, scheduler=None):
        chosen.append((cls, loss))
        return real_choose(cfg, loss, train, labels, cls, scheduler)

    monkeypatch.setattr(voc_train, "train_one", train_one)
    monkeypatch.setattr(voc_train, "choose_C", choose_C)
    stop = True
    with pytest.raises(KeyboardInterrupt):
        _runner.run(voc.SPEC, cfg, out, progress=False)
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == [
        "aeroplane__0-1.json",
        "aeroplane__C-01.json",
        "aeroplane__C-ap.json",
        "aeroplane__ap.json",
        "aeroplane__ap_qs.json",
    ]
    assert not (out / "table5.md").exists()

    trained.clear()
    chosen.clear()
    stop = False
    _runner.run(voc.SPEC, cfg, out, progress=False)
    assert trained == ["ap_auto", *voc.METHODS]  # aeroplane's last, then person's four
    assert chosen == [("person", "01"), ("person", "ap")]  # aeroplane's Cs were kept
    cols = ["class", "method", "C", "test_ap", "w_sha256", "lai_calls"]
    pd.testing.assert_frame_equal(
        pd.read_csv(out / "timings.csv")[cols], pd.read_csv(reference / "timings.csv")[cols]
    )


def test_cli_filters_class_loss_and_inference(tmp_path):
    out = tmp_path / "run"
    result = invoke(
        "train",
        "--config",
        write_config(tmp_path / "c.yaml"),
        "--class",
        "person",
        "--loss",
        "ap",
        "--inference",
        "qs",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == [
        "person__C-ap.json",
        "person__ap_qs.json",
    ]
    assert "Only one AP method per class was trained" in result.output
    result = invoke(
        "train",
        "--config",
        write_config(tmp_path / "c.yaml"),
        "--class",
        "person",
        "--loss",
        "01",
        "--out",
        tmp_path / "zero_one",
    )
    assert result.exit_code == 0, result.output
    assert "Total loss-augmented inference time" not in result.output


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"colour": 1}, r"unknown config key 'colour'; allowed keys: experiment, seed, data"),
        (
            {"synthetic": {"size": 3}},
            r"unknown config key 'synthetic.size'; allowed keys in "
            r"'synthetic': scale, boxes_per_image",
        ),
        (
            {"classes": ["aeroplane", "zebra"]},
            (r"classes.1: expected one of aeroplane, bicycle, .*; got 'zebra'"),
        ),
        ({"seed": "one"}, r"seed: expected an integer; got 'one'"),
        ({"nms_threshold": 1.5}, r"nms_threshold: expected a value <= 1; got 1.5"),
        ({"synthetic": {"scale": 0}}, r"synthetic.scale: expected a value > 0; got 0"),
        ({"C": {"ndcg": 1.0}}, r"C.ndcg: expected one of 01, ap; got 'ndcg'"),
        (
            {"methods": "ap_search"},
            r"methods.0: expected one of 0-1, ap, ap_qs, ap_auto; got 'ap_search'",
        ),
        ({"data": 3}, r"data: expected 'synthetic' or a mapping"),
        ({"scheduler": "threads"}, r"scheduler applies to data read from stores"),
        (
            {"store": "boxes.zarr"},
            r"store: expected a mapping \{trainval: PATH, test: PATH\}",
        ),
        (
            {"store": {"trainval": "a.zarr"}},
            r"store: expected a mapping .*; got "
            r"\{'trainval': 'a.zarr'\}",
        ),
        (
            {"store": {"trainval": "a", "test": "b"}, "data": {"trainval": "c", "test": "d"}},
            r"give either data .* or store, not both",
        ),
        ({"in_memory_max_gb": -1}, r"in_memory_max_gb: expected a value >= 0; got -1"),
        ({"init": "whole_image"}, r"init: expected one of image_means, random"),
        ({"C": []}, r"C: expected a number or a list of 1 or more or a mapping; got \[\]"),
        ({"C": {"01": [10, 0]}}, r"C.01.1: expected a value > 0; got 0"),
        ({"validation_fraction": 1}, r"validation_fraction: expected a value < 1; got 1"),
        ({"min_outer": {"ap": 0}}, r"min_outer.ap: expected a value >= 1; got 0"),
        ({"blas_threads": 0}, r"blas_threads: expected a value >= 1; got 0"),
    ],
)
def test_bad_config_is_one_line_and_exit_1(tmp_path, changes, message):
    result = invoke(
        "train",
        "--config",
        write_config(tmp_path / "bad.yaml", **changes),
        "--out",
        tmp_path / "run",
    )
    assert result.exit_code == 1, result.output
    assert re.search(message, result.output), result.output
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


def test_cli_loss_and_store_errors(tmp_path):
    config = write_config(tmp_path / "c.yaml")
    result = invoke("train", "--config", config, "--loss", "ndcg")
    assert result.exit_code == 1 and "loss: expected one of 01, ap; got 'ndcg'" in result.output
    result = invoke("train", "--config", config, "--solver", "frank_wolfe")
    assert result.exit_code == 1 and "solver: expected 'cutting_plane'" in result.output
    store = write_config(
        tmp_path / "s.yaml",
        store={"trainval": str(tmp_path / "t.zarr"), "test": str(tmp_path / "boxes.zarr")},
    )
    result = invoke("train", "--config", store, "--out", tmp_path / "run")
    assert result.exit_code == 1 and f"No box store at {tmp_path / 't.zarr'}" in result.output


# the stores hold the very data of TINY's synthetic run, in blocks of 16 images
STORE_DATA = {"seed": 0, "scale": 0.01, "boxes_per_image": 6, "n_features": 8, "chunk_images": 16}
#: what must not change with where the boxes are read from
SAME = [
    "class",
    "method",
    "C",
    "n_images",
    "n_pos",
    "n_boxes",
    "lai_calls",
    "n_outer",
    "n_iter",
    "test_ap",
    "w_sha256",
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    return {
        split: str(write_synthetic_store(root / f"{split}.zarr", split=split, **STORE_DATA))
        for split in ("trainval", "test")
    }


def same_results(out, reference, classes=TINY["classes"]):
    ours = pd.read_csv(out / "timings.csv")[SAME]
    ref = pd.read_csv(reference / "timings.csv")[SAME]
    pd.testing.assert_frame_equal(ours, ref[ref["class"].isin(classes)].reset_index(drop=True))


@pytest.mark.parametrize(
    "max_gb, how, working_set",
    [
        (1.0, "at most in_memory_max_gb (1 GB): loaded in memory", 0),
        (
            0,
            (
                "above in_memory_max_gb (0 GB): read out of core, blocks of 16 images on Dask's "
                "threaded scheduler"
            ),
            2,
        ),
    ],
)
def test_stores_train_what_the_data_in_memory_train(
    tiny_run, stores, tmp_path, max_gb, how, working_set
):
    """Out of core with a working set of 2 of the 6 boxes per image: the same models."""
    reference, _ = tiny_run
    out = tmp_path / "run"
    config = write_config(
        tmp_path / "s.yaml",
        store=stores,
        in_memory_max_gb=max_gb,
        **({"working_set": working_set} if working_set else {}),
    )
    result = invoke("train", "--config", config, "--out", out)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"store {stores['trainval']}: 9,600 bytes of features as float32, {how}" in text
    assert (
        "test: synthetic VOC2007-like bags of boxes (seed 0, scale 0.01, test); not the "
        "paper's data"
    ) in text and "Our numbers are synthetic" in text
    same_results(out, reference)  # the same weights, bit for bit, and the same test APs
    timings = pd.read_csv(out / "timings.csv")
    assert (timings["working_set"] == working_set).all()
    assert ((timings["passes"] < timings["lai_calls"]) == bool(working_set)).all()
    for cls in TINY["classes"]:
        for m in voc.METHODS:
            ours, ref = (np.load(d / "runs" / f"{cls}__{m}.npz") for d in (out, reference))
            assert np.array_equal(ours["coef"], ref["coef"])
    provenance = json.loads((out / "provenance.json").read_text())
    assert f"store {stores['test']}" in provenance["data"]


def test_a_distributed_scheduler_trains_the_same(tiny_run, stores, tmp_path):
    distributed = pytest.importorskip("distributed")
    reference, _ = tiny_run
    out = tmp_path / "run"
    config = write_config(tmp_path / "s.yaml", store=stores, in_memory_max_gb=0, classes=["person"])
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        result = invoke("train", "--config", config, "--scheduler", address, "--out", out)
    assert result.exit_code == 0, result.output
    assert f"on the Dask scheduler {address}" in " ".join(result.output.split())
    same_results(out, reference, ["person"])


def test_scheduler_option_needs_a_store_experiment(tmp_path):
    config = write_config(tmp_path / "c.yaml")
    result = invoke("train", "--config", config, "--scheduler", "tcp://127.0.0.1:1")
    assert result.exit_code == 1 and "scheduler applies to data read from stores" in result.output
    digits = tmp_path / "d.yaml"
    digits.write_text("experiment: digits\n")
    result = invoke("train", "--config", digits, "--scheduler", "threads")
    assert (
        result.exit_code == 1
        and "--scheduler applies to experiments that read box "
        "stores (voc2007_detection), not to digits"
        in result.output
    )


def copy_store(src, dst, change):
    """A copy of store `src` at `dst` with `change(zarr group)` applied, its chunks' checksums
    recorded again (a store written so, not a damaged one)."""
    import hashlib
    import shutil

    import zarr

    shutil.copytree(src, dst)
    group = zarr.open_group(dst, mode="r+")
    change(group)
    sums = group.attrs["checksums"]
    group.attrs["checksums"] = {
        name: {
            key: hashlib.sha256((Path(dst) / name / key).read_bytes()).hexdigest() for key in keys
        }
        for name, keys in sums.items()
    }
    return str(dst)


def damaged_copy(src, dst):
    """A copy of store `src` at `dst` with one features chunk deleted."""
    import shutil

    shutil.copytree(src, dst)
    (dst / "features" / "c" / "0" / "0" / "0").unlink()
    return str(dst)


def test_store_errors_are_one_line_and_exit_1(stores, tmp_path):
    other_d = write_synthetic_store(
        tmp_path / "d4.zarr", split="test", **{**STORE_DATA, "n_features": 4}
    )
    fewer = copy_store(
        stores["test"],
        tmp_path / "classes.zarr",
        lambda g: g.attrs.update(classes=list(CLASSES[:19])),
    )
    old = copy_store(
        stores["test"], tmp_path / "old.zarr", lambda g: g.attrs.update(format_version=0)
    )
    cow = CLASSES.index("cow")

    def no_cows(group):
        group["labels"][:, cow] = 0

    def unknown(group):
        group["labels"][:3, cow] = -1

    cases = [
        (
            {"test": str(other_d)},
            (
                "has 8 features per box but .*d4.zarr 4; both splits must "
                "come from the same feature extraction"
            ),
        ),
        # classes edited without the labels: the store's own record refuses it first
        ({"test": fewer}, "labels has shape .*; its attributes record .* the store is damaged"),
        ({"test": old}, ("old.zarr is a store of format version 0; this qsrank reads version 1")),
        (
            {"test": str(tmp_path / "half.zarr.partial")},
            ("half.zarr.partial is an unfinished conversion, not a store"),
        ),
        (
            {"trainval": copy_store(stores["trainval"], tmp_path / "no_cows.zarr", no_cows)},
            "class 'cow' has no positive image in trainval",
        ),
        (
            {"trainval": copy_store(stores["trainval"], tmp_path / "unknown.zarr", unknown)},
            "class 'cow': 3 trainval images have no label for it",
        ),
        (
            {"test": damaged_copy(stores["test"], tmp_path / "damaged.zarr")},
            r"damaged.zarr: 1 of \d+ chunks fail their checksum: features chunk c/0/0/0 "
            r"\(missing\); the store is damaged",
        ),
    ]
    for change, message in cases:
        config = write_config(tmp_path / "s.yaml", store={**stores, **change}, classes=["cow"])
        result = invoke("train", "--config", config, "--out", tmp_path / "run")
        assert result.exit_code == 1, result.output
        assert re.search(message, result.output), result.output
        assert "Traceback" not in result.output and len(result.output.splitlines()) == 1
        assert not (tmp_path / "run").exists()


def test_c_is_chosen_on_held_out_trainval_images(tiny_run):
    out, _ = tiny_run
    timings = pd.read_csv(out / "timings.csv")
    for cls in TINY["classes"]:
        for loss in voc.LOSSES:
            record = json.loads((out / "runs" / f"{cls}__C-{loss}.json").read_text())
            scores = {float(c): ap for c, ap in record["validation_ap"].items()}
            assert sorted(scores) == [10.0, 100.0, 1000.0]
            best = max(scores.values())
            assert record["C"] == min(c for c, ap in scores.items() if ap == best)
            used = timings[(timings["class"] == cls) & (timings["loss"] == loss)]["C"]
            assert (used == record["C"]).all()
    fit, val = voc.holdout(np.array([1] * 8 + [0] * 40), 0.25, 0, 3)
    assert np.intersect1d(fit, val).size == 0 and np.union1d(fit, val).size == 48
    assert (val < 8).sum() == 2 and (val >= 8).sum() == 10


def test_detections_are_suppressed_per_image_before_ap():
    # two images of 3 boxes; image a: two overlapping boxes (IoU 0.9) on its object; image b:
    # its object at the same place, whose box NMS must keep (suppression is per image)
    boxes = np.array(
        [
            [1, 1, 10, 10],
            [1, 1, 10, 9],
            [30, 30, 40, 40],
            [1, 1, 10, 10],
            [50, 50, 60, 60],
            [70, 70, 80, 80],
        ],
        dtype=float,
    )
    scores = np.array([3.0, 2.0, 0.25, 0.5, 0.375, 0.125])
    data = DetectionData(
        scores[:, None].astype(np.float32),
        np.array([0, 3, 6]),
        boxes,
        np.array(["a", "b"]),
        (
            (boxes[:1], np.array([0]), np.array([False])),
            (boxes[3:4], np.array([0]), np.array([False])),
        ),
        "hand-made",
    )
    ids, kept, s = BagSet.in_memory(data).detections(np.ones(1), 1.0, 0.3)
    assert list(ids) == ["a", "a", "b", "b", "b"]
    assert list(s) == [4.0, 1.25, 1.5, 1.375, 1.125]
    assert np.array_equal(kept, boxes[[0, 2, 3, 4, 5]])
    # without NMS the duplicate in image a is a false positive ranked second: AP < 1
    assert voc_detection_ap(ids, kept, s, data.ground_truth(0)) == pytest.approx(1.0)
    assert voc_detection_ap(np.repeat(["a", "b"], 3), boxes, scores, data.ground_truth(0)) < 1.0


def test_rcnn_cache_directories_are_read_and_trained(tmp_path):
    # 8 images per split, 4 boxes each: the first box is the ground truth (class cat in
    # every other image, dog in the rest), its features pointing along the class's axis
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    for split in ("trainval", "test"):
        (tmp_path / split).mkdir()
        for i in range(8):
            cls = CLASSES.index("cat") if i % 2 else CLASSES.index("dog")
            boxes = np.array(
                [[10, 10, 60, 60], [12, 8, 58, 62], [100, 100, 150, 140], [200, 20, 260, 90]],
                dtype=float,
            )
            feat = rng.normal(size=(4, 3))
            feat[:2, 0 if cls == CLASSES.index("cat") else 1] += 3
            savemat(
                tmp_path / split / f"{split}_{i:02d}.mat",
                {
                    "boxes": boxes,
                    "feat": feat,
                    "gt": np.array([1, 0, 0, 0]),
                    "class": np.array([cls + 1, 0, 0, 0]),
                },
            )
    config = write_config(
        tmp_path / "c.yaml",
        classes=["cat"],
        methods=["0-1", "ap_qs"],
        data={s: str(tmp_path / s) for s in ("trainval", "test")},
    )
    out = tmp_path / "run"
    result = invoke("train", "--config", config, "--out", out)
    assert result.exit_code == 0, result.output
    assert "R-CNN .mat caches, 8 files" in result.output and "synthetic" not in result.output
    assert re.search(r"0-1 loss, ours\s+\|", result.output)
    assert pd.read_csv(out / "timings.csv")["n_boxes"].tolist() == [32, 32]


def test_latent_zero_one_svm_from_random_boxes_starts_at_w_zero():
    # The README's finding: at random positive boxes, the convex step of the latent 0-1 SVM
    # (bias feature, one outer step) is solved by w = 0 and bias -1, every image called
    # negative: the objective is 1/2 + C * 2P/n, and at w = 0 every box ties, so CCCP has no
    # direction to move the boxes. From the image-means boxes it learns the class.
    splits = make_voc2007_detection(0, scale=0.1, boxes_per_image=8, n_features=16)
    train = BagSet.in_memory(splits["trainval"])
    y = train.image_labels(CLASSES.index("car"))
    C = 1e4
    est = LatentRankSVM(loss="01", inference="zero_one", C=C, max_outer=1, min_outer=1)
    train.fit(est, y)
    assert np.linalg.norm(est.coef_) < 1e-9 and est.intercept_ == pytest.approx(-1, abs=1e-6)
    assert est.objective_curve_[0] == pytest.approx(0.5 + C * 2 * y.sum() / y.size, rel=1e-6)
    est.set_params(init=train.mean_difference_boxes(y))
    train.fit(est, y)
    assert np.linalg.norm(est.coef_) > 0.1
    assert voc.detection_ap(est, BagSet.in_memory(splits["test"]), "car", 0.3) > 0.4


def test_plot_redraws_the_figure_and_names_a_missing_file(tiny_run, tmp_path):
    import shutil

    out, _ = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".qsrank-run.lock"))
    for ext in ("png", "pdf"):
        (copy / f"figure.{ext}").unlink()
    result = invoke("plot", copy)
    assert result.exit_code == 0, result.output
    assert (copy / "figure.png").read_bytes().startswith(b"\x89PNG")
    assert (copy / "figure.pdf").read_bytes().startswith(b"%PDF")
    (copy / "timings.csv").unlink()
    (copy / "figure.png").unlink()
    result = invoke("plot", copy)
    assert result.exit_code == 1
    assert f"{copy / 'timings.csv'} is missing" in result.output
    assert not (copy / "figure.png").exists()


def test_lockstep_units_go_method_by_method():
    """A lockstep loss trains every class in its first unit: units in method order, so the
    run's progress counts the classes done; class by class otherwise."""
    for lockstep in (False, True):
        cfg = _runner.resolve(voc.SPEC, {"classes": ["cat", "dog"], "lockstep": lockstep, "C": 10})
        methods = voc_train.selected_methods(cfg)
        units = voc_train.units(cfg, None)
        assert sorted(units) == sorted((c, m) for c in ("cat", "dog") for m in methods)
        first = [m for _, m in units[:2]] if lockstep else [c for c, _ in units[: len(methods)]]
        assert len(set(first)) == 1, units

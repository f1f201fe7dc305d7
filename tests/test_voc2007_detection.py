"""The VOC2007 detection pipeline (Table 5): a tiny run through `qsrank train`, its tables
against its CSVs, identical weights of the exact AP methods, resuming after an interruption,
per-image NMS before detection AP, and config errors."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from cli.main import main
from pipelines import voc2007_detection as voc
from qs.data.voc2007 import CLASSES, DetectionData
from qs.metrics import voc_detection_ap

TINY = {"experiment": "voc2007_detection", "classes": ["aeroplane", "person"],
        "synthetic": {"scale": 0.01, "boxes_per_image": 6, "n_features": 8}}


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
        "table5.md", "results.csv", "timings.csv", "figure.png", "figure.pdf", "config.yaml",
        "provenance.json", "runs"}
    timings = pd.read_csv(out / "timings.csv")
    assert list(zip(timings["class"], timings["method"])) == [
        (c, m) for c in TINY["classes"] for m in voc.METHODS]
    assert (timings["lai_calls"] >= 1).all() and (timings["lai_time_s"] > 0).all()
    assert timings["test_ap"].between(0, 1).all()
    provenance = json.loads((out / "provenance.json").read_text())
    assert "not the paper's data" in provenance["data"] and provenance["seed"] == 0
    assert len(provenance["data_sha256"]) == 2


def _md_rows(text, first_cell):
    """The cells of the Markdown table rows whose first cell starts with `first_cell`."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]
    return [r for r in rows if r[0].startswith(first_cell)]


def test_table5_matches_the_csvs(tiny_run):
    out, _ = tiny_run
    md = (out / "table5.md").read_text()
    assert "0-1 loss, ours (synthetic)" in md and "AP loss, paper" in md
    results = pd.read_csv(out / "results.csv")
    timings = pd.read_csv(out / "timings.csv").set_index(["class", "method"])
    for _, row in results.iterrows():
        ap_row, lai_row = _md_rows(md, voc.CLASS_NAMES[row["class"]])
        assert ap_row[1:] == [f"{row[c]:.2f}" for c in ("ap_0-1", "ap_ap", "paper_ap_0-1",
                                                        "paper_ap_ap")]
        assert float(ap_row[1]) == pytest.approx(100 * timings.loc[(row["class"], "0-1"),
                                                                   "test_ap"], abs=5e-3)
        assert float(ap_row[3:5][0]) == voc.PAPER_AP[row["class"]][0]
        yue, qs, auto = (timings.loc[(row["class"], m), "lai_time_s"]
                         for m in ("ap", "ap_qs", "ap_auto"))
        assert lai_row[1:6] == [f"{yue:.4f}", f"{qs:.4f}", f"{auto:.4f}", f"{yue / qs:.1f}",
                                f"{yue / auto:.1f}"]
    (mean_ap,) = _md_rows(md, "**mean** (2 classes)")[:1]
    assert mean_ap[1] == f"{results['ap_0-1'].mean():.2f}"
    assert mean_ap[4] == f"{np.mean([voc.PAPER_AP[c][1] for c in TINY['classes']]):.2f}"
    (paper,) = _md_rows(md, "**paper**")
    assert paper[1:4] == ["7.6230", "0.5214", ""] and paper[4] == "14.6"


def test_exact_ap_methods_train_identical_weights(tiny_run):
    out, _ = tiny_run
    results = pd.read_csv(out / "results.csv")
    assert results["ap_models_identical"].all()
    assert "trained bit-identical weights for every one of the 2 classes" in \
        (out / "table5.md").read_text()
    for cls in TINY["classes"]:
        coefs = [np.load(out / "runs" / f"{cls}__{m}.npz")["coef"] for m in voc.AP_METHODS]
        assert all(np.array_equal(coefs[0], c) for c in coefs[1:])
        assert np.abs(coefs[0]).max() > 0


def test_table_says_when_ap_weights_differ(tiny_run):
    out, _ = tiny_run
    frame = pd.read_csv(out / "timings.csv")
    frame.loc[frame["method"] == "ap_auto", "w_sha256"] = "0" * 64
    line = voc._identical_line(voc.ap_table(frame))
    assert line.startswith("**Warning**") and "aeroplane, person" in line


def test_run_resumes_after_an_interruption(tiny_run, tmp_path, monkeypatch):
    reference, _ = tiny_run
    cfg = voc.load_config(write_config(tmp_path / "tiny.yaml"))
    out = tmp_path / "run"
    trained = []
    real = voc.train_one

    def stop_after_three(cfg, name, train, labels):
        if len(trained) == 3:
            raise KeyboardInterrupt
        trained.append(name)
        return real(cfg, name, train, labels)

    monkeypatch.setattr(voc, "train_one", stop_after_three)
    with pytest.raises(KeyboardInterrupt):
        voc.run(cfg, out, progress=False)
    assert len(list((out / "runs").glob("*.json"))) == 3
    assert not (out / "table5.md").exists()

    def count(cfg, name, train, labels):
        trained.append(name)
        return real(cfg, name, train, labels)

    trained.clear()
    monkeypatch.setattr(voc, "train_one", count)
    voc.run(cfg, out, progress=False)
    assert trained == ["ap_auto", *voc.METHODS]  # aeroplane's last, then person's four
    cols = ["class", "method", "test_ap", "w_sha256", "lai_calls"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "timings.csv")[cols],
                                  pd.read_csv(reference / "timings.csv")[cols])


def test_cli_filters_class_loss_and_inference(tmp_path):
    out = tmp_path / "run"
    result = invoke("train", "--config", write_config(tmp_path / "c.yaml"), "--class", "person",
                    "--loss", "ap", "--inference", "qs", "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == ["person__ap_qs.json"]
    assert "Only one AP method per class was trained" in result.output
    result = invoke("train", "--config", write_config(tmp_path / "c.yaml"), "--class", "person",
                    "--loss", "01", "--out", tmp_path / "zero_one")
    assert result.exit_code == 0, result.output
    assert "Total loss-augmented inference time" not in result.output


@pytest.mark.parametrize("changes, message", [
    ({"colour": 1}, r"unknown config key\(s\) 'colour'; allowed keys: experiment, seed, data"),
    ({"synthetic": {"size": 3}}, r"unknown config key\(s\) 'size' in 'synthetic'"),
    ({"classes": ["aeroplane", "zebra"]}, (r"unknown object class name\(s\) 'zebra' in classes; "
                                          r"known: aeroplane, bicycle")),
    ({"seed": "one"}, r"seed must be a finite integer >= 0; got 'one'"),
    ({"nms_threshold": 1.5}, r"nms_threshold must be an IoU in \[0, 1\]"),
    ({"synthetic": {"scale": 0}}, r"synthetic.scale must be a finite number > 0"),
    ({"C": {"ndcg": 1.0}}, r"unknown config key\(s\) 'ndcg' in 'C'"),
    ({"methods": "ap_search"}, r"unknown method name\(s\) 'ap_search'"),
    ({"data": 3}, r"data must be 'synthetic' or a mapping"),
    ({"scheduler": "threads"}, r"scheduler applies to data read from a store"),
    ({"min_outer": {"ap": 0}}, r"min_outer.ap must be a finite integer >= 1"),
    ({"blas_threads": 0}, r"blas_threads must be a finite integer >= 1"),
])
def test_bad_config_is_one_line_and_exit_1(tmp_path, changes, message):
    result = invoke("train", "--config", write_config(tmp_path / "bad.yaml", **changes),
                    "--out", tmp_path / "run")
    assert result.exit_code == 1, result.output
    assert re.search(message, result.output), result.output
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


def test_cli_loss_and_store_errors(tmp_path):
    config = write_config(tmp_path / "c.yaml")
    result = invoke("train", "--config", config, "--loss", "ndcg")
    assert result.exit_code == 1 and "loss must be one of 01, ap; got 'ndcg'" in result.output
    result = invoke("train", "--config", config, "--solver", "frank_wolfe")
    assert result.exit_code == 1 and "solver must be one of cutting_plane" in result.output
    store = write_config(tmp_path / "s.yaml", store=str(tmp_path / "boxes.zarr"))
    result = invoke("train", "--config", store, "--out", tmp_path / "run")
    assert result.exit_code == 1 and "not yet supported" in result.output


def test_class_without_positive_image_is_an_error(tmp_path, monkeypatch):
    real = voc.load_data

    def without_cows(cfg):  # every cow in trainval relabelled as a cat
        splits = real(cfg)
        train = splits["trainval"]
        cow, cat = CLASSES.index("cow"), CLASSES.index("cat")
        objects = tuple((b, np.where(c == cow, cat, c), d) for b, c, d in train.objects)
        splits["trainval"] = DetectionData(train.X, train.offsets, train.boxes,
                                           train.image_ids, objects, train.source)
        return splits

    monkeypatch.setattr(voc, "load_data", without_cows)
    result = invoke("train", "--config", write_config(tmp_path / "c.yaml"), "--class", "cow",
                    "--out", tmp_path / "run")
    assert result.exit_code == 1, result.output
    assert "class 'cow' has no positive image in trainval" in result.output
    assert not (tmp_path / "run").exists()


def test_detections_are_suppressed_per_image_before_ap():
    # two images of 3 boxes; image a: two overlapping boxes (IoU 0.9) on its object; image b:
    # its object at the same place, whose box NMS must keep (suppression is per image)
    boxes = np.array([[1, 1, 10, 10], [1, 1, 10, 9], [30, 30, 40, 40],
                      [1, 1, 10, 10], [50, 50, 60, 60], [70, 70, 80, 80]], dtype=float)
    data = DetectionData(np.zeros((6, 1), np.float32), np.array([0, 3, 6]), boxes,
                         np.array(["a", "b"]),
                         ((boxes[:1], np.array([0]), np.array([False])),
                          (boxes[3:4], np.array([0]), np.array([False]))), "hand-made")
    scores = np.array([3.0, 2.0, 0.2, 0.5, 0.4, 0.3])
    ids, kept, s = voc.detections(scores, data, 0.3)
    assert list(ids) == ["a", "a", "b", "b", "b"] and list(s) == [3.0, 0.2, 0.5, 0.4, 0.3]
    assert np.array_equal(kept, boxes[[0, 2, 3, 4, 5]])
    # without NMS the duplicate in image a is a false positive ranked second: AP < 1
    assert voc_detection_ap(ids, kept, s, data.ground_truth(0)) == pytest.approx(1.0)
    assert voc_detection_ap(np.repeat(["a", "b"], 3), boxes, scores,
                            data.ground_truth(0)) < 1.0


def test_rcnn_cache_directories_are_read_and_trained(tmp_path):
    # 8 images per split, 4 boxes each: the first box is the ground truth (class cat in
    # every other image, dog in the rest), its features pointing along the class's axis
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    for split in ("trainval", "test"):
        (tmp_path / split).mkdir()
        for i in range(8):
            cls = CLASSES.index("cat") if i % 2 else CLASSES.index("dog")
            boxes = np.array([[10, 10, 60, 60], [12, 8, 58, 62], [100, 100, 150, 140],
                              [200, 20, 260, 90]], dtype=float)
            feat = rng.normal(size=(4, 3))
            feat[:2, 0 if cls == CLASSES.index("cat") else 1] += 3
            savemat(tmp_path / split / f"{split}_{i:02d}.mat",
                    {"boxes": boxes, "feat": feat, "gt": np.array([1, 0, 0, 0]),
                     "class": np.array([cls + 1, 0, 0, 0])})
    config = write_config(tmp_path / "c.yaml", classes=["cat"], methods=["0-1", "ap_qs"],
                          data={s: str(tmp_path / s) for s in ("trainval", "test")})
    out = tmp_path / "run"
    result = invoke("train", "--config", config, "--out", out)
    assert result.exit_code == 0, result.output
    assert "R-CNN .mat caches, 8 files" in result.output and "synthetic" not in result.output
    assert re.search(r"0-1 loss, ours\s+\|", result.output)
    assert pd.read_csv(out / "timings.csv")["n_boxes"].tolist() == [32, 32]

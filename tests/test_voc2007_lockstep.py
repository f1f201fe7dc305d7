"""Table 5 with every class of a loss trained in lockstep (`lockstep: true`): the models and
test APs of the per-class run, from features in memory, generated block by block, or scored
on a dask.distributed cluster; a run resumed after an interruption says so and ends the same."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from qs.data.bags import BagSet
from qs.data.voc2007 import SyntheticVOC2007
from qsrank.main import main
from qsrank.pipelines.voc2007_detection import lockstep as voc_lockstep
from qsrank.pipelines.voc2007_detection.config import Config

SMALL = {
    "experiment": "voc2007_detection",
    "classes": ["aeroplane", "person"],
    "synthetic": {"scale": 0.01, "boxes_per_image": 6, "n_features": 8},
    "C": 100,
}
#: what a lockstep run shares with the per-class run (its repeats add LAI calls)
SAME = ["class", "method", "C", "n_images", "n_pos", "n_boxes", "n_outer", "test_ap", "w_sha256"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def train(tmp_path, name, *args, **changes):
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump({**SMALL, **changes}))
    out = tmp_path / name
    result = invoke("train", "--config", config, "--out", out, *args)
    assert result.exit_code == 0, result.output
    return out, result.output


def same_tables(out, reference):
    ours, ref = (pd.read_csv(d / "timings.csv") for d in (out, reference))
    pd.testing.assert_frame_equal(ours[SAME], ref[SAME])
    ours, ref = (pd.read_csv(d / "results.csv") for d in (out, reference))
    pd.testing.assert_frame_equal(ours.drop(columns="data"), ref.drop(columns="data"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lockstep")
    return {
        "per_class": train(root, "per_class")[0],
        "lockstep": train(root, "lockstep", lockstep=True, working_set=2)[0],
    }


def test_lockstep_trains_the_per_class_models(runs):
    """Weights (SHA-256), boxes' test APs and the tables of the per-class run, in a pass per
    round for all classes: far fewer passes than LAI calls."""
    same_tables(runs["lockstep"], runs["per_class"])
    timings = pd.read_csv(runs["lockstep"] / "timings.csv")
    assert (timings["passes"] < timings["lai_calls"] / 4).all()
    assert (timings["working_set"] == 2).all()
    summary = json.loads((runs["lockstep"] / "lockstep.json").read_text())
    assert set(summary) == {"01", "ap"}
    for loss, s in summary.items():
        assert (
            s["passes"] == len(s["pass_s"]) == timings.loc[timings["loss"] == loss, "passes"].max()
        )
        assert s["verify"] == "path" and s["peak_rss_gb"] > 0
        assert s["boxes"] == 50 * 6 and s["features"] == 8
        assert 0 < s["working_set_rows"] <= s["boxes"]
        row_bytes = (s["features"] + (loss == "01")) * 4  # float32, the 0-1 SVM's bias column
        assert s["working_set_gb"] == s["working_set_rows"] * row_bytes / 1e9
    table = (runs["lockstep"] / "lockstep.md").read_text().splitlines()
    assert len(table) == 4 and table[2].startswith(f"| 01 | {50 * 6:,} x 8 | ")


def test_generated_features_train_what_the_features_in_memory_train(runs, tmp_path):
    out, output = train(
        tmp_path,
        "generated",
        lockstep=True,
        working_set=2,
        synthetic={**SMALL["synthetic"], "generated": True, "chunk_images": 7},
    )
    same_tables(out, runs["lockstep"])
    text = " ".join(output.split())
    assert (
        "generated block by block from its seed on every pass (float32, blocks of 7 "
        "images) on Dask's threaded scheduler"
        in text
        and "Our numbers are synthetic" in text
    )


def test_generated_bag_set_holds_the_generator_images():
    gen = SyntheticVOC2007(3, 0.005, 5, 4)
    split = BagSet.generated(gen, "test", chunk_images=3)
    whole = gen.split_data("test")
    assert split.features.numblocks[0] == -(-split.n_images // 3)
    np.testing.assert_array_equal(np.asarray(split.features).reshape(-1, 4), whole.X)
    np.testing.assert_array_equal(split.boxes.reshape(-1, 4), whole.boxes)
    assert split.source == whole.source and "synthetic" in split.source
    for (b, c, d), (wb, wc, wd) in zip(split.objects, whole.objects):
        assert np.array_equal(b, wb) and np.array_equal(c, wc) and np.array_equal(d, wd)
    assert np.array_equal(split.labels, BagSet.in_memory(whole).labels)


def test_an_interrupted_lockstep_run_resumes_and_says_so(runs, tmp_path, monkeypatch):
    real = voc_lockstep.latent_lockstep

    def interrupted(*args, callback, **kwargs):
        def stop(state):
            callback(state)
            if state.passes == 3:
                raise KeyboardInterrupt

        return real(*args, callback=stop, **kwargs)

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "lockstep": True, "working_set": 2}))
    out = tmp_path / "run"
    monkeypatch.setattr(voc_lockstep, "latent_lockstep", interrupted)
    invoke("train", "--config", config, "--out", out)
    assert (out / "runs" / "lockstep__01.npz").exists()
    monkeypatch.setattr(voc_lockstep, "latent_lockstep", real)
    result = invoke("train", "--config", config, "--out", out)
    assert result.exit_code == 0, result.output
    assert re.search(
        r"lockstep 01: resuming from the stored state after pass 3 \(\d+ outer "
        r"steps\)",
        result.output,
    ), result.output
    same_tables(out, runs["lockstep"])
    summary = json.loads((out / "lockstep.json").read_text())
    assert summary["01"]["resumed"] == 1 and summary["ap"]["resumed"] == 0


@pytest.mark.parametrize("processes", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_local_cluster_of_two_workers_gives_the_same_tables(runs, tmp_path, processes):
    """Two workers in this process, or two worker processes (the features generated in each
    worker, the weights sent to them): the tables of the threaded scheduler."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        out, output = train(
            tmp_path,
            "cluster",
            "--scheduler",
            address,
            lockstep=True,
            working_set=2,
            synthetic={**SMALL["synthetic"], "generated": True},
        )
    assert f"on the Dask scheduler {address}" in " ".join(output.split())
    same_tables(out, runs["lockstep"])


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"lockstep": True, "C": [10, 100]},
            r"lockstep trains every class at once and needs one "
            r"C per loss",
        ),
        (
            {"store": {"trainval": "a.zarr", "test": "b.zarr"}, "synthetic": {"generated": True}},
            r"synthetic.generated applies to synthetic data only",
        ),
        ({"verify": "all"}, r"verify: expected one of path, step"),
    ],
)
def test_bad_lockstep_config_is_one_line(tmp_path, changes, message):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({**SMALL, **changes}))
    result = invoke("train", "--config", config, "--out", tmp_path / "run")
    assert result.exit_code == 1 and re.search(message, result.output), result.output
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "name", ["voc2007_large", "voc2007_xlarge", "voc2007_paper", "voc2007_full_images"]
)
def test_the_scale_configs_are_valid_and_shaped_like_cnn_features(name):
    """The configs of the runs at scale validate, generate CNN-like features in lockstep."""
    path = Path(__file__).resolve().parents[1] / "configs" / f"{name}.yaml"
    cfg = Config.model_validate(yaml.safe_load(path.read_text())).model_dump()
    assert cfg["lockstep"] and cfg["synthetic"]["generated"]
    assert cfg["synthetic"]["components"] > 0


def test_the_summary_table_shows_fields_an_older_entry_lacks_as_a_dash():
    """An entry of lockstep.json written before the boxes, features, working sets and peak
    memory were recorded gets a row with "-" in their cells (no projection: its features
    are unknown); a complete entry beside it keeps its numbers."""
    new = {
        "passes": 4,
        "resumed": 1,
        "boxes": 2000,
        "features": 4096,
        "pass_s": [1.0, 3.0],
        "train_s": 10.0,
        "test_s": 2.5,
        "working_set": 5,
        "verify": "step",
        "outer_steps": 6,
        "repeats": 2,
        "working_set_rows": 7,
        "working_set_gb": 0.25,
        "peak_rss_gb": 1.5,
    }
    old = {
        k: new[k]
        for k in (
            "passes",
            "resumed",
            "pass_s",
            "train_s",
            "test_s",
            "working_set",
            "verify",
            "outer_steps",
            "repeats",
        )
    }
    table = voc_lockstep._summary_table({"01": old, "ap": new}).splitlines()
    assert table[2] == "| 01 | - | 4 (1) | 6 | 2 | 10.0 | 2.00 | - | 2.5 | - | - |"
    assert table[3] == (
        "| ap | 2,000 x 4096 | 4 (1) | 6 | 2 | 10.0 | 2.00 | 1000.00 | 2.5 | 0.250 | 1.50 |"
    )
    assert len(table) == 4
    assert "At the mean rate" in voc_lockstep._summary_table({"ap": new})


def test_a_step_verified_run_resumes_from_its_constraints_or_from_a_state_without(
    tmp_path, monkeypatch
):
    """Interrupted in the middle of a repeated step, a step-verified run resumes from its
    stored constraints with the uninterrupted run's models (SHA-256); the same state stored
    without them (the earlier layout) resumes too, its repeat solved cold."""
    step = {"lockstep": True, "working_set": 1, "verify": "step"}
    reference, _ = train(tmp_path, "reference", **step)
    real = voc_lockstep.latent_lockstep

    def interrupted(*args, callback, **kwargs):
        def stop(state):
            callback(state)
            if any(c.constraints is not None for c in state.classes):
                raise KeyboardInterrupt

        return real(*args, callback=stop, **kwargs)

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**SMALL, **step}))
    out, cold = tmp_path / "run", tmp_path / "cold"
    monkeypatch.setattr(voc_lockstep, "latent_lockstep", interrupted)
    invoke("train", "--config", config, "--out", out)
    monkeypatch.setattr(voc_lockstep, "latent_lockstep", real)
    shutil.copytree(out, cold)
    stores = {}
    for store in sorted((cold / "runs").glob("lockstep__*.npz")):  # one per loss trained so far
        with np.load(store, allow_pickle=False) as stored:
            stores[store] = dict(stored)
    (path,) = [p for p, a in stores.items() if any(k.startswith("constraints_") for k in a)]
    arrays = stores[path]
    np.savez_compressed(
        path, **{k: v for k, v in arrays.items() if not k.startswith("constraints_")}
    )
    for run in (out, cold):
        result = invoke("train", "--config", config, "--out", run)
        assert result.exit_code == 0, result.output
        assert "resuming from the stored state" in result.output
    same_tables(out, reference)
    ours, ref = (pd.read_csv(d / "timings.csv") for d in (cold, reference))
    pd.testing.assert_frame_equal(
        ours[["class", "method", "n_pos"]], ref[["class", "method", "n_pos"]]
    )
    assert ours["test_ap"].between(0, 1).all()

"""The VOC2011 action pipeline (Mohapatra et al., CVPR 2018, Tables 1-4 and Figures 2-3) on tiny
subsamples of the synthetic data: its files and columns, identical weights across exact LAI methods,
resuming, settings changes, bad configs and data, and atomicity when a training fails."""

import json
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from qs.data import ACTIONS, cache_arrays, make_voc2011_actions
from qsrank.pipelines import _runner
from qsrank.pipelines import voc2011_actions as voc
from qsrank.pipelines._io import write_npz
from qsrank.pipelines.voc2011_actions import figures as voc_figures
from qsrank.pipelines.voc2011_actions import train as voc_train

run = partial(_runner.run, voc.SPEC)
resolve = partial(_runner.resolve, voc.SPEC)
figure_run = partial(_runner.run, voc.FIGURES)
load_config = partial(_runner.load_config, voc.SPEC)

CLASSES = ["phoning", "ridingbike"]
AP_METHODS = ["ap", "ap_qs", "ap_search"]
METHODS = ["0-1", *AP_METHODS, "ndcg", "ndcg_qs"]
TINY = {"max_boxes": 300, "classes": CLASSES, "methods": METHODS, "lai_repeats": 3}
TABLE_COLUMNS = {
    "table1": [
        "method",
        "lai_time_s",
        "lai_replay_median_s",
        "paper_lai_time_s",
        "lai_calls",
        "n_classes",
        "data",
    ],
    "table2": [
        "method",
        "ms_per_call",
        "ms_per_call_std",
        "paper_ms_per_call",
        "paper_ms_per_call_std",
        "n_classes",
        "data",
    ],
    "ratios": [
        "ratio",
        "total_time",
        "replay_median",
        "replay_min",
        "replay_max",
        "replay_rounds",
        "paper_total_time",
        "per_call",
        "paper_per_call",
        "data",
    ],
    "table3": ["class", "object_class", "ap_0-1", "ap_ap", "paper_ap_0-1", "paper_ap_ap", "data"],
    "table4": [
        "class",
        "object_class",
        "ndcg_0-1",
        "ndcg_ndcg",
        "paper_ndcg_0-1",
        "paper_ndcg_ndcg",
        "data",
    ],
}
TIMING_COLUMNS = [
    "class",
    "method",
    "loss",
    "inference",
    "solver",
    "C",
    "C_from",
    "n_train",
    "n_pos",
    "lai_calls",
    "lai_time_s",
    "lai_replay_median_s",
    "lai_ms_per_call",
    "n_iter",
    "converged",
    "test_ap",
    "test_ndcg",
    "cv_ap",
    "cv_ndcg",
    "train_s",
]


def config(**changes):
    return resolve({**TINY, **changes})


def read(path):
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


@pytest.fixture
def count_trainings(monkeypatch):
    """Count the calls of voc.train_one (each training)."""
    calls = []
    real = voc.train_one

    def counted(cfg, name, *args, **kwargs):
        calls.append(name)
        return real(cfg, name, *args, **kwargs)

    monkeypatch.setattr(voc_train, "train_one", counted)
    return calls


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("voc") / "run"
    return run(config(), out, progress=False)


def test_run_writes_tables_with_paper_columns(tiny_run):
    for name, columns in TABLE_COLUMNS.items():
        frame = read(tiny_run / f"{name}.csv")
        assert list(frame.columns) == columns, name
        assert frame["data"].str.startswith("Data: synthetic (seed 0)").all()
        text = (tiny_run / f"{name}.md").read_text() if name != "ratios" else ""
        if text:
            assert "Data: synthetic (seed 0)" in text and "ours (synthetic)" in text
    for name in ("summary.md", "config.yaml", "provenance.json"):
        assert (tiny_run / name).stat().st_size > 0
    assert not list(tiny_run.rglob(".*.tmp")), "temporary files left behind"
    t1 = read(tiny_run / "table1.csv").set_index("method")
    assert list(t1.index) == METHODS
    assert t1.loc["ap_qs", "paper_lai_time_s"] == 0.0625
    assert t1.loc["ndcg", "paper_lai_time_s"] == 6.8019
    assert (t1["lai_time_s"] > 0).all() and (t1["n_classes"] == 2).all()
    t2 = read(tiny_run / "table2.csv").set_index("method")
    assert t2.loc["ap", "paper_ms_per_call"] == 16.29
    assert t2.loc["ap_search", "paper_ms_per_call"] == 2.323
    ratios = read(tiny_run / "ratios.csv").set_index("ratio")
    assert ratios.loc["ap / ap_qs", "total_time"] == pytest.approx(
        t1.loc["ap", "lai_time_s"] / t1.loc["ap_qs", "lai_time_s"]
    )
    assert ratios.loc["ndcg / ndcg_qs", "paper_total_time"] == pytest.approx(6.8019 / 0.0473)
    t3 = read(tiny_run / "table3.csv")
    assert t3["class"].tolist() == CLASSES
    assert t3["paper_ap_ap"].tolist() == [32.630, 81.060]
    assert t3["ap_ap"].between(0, 100).all() and t3["ap_0-1"].between(0, 100).all()
    provenance = json.loads((tiny_run / "provenance.json").read_text())
    assert provenance["seed"] == 0 and "synthetic (seed 0)" in provenance["data"]


def test_ratios_are_replayed_medians_with_their_range(tiny_run):
    """Each training's LAI calls are replayed lai_repeats times; a ratio is the median over
    rounds of the round's mean totals, with its range, as replay.csv holds them."""
    replay = read(tiny_run / "replay.csv")
    timings = read(tiny_run / "timings.csv")
    assert len(replay) == 3 * len(timings) and (replay["lai_time_s"] > 0).all()
    per_round = replay.groupby(["method", "round"])["lai_time_s"].mean()
    ratio = per_round["ap"] / per_round["ap_qs"]
    r = read(tiny_run / "ratios.csv").set_index("ratio").loc["ap / ap_qs"]
    assert r["replay_rounds"] == 3
    assert (r["replay_median"], r["replay_min"], r["replay_max"]) == pytest.approx(
        (ratio.median(), ratio.min(), ratio.max())
    )
    medians = replay.groupby(["class", "method"], sort=False)["lai_time_s"].median()
    assert timings.set_index(["class", "method"])[
        "lai_replay_median_s"
    ].sort_index().tolist() == pytest.approx(medians.sort_index().tolist())
    text = (tiny_run / "table1.md").read_text()
    assert "replayed 3x (s)" in text and "replayed 3x: median (min-max)" in text
    assert f"{r['replay_median']:.1f} ({r['replay_min']:.1f}-{r['replay_max']:.1f})" in text


def test_no_replay_when_lai_repeats_is_0(tmp_path):
    out = run(
        config(lai_repeats=0, classes=["phoning"], methods=["ap", "ap_qs"]),
        tmp_path / "run",
        progress=False,
    )
    assert read(out / "replay.csv").empty
    assert "replayed" not in (out / "table1.md").read_text()


def test_timings_one_row_per_class_and_method(tiny_run):
    timings = read(tiny_run / "timings.csv")
    assert list(timings.columns) == TIMING_COLUMNS
    assert list(zip(timings["class"], timings["method"])) == [
        (c, m) for c in CLASSES for m in METHODS
    ]
    assert (timings["lai_calls"] == timings["n_iter"]).all()
    assert timings["lai_ms_per_call"].tolist() == pytest.approx(
        (1e3 * timings["lai_time_s"] / timings["lai_calls"]).tolist()
    )
    assert (timings["lai_time_s"] > 0).all() and (timings["lai_time_s"] < timings["train_s"]).all()
    assert set(timings["C"]) == {100.0, 1000.0, 10.0} and set(timings["C_from"]) == {"fixed"}
    assert timings["n_pos"].gt(0).all() and timings["n_train"].le(300).all()


def test_exact_ap_methods_train_the_same_weights(tiny_run):
    timings = read(tiny_run / "timings.csv").set_index(["class", "method"])
    for action in CLASSES:
        coefs = [np.load(tiny_run / "runs" / f"{action}__{m}.npz")["coef"] for m in AP_METHODS]
        assert np.abs(coefs[0]).max() > 0
        for coef in coefs[1:]:
            np.testing.assert_allclose(coef, coefs[0], rtol=1e-9, atol=1e-12)
        aps = [timings.loc[(action, m), "test_ap"] for m in AP_METHODS]
        assert aps == pytest.approx([aps[0]] * 3, abs=1e-12)
        calls = {timings.loc[(action, m), "lai_calls"] for m in AP_METHODS}
        assert len(calls) == 1
        ndcg = [
            np.load(tiny_run / "runs" / f"{action}__{m}.npz")["coef"] for m in ("ndcg", "ndcg_qs")
        ]
        np.testing.assert_allclose(ndcg[1], ndcg[0], rtol=1e-9, atol=1e-12)
    # and the 0-1 SVM really is another model
    assert not np.allclose(
        np.load(tiny_run / "runs" / "phoning__0-1.npz")["coef"],
        np.load(tiny_run / "runs" / "phoning__ap.npz")["coef"],
    )


def test_resume_skips_finished_runs_and_force_retrains(tiny_run, count_trainings):
    runs = sorted((tiny_run / "runs").glob("*.json"))
    assert len(runs) == len(CLASSES) * len(METHODS)
    before = {p: p.stat().st_mtime_ns for p in runs}
    run(config(), tiny_run, progress=False)
    assert count_trainings == []
    assert {p: p.stat().st_mtime_ns for p in runs} == before
    # a filtered run into the same directory: only phoning's ap_qs, tables still cover all
    run(
        config(classes=["phoning"], loss="ap", inference="qs", force=True), tiny_run, progress=False
    )
    assert count_trainings == ["ap_qs"]
    assert len(read(tiny_run / "timings.csv")) == len(CLASSES) * len(METHODS)


def test_changed_settings_retrain(tmp_path, count_trainings):
    out = run(config(classes=["phoning"], methods=["ap_qs"]), tmp_path, progress=False)
    assert count_trainings == ["ap_qs"]
    run(config(classes=["phoning"], methods=["ap_qs"], C=3.0), out, progress=False)
    assert count_trainings == ["ap_qs", "ap_qs"]
    timings = read(out / "timings.csv")
    assert timings["C"].tolist() == [3.0]  # the old record is not mixed into the tables


def test_failed_training_keeps_earlier_files(tmp_path, monkeypatch):
    out = run(config(classes=["phoning"], methods=["0-1", "ap_qs"]), tmp_path, progress=False)
    tables = {p.name: p.read_bytes() for p in out.glob("*.*")}
    real = voc.train_one
    calls = []

    def fail_second(cfg, name, *args, **kwargs):
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return real(cfg, name, *args, **kwargs)

    monkeypatch.setattr(voc_train, "train_one", fail_second)
    with pytest.raises(RuntimeError, match="boom"):
        run(config(classes=["phoning"], methods=["0-1", "ap_qs"], tol=1e-2), out, progress=False)
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["status"] == "interrupted: RuntimeError: boom"
    assert [c["status"] for c in provenance["commands"]] == ["complete", provenance["status"]]
    del tables["provenance.json"]
    assert {
        p.name: p.read_bytes() for p in out.glob("*.*") if p.name != "provenance.json"
    } == tables
    assert not list(out.rglob(".*.tmp"))
    # the first training of the failed run was kept and is not redone
    first = json.loads((out / "runs" / "phoning__0-1.json").read_text())
    assert first["settings"]["tol"] == 1e-2
    calls.clear()
    monkeypatch.setattr(
        voc_train,
        "train_one",
        lambda cfg, name, *a, **k: calls.append(name) or real(cfg, name, *a, **k),
    )
    run(config(classes=["phoning"], methods=["0-1", "ap_qs"], tol=1e-2), out, progress=False)
    assert calls == ["ap_qs"]


def test_trainings_stopped_early_warn_and_are_marked(tmp_path):
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="stopped at max_iter=2"):
        out = run(
            config(classes=["phoning"], methods=["0-1", "ap_qs", "ndcg_qs"], max_iter=2, tol=0.0),
            tmp_path / "run",
            progress=False,
        )
    table1 = (out / "table1.md").read_text()
    for method in ("0-1", "ap_qs", "ndcg_qs"):
        assert f"| {method} † " in table1
    assert "†: 3 trainings stopped at the iteration cap before converging" in table1
    row = next(
        line
        for line in (out / "table3.md").read_text().splitlines()
        if line.startswith("| Phoning")
    )
    assert row.count("†") == 2
    # converged trainings are not marked, and no note is added
    clean = run(
        config(classes=["phoning"], methods=["0-1", "ap_qs"]), tmp_path / "clean", progress=False
    )
    assert "†" not in (clean / "table1.md").read_text()


def test_cv_chooses_C_from_the_grid_and_resumes(tmp_path, count_trainings):
    cv = {"folds": 2, "grid": {"01": [1.0, 10.0], "ap": [1.0, 10.0], "ndcg": [1.0]}}
    cfg = config(max_boxes=200, classes=["ridingbike"], methods=["0-1", "ap_qs"], C="cv", cv=cv)
    out = run(cfg, tmp_path, progress=False)
    timings = read(out / "timings.csv")
    assert set(timings["C"]) <= {1.0, 10.0} and set(timings["C_from"]) == {"cv"}
    assert timings["cv_ap"].between(0, 1).all() and timings["cv_ndcg"].between(0, 1).all()
    record = json.loads((out / "runs" / "cv-ridingbike__ap.json").read_text())
    assert record["C"] == record["grid"][int(np.argmax(record["mean_test_ap"]))]
    assert "5-fold" not in (out / "table1.md").read_text()
    run(cfg, out, progress=False)
    assert count_trainings == ["0-1", "ap_qs"]


def test_forced_cv_runs_once_per_class_and_loss(tmp_path, monkeypatch):
    # ap and ap_qs share the AP loss, hence one cross-validation, even when forced
    calls = []
    real = voc.cross_validate
    monkeypatch.setattr(
        voc_train, "cross_validate", lambda cfg, loss, *a: calls.append(loss) or real(cfg, loss, *a)
    )
    cv = {"folds": 2, "grid": {"01": [1.0], "ap": [1.0, 10.0], "ndcg": [1.0]}}
    cfg = config(
        max_boxes=200, classes=["ridingbike"], methods=["ap", "ap_qs"], C="cv", cv=cv, force=True
    )
    run(cfg, tmp_path, progress=False)
    run(cfg, tmp_path, progress=False)
    assert calls == ["ap", "ap"]


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"colour": 1}, "^unknown config key 'colour'; allowed keys: experiment, seed, data"),
        ({"cv": {"folds": 5, "gird": {}}}, "^unknown config key 'cv.gird'; allowed keys in 'cv'"),
        (
            {"classes": ["phoning", "dancing"]},
            "^classes.1: expected one of jumping, .*; got 'dancing'$",
        ),
        ({"methods": ["ap_fast"]}, "^methods.0: expected one of 0-1, ap, .*; got 'ap_fast'$"),
        ({"methods": ["ap"], "loss": "ndcg"}, r"^no method of \['ap'\] has loss 'ndcg'$"),
        (
            {"C": -1},
            "^C: expected a value > 0 or a mapping or 'cv'; got -1$",
        ),
        ({"C": {"ap": 1.0, "auc": 2.0}}, "^C.auc: expected one of 01, ap, ndcg; got 'auc'$"),
        ({"C": {"ap": 0}}, "^C.ap: expected a value > 0; got 0$"),
        ({"data": "/nowhere/list.txt"}, "^data: expected 'synthetic' or a mapping"),
        ({"features_dir": "/x"}, "^features_dir applies to list-file data only"),
        ({"solver": "adam"}, "^solver: expected one of .*; got 'adam'$"),
        ({"experiment": "digits"}, "^experiment: expected 'voc2011_actions'; got 'digits'$"),
        (
            {"figures": {"vary": "both"}},
            "^figures.vary: expected one of total, negatives, positives",
        ),
        (
            {"figures": {"preset": "huge"}},
            "^figures.preset: expected one of paper, quick; got 'huge'$",
        ),
        ({"figures": {"class_": "phoning"}}, "^unknown config key 'figures.class_'"),
        (
            {"figures": {"presets": {"mine": {"total": {"fixed": 3, "values": [4]}}}}},
            r"^figures.presets: expected .*; got mine.total: \{'fixed': 3, 'values': \[4\]\}$",
        ),
        (
            {
                "figures": {
                    "presets": {"quick": {"total": {"values": [1]}}},
                    "preset": "quick",
                    "vary": "total",
                }
            },
            "every total must leave at least one negative",
        ),
    ],
)
def test_bad_config_is_a_clear_value_error(changes, match):
    with pytest.raises(ValueError, match=match):
        config(**changes)


def test_load_config_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("experiment: voc2011_actions\nseeed: 3\n")
    with pytest.raises(ValueError, match=r"config .*bad.yaml: unknown config key.*'seeed'"):
        load_config(path)
    assert load_config() == resolve({})


def test_repository_config_sets_only_the_experiment():
    path = Path(__file__).resolve().parents[1] / "configs" / "voc2011_actions.yaml"
    text = path.read_text()
    assert text.startswith("# `make reproduce-table1`") and "Table 4" in text
    assert yaml.safe_load(text) == {"experiment": "voc2011_actions"}
    assert load_config(path) == resolve({})


def test_class_without_positives_fails_before_writing(tmp_path):
    # 8 boxes: some action has no positive among them
    out = run(config(classes=["phoning"], methods=["ap_qs"]), tmp_path, progress=False)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    missing = next(
        a
        for a in ACTIONS
        if voc.load_data(config(max_boxes=8))["trainval"].targets(a)[0].sum() == 0
    )
    with pytest.raises(ValueError, match=f"class '{missing}' has no positive box"):
        run(config(max_boxes=8, classes=[missing]), out, progress=False)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_missing_list_or_feature_file(tmp_path):
    with pytest.raises(ValueError, match="Cannot read the poselet list file"):
        run(
            config(data={"trainval": str(tmp_path / "no.txt"), "test": str(tmp_path / "no.txt")}),
            tmp_path / "out",
        )
    listing = tmp_path / "list.txt"
    listing.write_text("1\n0 2 img1 1\n1 2 30 40 1 2\n2\n")
    with pytest.raises(ValueError, match=r"Missing or unreadable feature file .*img1_1.feature"):
        run(config(data={"trainval": str(listing), "test": str(listing)}), tmp_path / "out")
    with pytest.raises(ValueError, match="does not exist"):
        run(
            config(data={"trainval": str(tmp_path / "c.npz"), "test": str(tmp_path / "c.npz")}),
            tmp_path / "out",
        )
    assert not (tmp_path / "out").exists()


def test_npz_cache_data(tmp_path):
    splits = make_voc2011_actions(0)
    paths = {}
    for split, data in splits.items():
        paths[split] = str(tmp_path / f"{split}.npz")
        write_npz(paths[split], cache_arrays(data))
    out = run(
        config(data=paths, classes=["phoning"], methods=["ap_qs"]), tmp_path / "run", progress=False
    )
    via_cache = read(out / "timings.csv")
    direct = run(
        config(classes=["phoning"], methods=["ap_qs"]), tmp_path / "direct", progress=False
    )
    assert via_cache["test_ap"].tolist() == read(direct / "timings.csv")["test_ap"].tolist()
    assert "synthetic (seed 0)" in (out / "table1.md").read_text()


# ---------------------------------------------------------------------------- figures

FIG = {"preset": "quick", "repeats": 1}


def test_figure_run_writes_curves_and_resumes(tmp_path, count_trainings, capsys):
    out = tmp_path / "fig"
    for vary in ("negatives", "positives"):
        figure_run(config(figures={**FIG, "vary": vary, "loss": "ap"}), out, progress=False)
    timings = read(out / "timings.csv")
    assert list(timings.columns) == voc_figures.FIGURE_COLUMNS
    spec = voc.FIGURE_PRESETS["quick"]
    assert len(timings) == 2 * 2 * 4 == len(count_trainings)
    assert set(timings["method"]) == {"0-1", "ap", "ap_qs", "ap_search"}
    neg = timings[timings["vary"] == "negatives"]
    assert set(neg["n_pos"]) == {spec["negatives"]["fixed"]}
    assert sorted(set(neg["n_neg"])) == spec["negatives"]["values"]
    assert (timings["lai_time_s"] > 0).all()
    for name in ("figure.png", "figure.pdf", "summary.md", "config.yaml", "provenance.json"):
        assert (out / name).stat().st_size > 0
    summary = (out / "summary.md").read_text()
    assert "Figure 2 (ap), varying the negatives" in summary and "synthetic" in summary
    figure_run(config(figures={**FIG, "vary": "negatives", "loss": "ap"}), out)
    assert len(count_trainings) == 16  # resumed: nothing retrained
    assert "figure negatives: up to date: all 8 points done" in capsys.readouterr().err
    # same-size trainings of the exact AP methods agree
    agree = timings[timings["method"].isin(["ap", "ap_qs", "ap_search"])]
    assert agree.groupby(["vary", "n_pos", "n_neg"])["lai_calls"].nunique().eq(1).all()


def test_figure_sizes_beyond_the_data(tmp_path):
    big = {"presets": {"quick": {"negatives": {"fixed": 10, "values": [10**6]}}}}
    with pytest.raises(ValueError, match="but the trainval boxes hold .*trainval\\+test"):
        figure_run(config(figures={**FIG, **big}), tmp_path / "fig", progress=False)
    assert not (tmp_path / "fig").exists()


def test_figure_sizes():
    cfg = resolve({"figures": {"vary": "total"}})
    assert voc.figure_sizes(cfg)[-1] == (227, 2270)
    cfg = resolve({"figures": {"vary": "positives"}})
    assert voc.figure_sizes(cfg) == [(p, 200) for p in (25, 50, 100, 150, 227)]
    assert voc.figure_methods(resolve({"figures": {"loss": "ndcg"}})) == ["0-1", "ndcg", "ndcg_qs"]


def test_ratios_use_the_classes_both_methods_have():
    frame = pd.DataFrame(
        {
            "class": ["phoning", "running", "phoning"],
            "method": ["ap", "ap", "ap_qs"],
            "lai_time_s": [1.0, 100.0, 0.1],
            "lai_ms_per_call": [2.0, 50.0, 0.5],
            "lai_replay_s": [[1.0, 2.0, 1.0], [100.0, 100.0, 100.0], [0.1, 0.4, 0.2]],
        }
    )
    row = voc.ratios(frame).set_index("ratio").loc["ap / ap_qs"]
    assert row["total_time"] == pytest.approx(10.0) and row["per_call"] == pytest.approx(4.0)
    # rounds of phoning alone: 10, 5, 5
    assert (row["replay_median"], row["replay_min"], row["replay_max"]) == pytest.approx(
        (5.0, 5.0, 10.0)
    )
    assert row["paper_total_time"] == pytest.approx(0.7154 / 0.0625)


def test_plot_redraws_a_figure_run_and_says_a_table_run_has_none(tiny_run, tmp_path):
    from click.testing import CliRunner

    from qsrank.main import main

    out = tmp_path / "fig"
    figure_run(config(figures={**FIG, "vary": "negatives", "loss": "ap"}), out, progress=False)
    for ext in ("png", "pdf"):
        (out / f"figure.{ext}").unlink()
    result = CliRunner().invoke(main, ["plot", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "figure.png").read_bytes().startswith(b"\x89PNG")
    result = CliRunner().invoke(main, ["plot", str(tiny_run)])
    assert result.exit_code == 1
    assert "Tables 1-4, which have no figure" in result.output
    assert "qsrank bench --experiment voc2011_actions" in result.output

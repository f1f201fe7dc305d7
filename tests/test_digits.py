"""The digits pipeline: a reduced run's files and numbers, the split, and config checking."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import average_precision_score

from qs.estimators import RankSVM
from qsrank.pipelines import _runner, digits

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "digits.yaml"


def load_config(path=None, sets=None, /, **overrides):
    return _runner.load_config(digits.SPEC, path, sets, **overrides)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """Two digits, the AP-SVM's C by 2-fold CV over two values, the others fixed."""
    cfg = load_config(
        classes=[3, 8],
        max_iter=60,
        tol=1e-2,
        C={"ap_svm": "cv", "zero_one_svm": 10.0, "linear_svc": 10.0},
        cv={"folds": 2, "grid": {"ap_svm": [1.0, 10.0]}},
    )
    out = tmp_path_factory.mktemp("digits") / "run"
    return cfg, _runner.run(digits.SPEC, cfg, out, progress=False)


def test_run_writes_its_files(small_run):
    cfg, out = small_run
    names = {p.name for p in out.iterdir()}
    assert names == {
        "table.csv",
        "table.md",
        "runs.csv",
        "config.yaml",
        "provenance.json",
        "qsrank-run.json",
        ".qsrank-run.lock",
        "runs",
    }
    assert len(list((out / "runs").glob("*.json"))) == 2 * len(digits.METHODS)
    assert yaml.safe_load((out / "config.yaml").read_text()) == cfg
    record = json.loads((out / "provenance.json").read_text())
    assert record["seed"] == 0
    assert record["data"].startswith("scikit-learn load_digits (1797 images, 8x8, real data)")


def test_rerun_resumes_and_a_changed_key_retrains(small_run, tmp_path):
    cfg, out = small_run
    stamp = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    table = (out / "table.md").read_text()
    _runner.run(digits.SPEC, cfg, out, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == stamp
    assert (out / "table.md").read_text() == table  # rebuilt from the stored records
    # a new key value retrains every unit; a new digit only its own
    copy = tmp_path / "run"
    _runner.run(digits.SPEC, {**cfg, "classes": [3]}, copy, progress=False)
    first = {p.name: p.stat().st_mtime_ns for p in (copy / "runs").iterdir()}
    _runner.run(digits.SPEC, {**cfg, "classes": [3, 8]}, copy, progress=False)
    after = {p.name: p.stat().st_mtime_ns for p in (copy / "runs").iterdir()}
    assert all(after[name] == first[name] for name in first) and len(after) == 6
    _runner.run(digits.SPEC, {**cfg, "classes": [3], "tol": 0.05}, copy, progress=False)
    assert all((copy / "runs" / n).stat().st_mtime_ns != first[n] for n in first)


def test_table_values_and_mean_row(small_run):
    _, out = small_run
    table = pd.read_csv(out / "table.csv", dtype={"digit": str})
    assert list(table.columns) == ["digit", "ap_svm", "zero_one_svm", "linear_svc"]
    assert list(table["digit"]) == ["3", "8", "mean"]
    values = table[list(digits.METHODS)].to_numpy()
    assert np.all((values > 0) & (values <= 1))
    runs = pd.read_csv(out / "runs.csv")
    for name in digits.METHODS:
        assert table[name].iloc[-1] == pytest.approx(
            runs.loc[runs.method == name, "test_ap"].mean()
        )
        assert table[name].iloc[-1] == pytest.approx(table[name].iloc[:-1].mean())
    md = _runner.report(digits.SPEC, out)
    assert "| mean " in md and f"{table['ap_svm'].iloc[-1]:.4f}" in md


def test_runs_record_C_choice_and_lai(small_run):
    _, out = small_run
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 2 * len(digits.METHODS)
    ap = runs[runs.method == "ap_svm"]
    assert set(ap.C) <= {1.0, 10.0} and set(ap.C_from) == {"2-fold cv"}
    assert set(runs[runs.method == "zero_one_svm"].C) == {10.0}
    svm = runs[runs.method != "linear_svc"]
    assert np.all(svm.lai_calls >= 1) and np.all(svm.lai_time_s > 0)
    assert runs[runs.method == "linear_svc"].lai_calls.isna().all()
    linear = runs[runs.method == "linear_svc"]
    assert linear.converged.all() and (linear.n_iter < 10_000).all()


def test_table_matches_a_fit_by_hand(small_run):
    # the 0-1 SVM at its fixed C, trained and scored outside the pipeline on the same split
    cfg, out = small_run
    X_train, X_test, y_train, y_test, _ = digits.load_data(cfg)
    est = RankSVM(loss="01", inference="zero_one", C=10.0, tol=1e-2, max_iter=60)
    est.fit(X_train, y_train == 8)
    expected = average_precision_score(y_test == 8, est.decision_function(X_test))
    table = pd.read_csv(out / "table.csv", dtype={"digit": str}).set_index("digit")
    assert table.loc["8", "zero_one_svm"] == pytest.approx(expected, rel=1e-9)


def test_split_is_seeded_stratified_and_scaled_on_train():
    cfg = load_config()
    X_train, X_test, y_train, y_test, note = digits.load_data(cfg)
    assert X_train.shape == (898, 64) and X_test.shape == (899, 64)
    assert np.abs(np.bincount(y_train) - np.bincount(y_test)).max() <= 1
    np.testing.assert_allclose(X_train.mean(axis=0), 0.0, atol=1e-12)
    assert np.abs(X_test.mean(axis=0)).max() > 1e-3  # scaled with the train half's statistics
    again = digits.load_data(cfg)
    np.testing.assert_array_equal(again[0], X_train)
    other = digits.load_data(load_config(seed=1))
    assert not np.array_equal(other[2], y_train)
    assert "898 train / 899 test" in note


def test_classes_given_as_text_are_digits():
    assert load_config(classes=["3", "8"])["classes"] == [3, 8]


def test_shipped_config_loads():
    cfg = load_config(CONFIG)
    assert cfg["experiment"] == "digits" and cfg["classes"] == list(range(10))
    assert cfg["C"] == dict.fromkeys(digits.METHODS, "cv")


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"epochs": 3}, r"^unknown config key 'epochs'; allowed keys: experiment, seed"),
        ({"C": {"ap_svm": 1.0, "svc": 1.0}}, r"^unknown config key 'C.svc'; allowed keys in 'C'"),
        ({"cv": {"grid": {"rbf": [1.0]}}}, r"'cv.grid.rbf'; allowed keys in 'cv.grid'"),
        ({"experiment": "scaling"}, "^experiment: expected 'digits'; got 'scaling'$"),
        ({"classes": [3, 10]}, r"^classes.1: expected a value <= 9; got 10$"),
        ({"classes": []}, r"^classes: expected a list of 1 or more; got \[\]$"),
        ({"classes": ["three"]}, "^classes.0: expected an integer; got 'three'$"),
        ({"classes": [True]}, "^classes.0: expected an integer; got True$"),
        ({"classes": [3, 3]}, r"^classes: expected no repeated entries; got \[3, 3\]$"),
        ({"test_size": 1.0}, r"^test_size: expected a value < 1; got 1.0$"),
        ({"scaler": "robust"}, "^scaler: expected one of standard, minmax; got 'robust'$"),
        ({"inference": "chakrabarti"}, "^inference: expected one of .*; got 'chakrabarti'$"),
        ({"C": {"ap_svm": -1}}, "^C.ap_svm: expected a value > 0 or 'cv'; got -1$"),
        ({"C": 5}, "^C: expected a mapping of keys; got 5$"),
        ({"seed": True}, "^seed: expected an integer; got True$"),
        ({"cv": {"folds": 1}}, "^cv.folds: expected a value >= 2; got 1$"),
        (
            {"cv": {"grid": {"linear_svc": []}}},
            "^cv.grid.linear_svc: expected a list of 1 or more; got \\[\\]$",
        ),
        (
            {"cv": {"grid": {"linear_svc": [1, -2]}}},
            "^cv.grid.linear_svc.1: expected a value > 0; got -2$",
        ),
    ],
)
def test_bad_config_is_rejected(overrides, match):
    with pytest.raises(ValueError, match=match):
        load_config(**overrides)


def test_config_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("experiment: digits\nlearning_rate: 0.1\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: unknown config key 'learning_rate'"):
        load_config(path)


def test_set_overrides_lay_over_the_file():
    cfg = load_config(CONFIG, {"C": {"ap_svm": 10}, "cv": {"folds": 3}})
    assert cfg["C"] == {"ap_svm": 10, "zero_one_svm": "cv", "linear_svc": "cv"}
    assert (
        cfg["cv"]["folds"] == 3
        and cfg["cv"]["grid"] == _runner.resolve(digits.SPEC, {})["cv"]["grid"]
    )
    with pytest.raises(ValueError, match=r"in --set: unknown config key 'C.svc'"):
        load_config(CONFIG, {"C": {"svc": 1}})


def test_linear_svc_c_is_on_the_rank_svms_scale():
    # C weighs the mean squared hinge: liblinear's C divided by the number of samples
    from sklearn.svm import LinearSVC

    X, _, y, _, _ = digits.load_data(load_config())
    y = y == 1
    ours = digits.MeanLossLinearSVC(C=10.0, tol=1e-8, max_iter=100_000).fit(X, y)
    plain = LinearSVC(C=10.0 / X.shape[0], tol=1e-8, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, plain.coef_, rtol=1e-5, atol=1e-7)
    assert digits.Grids().linear_svc == digits.Grids().ap_svm == digits.Grids().zero_one_svm


def test_fits_stopped_early_warn_and_are_marked(tmp_path):
    from sklearn.exceptions import ConvergenceWarning

    cfg = load_config(
        classes=[3],
        max_iter=2,
        tol=0.0,
        C={"ap_svm": 10.0, "zero_one_svm": 10.0, "linear_svc": 10.0},
    )
    with pytest.warns(ConvergenceWarning, match="stopped at max_iter=2"):
        out = _runner.run(digits.SPEC, cfg, tmp_path / "run", progress=False)
    md = (out / "table.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| 3 "))
    assert row.count("†") == 2  # the two RankSVMs; LinearSVC converged
    assert "†: 2 fits stopped at the iteration cap before converging" in md


def test_plot_draws_a_digits_run_as_bars_of_its_table(small_run, tmp_path):
    import shutil

    from click.testing import CliRunner

    from qsrank.main import main

    _, out = small_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    result = CliRunner().invoke(main, ["plot", str(copy)])
    assert result.exit_code == 0, result.output
    assert result.output.split() == [str(copy / "figure.png"), str(copy / "figure.pdf")]
    assert (copy / "figure.png").stat().st_size > 0
    (copy / "table.csv").unlink()
    result = CliRunner().invoke(main, ["plot", str(copy)])
    assert result.exit_code == 1 and "table.csv is missing" in result.output

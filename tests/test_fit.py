"""`qsrank fit`, `predict`, `evaluate` on a researcher's own files: the readers give back the
arrays written, one-vs-rest models match RankSVMs fitted directly, CV picks the C a direct
loop picks, the metrics match scikit-learn's, and every bad input is one line, exit 1, and
nothing written."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.io
from click.testing import CliRunner
from sklearn.datasets import dump_svmlight_file
from sklearn.metrics import (
    average_precision_score,
    ndcg_score,
    precision_recall_curve,
    roc_auc_score,
)
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

from qs.data.tables import read_labels, read_table
from qs.estimators import RankSVM
from qs.metrics import average_precision
from qs.ssvm import SOLVERS
from qsrank.main import main
from qsrank.pipelines import fit as pipeline
from qsrank.pipelines.model import model_digest, read_model, write_model
from qsrank.pipelines.scoring import evaluate

NAMES = ["alpha", "beta", "gamma", "delta"]


def data(n=60, d=4, classes=("a", "b"), seed=0):
    """Features that separate the classes somewhat, labels cycling over `classes`."""
    rng = np.random.default_rng(seed)
    y = np.array([classes[k % len(classes)] for k in range(n)])
    X = rng.normal(size=(n, d)) + (np.searchsorted(sorted(classes), y)[:, None] == np.arange(d))
    return X, y


def write_csv(path, X, y, names=NAMES, sep=","):
    frame = pd.DataFrame(X, columns=names[: X.shape[1]]).assign(label=y)
    frame.to_csv(path, index=False, sep=sep)
    return path


def qsrank(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, *words):
    """Exit 1 with one line that holds every word."""
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for word in words:
        assert str(word) in lines[0], (word, lines[0])


# ---------------------------------------------------------------------------- readers


@pytest.mark.parametrize("suffix,sep", [(".csv", ","), (".tsv", "\t")])
def test_table_reader_round_trip(tmp_path, suffix, sep):
    X, y = data()
    table = read_table(write_csv(tmp_path / f"f{suffix}", X, y, sep=sep), label_column="label")
    np.testing.assert_array_equal(table.X, X)
    np.testing.assert_array_equal(table.y, y)
    assert table.feature_names == NAMES
    np.testing.assert_array_equal(read_labels(tmp_path / f"f{suffix}", label_column="label"), y)
    unlabelled = read_table(tmp_path / f"f{suffix}", label_column="label", labels=False)
    assert unlabelled.y is None and unlabelled.X.shape == X.shape


def test_parquet_reader_round_trip(tmp_path):
    pytest.importorskip("pyarrow")
    X, y = data()
    path = tmp_path / "f.parquet"
    pd.DataFrame(X, columns=NAMES).assign(label=y).to_parquet(path)
    table = read_table(path, label_column="label")
    np.testing.assert_array_equal(table.X, X)
    np.testing.assert_array_equal(table.y, y)
    assert table.feature_names == NAMES


def test_svmlight_npz_mat_readers_round_trip(tmp_path):
    X, _ = data()
    y = np.tile([1, -1, 2], 20)
    dump_svmlight_file(X, y, str(tmp_path / "f.svm"))
    np.savez(tmp_path / "f.npz", X=X, y=y)
    scipy.io.savemat(tmp_path / "f.mat", {"X": X, "y": y})
    for name in ("f.svm", "f.npz", "f.mat"):
        table = read_table(tmp_path / name)
        dense = table.X.toarray() if hasattr(table.X, "toarray") else table.X
        np.testing.assert_allclose(dense, X, rtol=1e-15)
        np.testing.assert_array_equal(table.y, y)
        assert table.y.dtype.kind == "i", name  # svmlight's 1.0 is class 1
        assert table.feature_names is None
    assert read_table(tmp_path / "f.npz", labels=False).y is None


def test_npz_with_pickled_objects_is_refused(tmp_path):
    np.savez(tmp_path / "f.npz", X=np.array([[1, "a"]], dtype=object), y=np.array([1]))
    with pytest.raises(ValueError, match="f.npz"):
        read_table(tmp_path / "f.npz")


# ---------------------------------------------------------------------------- fit


def test_multiclass_one_vs_rest_matches_rank_svms_and_predict_scores(tmp_path):
    X, y = data(n=90, classes=("cat", "dog", "eel"))
    X_test, y_test = data(n=45, classes=("cat", "dog", "eel"), seed=1)
    train = write_csv(tmp_path / "train.csv", X, y)
    test = write_csv(tmp_path / "test.csv", X_test, y_test)
    result = qsrank(
        "fit",
        train,
        "--test",
        test,
        "--label-column",
        "label",
        "--C",
        "1",
        "--baseline-C",
        "1",
        "--out",
        tmp_path / "run",
    )
    assert result.exit_code == 0, result.output
    model = read_model(tmp_path / "run")
    assert model.meta["classes"] == ["cat", "dog", "eel"]
    assert model.meta["feature_names"] == NAMES
    scaler = StandardScaler().fit(X)
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert set(metrics["class"]) == {"cat", "dog", "eel"}
    assert set(metrics["method"]) == set(pipeline.METHODS)
    expected = np.column_stack(
        [
            RankSVM(loss="ap", C=1.0)
            .fit(scaler.transform(X), y == c)
            .decision_function(scaler.transform(X_test))
            for c in ("cat", "dog", "eel")
        ]
    )
    assert (
        qsrank(
            "predict", tmp_path / "run" / "model.json", test, "--out", tmp_path / "scores.csv"
        ).exit_code
        == 0
    )
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert list(scores.columns) == ["cat", "dog", "eel"]
    np.testing.assert_allclose(scores.to_numpy(), expected, rtol=1e-9, atol=1e-9)
    ap = metrics.set_index(["class", "method"])["ap"]
    for k, c in enumerate(("cat", "dog", "eel")):
        assert ap[c, "rank_svm"] == pytest.approx(average_precision(y_test == c, expected[:, k]))


def test_binary_takes_the_larger_class_or_pos_label_and_resumes(tmp_path):
    X, y = data(classes=(0, 1))
    train = write_csv(tmp_path / "t.csv", X, y)
    args = ["fit", train, "--label-column", "label", "--C", "1", "--baseline-C", "1"]
    assert qsrank(*args, "--out", tmp_path / "a").exit_code == 0
    assert read_model(tmp_path / "a").meta["classes"] == [1]
    assert qsrank(*args, "--pos-label", "0", "--out", tmp_path / "b").exit_code == 0
    assert read_model(tmp_path / "b").meta["classes"] == [0]
    again = qsrank(*args, "--pos-label", "0", "--out", tmp_path / "b")
    assert again.exit_code == 0 and "fit: up to date" in again.output
    one_line_error(qsrank(*args, "--pos-label", "7", "--out", tmp_path / "c"), "no class '7'")


def test_cv_picks_the_c_a_direct_loop_picks():
    X, y = data(n=80, d=4)
    X = StandardScaler().fit_transform(X)
    is_b = y == "b"
    cfg = {**pipeline.Config().model_dump(), "cv_folds": 4, "seed": 3}
    grid = [0.001, 0.1, 10.0]
    _, chosen, best = pipeline.tune(cfg, pipeline.estimator(cfg, "rank_svm"), grid, X, is_b)
    folds = list(StratifiedKFold(4, shuffle=True, random_state=3).split(X, is_b))
    means = [
        np.mean(
            [
                average_precision(
                    is_b[te], RankSVM(C=C).fit(X[tr], is_b[tr]).decision_function(X[te])
                )
                for tr, te in folds
            ]
        )
        for C in grid
    ]
    assert chosen == grid[int(np.argmax(means))]
    assert best == pytest.approx(max(means))


def test_evaluate_matches_scikit_learn(tmp_path):
    rng = np.random.default_rng(5)
    labels = np.array(["x", "y", "z"])[rng.integers(0, 3, 200)]
    scores = pd.DataFrame(rng.normal(size=(200, 3)), columns=["x", "y", "z"])
    scores.to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame({"truth": labels}).to_csv(tmp_path / "l.csv", index=False)
    result = qsrank(
        "evaluate",
        tmp_path / "s.csv",
        tmp_path / "l.csv",
        "--label-column",
        "truth",
        "--out",
        tmp_path / "m.csv",
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "m.csv").set_index("class")
    for c in "xyz":
        rel, s = labels == c, scores[c].to_numpy()
        assert frame.loc[c, "ap"] == pytest.approx(average_precision_score(rel, s), abs=1e-12)
        assert frame.loc[c, "ndcg"] == pytest.approx(ndcg_score([rel], [s]), abs=1e-12)
        assert frame.loc[c, "roc_auc"] == pytest.approx(roc_auc_score(rel, s), abs=1e-12)
        precision, recall, _ = precision_recall_curve(rel, s)
        steps = np.arange(1, rel.sum() + 1) / rel.sum()  # VOC: best precision at recall >= k/P
        voc = np.mean([precision[recall >= r - 1e-12].max() for r in steps])
        assert frame.loc[c, "voc_ap"] == pytest.approx(voc, abs=1e-12)
        assert frame.loc[c, "positives"] == rel.sum()
    assert evaluate(tmp_path / "s.csv", tmp_path / "l.csv", "truth").shape == (3, 6)


@pytest.mark.parametrize("decimals", [0, 1, 12])
def test_roc_auc_is_scikit_learns_ties_included(decimals):
    from qsrank.pipelines.scoring import roc_auc

    rng = np.random.default_rng(decimals)
    relevant = rng.random(300) < 0.2
    scores = np.round(rng.normal(size=300) + relevant, decimals)  # 0 decimals: many ties
    assert roc_auc(relevant, scores) == pytest.approx(roc_auc_score(relevant, scores), abs=1e-12)


def test_help_imports_no_pipeline_nor_data_library():
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom qsrank.main import main\n"
        "for command in ('fit', 'predict', 'evaluate'):\n"
        "    assert CliRunner().invoke(main, [command, '--help']).exit_code == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numba', 'qs', 'scipy', 'pandas', 'sklearn') or m.startswith('qsrank.pipelines.') "
        "and m != 'qsrank.pipelines._registry'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_predict_and_evaluate_start_without_scikit_learn(tmp_path, model_dir):
    """Scoring a table needs numpy and pandas only: the start-up of `qsrank predict` does not
    pay for scikit-learn, numba or the data readers it does not use; `evaluate` pays for
    numba (qs.metrics), not scikit-learn."""
    X, y = data(n=10)
    table = write_csv(tmp_path / "d.csv", X, y)
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom qsrank.main import main\n"
        f"r = CliRunner().invoke(main, ['predict', {str(model_dir)!r}, {str(table)!r}, "
        f"'--out', {str(tmp_path / 's.csv')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'numba', 'torch', "
        "'dask', 'zarr', 'h5py'}), sorted(m for m in sys.modules if m.startswith('qs.data.')"
        " and m.split('.')[2] not in ('files', 'formats', 'poselet', 'sparse_text', "
        "'tables')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"
    # evaluate: the rank metrics, without scikit-learn
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom qsrank.main import main\n"
        f"r = CliRunner().invoke(main, ['evaluate', {str(tmp_path / 's.csv')!r}, "
        f"{str(table)!r}, '--label-column', 'label'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('sklearn' in {m.split('.')[0] for m in sys.modules})"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_help_names_every_solver():
    result = qsrank("fit", "--help")
    assert result.exit_code == 0
    assert all(name in result.output for name in SOLVERS)
    for command in ("predict", "evaluate"):
        assert qsrank(command, "--help").output.startswith("Usage: ")


# ---------------------------------------------------------------------------- bad input


def _bad_csv(path, problem):
    X, y = data(n=20)
    frame = pd.DataFrame(X, columns=NAMES).assign(label=y).astype(object)
    if problem == "mixed":
        frame.loc[3, "beta"] = "tall"
    elif problem == "nan":
        frame.loc[5, "gamma"] = None
    elif problem == "one class":
        frame["label"] = "a"
    elif problem == "no label":
        frame = frame.drop(columns="label")
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "problem,words",
    [
        ("no label", ["no label column 'label'", "'alpha'"]),
        ("mixed", ["column 'beta' holds text", "data row 4"]),
        ("nan", ["column 'gamma' is missing", "data row 6"]),
        ("one class", ["one class only", "'a'"]),
    ],
)
def test_bad_training_file_is_one_line_and_writes_nothing(tmp_path, problem, words):
    path = _bad_csv(tmp_path / "bad.csv", problem)
    result = qsrank("fit", path, "--label-column", "label", "--out", tmp_path / "run")
    one_line_error(result, "bad.csv", *words)
    assert not (tmp_path / "run").exists()


def test_test_file_of_another_feature_count_is_refused(tmp_path):
    X, y = data()
    train = write_csv(tmp_path / "train.csv", X, y)
    test = write_csv(tmp_path / "test.csv", X[:, :3], y)
    one_line_error(
        qsrank("fit", train, "--test", test, "--label-column", "label", "--out", tmp_path / "run"),
        "test.csv",
        "'delta'",
    )
    np.savez(tmp_path / "train.npz", X=X, y=y)
    np.savez(tmp_path / "test.npz", X=X[:, :3], y=y)
    one_line_error(
        qsrank(
            "fit",
            tmp_path / "train.npz",
            "--test",
            tmp_path / "test.npz",
            "--out",
            tmp_path / "run",
        ),
        "test.npz",
        "3 features",
        "has 4",
    )
    one_line_error(
        qsrank(
            "fit",
            tmp_path / "train.npz",
            "--test",
            tmp_path / "test.npz",
            "--label-column",
            "y",
            "--out",
            tmp_path / "run",
        ),
        "train.npz",
    )
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    meta = {
        "n_features": 4,
        "feature_names": NAMES,
        "label_column": "label",
        "classes": ["b"],
        "loss": "ap",
        "solver": "cutting_plane",
        "C": [1.0],
        "scaling": "none",
        "svmlight_zero_based": False,
        "column_fingerprint": None,
    }
    write_model(
        out, meta, coef=[[1.0, 2.0, 3.0, 4.0]], intercept=[0.5], mean=np.zeros(4), scale=np.ones(4)
    )
    return out


def test_model_scores_are_its_linear_function(tmp_path, model_dir):
    X, y = data(n=10)
    path = write_csv(tmp_path / "d.csv", X[:, ::-1], y, names=NAMES[::-1])  # columns reordered
    assert qsrank("predict", model_dir, path, "--out", tmp_path / "s.csv").exit_code == 0
    np.testing.assert_allclose(pd.read_csv(tmp_path / "s.csv")["b"], X @ [1, 2, 3, 4] + 0.5)


def _copy(model_dir, tmp_path, **changes):
    meta = json.loads((model_dir / "model.json").read_text())
    (tmp_path / "model.npz").write_bytes((model_dir / "model.npz").read_bytes())
    (tmp_path / "model.json").write_text(json.dumps({**meta, **changes}))
    return tmp_path / "model.json"


@pytest.mark.parametrize("kind", ["other version", "not ours", "other features", "pickle"])
def test_model_file_refusals_are_one_line(tmp_path, model_dir, kind):
    X, y = data(n=10)
    data_path = write_csv(tmp_path / "d.csv", X, y)
    if kind == "other version":
        model, words = _copy(model_dir, tmp_path, format_version=99), ["version 99"]
    elif kind == "not ours":
        model, words = data_path, ["not a qsrank model file"]
    elif kind == "other features":
        data_path = tmp_path / "d.npz"
        np.savez(data_path, X=X[:, :3], y=y)
        model, words = model_dir, ["3 features", "has 4"]
    else:  # a pickle in place of the weights, the checksum made to match
        model = _copy(model_dir, tmp_path)
        np.savez(
            tmp_path / "model.npz",
            coef=np.array([[object()] * 4], dtype=object),
            intercept=[0.5],
            mean=np.zeros(4),
            scale=np.ones(4),
        )
        meta = json.loads(model.read_text())
        meta["sha256"] = model_digest(meta, (tmp_path / "model.npz").read_bytes())
        model.write_text(json.dumps(meta))
        words = ["model.npz", "coef must be finite floats of shape (1, 4); got object"]
    result = qsrank("predict", model, data_path, "--out", tmp_path / "s.csv")
    one_line_error(result, *words)
    assert not (tmp_path / "s.csv").exists()


def test_sparse_svmlight_fit_scores_as_the_estimator(tmp_path):
    X, _ = data(n=60)
    X[X < 0.3] = 0.0  # mostly zeros: read and kept as CSR
    y = np.tile([3, 5], 30)
    dump_svmlight_file(X, y, str(tmp_path / "t.svm"))
    result = qsrank(
        "fit",
        tmp_path / "t.svm",
        "--test",
        tmp_path / "t.svm",
        "--loss",
        "ndcg",
        "--C",
        "1",
        "--baseline-C",
        "1",
        "--out",
        tmp_path / "run",
    )
    assert result.exit_code == 0, result.output
    assert read_model(tmp_path / "run").meta["classes"] == [5]
    scaled = StandardScaler(with_mean=False).fit(X)
    expected = RankSVM(loss="ndcg", C=1.0).fit(scaled.transform(X), y == 5)
    assert (
        qsrank(
            "predict", tmp_path / "run", tmp_path / "t.svm", "--out", tmp_path / "s.csv"
        ).exit_code
        == 0
    )
    np.testing.assert_allclose(
        pd.read_csv(tmp_path / "s.csv")["5"],
        expected.decision_function(scaled.transform(X)),
        rtol=1e-9,
        atol=1e-9,
    )
    # the same rows as a CSV with a label column the model does not know
    write_csv(tmp_path / "t.csv", X, y, names=["f0", "f1", "f2", "f3"])
    assert (
        qsrank(
            "predict", tmp_path / "run", tmp_path / "t.csv", "--out", tmp_path / "s2.csv"
        ).exit_code
        == 1
    )  # 5 columns: the label taken as a feature
    assert (
        qsrank(
            "predict",
            tmp_path / "run",
            tmp_path / "t.csv",
            "--label-column",
            "label",
            "--out",
            tmp_path / "s2.csv",
        ).exit_code
        == 0
    )
    np.testing.assert_allclose(
        pd.read_csv(tmp_path / "s2.csv"), pd.read_csv(tmp_path / "s.csv"), rtol=1e-12
    )


def test_parquet_without_an_engine_names_the_package(tmp_path, monkeypatch):
    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    (tmp_path / "f.parquet").write_bytes(b"PAR1")
    with pytest.raises(
        ValueError,
        match=r"f.parquet: reading Parquet needs pyarrow or "
        r"fastparquet",
    ):
        read_table(tmp_path / "f.parquet", label_column="label")


@pytest.mark.parametrize(
    "problem,words",
    [
        ("rows", ["has 3 labels", "4 rows"]),
        ("text", ["expected a CSV of finite scores"]),
        ("classes", ["none of its columns"]),
    ],
)
def test_evaluate_bad_input_is_one_line_and_writes_nothing(tmp_path, problem, words):
    scores = {
        "rows": "a\n0.1\n0.2\n0.3\n0.4\n",
        "text": "a\n0.1\nhigh\n0.3\n",
        "classes": "q\n0.1\n0.2\n0.3\n",
    }[problem]
    (tmp_path / "s.csv").write_text(scores)
    (tmp_path / "l.csv").write_text("label\na\nb\na\n")
    result = qsrank(
        "evaluate",
        tmp_path / "s.csv",
        tmp_path / "l.csv",
        "--label-column",
        "label",
        "--out",
        tmp_path / "m.csv",
    )
    one_line_error(result, *words)
    assert not (tmp_path / "m.csv").exists()


def test_mixed_label_types_and_a_narrower_svmlight_test_file(tmp_path):
    X, _ = data(n=40)
    y = np.tile([0, 1], 20)
    dump_svmlight_file(X, y, str(tmp_path / "train.svm"))
    X_test = X.copy()
    X_test[:, -1] = 0.0  # svmlight writes no value of the last column: the file is narrower
    dump_svmlight_file(X_test, y, str(tmp_path / "test.svm"))
    assert read_table(tmp_path / "test.svm").X.shape[1] == X.shape[1] - 1
    result = qsrank(
        "fit",
        tmp_path / "train.svm",
        "--test",
        tmp_path / "test.svm",
        "--C",
        "1",
        "--baseline-C",
        "1",
        "--out",
        tmp_path / "a",
    )
    assert result.exit_code == 0, result.output
    write_csv(tmp_path / "train.csv", X, y)
    write_csv(tmp_path / "test.csv", X, np.where(y == 1, "1", "x"))  # "1" as text
    result = qsrank(
        "fit",
        tmp_path / "train.csv",
        "--test",
        tmp_path / "test.csv",
        "--label-column",
        "label",
        "--C",
        "1",
        "--baseline-C",
        "1",
        "--out",
        tmp_path / "b",
    )
    assert result.exit_code == 0, result.output
    metrics = pd.read_csv(tmp_path / "b" / "metrics.csv")
    assert list(metrics["test_positives"]) == [20, 20, 20]


@pytest.mark.parametrize(
    "given,near", [("Label", "label"), (" label ", "label"), ("lable", "label"), ("target", None)]
)
def test_a_misnamed_label_column_names_the_near_miss(tmp_path, given, near):
    X, y = data(n=20, d=4)
    frame = pd.DataFrame(X, columns=NAMES).assign(label=y)
    for k in range(8):  # more columns than the message lists
        frame[f"extra{k}"] = 0.0
    frame.to_csv(tmp_path / "t.csv", index=False)
    result = qsrank("fit", tmp_path / "t.csv", "--label-column", given, "--out", tmp_path / "r")
    one_line_error(result, "t.csv", "no label column")
    assert ("did you mean 'label'?" in result.output) == (near is not None), result.output
    labels = tmp_path / "l.csv"
    frame[["label"]].to_csv(labels, index=False)
    (tmp_path / "s.csv").write_text("a\n" + "0.1\n" * 20)
    result = qsrank("evaluate", tmp_path / "s.csv", labels, "--label-column", given)
    one_line_error(result, "l.csv", "no label column")
    assert ("did you mean 'label'?" in result.output) == (near is not None), result.output


def test_an_unnamed_label_column_names_the_option(tmp_path):
    X, y = data(n=20)
    write_csv(tmp_path / "t.csv", X, y)
    (tmp_path / "s.csv").write_text("a\n" + "0.1\n" * 20)
    one_line_error(
        qsrank("evaluate", tmp_path / "s.csv", tmp_path / "t.csv"),
        "name its label column with --label-column",
        "'label'",
    )
    one_line_error(
        qsrank("fit", tmp_path / "t.csv", "--out", tmp_path / "r"),
        "name its label column with --label-column",
    )
    assert not (tmp_path / "r").exists()


def test_the_progress_bar_names_the_class_not_the_unit_file():
    assert pipeline.SPEC.unit_text(("000", "malignant")) == "class malignant"


def test_plot_draws_a_fit_run_as_bars_of_its_test_ap(tmp_path):
    X, y = data(n=90, classes=("a", "b", "c"))
    train = write_csv(tmp_path / "t.csv", X, y)
    out = tmp_path / "run"
    result = qsrank(
        "fit", train, "--label-column", "label", "--C", "1", "--baseline-C", "1", "--out", out
    )
    assert result.exit_code == 0, result.output
    result = qsrank("plot", out)
    assert result.exit_code == 0, result.output
    assert result.output.split() == [str(out / "figure.png"), str(out / "figure.pdf")]
    assert (out / "figure.png").read_bytes().startswith(b"\x89PNG")

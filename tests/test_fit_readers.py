"""The readers of `qsrank fit` and `predict` under awkward input: the svmlight index base
decided once per model, repeated column names, labels written two ways, Parquet timestamps,
feature indices far beyond the data (run under a memory limit), sparse input scaled as dense
input, and files without column names whose columns come in another order."""

import io
import os
import resource
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from sklearn.datasets import dump_svmlight_file

from qs.data.formats import read_svmlight
from qs.data.tables import read_labels, read_table
from qsrank.main import main
from qsrank.pipelines import fit as pipeline
from qsrank.pipelines import fit_data
from qsrank.pipelines.model import read_model

FIT = ("--C", "1", "--baseline-C", "1")


def qsrank(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, *words):
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for word in words:
        assert str(word) in lines[0], (word, lines[0])


def data(n=80, d=5, seed=0, offset=0.0):
    """Binary labels and features that separate them somewhat, each column its own mean and
    spread (so that a permutation of the columns shows)."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1) + 3 * np.arange(d) + offset
    X[:, 0] += 1.5 * y
    return X, y


# ---------------------------------------------------------------------------- svmlight base


def test_zero_and_one_based_files_give_the_same_model(tmp_path):
    X, y = data()
    X_test, y_test = data(seed=1)
    X_test[:, 0] = 0.0  # the zero-based test file never writes index 0
    for base in ("zero", "one"):
        dump_svmlight_file(X, y, str(tmp_path / f"train_{base}.svm"), zero_based=base == "zero")
        dump_svmlight_file(
            X_test, y_test, str(tmp_path / f"test_{base}.svm"), zero_based=base == "zero"
        )
        result = qsrank(
            "fit",
            tmp_path / f"train_{base}.svm",
            "--test",
            tmp_path / f"test_{base}.svm",
            *FIT,
            "--out",
            tmp_path / base,
        )
        assert result.exit_code == 0, result.output
        assert (
            qsrank(
                "predict",
                tmp_path / base,
                tmp_path / f"test_{base}.svm",
                "--out",
                tmp_path / f"scores_{base}.csv",
            ).exit_code
            == 0
        )
    zero, one = read_model(tmp_path / "zero"), read_model(tmp_path / "one")
    assert zero.meta["svmlight_zero_based"] is True and one.meta["svmlight_zero_based"] is False
    np.testing.assert_allclose(zero.coef, one.coef, rtol=1e-9, atol=1e-12)
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "zero" / "metrics.csv").drop(columns="train_s"),
        pd.read_csv(tmp_path / "one" / "metrics.csv").drop(columns="train_s"),
    )
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "scores_zero.csv"), pd.read_csv(tmp_path / "scores_one.csv")
    )


def test_a_given_base_applies_to_every_file(tmp_path):
    X, y = data()
    dump_svmlight_file(X, y, str(tmp_path / "zero.svm"), zero_based=True)
    one_line_error(
        qsrank("fit", tmp_path / "zero.svm", "--one-based", *FIT, "--out", tmp_path / "run"),
        "zero.svm, line 1",
        "index 0",
        "--zero-based",
    )
    assert not (tmp_path / "run").exists()
    dump_svmlight_file(X, y, str(tmp_path / "one.svm"), zero_based=False)
    assert qsrank("fit", tmp_path / "one.svm", *FIT, "--out", tmp_path / "one").exit_code == 0
    one_line_error(
        qsrank("predict", tmp_path / "one", tmp_path / "zero.svm", "--out", tmp_path / "s.csv"),
        "zero.svm, line 1",
        "index 0",
    )
    assert not (tmp_path / "s.csv").exists()
    Xz, _, _, base = read_svmlight(tmp_path / "zero.svm")
    assert base is True and Xz.shape == X.shape
    X1, _, _, base = read_svmlight(tmp_path / "zero.svm", zero_based=True, n_features=9)
    assert base is True and X1.shape == (X.shape[0], 9)


# ---------------------------------------------------------------------------- tables


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_a_repeated_column_name_is_refused(tmp_path, suffix):
    X, y = data(n=20, d=2)
    path = tmp_path / f"f{suffix}"
    columns = [X[:, 0], X[:, 1], y, y]
    if suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(
            pa.Table.from_arrays(
                [pa.array(c) for c in columns], names=["a", "b", "label", "label"]
            ),
            path,
        )
    else:
        sep = "," if suffix == ".csv" else "\t"
        lines = [sep.join(["a", "b", "label", "label"])]
        lines += [sep.join(str(v) for v in row) for row in zip(*columns)]
        path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"the column name 'label' appears more than once"):
        read_table(path, label_column="label")
    one_line_error(
        qsrank("fit", path, "--label-column", "label", *FIT, "--out", tmp_path / "run"),
        "'label' appears more than once",
    )


def test_labels_written_two_ways_stay_apart(tmp_path):
    X, _ = data(n=30, d=2)
    labels = np.array(["01", "1", "2"] * 10)
    frame = pd.DataFrame(X, columns=["a", "b"])
    frame.assign(label=labels).to_csv(tmp_path / "two_ways.csv", index=False)
    table = read_table(tmp_path / "two_ways.csv", label_column="label")
    assert sorted(np.unique(table.y)) == ["01", "1", "2"]
    assert sorted(read_labels(tmp_path / "two_ways.csv", label_column="label")) == sorted(labels)
    frame.assign(label=np.array(["1", "1.0"] * 15)).to_csv(tmp_path / "f.csv", index=False)
    assert sorted(np.unique(read_table(tmp_path / "f.csv", label_column="label").y)) == ["1", "1.0"]
    frame.assign(label=np.array(["1", "2", "10"] * 10)).to_csv(tmp_path / "n.csv", index=False)
    y = read_table(tmp_path / "n.csv", label_column="label").y
    assert y.dtype.kind == "i" and sorted(np.unique(y)) == [1, 2, 10]
    result = qsrank(
        "fit", tmp_path / "two_ways.csv", "--label-column", "label", *FIT, "--out", tmp_path / "run"
    )
    assert result.exit_code == 0, result.output
    assert sorted(read_model(tmp_path / "run").meta["classes"]) == ["01", "1", "2"]


def test_parquet_timestamps_are_refused(tmp_path):
    pytest.importorskip("pyarrow")
    X, y = data(n=20, d=2)
    frame = pd.DataFrame(X, columns=["a", "b"]).assign(
        when=pd.date_range("2024-01-01", periods=20, freq="D"), label=y
    )
    frame.to_parquet(tmp_path / "f.parquet")
    with pytest.raises(
        ValueError,
        match=r"feature column 'when' holds timestamps "
        r"\(datetime64\[\w+\]\).*encode them as numbers",
    ):
        read_table(tmp_path / "f.parquet", label_column="label")


# ---------------------------------------------------------------------------- memory


def _limited(limit_bytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return limit


def fit_under_limit(tmp_path, train, limit=3 * 2**30, timeout=600):
    """`qsrank fit TRAIN` in a process whose address space is limited, so that a
    regression fails here instead of eating the machine."""
    code = "import sys; from qsrank.main import main; main(sys.argv[1:], prog_name='qsrank')"
    env = {
        **os.environ,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", code, "fit", str(train), *FIT, "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        preexec_fn=_limited(limit),
        env=env,
    )


def _one_line(result, *words):
    assert result.returncode == 1, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ") and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[-1], (word, lines[-1])


def test_a_huge_feature_index_is_refused_in_one_line(tmp_path):
    X, y = data(n=40, d=3)
    dump_svmlight_file(X, y, str(tmp_path / "f.svm"), zero_based=False)
    with open(tmp_path / "f.svm", "a") as fh:
        fh.write("1 100000000:1\n")
    _one_line(
        fit_under_limit(tmp_path, tmp_path / "f.svm"), "100,000,000 feature columns", "would take"
    )
    assert not (tmp_path / "run").exists()


def test_a_csr_npz_with_a_huge_shape_is_refused_in_one_line(tmp_path):
    X, y = data(n=40, d=3)
    A = sp.csr_matrix(X)
    np.savez(
        tmp_path / "f.npz",
        X_data=A.data,
        X_indices=A.indices,
        X_indptr=A.indptr,
        X_shape=np.array([40, 2_000_000_000]),
        y=y,
    )
    _one_line(
        fit_under_limit(tmp_path, tmp_path / "f.npz"), "2,000,000,000 feature columns", "would take"
    )


def test_a_dense_npz_declaring_a_huge_array_is_refused_before_reading(tmp_path):
    header = io.BytesIO()  # a header declaring 9.6 TB, and a few bytes of data
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (4_000_000, 300_000)}
    )
    with zipfile.ZipFile(tmp_path / "f.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("X.npy", header.getvalue() + bytes(4096))
        archive.writestr("y.npy", header.getvalue())
    with pytest.raises(
        ValueError,
        match=r"f\.npz: X of shape \(4000000, 300000\) \(float64\) "
        r"would take .* GiB of memory",
    ):
        read_table(tmp_path / "f.npz")


def test_one_feature_far_out_trains_on_the_columns_in_use(tmp_path):
    X, y = data(n=40, d=3)
    dump_svmlight_file(X, y, str(tmp_path / "f.svm"), zero_based=False)
    with open(tmp_path / "f.svm", "a") as fh:
        fh.write("1 2:1 20000000:1\n0 20000000:2\n")
    result = fit_under_limit(tmp_path, tmp_path / "f.svm")
    assert result.returncode == 0, result.stderr[-2000:]
    model = read_model(tmp_path / "run")
    assert model.coef.shape == (1, 20_000_000)
    assert np.count_nonzero(model.coef) <= 4 and model.coef[0, -1] != 0


# ---------------------------------------------------------------------------- scaling


def test_svmlight_and_csv_of_the_same_split_give_the_same_metrics(tmp_path):
    X, y = data(n=120, d=6, offset=8.0)  # offsets far from 0: centring matters to LinearSVC
    X_test, y_test = data(n=80, d=6, seed=3, offset=8.0)
    names = [f"f{k}" for k in range(X.shape[1])]
    for name, (A, b) in {"train": (X, y), "test": (X_test, y_test)}.items():
        dump_svmlight_file(A, b, str(tmp_path / f"{name}.svm"), zero_based=False)
        pd.DataFrame(A, columns=names).assign(label=b).to_csv(tmp_path / f"{name}.csv", index=False)
    runs = {}
    for fmt, extra in {"svm": (), "csv": ("--label-column", "label")}.items():
        result = qsrank(
            "fit",
            tmp_path / f"train.{fmt}",
            "--test",
            tmp_path / f"test.{fmt}",
            *extra,
            *FIT,
            "--out",
            tmp_path / fmt,
        )
        assert result.exit_code == 0, result.output
        runs[fmt] = pd.read_csv(tmp_path / fmt / "metrics.csv").drop(columns="train_s")
        assert (
            "centred and scaled to unit variance on the training rows, for every method"
            in (tmp_path / fmt / "table.md").read_text()
        )
    pd.testing.assert_frame_equal(runs["svm"], runs["csv"], rtol=1e-9)


def test_large_sparse_input_stays_sparse_and_the_table_says_so(tmp_path, monkeypatch):
    X, y = data(n=60, d=4)
    X[np.abs(X) < 4] = 0.0
    dump_svmlight_file(X, y, str(tmp_path / "t.svm"), zero_based=False)
    monkeypatch.setattr(fit_data, "DENSE_BYTES", 0)
    cfg = {
        **{k: v.default for k, v in pipeline.Config.model_fields.items()},
        "train": str(tmp_path / "t.svm"),
        "C": [1.0],
        "baseline_C": [1.0],
    }
    fitted = pipeline.load_data(cfg)
    assert sp.issparse(fitted.X_train) and not fitted.mean.any()
    assert fitted.scaling.startswith(
        "scaled to unit variance on the training rows for every "
        "method, not centred: the input is sparse"
    )


# ---------------------------------------------------------------------------- column order


def test_permuted_columns_of_a_file_without_names_are_warned(tmp_path):
    X, y = data(n=120, d=5)
    X_test, y_test = data(n=60, d=5, seed=2)
    np.savez(tmp_path / "train.npz", X=X, y=y)
    np.savez(tmp_path / "test.npz", X=X_test, y=y_test)
    np.savez(tmp_path / "reversed.npz", X=X_test[:, ::-1], y=y_test)
    result = qsrank(
        "fit",
        tmp_path / "train.npz",
        "--test",
        tmp_path / "reversed.npz",
        *FIT,
        "--out",
        tmp_path / "run",
    )
    assert result.exit_code == 0, result.output
    warned = [line for line in result.output.splitlines() if line.startswith("Warning: ")]
    assert len(warned) == 1 and "reversed.npz" in warned[0] and "another order" in warned[0]
    fingerprint = read_model(tmp_path / "run").meta["column_fingerprint"]
    assert fingerprint["count"] == 5 and len(fingerprint["mean"]) == 5
    for name, expected in (("reversed", 1), ("test", 0)):
        result = qsrank(
            "predict", tmp_path / "run", tmp_path / f"{name}.npz", "--out", tmp_path / f"{name}.csv"
        )
        assert result.exit_code == 0, result.output
        assert (
            sum(
                line.startswith("Warning: ") and "another order" in line
                for line in result.output.splitlines()
            )
            == expected
        ), result.output

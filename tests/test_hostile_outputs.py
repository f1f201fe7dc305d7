"""`qsrank fit`, `predict` and `evaluate` facing hostile outputs, model files and inputs: an
output path that is a FIFO, a socket or one of the inputs is refused, an edited or zip-bombed
model is refused, non-finite scores are never written, files of no rows or of overflowing
values are refused before the run directory is claimed; each in one line, nothing lost."""

import io
import json
import os
import resource
import socket
import stat
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest
import scipy.io
from sklearn.datasets import dump_svmlight_file

from qs.data.files import read_bytes
from qsrank.pipelines import _io
from qsrank.pipelines.model import model_digest, read_model, write_model
from tests.test_fit import NAMES, data, one_line_error, qsrank, write_csv

FAST = ["--C", "1", "--baseline-C", "1"]


def _model(path, scale=None, coef=(1.0, 2.0, 3.0, 4.0)):
    meta = {
        "n_features": 4,
        "feature_names": NAMES,
        "label_column": "label",
        "classes": ["b"],
        "loss": "ap",
        "solver": "cutting_plane",
        "C": [1.0],
        "scaling": "standard",
        "svmlight_zero_based": False,
        "column_fingerprint": None,
    }
    write_model(
        path,
        meta,
        coef=[list(coef)],
        intercept=[0.5],
        mean=np.zeros(4),
        scale=np.ones(4) if scale is None else scale,
    )
    return path


@pytest.fixture
def files(tmp_path):
    X, y = data(n=20)
    return _model(tmp_path / "model"), write_csv(tmp_path / "d.csv", X, y)


def _kind(path):
    return stat.S_IFMT(os.lstat(path).st_mode)


# ---------------------------------------------------------------------------- --out


def test_out_on_a_fifo_a_socket_or_a_link_to_one_is_refused(tmp_path, files):
    model, data_path = files
    fifo, link, sock_path = tmp_path / "fifo", tmp_path / "link", tmp_path / "sock"
    os.mkfifo(fifo)
    link.symlink_to(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        for out, kind in [
            (fifo, "a FIFO"),
            (link, "a FIFO (through the link"),
            (sock_path, "a socket"),
        ]:
            one_line_error(
                qsrank("predict", model, data_path, "--out", out),
                out.name,
                kind,
                "not a regular file",
            )
        (tmp_path / "s.csv").write_text("b\n" + "0.5\n" * 20)
        one_line_error(
            qsrank(
                "evaluate", tmp_path / "s.csv", data_path, "--label-column", "label", "--out", fifo
            ),
            "fifo",
            "a FIFO",
        )
    finally:
        sock.close()
    assert _kind(fifo) == stat.S_IFIFO and _kind(sock_path) == stat.S_IFSOCK
    assert link.is_symlink() and os.readlink(link) == str(fifo)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "d.csv",
        "fifo",
        "link",
        "model",
        "s.csv",
        "sock",
    ]  # no temporary left


def test_atomic_writes_refuse_what_appears_meanwhile(tmp_path):
    """The check stands again just before the replace: a FIFO made while the output was
    being written is not replaced."""
    out = tmp_path / "out.txt"
    with pytest.raises(ValueError, match="it is a FIFO"), _io.atomic_path(out) as tmp:
        tmp.write_text("x")
        os.mkfifo(out)
    assert _kind(out) == stat.S_IFIFO and os.listdir(tmp_path) == ["out.txt"]


def test_out_through_a_link_to_a_regular_file_writes_its_target(tmp_path, files):
    model, data_path = files
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    assert qsrank("predict", model, data_path, "--out", link).exit_code == 0
    assert link.is_symlink() and target.read_text().startswith("b\n")


@pytest.mark.parametrize("which", ["model.json", "model.npz", "data", "hard link", "symlink"])
def test_predict_out_equal_to_an_input_is_refused_naming_both(tmp_path, files, which):
    model, data_path = files
    (tmp_path / "hard.csv").hardlink_to(data_path)
    (tmp_path / "soft.csv").symlink_to(data_path)
    out = {
        "model.json": model / "model.json",
        "model.npz": model / "model.npz",
        "data": data_path,
        "hard link": tmp_path / "hard.csv",
        "symlink": tmp_path / "soft.csv",
    }[which]
    before = {p: p.read_bytes() for p in [model / "model.json", model / "model.npz", data_path]}
    what = {"model.json": "the model file", "model.npz": "the model weights"}.get(
        which, "the data file"
    )
    for model_arg in (model, model / "model.json"):
        one_line_error(
            qsrank("predict", model_arg, data_path, "--out", out),
            str(out),
            what,
            "would replace it",
        )
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("which", ["scores", "labels"])
def test_evaluate_out_equal_to_an_input_is_refused_naming_both(tmp_path, which):
    scores, labels = tmp_path / "s.csv", tmp_path / "l.csv"
    scores.write_text("a\n0.1\n0.2\n0.3\n")
    labels.write_text("label\na\nb\na\n")
    out = scores if which == "scores" else labels
    one_line_error(
        qsrank("evaluate", scores, labels, "--label-column", "label", "--out", out),
        f"the {which} file",
        "would replace it",
    )
    assert scores.read_text() == "a\n0.1\n0.2\n0.3\n" and labels.read_text() == "label\na\nb\na\n"


# ---------------------------------------------------------------------------- reading


def test_read_bytes_asks_for_no_more_memory_than_the_file_takes(tmp_path):
    """Under `ulimit -v 6000000` (the issue's), a bound of 8 GiB must not be asked for."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 1000)
    code = (
        "import resource, sys; from qs.data.files import read_bytes; "
        "resource.setrlimit(resource.RLIMIT_AS, (6_000_000 * 1024,) * 2); "
        f"assert read_bytes({str(path)!r}, 'f', 2 ** 33) == b'x' * 1000"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    with pytest.raises(ValueError, match="larger than 999 bytes"):
        read_bytes(path, "f", 999)


def test_predict_runs_under_a_6_gb_address_space_limit(tmp_path, files):
    model, data_path = files

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6_000_000 * 1024,) * 2)

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "qsrank.main",
            "predict",
            str(model),
            str(data_path),
            "--out",
            str(tmp_path / "s.csv"),
        ],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(pd.read_csv(tmp_path / "s.csv")) == 20


# ---------------------------------------------------------------------------- model files


def _edit(model, rehash, **changes):
    meta = {**json.loads((model / "model.json").read_text()), **changes}
    if rehash:
        meta["sha256"] = model_digest(meta, (model / "model.npz").read_bytes())
    (model / "model.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "changes",
    [{"feature_names": NAMES[::-1]}, {"classes": ["a"]}, {"C": [2.0]}, {"scaling": "none"}],
)
def test_any_edit_of_model_json_is_refused_by_the_checksum(tmp_path, files, changes):
    model, data_path = files
    _edit(model, False, **changes)
    one_line_error(
        qsrank("predict", model, data_path, "--out", tmp_path / "s.csv"),
        "model.json",
        "checksum does not match",
    )
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize(
    "changes,words",
    [
        (
            {"feature_names": NAMES[:3] + NAMES[:1]},
            ["feature_names", "'alpha' appears more than once"],
        ),
        ({"feature_names": [1, 2, 3, 4]}, ["feature_names.0", "valid string"]),
        ({"feature_names": NAMES[:3]}, ["feature_names: 3 names for 4 features"]),
        ({"classes": ["b", "b"], "C": [1.0, 1.0]}, ["classes: 'b' appears more than once"]),
        ({"classes": []}, ["classes"]),
        ({"n_features": True}, ["n_features", "valid integer"]),
        ({"n_features": 10**12}, ["n_features"]),
        ({"C": ["x"]}, ["C.0"]),
        ({"weights": "../model.npz"}, ["weights"]),
        ({"run": "rm -rf /"}, ["run", "Extra inputs"]),
    ],
)
def test_model_json_that_its_schema_refuses_is_one_line(tmp_path, files, changes, words):
    """Edits made with the checksum made to match: the schema refuses them."""
    model, data_path = files
    _edit(model, True, **changes)
    one_line_error(
        qsrank("predict", model, data_path, "--out", tmp_path / "s.csv"),
        "model.json: damaged qsrank model file",
        *words,
    )


def _rewrite_npz(model, members):
    buf = io.BytesIO()
    np.savez_compressed(buf, **members)
    (model / "model.npz").write_bytes(buf.getvalue())
    _edit(model, True)


@pytest.mark.parametrize(
    "scale,coef,words",
    [
        (np.full(4, 1e-310), None, ["scale must be at least 2.23e-308", "1e-310"]),
        (np.full(4, 1e-10), np.full((1, 4), 1e308), ["coef / scale overflows"]),
    ],
)
def test_absurd_scales_are_refused(tmp_path, files, scale, coef, words):
    model, data_path = files
    with np.load(model / "model.npz") as npz:
        members = {k: npz[k] for k in npz.files}
    members["scale"] = scale
    if coef is not None:
        members["coef"] = coef
    _rewrite_npz(model, members)
    one_line_error(
        qsrank("predict", model, data_path, "--out", tmp_path / "s.csv"), "model.npz", *words
    )


def _bomb(model, n=2**27):
    """model.npz whose `scale` member declares and inflates to n float64 zeros (1 GiB)."""
    with np.load(model / "model.npz") as npz:
        kept = {k: npz[k] for k in npz.files if k != "scale"}
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (n,)}
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, a in kept.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, a)
            zf.writestr(f"{k}.npy", member.getvalue())
        with zf.open("scale.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            zeros = bytes(2**22)
            for _ in range(n * 8 // len(zeros)):
                member.write(zeros)
    (model / "model.npz").write_bytes(out.getvalue())
    _edit(model, True)


def test_a_zip_bombed_model_is_refused_before_it_inflates(tmp_path, files, monkeypatch):
    model, _ = files
    _bomb(model)
    assert (model / "model.npz").stat().st_size < 2**21
    monkeypatch.setattr(np.lib.format, "read_array", None)  # inflating it would fail loudly
    with pytest.raises(
        ValueError,
        match=r"model\.npz: scale inflates to 1,073,741,952 bytes, "
        r"more than an array of shape \(4,\) takes",
    ):
        read_model(model)


def test_a_model_npz_member_declaring_another_shape_is_refused_before_reading(tmp_path, files):
    """A member small on disk whose header declares a huge array: numpy would allocate it."""
    model, _ = files
    with np.load(model / "model.npz") as npz:
        members = {k: npz[k] for k in npz.files}
    members["mean"] = np.zeros(5)
    _rewrite_npz(model, members)
    with pytest.raises(
        ValueError,
        match=r"mean must be finite floats of shape \(4,\); got "
        r"float64 of shape \(5,\)",
    ):
        read_model(model)


def test_a_model_of_format_version_1_is_refused_asking_for_a_refit(tmp_path, files):
    model, data_path = files
    _edit(model, False, format_version=1)
    one_line_error(
        qsrank("predict", model, data_path, "--out", tmp_path / "s.csv"),
        "model format version 1",
        "reads version 2",
        "refit the model",
    )


# ---------------------------------------------------------------------------- scores


@pytest.mark.parametrize("value", [1e306, 1e308])
def test_predict_never_writes_non_finite_scores(tmp_path, value):
    model = _model(tmp_path / "model", scale=np.full(4, 1e-6))
    X, y = data(n=20)
    X[3, 0] = value
    path = write_csv(tmp_path / "d.csv", X, y)
    one_line_error(
        qsrank("predict", model, path, "--out", tmp_path / "s.csv"),
        "d.csv",
        "1 of its 20 rows",
        "data row 4",
        "inf or NaN",
    )
    assert not (tmp_path / "s.csv").exists()


# ---------------------------------------------------------------------------- inputs


def _empty(tmp_path, kind):
    path = tmp_path / f"empty.{kind}"
    if kind == "csv":
        path.write_text(",".join(NAMES) + ",label\n")
    elif kind == "svm":
        path.write_text("")
    elif kind == "npz":
        np.savez(path, X=np.zeros((0, 4)), y=np.zeros(0))
    else:
        scipy.io.savemat(path, {"X": np.zeros((0, 4)), "y": np.zeros((0, 1))})
    return path


@pytest.mark.parametrize("kind", ["csv", "svm", "npz", "mat"])
def test_files_of_no_rows_are_one_line_and_write_nothing(tmp_path, kind):
    path = _empty(tmp_path, kind)
    label = ["--label-column", "label"] if kind == "csv" else []
    one_line_error(qsrank("fit", path, *label, *FAST, "--out", tmp_path / "run"), path.name)
    assert not (tmp_path / "run").exists()
    X, y = data(n=20)
    train = write_csv(tmp_path / "train.csv", X, y)
    if kind in ("csv", "npz"):  # a test file of no rows, and rows to score
        test_label = ["--label-column", "label"] if kind == "csv" else []
        if kind == "npz":
            np.savez(tmp_path / "train.npz", X=X, y=y)
            train = tmp_path / "train.npz"
        one_line_error(
            qsrank("fit", train, "--test", path, *test_label, *FAST, "--out", tmp_path / "run"),
            path.name,
            "holds no rows",
        )
        one_line_error(
            qsrank("predict", _model(tmp_path / "model"), path, "--out", tmp_path / "s.csv"),
            path.name,
            "holds no rows to score",
        )
        assert not (tmp_path / "run").exists() and not (tmp_path / "s.csv").exists()


def test_a_mat_file_of_no_rows_is_told_as_such(tmp_path):
    """MATLAB keeps an empty vector as a 0-by-0 matrix: read as no labels, not as a y of
    another shape."""
    path = tmp_path / "empty.mat"
    scipy.io.savemat(path, {"X": np.zeros((0, 4)), "y": np.zeros(0)})
    result = qsrank("fit", path, *FAST, "--out", tmp_path / "run")
    one_line_error(result, "empty.mat", "holds no rows")


@pytest.mark.parametrize(
    "where,scale,words",
    [
        ("train", "standard", ["big.csv", "column 'beta' has values too large to standardise"]),
        ("test", "standard", ["big.csv", "data row 6, once scaled,"]),
        ("train", "none", ["big.csv", "a training row holds values too large"]),
        ("test", "none", ["big.csv", "data row 6 holds values too large"]),
    ],
)
def test_overflowing_values_are_refused_before_the_run_directory(tmp_path, where, scale, words):
    X, y = data(n=40)
    big = X.copy()
    big[5, 1] = 1e308
    big = write_csv(tmp_path / "big.csv", big, y)
    good = write_csv(tmp_path / "good.csv", X, y)
    files = [big] if where == "train" else [good, "--test", big]
    one_line_error(
        qsrank(
            "fit",
            *files,
            "--label-column",
            "label",
            "--scale",
            scale,
            *FAST,
            "--out",
            tmp_path / "run",
        ),
        *words,
    )
    assert not (tmp_path / "run").exists()


def test_test_labels_sharing_no_class_with_training_are_refused(tmp_path):
    X, y = data(n=40)
    train = write_csv(tmp_path / "train.csv", X, y)
    test = write_csv(tmp_path / "test.csv", X, np.array(["c", "d"] * 20))
    one_line_error(
        qsrank(
            "fit",
            train,
            "--test",
            test,
            "--label-column",
            "label",
            *FAST,
            "--out",
            tmp_path / "run",
        ),
        "test.csv",
        "'b'",
        "'c', 'd'",
        "every test metric would be undefined",
    )
    assert not (tmp_path / "run").exists()


def test_a_label_with_a_newline_or_a_bar_keeps_table_md_one_row_a_line(tmp_path):
    X, _ = data(n=40)
    path = write_csv(tmp_path / "t.csv", X, np.array(["c|d", "x\ny"] * 20))
    result = qsrank("fit", path, "--label-column", "label", *FAST, "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    rows = [
        line
        for line in (tmp_path / "run" / "table.md").read_text().splitlines()
        if line.startswith("|")
    ]
    assert len(rows) == 2 + 3 and "x\\ny" in rows[2]
    assert len({row.replace("\\|", "").count("|") for row in rows}) == 1


def test_a_class_named_na_is_a_class(tmp_path):
    X, _ = data(n=40)
    path = write_csv(tmp_path / "t.csv", X, np.array(["NA", "b"] * 20))
    result = qsrank(
        "fit",
        path,
        "--label-column",
        "label",
        "--pos-label",
        "NA",
        *FAST,
        "--out",
        tmp_path / "run",
    )
    assert result.exit_code == 0, result.output
    assert read_model(tmp_path / "run").meta["classes"] == ["NA"]


def test_an_unknown_set_key_is_cut_in_the_message(tmp_path):
    result = qsrank(
        "train", "--config", "digits", "--set", "k" * 100_000 + "=1", "--out", tmp_path / "run"
    )
    one_line_error(result, "unknown config key 'kkkk")
    assert len(result.output) < 500


def test_a_narrower_svmlight_file_is_still_scored(tmp_path):
    """The checks above leave the svmlight reading of `predict` as it was."""
    X, y = data(n=20)
    X[:, -1] = 0.0
    dump_svmlight_file(X, y == "b", str(tmp_path / "d.svm"))
    meta = {
        "n_features": 4,
        "feature_names": None,
        "label_column": None,
        "classes": [1.0],
        "loss": "ap",
        "solver": "cutting_plane",
        "C": [1.0],
        "scaling": "none",
        "svmlight_zero_based": True,
        "column_fingerprint": None,
    }  # dump_svmlight_file's base
    write_model(
        tmp_path / "m",
        meta,
        coef=[[1.0, 2.0, 3.0, 4.0]],
        intercept=[0.5],
        mean=np.zeros(4),
        scale=np.ones(4),
    )
    assert (
        qsrank("predict", tmp_path / "m", tmp_path / "d.svm", "--out", tmp_path / "s.csv").exit_code
        == 0
    )
    np.testing.assert_allclose(pd.read_csv(tmp_path / "s.csv")["1.0"], X @ [1, 2, 3, 4] + 0.5)


def test_a_repeated_score_column_is_refused(tmp_path):
    """pandas reads a second column `b` as `b.1`, which names no class: every metric of it
    would be "-" with exit 0."""
    X, _ = data(n=40)
    labels = write_csv(tmp_path / "l.csv", X, np.array(["a", "b"] * 20))
    (tmp_path / "s.csv").write_text("b,b\n" + "".join(f"{k},{-k}\n" for k in range(40)))
    result = qsrank("evaluate", tmp_path / "s.csv", labels, "--label-column", "label")
    one_line_error(result, "s.csv", "the column name 'b' appears more than once")


def test_a_model_json_repeating_a_key_is_refused(tmp_path):
    """json keeps the last of two values of a key (another reader may keep the first), and
    the checksum covers the values read: the file says two things, one of them unchecked."""
    model = _model(tmp_path / "model")
    path = model / "model.json"
    path.write_text(path.read_text().replace("{", '{"n_features": 9, ', 1))
    with pytest.raises(
        ValueError,
        match=r"model\.json: damaged qsrank model file: the key 'n_features' appears more "
        r"than once",
    ):
        read_model(model)

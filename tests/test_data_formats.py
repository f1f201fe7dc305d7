"""qs.data.formats: .mat (v5 and v7.3), svmlight and .npz feature files, and the .npz
cache of a loaded data set, on small files written here; corrupt and hostile files are
clear errors naming the file."""

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from qs.data import N_FEATURES, cache_arrays, load_features, load_npz_cache, load_poselet
from qsrank.pipelines._io import write_npz
from tests.test_data_poselet import expected_dense, write_poselet

# --- .mat, svmlight, .npz -----------------------------------------------------------------


@pytest.fixture
def Xy():
    rng = np.random.default_rng(0)
    X = rng.random((7, 5)) * (rng.random((7, 5)) < 0.5)
    return X, np.array([1, 0, 0, 1, -1, 0, 1])


@pytest.mark.parametrize("sparse", [False, True])
def test_mat_v5_round_trip(tmp_path, Xy, sparse):
    X, y = Xy
    scipy.io.savemat(
        tmp_path / "f.mat", {"feats": sp.csc_matrix(X) if sparse else X, "labels": y[:, None]}
    )
    X2, y2 = load_features(tmp_path / "f.mat", x_key="feats", y_key="labels", n_features=5)
    assert sp.issparse(X2) is sparse
    np.testing.assert_array_equal(X2.toarray() if sparse else X2, X)
    np.testing.assert_array_equal(y2, y)
    with pytest.raises(ValueError, match=r"f\.mat: no variable X, y; it holds feats, labels"):
        load_features(tmp_path / "f.mat")
    with pytest.raises(ValueError, match=r"f\.mat: expected 6 feature columns; got 5"):
        load_features(tmp_path / "f.mat", x_key="feats", y_key="labels", n_features=6)


def write_mat73(path, arrays):
    """A MATLAB v7.3 file as MATLAB writes it: HDF5 behind a 512-byte MAT header, each
    variable stored transposed; sparse as a CSC group (data, ir, jc, MATLAB_sparse)."""
    h5py = pytest.importorskip("h5py", reason="h5py is needed for MATLAB v7.3 files")
    with h5py.File(path, "w", userblock_size=512) as f:
        for name, a in arrays.items():
            if sp.issparse(a):
                a = sp.csc_matrix(a)
                group = f.create_group(name)
                group["data"], group["ir"], group["jc"] = a.data, a.indices, a.indptr
                group.attrs["MATLAB_sparse"] = a.shape[0]
            else:
                f[name] = np.asarray(a).T
    with open(path, "r+b") as fh:
        fh.write(
            b"MATLAB 7.3 MAT-file, written by qsrank's tests".ljust(116) + b"\0" * 8 + b"\x00\x02IM"
        )


@pytest.mark.parametrize("sparse", [False, True])
def test_mat_v73_round_trip(tmp_path, Xy, sparse):
    X, y = Xy
    write_mat73(tmp_path / "f.mat", {"X": sp.csr_matrix(X) if sparse else X, "y": y[None, :]})
    X2, y2 = load_features(tmp_path / "f.mat", n_features=5)
    np.testing.assert_array_equal(X2.toarray() if sparse else X2, X)
    np.testing.assert_array_equal(y2, y)


def test_mat_v73_without_h5py(tmp_path, Xy, monkeypatch):
    write_mat73(tmp_path / "f.mat", {"X": Xy[0], "y": Xy[1]})
    monkeypatch.setitem(__import__("sys").modules, "h5py", None)
    with pytest.raises(ValueError, match=r"f\.mat is a MATLAB v7.3 .*needs h5py"):
        load_features(tmp_path / "f.mat")


def test_svmlight_round_trip(tmp_path, Xy):
    X, y = Xy
    dump_svmlight_file(X, y, str(tmp_path / "f.svm"), zero_based=False)
    X2, y2 = load_features(tmp_path / "f.svm", n_features=5)
    np.testing.assert_allclose(X2.toarray(), X)
    np.testing.assert_array_equal(y2, y)
    with pytest.raises(ValueError, match=r"f\.svm: expected 3 feature columns; got 5"):
        load_features(tmp_path / "f.svm", n_features=3)


@pytest.mark.parametrize("sparse", [False, True])
def test_npz_round_trip(tmp_path, Xy, sparse):
    X, y = Xy
    if sparse:
        S = sp.csr_matrix(X)
        np.savez(
            tmp_path / "f.npz",
            X_data=S.data,
            X_indices=S.indices,
            X_indptr=S.indptr,
            X_shape=S.shape,
            y=y,
        )
    else:
        np.savez(tmp_path / "f.npz", X=X, y=y)
    X2, y2 = load_features(tmp_path / "f.npz")
    np.testing.assert_array_equal(X2.toarray() if sparse else X2, X)
    np.testing.assert_array_equal(y2, y)


def test_npz_cache_round_trip(tmp_path):
    data = load_poselet(write_poselet(tmp_path))
    out = tmp_path / "cache.npz"
    write_npz(out, cache_arrays(data))
    assert [p.name for p in tmp_path.glob("*cache*")] == ["cache.npz"]  # no temp file left
    back = load_npz_cache(out)
    assert (back.X != data.X).nnz == 0 and back.source == data.source and back.bias
    for field in ("labels", "image_names", "box_ids", "boxes"):
        np.testing.assert_array_equal(getattr(back, field), getattr(data, field))
    X, y = load_features(out, n_features=N_FEATURES + 1)
    np.testing.assert_array_equal(X.toarray(), expected_dense())
    np.testing.assert_array_equal(y, data.labels)


def test_corrupt_files(tmp_path, Xy):
    np.savez(tmp_path / "f.npz", X=Xy[0], y=Xy[1])
    whole = (tmp_path / "f.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "junk.npz").write_bytes(b"not an archive")
    scipy.io.savemat(tmp_path / "f.mat", {"X": Xy[0], "y": Xy[1]})
    whole = (tmp_path / "f.mat").read_bytes()
    (tmp_path / "cut.mat").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "bad.svm").write_text("1 1:0.5\n0 2:x\n")
    np.savez(tmp_path / "nox.npz", y=Xy[1])
    np.savez(tmp_path / "short.npz", X=Xy[0], y=Xy[1][:3])
    for name in ("cut.npz", "junk.npz", "cut.mat", "bad.svm"):
        with pytest.raises(ValueError, match=rf"Cannot read .*{name.replace('.', '[.]')} as"):
            load_features(tmp_path / name)
    with pytest.raises(ValueError, match=r"nox\.npz: missing X_data, X_indices"):
        load_features(tmp_path / "nox.npz")
    with pytest.raises(ValueError, match=r"short\.npz: X has 7 rows but y has 3 labels"):
        load_features(tmp_path / "short.npz")
    with pytest.raises(ValueError, match=r"Cannot tell the format of .*f\.csv"):
        load_features(tmp_path / "f.csv")
    with pytest.raises(ValueError, match=r"missing\.npz: No such file"):
        load_features(tmp_path / "missing.npz")


# --- hostile files: corrupt sparse structures, inconsistent fields, non-finite values --------

CSR = dict(X_data=[1.0, 2.0], X_indices=[0, 2], X_indptr=[0, 1, 2], X_shape=[2, 3], y=[1, 0])

BAD_CSR = [
    (dict(X_indices=[0, 10**9]), r"X_indices\[1\] = 1000000000 is not an index of the 3 columns"),
    (dict(X_indices=[0, -1]), r"X_indices\[1\] = -1 is not an index"),
    (dict(X_indices=[0.0, 2.5]), r"X_indices must be a 1-D array of integers; got float64"),
    (dict(X_indices=np.array([0, 2**63 + 1], np.uint64)), r"X_indices holds 9223372036854775809"),
    (dict(X_indptr=[0, 3, 2]), r"X_indptr must be non-decreasing; got 3 then 2 at row 1"),
    (dict(X_indptr=[1, 1, 2]), r"X_indptr must start at 0 and end at 2 .*got 1 \.\. 2"),
    (dict(X_indptr=[0, 1, 1]), r"X_indptr must start at 0 and end at 2 .*got 0 \.\. 1"),
    (dict(X_indptr=[0, 1, 3]), r"X_indptr must start at 0 and end at 2"),
    (dict(X_indptr=[0, 2]), r"X_indptr must have 3 entries \(one per row of 2, plus one\); got 2"),
    (dict(X_data=[1.0]), r"X_indices and X_data must have the same length; got 2 and 1"),
    (dict(X_data=["1", "2"]), r"X_data must be a 1-D array of numbers; got <U1"),
    (dict(X_data=[1.0, np.nan]), r"X must be finite; got np.float64\(nan\) at row 1, column 2"),
    (dict(X_shape=[2, 3, 1]), r"the shape of the sparse matrix must be two sizes >= 0"),
    (dict(X_shape=[-2, 3]), r"the shape of the sparse matrix must be two sizes >= 0"),
    (dict(X_shape=[2.0, 3.5]), r"X_shape must be a 1-D array of integers"),
]


@pytest.mark.parametrize("change, message", BAD_CSR, ids=[m[:24] for _, m in BAD_CSR])
@pytest.mark.parametrize("loader", ["features", "cache"])
def test_npz_corrupt_sparse_matrix(tmp_path, change, message, loader):
    """Every structure is checked before the matrix is built: an index out of range used to
    load silently, and the first product read out of bounds (a segfault)."""
    data = load_poselet(write_poselet(tmp_path))
    arrays = (
        {
            **cache_arrays(data),
            **CSR,
            "y": [2, 0],
            "image_names": ["a", "b"],
            "box_ids": [1, 2],
            "boxes": np.zeros((2, 4)),
        }
        if loader == "cache"
        else dict(CSR)
    )
    np.savez(tmp_path / "b.npz", **{**arrays, **change})
    load = load_npz_cache if loader == "cache" else load_features
    with pytest.raises(ValueError, match=r"b\.npz: " + message):
        load(tmp_path / "b.npz")


@pytest.mark.parametrize(
    "edit, message",
    [
        (dict(y=[2, 0, 1]), r"X has 2 rows but y has 3 labels"),
        (dict(y=[[2, 0]]), r"y must hold integer box labels .*got int64 of shape \(1, 2\)"),
        (dict(y=[[2, 0], [1, 1]]), r"expected X 2-D and y 1-D"),
        (dict(y=[2.0, 0.0]), r"y must hold integer box labels of shape \(2,\)"),
        (dict(image_names=["a"]), r"image_names must hold image names \(strings\) of shape \(2,\)"),
        (dict(box_ids=[1.5, 2.0]), r"box_ids must hold integer box ids"),
        (
            dict(boxes=np.zeros((2, 3))),
            r"boxes must hold box coordinates .* of shape \(2, 4\).*"
            r"got float64 of shape \(2, 3\)",
        ),
        (dict(boxes=np.zeros(8)), r"boxes must hold box coordinates"),
        (
            dict(boxes=[[0, 0, 1, 1], [0, np.inf, 1, 1]]),
            r"boxes must be finite; got np.float64\(inf\)",
        ),
        (dict(source=["a", "b"]), r"source must hold one string"),
        (dict(bias=[True, False]), r"bias must hold one bool"),
        (dict(X=np.ones(2)), r"expected X 2-D and y 1-D; got X of shape \(2,\)"),
        (dict(X=np.array([[1.0], [np.nan]])), r"X must be finite; got .*nan.* at index \(1, 0\)"),
    ],
)
def test_npz_cache_fields_must_agree(tmp_path, edit, message):
    arrays = {
        **cache_arrays(load_poselet(write_poselet(tmp_path))),
        **CSR,
        "y": [2, 0],
        "image_names": ["a", "b"],
        "box_ids": [1, 2],
        "boxes": np.zeros((2, 4)),
    }
    if "X" in edit:
        arrays = {k: v for k, v in arrays.items() if not k.startswith("X_")}
    np.savez(tmp_path / "c.npz", **{**arrays, **edit})
    with pytest.raises(ValueError, match=r"c\.npz: " + message):
        load_npz_cache(tmp_path / "c.npz")


def test_npy_renamed_npz(tmp_path, Xy):
    np.save(tmp_path / "a.npy", Xy[0])
    (tmp_path / "a.npy").rename(tmp_path / "a.npz")
    for load in (load_features, load_npz_cache):
        with pytest.raises(ValueError, match=r"a\.npz: expected an \.npz archive; got a single"):
            load(tmp_path / "a.npz")


def test_non_finite_features_and_labels(tmp_path, Xy):
    X, y = Xy
    bad = X.copy()
    bad[3, 1] = np.inf
    np.savez(tmp_path / "inf.npz", X=bad, y=y)
    with pytest.raises(
        ValueError,
        match=r"inf\.npz: X must be finite; got np.float64\(inf\) at "
        r"index \(3, 1\)",
    ):
        load_features(tmp_path / "inf.npz")
    (tmp_path / "nan.svm").write_text("1 1:0.5\nnan 2:1\n")
    with pytest.raises(ValueError, match=r"nan\.svm, line 2: the label is nan; expected finite"):
        load_features(tmp_path / "nan.svm")
    (tmp_path / "nanx.svm").write_text("1 1:0.5\n0 2:nan\n")
    with pytest.raises(
        ValueError, match=r"nanx\.svm, line 2: feature index 2 \(as written\) holds nan"
    ):
        load_features(tmp_path / "nanx.svm")
    scipy.io.savemat(tmp_path / "cell.mat", {"X": np.array([[1.0, "a"]], dtype=object), "y": [1]})
    with pytest.raises(ValueError, match=r"cell\.mat: expected X to hold numbers; got dtype obj"):
        load_features(tmp_path / "cell.mat")


def mat_v5_with(path, part, values):
    """A MATLAB v5 file whose sparse X has ``values`` for ``part`` ("ir" or "jc"), patched in
    the bytes: scipy writes the valid ones (ir 2 0 1, jc 0 1 2 3) as int32."""
    X = sp.csc_matrix((np.ones(3), [2, 0, 1], [0, 1, 2, 3]), shape=(3, 3))
    scipy.io.savemat(path, {"X": X, "y": np.ones(3)})
    raw = path.read_bytes()
    valid = np.array({"ir": [2, 0, 1], "jc": [0, 1, 2, 3]}[part], "<i4").tobytes()
    assert raw.count(valid) == 1
    path.write_bytes(raw.replace(valid, np.asarray(values, "<i4").tobytes()))


@pytest.mark.parametrize(
    "part, values, message",
    [
        ("jc", [0, 2, 1, 3], r"b\.mat: X \(jc\) must be non-decreasing; got 2 then 1 at column 1"),
        ("ir", [2, 0, 7], r"b\.mat: X \(ir\)\[2\] = 7 is not an index of the 3 rows"),
        ("jc", [0, 1, 2, 5], r"Cannot read .*b\.mat as MATLAB \.mat"),  # refused by scipy
    ],
)
def test_mat_v5_corrupt_sparse(tmp_path, part, values, message):
    mat_v5_with(tmp_path / "b.mat", part, values)
    with pytest.raises(ValueError, match=message):
        load_features(tmp_path / "b.mat")


@pytest.mark.parametrize(
    "part, value, message",
    [
        ("jc", [0, 2, 1, 3], r"X/jc must be non-decreasing"),
        ("jc", [0, 1, 2, 4], r"X/jc must start at 0 and end at 3"),
        ("ir", [0, 1, 7], r"X/ir\[2\] = 7 is not an index of the 3 rows"),
        ("data", [1.0, np.nan, 1.0], r"X must be finite"),
    ],
)
def test_mat_v73_corrupt_sparse(tmp_path, part, value, message):
    h5py = pytest.importorskip("h5py")
    write_mat73(tmp_path / "b.mat", {"X": sp.eye(3, format="csc"), "y": np.ones((1, 3))})
    with h5py.File(tmp_path / "b.mat", "r+") as f:
        del f["X"][part]
        f["X"][part] = np.asarray(value)
    with pytest.raises(ValueError, match=r"b\.mat: " + message):
        load_features(tmp_path / "b.mat")


def test_mat_v73_spare_room_after_the_entries_is_dropped(tmp_path):
    """MATLAB may store more ir/data entries than jc points to (nzmax): they are ignored."""
    h5py = pytest.importorskip("h5py")
    write_mat73(tmp_path / "f.mat", {"X": sp.eye(3, format="csc"), "y": np.ones((1, 3))})
    with h5py.File(tmp_path / "f.mat", "r+") as f:
        for part, extra in (("ir", 0), ("data", 9.0)):
            value = np.append(f["X"][part][()], extra)
            del f["X"][part]
            f["X"][part] = value
    X, _ = load_features(tmp_path / "f.mat")
    np.testing.assert_array_equal(X.toarray(), np.eye(3))


@pytest.mark.parametrize("damage", ["no attribute", "no jc", "dangling link", "truncated"])
def test_mat_v73_corrupt_file(tmp_path, Xy, damage):
    """Whatever h5py raises on a damaged file (here KeyError, OSError) becomes a ValueError
    naming it."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "b.mat"
    write_mat73(path, {"X": sp.csr_matrix(Xy[0]), "y": Xy[1][None, :]})
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-1000])
    else:
        with h5py.File(path, "r+") as f:
            if damage == "no attribute":
                del f["X"].attrs["MATLAB_sparse"]
            elif damage == "no jc":
                del f["X"]["jc"]
            else:
                del f["y"]
                f["y"] = h5py.SoftLink("/nowhere")
    with pytest.raises(ValueError, match=r"Cannot read .*b\.mat as MATLAB v7\.3 \(HDF5\)"):
        load_features(path)


def test_mat_v73_damaged_anywhere(tmp_path, Xy):
    """16 bytes overwritten (zeros, then ones) every 64 bytes past the MAT header: each
    copy loads or raises a ValueError naming the file (once: RuntimeError or KeyError; at
    other places a TypeError, and a crash in .tocsr())."""
    pytest.importorskip("h5py")
    path = tmp_path / "b.mat"
    write_mat73(path, {"X": sp.csr_matrix(Xy[0]), "y": Xy[1][None, :]})
    raw = path.read_bytes()
    for at in range(512, len(raw), 64):
        for fill in (b"\0", b"\xff"):
            path.write_bytes(raw[:at] + fill * 16 + raw[at + 16 :])
            try:
                load_features(path)
            except ValueError as err:
                assert "b.mat" in str(err)

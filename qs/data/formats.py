"""Feature matrices in common formats: MATLAB .mat, svmlight and .npz, plus the .npz cache.

`load_features` returns ``(X, y)``: X float64, dense ndarray or scipy.sparse CSR as stored,
y a 1-D array with one label per row. Layout of an .npz file: ``X`` dense, or CSR components
``X_data``, ``X_indices``, ``X_indptr``, ``X_shape``; and ``y``. The poselet cache
(`cache_arrays`, saved by the caller) uses that layout, so `load_features` reads it too;
`load_npz_cache` gives back the whole `PoseletData`.
"""

from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from qs.data.poselet import PoseletData

__all__ = ["cache_arrays", "load_features", "load_npz_cache"]

KINDS = {".mat": "mat", ".npz": "npz", ".svm": "svmlight", ".svmlight": "svmlight",
         ".libsvm": "svmlight"}
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_CSR_KEYS = ("X_data", "X_indices", "X_indptr", "X_shape")
_CACHE_KEYS = ("y", "image_names", "box_ids", "boxes", "source", "bias")


def load_features(path, *, kind=None, n_features=None, x_key="X", y_key="y"):
    """Read ``(X, y)`` from a .mat, svmlight or .npz file, by suffix unless ``kind`` is given.

    ``x_key``/``y_key`` name the variables of a .mat file; ``n_features``, when given, is the
    number of columns X must have. Unreadable, corrupt or inconsistent files raise ValueError
    naming the file.
    """
    path = Path(path)
    kind = kind or KINDS.get(path.suffix.lower())
    if kind not in set(KINDS.values()):
        raise ValueError(f"Cannot tell the format of {path}: expected a suffix among "
                         f"{', '.join(KINDS)} or kind='mat'|'svmlight'|'npz'; got "
                         f"{path.suffix!r} (kind={kind!r}).")
    if not path.is_file():
        raise ValueError(f"Feature file {path} does not exist.")
    if kind == "mat":
        X, y = _load_mat(path, x_key, y_key)
    elif kind == "svmlight":
        X, y = _call(path, "svmlight", load_svmlight_file, str(path), n_features=n_features,
                     dtype=np.float64)
    else:
        with _call(path, ".npz", np.load, path, allow_pickle=False) as npz:
            arrays = _npz_arrays(path, npz, ("y",))
        X, y = _call(path, ".npz", _x_from, arrays), arrays["y"]
    return _checked(path, X, y, n_features)


def _checked(path, X, y, n_features):
    X = X.tocsr().astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:  # MATLAB keeps vectors 2-D
        y = y.ravel()
    if X.ndim != 2 or y.ndim != 1:
        raise ValueError(f"{path}: expected X 2-D and y 1-D; got X of shape {X.shape} and y "
                         f"of shape {y.shape}.")
    if X.shape[0] != y.size:
        raise ValueError(f"{path}: X has {X.shape[0]} rows but y has {y.size} labels; expected "
                         "one label per row.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{path}: expected {n_features} feature columns; got {X.shape[1]}.")
    return X, y


def _call(path, what, fn, *args, **kwargs):
    """Run a reader, turning whatever it raises on a bad file into a ValueError naming it."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # the readers raise many types (OSError, zlib, zip, struct ...)
        raise ValueError(f"Cannot read {path} as {what} (corrupt, truncated or another "
                         f"format?): {type(err).__name__}: {err}") from err


def _npz_arrays(path, npz, required):
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: expected an .npz archive; got a single .npy array.")
    keys = set(npz.files)
    x_keys = ("X",) if "X" in keys else _CSR_KEYS
    missing = [k for k in (*x_keys, *required) if k not in keys]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}; expected X (dense) or "
                         f"{', '.join(_CSR_KEYS)} (CSR), and {', '.join(required)}; got "
                         f"{', '.join(sorted(keys)) or 'no arrays'}.")
    return _call(path, ".npz", lambda: {k: npz[k] for k in (*x_keys, *required)})


def _x_from(arrays):
    if "X" in arrays:
        return arrays["X"]
    return sp.csr_matrix((arrays["X_data"], arrays["X_indices"], arrays["X_indptr"]),
                         shape=tuple(arrays["X_shape"]))


def _load_mat(path, x_key, y_key):
    with open(path, "rb") as fh:
        head = fh.read(520)
    if _HDF5_SIGNATURE in (head[:8], head[512:520]):
        return _load_mat73(path, x_key, y_key)
    variables = _call(path, "MATLAB .mat", scipy.io.loadmat, path)
    missing = [k for k in (x_key, y_key) if k not in variables]
    if missing:
        names = sorted(k for k in variables if not k.startswith("__"))
        raise ValueError(f"{path}: no variable {', '.join(missing)}; it holds "
                         f"{', '.join(names) or 'none'} (pass x_key/y_key).")
    return variables[x_key], variables[y_key]


def _load_mat73(path, x_key, y_key):
    try:
        import h5py
    except ImportError:
        raise ValueError(f"{path} is a MATLAB v7.3 (HDF5) file; reading it needs h5py "
                         "(pip install h5py), or save it from MATLAB with -v7.") from None
    with _call(path, "MATLAB v7.3 (HDF5)", h5py.File, path, "r") as f:
        missing = [k for k in (x_key, y_key) if k not in f]
        if missing:
            raise ValueError(f"{path}: no variable {', '.join(missing)}; it holds "
                             f"{', '.join(sorted(f)) or 'none'} (pass x_key/y_key).")
        return tuple(_call(path, "MATLAB v7.3 (HDF5)", _h5_matrix, f[k], h5py)
                     for k in (x_key, y_key))


def _h5_matrix(node, h5py):
    """A MATLAB v7.3 variable: HDF5 holds the transpose (column-major); sparse is a CSC group."""
    if isinstance(node, h5py.Group):
        jc = node["jc"][()]
        data = node["data"][()] if "data" in node else np.empty(0)
        ir = node["ir"][()] if "ir" in node else np.empty(0, np.int64)
        return sp.csc_matrix((data, ir, jc), shape=(int(node.attrs["MATLAB_sparse"]),
                                                    jc.size - 1))
    return node[()].T


def cache_arrays(data):
    """The arrays of a `PoseletData` in the .npz cache layout (written by the caller)."""
    X = data.X.tocsr()
    return {"X_data": X.data, "X_indices": X.indices, "X_indptr": X.indptr,
            "X_shape": np.array(X.shape), "y": data.labels, "image_names": data.image_names,
            "box_ids": data.box_ids, "boxes": data.boxes, "source": np.array(data.source),
            "bias": np.array(data.bias)}


def load_npz_cache(path):
    """Read back a `PoseletData` saved from `cache_arrays`."""
    path = Path(path)
    with _call(path, ".npz", np.load, path, allow_pickle=False) as npz:
        arrays = _npz_arrays(path, npz, _CACHE_KEYS)
    X = sp.csr_matrix(_call(path, ".npz", _x_from, arrays), dtype=np.float64)
    return PoseletData(X=X, labels=arrays["y"],
                       image_names=arrays["image_names"], box_ids=arrays["box_ids"],
                       boxes=arrays["boxes"], source=str(arrays["source"]),
                       bias=bool(arrays["bias"]))

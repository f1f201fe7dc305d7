"""Feature matrices in common formats: MATLAB .mat, svmlight and .npz, plus the .npz cache.

`load_features` returns ``(X, y)``: X float64, dense ndarray or scipy.sparse CSR as stored,
y a 1-D array with one label per row; with ``query_id=True``, ``(X, y, groups)``, the query
id of each row (learning to rank: svmlight/LETOR ``qid:``, an .npz file's ``groups``), each
query's rows consecutive (`check_query_order`). Layout of an .npz file: ``X`` dense, or CSR
components ``X_data``, ``X_indices``, ``X_indptr``, ``X_shape``; ``y``; and ``groups``. The
poselet cache (`cache_arrays`, saved by the caller) uses that layout, so `load_features`
reads it too; `load_npz_cache` gives back the whole `PoseletData`.

Files are untrusted: a sparse matrix is checked in full before it is built (an index out of
range would make its first product read out of bounds and crash the interpreter), X must be
finite, and anything unreadable or inconsistent raises a ValueError naming the file and the
field. MATLAB files are read in a worker process (`read_isolated`): scipy's and h5py's
readers trust the lengths and types a file declares, and one damaged byte can crash them.
"""

import math
from collections.abc import Callable, Generator, Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from qs.data.files import check_final_newline, check_memory, check_regular, shown
from qs.data.poselet import PoseletData

__all__ = [
    "cache_arrays",
    "check_query_order",
    "load_features",
    "load_npz_cache",
    "mat_shapes",
    "names_queries",
    "read_isolated",
    "read_mat",
    "read_svmlight",
]

KINDS = {
    ".mat": "mat",
    ".npz": "npz",
    ".svm": "svmlight",
    ".svmlight": "svmlight",
    ".libsvm": "svmlight",
}
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_CSR_KEYS = ("X_data", "X_indices", "X_indptr", "X_shape")
_CACHE_KEYS = ("y", "image_names", "box_ids", "boxes", "source", "bias")


def load_features(
    path: str | Path,
    *,
    kind: str | None = None,
    n_features: int | None = None,
    x_key: str = "X",
    y_key: str | None = "y",
    query_id: bool = False,
    zero_based: bool | str = "auto",
) -> tuple[Any, ...]:
    """Read ``(X, y)`` from a .mat, svmlight or .npz file, by suffix unless `kind` is given.

    A .mat file is read in a worker process (`read_isolated`: the first one starts its
    server, a few seconds), so a script reading one runs under
    ``if __name__ == "__main__":``.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    kind : str or None, default None
        "mat", "svmlight" or "npz"; None: told by the suffix.
    n_features : int or None, default None
        The number of columns X must have, when given.
    x_key : str, default "X"
        The variable of X in a .mat file.
    y_key : str or None, default "y"
        The variable of y in a .mat file; None reads X alone (y is None; an svmlight
        file's labels are dropped), for data to score.
    query_id : bool, default False
        For learning to rank: return ``(X, y, groups)``, the query id of each row from the
        ``qid:`` of every line of an svmlight/LETOR file (trailing ``# ...`` comments are
        skipped) or the ``groups`` array of an .npz file. Rows stay in the file's order, and
        a query whose rows are not consecutive is refused naming the line (or row) that
        breaks the order.
    zero_based : bool or str, default "auto"
        The index base of an svmlight file (`read_svmlight`).

    Returns
    -------
    tuple
        ``(X, y)``, or ``(X, y, groups)`` with `query_id`: X a float64 array or CSR matrix
        (n_rows, n_features), y and groups one entry per row.

    Raises
    ------
    ValueError
        On an unreadable, corrupt or inconsistent file, naming it; an unknown format; query
        ids asked of a .mat file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "train.svm"
    ...     _ = path.write_text("1 qid:1 1:0.5 3:1\\n0 qid:1 2:1\\n")
    ...     X, y, groups = load_features(path, query_id=True)
    >>> X.toarray().tolist(), y.tolist(), groups.tolist()
    ([[0.5, 0.0, 1.0], [0.0, 1.0, 0.0]], [1.0, 0.0], [1, 1])
    """
    path = Path(path)
    kind = kind or KINDS.get(path.suffix.lower())
    if kind not in set(KINDS.values()):
        raise ValueError(
            f"Cannot tell the format of {path}: expected a suffix among "
            f"{', '.join(KINDS)} or kind='mat'|'svmlight'|'npz'; got "
            f"{path.suffix!r} (kind={kind!r})."
        )
    if query_id and kind == "mat":
        raise ValueError(
            f"{path}: query ids are read from svmlight (qid:) and .npz (groups) "
            "files; a .mat file holds none."
        )
    check_regular(path, "the feature file")
    groups = None
    if kind == "mat":
        if _is_hdf5(path):
            _h5py(path)  # a missing h5py is said here, not by the worker
        ((X, y),) = read_isolated([path], _load_mat, x_key, y_key)
    elif kind == "svmlight":
        X, y, groups, _ = read_svmlight(
            path, zero_based=zero_based, n_features=n_features, query_id=query_id
        )
        y = y if y_key is not None else None
    else:
        wanted = ("y",) * (y_key is not None) + ("groups",) * query_id
        with _open_npz(path) as npz:
            arrays = _npz_arrays(path, npz, wanted)
        X, y = _x_from(path, arrays), arrays.get("y")
        if query_id:
            groups = _npz_groups(path, arrays["groups"], X.shape[0])
    X, y = _checked(path, X, y, n_features)
    return (X, y, groups) if query_id else (X, y)


def names_queries(path, *, kind=None):
    """Whether a feature file names queries, reading no more of it than needed.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    kind : str or None, default None
        "mat", "svmlight" or "npz"; None: told by the suffix.

    Returns
    -------
    bool
        A ``qid:`` on an svmlight file's first data line, or a ``groups`` array in an .npz
        file; False for a .mat file.

    Raises
    ------
    Unreadable
        When the file is missing or not a regular file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     ranked, plain = pathlib.Path(tmp) / "ranked.svm", pathlib.Path(tmp) / "plain.svm"
    ...     _ = ranked.write_text("# a comment\\n1 qid:7 1:0.5\\n")
    ...     _ = plain.write_text("1 1:0.5\\n")
    ...     found = names_queries(ranked), names_queries(plain)
    >>> found
    (True, False)
    """
    path = Path(path)
    kind = kind or KINDS.get(path.suffix.lower())
    check_regular(path, "the feature file")
    if kind == "svmlight":
        with open(path, "rb") as fh:
            for line in fh:
                fields = line.split(b"#", 1)[0].split()
                if fields:
                    return len(fields) > 1 and fields[1].startswith(b"qid:")
        return False
    if kind == "npz":
        with _open_npz(path) as npz:
            return "groups" in npz.files
    return False


def read_svmlight(
    path: str | Path,
    *,
    zero_based: bool | str = "auto",
    n_features: int | None = None,
    query_id: bool = False,
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray | None, bool]:
    r"""Read an svmlight/libsvm file: its features, labels, query ids and index base.

    A model decides the index base once, on its training file, and reads every later file
    with it: "auto" per file would read a zero-based file that happens not to use index 0
    shifted by one column.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    zero_based : bool or str, default "auto"
        True (index 0 is the first column), False (index 1 is; an index 0 is refused
        naming its line) or "auto", decided by this file alone: zero-based when it uses
        index 0, else one-based.
    n_features : int or None, default None
        The number of columns: an svmlight file leaves zeros out, so X may have fewer
        columns than this; it is widened to them.
    query_id : bool, default False
        Whether to read the ``qid:`` of each row.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        The features, float64.
    y : numpy.ndarray of shape (n_rows,)
        The labels.
    groups : numpy.ndarray of shape (n_rows,) or None
        The query id of each row (None unless `query_id`).
    zero_based : bool
        The index base the file was read with.

    Raises
    ------
    ValueError
        On an unreadable or malformed file (naming the line), an index 0 read one-based,
        more columns than `n_features`, or a query whose rows are not consecutive.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "f.svm"
    >>> _ = path.write_text("1 1:0.5 3:2\n-1 2:1\n")
    >>> X, y, _, zero_based = read_svmlight(path, zero_based=True)
    >>> X.shape, zero_based
    ((2, 4), True)
    >>> read_svmlight(path)[0].toarray()
    array([[0.5, 0. , 2. ],
           [0. , 1. , 0. ]])
    """
    path = Path(path)
    check_regular(path, "the feature file")
    check_final_newline(path, _last_byte(path))
    from sklearn.datasets import load_svmlight_file  # scikit-learn loads on first use

    X, y, *qid = _call(
        path,
        "svmlight",
        load_svmlight_file,
        str(path),
        zero_based=True,
        dtype=np.float64,
        query_id=query_id,
    )
    X = X.tocsr()
    _check_svmlight_finite(path, X, y)
    uses_zero = bool(X.indices.size) and int(X.indices.min()) == 0
    if zero_based == "auto":
        zero_based = uses_zero
    if not zero_based:
        if uses_zero:
            row = int(np.searchsorted(X.indptr, np.flatnonzero(X.indices == 0)[0], "right") - 1)
            raise ValueError(
                f"{path}, line {_svmlight_lines(path)[row][0]}: index 0 in a file "
                "read one-based (index 1 is the first column), as the model's "
                "training file was; its indices are zero-based: fit the model "
                "with --zero-based, and every file of it is read so."
            )
        X = X[:, 1:] if X.shape[1] else X
    if n_features is not None and X.shape[1] < n_features:
        X.resize((X.shape[0], n_features))
    groups = _svmlight_groups(path, qid[0], X.shape[0]) if query_id else None
    return X, y, groups, bool(zero_based)


def check_query_order(path, groups, where):
    """Refuse query ids unless each query's rows are consecutive.

    Parameters
    ----------
    path : str or pathlib.Path
        The file the ids were read from, for the message.
    groups : array-like of shape (n_rows,)
        The query id of each row.
    where : callable
        ``where(k)`` describes row ``k`` (0-based) for the message, e.g. as its line.

    Raises
    ------
    ValueError
        Naming the first row that comes back to an earlier query, and that query's
        previous row.

    Examples
    --------
    >>> line = lambda k: f"line {k + 1}"
    >>> check_query_order("train.svm", [1, 1, 2, 2], line)
    >>> check_query_order("train.svm", [1, 2, 1], line)
    Traceback (most recent call last):
        ...
    ValueError: train.svm, line 3: query '1' comes back after other queries (it was last on ...
    """
    groups = np.asarray(groups)
    if groups.size == 0:
        return
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    _, first = np.unique(groups[starts], return_index=True)
    again = np.ones(starts.size, dtype=bool)
    again[first] = False
    if again.any():
        row = int(starts[np.flatnonzero(again)[0]])
        before = int(np.flatnonzero(groups[:row] == groups[row])[-1])
        raise ValueError(
            f"{path}, {where(row)}: query {shown(str(groups[row]))} comes back "
            f"after other queries (it was last on {where(before)}); expected "
            "each query's rows together, one after another. Sort the rows by "
            "query id, keeping their order within a query (e.g. a stable sort)."
        )


def _svmlight_groups(path, qid, n_rows):
    """The qid of every row of an svmlight file, checked to be on every line and in
    consecutive runs; ``qid`` holds those scikit-learn found (it skips lines without)."""
    if qid.size != n_rows:
        lines = _svmlight_lines(path)
        without = next(k for k, (_, has) in enumerate(lines) if not has)
        raise ValueError(
            f"{path}, line {lines[without][0]}: no qid; expected 'LABEL qid:ID "
            f"INDEX:VALUE ...' on every line ({n_rows - qid.size} of {n_rows} "
            "lines have none)."
        )
    check_query_order(path, qid, lambda k: f"line {_svmlight_lines(path)[k][0]}")
    return qid


def _check_svmlight_finite(path, X, y):
    """A ValueError naming the line of the first NaN/inf feature value or label of an
    svmlight file (scikit-learn reads ``nan`` and ``inf`` as numbers)."""
    bad_x = np.flatnonzero(~np.isfinite(X.data))
    bad_y = np.flatnonzero(~np.isfinite(y))
    if not bad_x.size and not bad_y.size:
        return
    rows = np.searchsorted(X.indptr, bad_x, "right") - 1
    row = int(min(rows.min(initial=y.size), bad_y.min(initial=y.size)))
    if bad_y.size and bad_y[0] == row:
        what = f"the label is {float(y[row])!r}"
    else:
        k = int(bad_x[np.flatnonzero(rows == row)[0]])
        what = f"feature index {X.indices[k]} (as written) holds {float(X.data[k])!r}"
    raise ValueError(
        f"{path}, line {_svmlight_lines(path)[row][0]}: {what}; expected finite numbers "
        f"({bad_x.size + bad_y.size} non-finite value(s) in all)."
    )


def _svmlight_lines(path):
    """``(line number, has a qid)`` of each data line of an svmlight file (a line with
    something before its ``#``), for messages."""
    lines = []
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            fields = line.split(b"#", 1)[0].split()
            if fields:
                lines.append((number, len(fields) > 1 and fields[1].startswith(b"qid:")))
    return lines


def _npz_groups(path, groups, n_rows):
    """An .npz file's ``groups``: 1-D, one integer or string id per row, in consecutive runs."""
    if groups.ndim != 1 or groups.dtype.kind not in "iuUS" or groups.size != n_rows:
        raise ValueError(
            f"{path}: groups must hold one query id (integer or string) per row "
            f"of X ({n_rows}); got {groups.dtype} of shape {groups.shape}."
        )
    check_query_order(path, groups, lambda k: f"row {k} of groups")
    return groups


def _last_byte(path):
    """The last byte of a file (b"" if it is empty)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(size - 1, 0))
            return fh.read(1)
    except OSError as err:
        raise ValueError(f"Cannot read {path}: {err.strerror}.") from None


def _checked(path, X, y, n_features):
    """``(X, y)`` as returned: X float64 (CSR when sparse) and finite, y 1-D with a label
    per row, numbers (finite) or strings; y None when X alone was read."""
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{path}: expected X to hold numbers; got dtype {X.dtype}.")
    X = X.tocsr().astype(np.float64) if sp.issparse(X) else X.astype(np.float64)
    y = None if y is None else np.asarray(y)
    # MATLAB keeps vectors 2-D, and an empty one 0 by 0
    if y is not None and y.ndim == 2 and (1 in y.shape or y.size == 0):
        y = y.ravel()
    if X.ndim != 2 or (y is not None and y.ndim != 1):
        expected, got = "X 2-D", f"X of shape {X.shape}"
        if y is not None:
            expected, got = f"{expected} and y 1-D", f"{got} and y of shape {y.shape}"
        raise ValueError(f"{path}: expected {expected}; got {got}.")
    if y is not None and X.shape[0] != y.size:
        raise ValueError(
            f"{path}: X has {X.shape[0]} rows but y has {y.size} labels; expected "
            "one label per row."
        )
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{path}: expected {n_features} feature columns; got {X.shape[1]}.")
    _check_finite(path, "X", X)
    if y is not None and y.dtype.kind not in "biufUS":
        raise ValueError(f"{path}: expected y to hold numbers or strings; got dtype {y.dtype}.")
    if y is not None and y.dtype.kind == "f":
        _check_finite(path, "y", y)
    return X, y


def _check_finite(path, name, a):
    """A ValueError naming the first NaN/inf entry of a float array or CSR matrix."""
    values = a.data if sp.issparse(a) else a
    bad = np.flatnonzero(~np.isfinite(values.ravel()))
    if bad.size:
        k = int(bad[0])
        where = (
            f"row {np.searchsorted(a.indptr, k, side='right') - 1}, column {a.indices[k]}"
            if sp.issparse(a)
            else f"index {tuple(map(int, np.unravel_index(k, a.shape)))}"
        )
        raise ValueError(
            f"{path}: {name} must be finite; got {values.ravel()[k]!r} at {where} "
            f"({bad.size} non-finite value{'s' * (bad.size > 1)} in all)."
        )


def _indices(path, name, a):
    """A stored index array as int64, once it is 1-D, of integers, and within int64."""
    a = np.asarray(a)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ValueError(
            f"{path}: {name} must be a 1-D array of integers; got {a.dtype} of shape {a.shape}."
        )
    if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{path}: {name} holds {a.max()}, beyond any index.")
    return a.astype(np.int64)


def _sparse(path, names, data, indices, indptr, shape, fmt, spare=False):
    """The ``fmt`` ("csr" or "csc") matrix of stored components, checked in full first.

    ``names`` are the components' names in the file (data, indices, indptr), for messages;
    ``indptr`` has one entry per row (CSR) or column (CSC), plus one. ``spare``: entries after
    the last one ``indptr`` points to are spare room (MATLAB's nzmax) and dropped; otherwise
    they are an error. scipy's own check misses that, fractional indices and non-numeric
    data, and names no field, so the checks are written out here.
    """
    data = np.asarray(data)
    if data.ndim != 1 or data.dtype.kind not in "biuf":
        raise ValueError(
            f"{path}: {names[0]} must be a 1-D array of numbers; got {data.dtype} "
            f"of shape {data.shape}."
        )
    indices, indptr = _indices(path, names[1], indices), _indices(path, names[2], indptr)
    if len(shape) != 2 or min(shape) < 0:
        raise ValueError(
            f"{path}: the shape of the sparse matrix must be two sizes >= 0; got {tuple(shape)}."
        )
    major, minor = shape if fmt == "csr" else shape[::-1]
    line = "row" if fmt == "csr" else "column"
    if indptr.size != major + 1:
        raise ValueError(
            f"{path}: {names[2]} must have {major + 1} entries (one per {line} of "
            f"{major}, plus one); got {indptr.size}."
        )
    if indices.size != data.size:
        raise ValueError(
            f"{path}: {names[1]} and {names[0]} must have the same length; got "
            f"{indices.size} and {data.size}."
        )
    end = indptr[-1]
    if indptr[0] != 0 or end > indices.size or (end < indices.size and not spare):
        raise ValueError(
            f"{path}: {names[2]} must start at 0 and end at {indices.size} (the "
            f"number of entries); got {indptr[0]} .. {end}."
        )
    step = np.diff(indptr)
    if step.size and step.min() < 0:
        k = int(np.argmin(step))
        raise ValueError(
            f"{path}: {names[2]} must be non-decreasing; got {indptr[k]} then "
            f"{indptr[k + 1]} at {line} {k}."
        )
    indices, data = indices[:end], data[:end]
    if indices.size and not 0 <= indices.min() <= indices.max() < minor:
        k = int(np.flatnonzero((indices < 0) | (indices >= minor))[0])
        raise ValueError(
            f"{path}: {names[1]}[{k}] = {indices[k]} is not an index of the "
            f"{minor} {'columns' if fmt == 'csr' else 'rows'} (0 .. {minor - 1})."
        )
    build = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return build((data, indices, indptr), shape=tuple(shape))


def _call(path, what, fn, *args, **kwargs):
    """Run a reader, turning whatever it raises on a bad file into a ValueError naming it."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # the readers raise many types (OSError, zlib, zip, struct ...)
        raise ValueError(
            f"Cannot read {path} as {what} (corrupt, truncated or another "
            f"format?): {type(err).__name__}: {err}"
        ) from err


def _open_npz(path):
    """An .npz archive, to use in a ``with`` block; a ValueError for anything else."""
    npz = _call(path, ".npz", np.load, path, allow_pickle=False)
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: expected an .npz archive; got a single .npy array.")
    return npz


def _npz_arrays(path, npz, required):
    keys = set(npz.files)
    x_keys = ("X",) if "X" in keys else _CSR_KEYS
    missing = [k for k in (*x_keys, *required) if k not in keys]
    if missing:
        raise ValueError(
            f"{path}: missing {', '.join(missing)}; expected X (dense) or "
            f"{', '.join(_CSR_KEYS)} (CSR), and {', '.join(required)}; got "
            f"{', '.join(sorted(keys)) or 'no arrays'}."
        )
    for key in (*x_keys, *required):
        _check_member_size(path, npz, key)
    return _call(path, ".npz", lambda: {k: npz[k] for k in (*x_keys, *required)})


def _check_member_size(path, npz, key):
    """Refuse the array ``key`` of an .npz archive whose header declares more bytes than this
    process can hold, before it is read (a few bytes compressed can declare terabytes)."""

    def declared():
        with npz.zip.open(f"{key}.npy") as fh:
            version = np.lib.format.read_magic(fh)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read(fh)
        return shape, dtype

    shape, dtype = _call(path, ".npz", declared)
    n_bytes = math.prod(shape) * dtype.itemsize
    check_memory(f"{path}: {key} of shape {shape} ({dtype})", n_bytes)


def _x_from(path, arrays):
    """X of an .npz file: dense, or checked CSR components."""
    if "X" in arrays:
        return arrays["X"]
    shape = _indices(path, "X_shape", arrays["X_shape"])
    return _sparse(
        path, _CSR_KEYS[:3], arrays["X_data"], arrays["X_indices"], arrays["X_indptr"], shape, "csr"
    )


def read_isolated(
    paths: Iterable[str | Path], reader: Callable[..., Any], *args: Any
) -> Generator[Any, None, None]:
    """Read files in a worker process, so that a reader a damaged file crashes fails in a line.

    The worker is `qs.data.reading.read_images`'s, which isolates the readers of a
    conversion the same way. As with any multiprocessing, a script calling it does its work
    under ``if __name__ == "__main__":``.

    Parameters
    ----------
    paths : iterable of str or pathlib.Path
        The files, in order.
    reader : callable
        ``reader(path, *args)``: reads one file (a module-level function, sent to the
        worker by name).
    *args : Any
        Passed to each call of `reader`.

    Yields
    ------
    Any
        ``reader(path, *args)`` of each path, in order.

    Raises
    ------
    ValueError
        When the reader raises it, or the worker crashes, naming the file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from scipy.io import savemat
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "x.mat"
    ...     savemat(path, {"X": np.ones((2, 3))})
    ...     shapes = list(read_isolated([path], mat_shapes))
    >>> shapes
    [{'X': (2, 3)}]
    """
    from qs.data.reading import read_images

    paths = list(paths)
    with closing(read_images(_Reader(paths, reader, args), range(len(paths)), 1)) as results:
        for _, result in results:
            yield result


class _Reader:
    """``reader(paths[i], *args)`` as the source of images that `read_images` takes."""

    def __init__(self, paths, reader, args):
        self.paths, self.reader, self.args = paths, reader, args

    def name(self, i):
        return str(self.paths[i])

    def read(self, i):
        return self.reader(self.paths[i], *self.args)


def _load_mat(path, x_key, y_key):
    keys = (x_key,) if y_key is None else (x_key, y_key)
    names, found = read_mat(path, keys)
    missing = [k for k in keys if k not in found]
    if missing:
        raise ValueError(
            f"{path}: no variable {', '.join(missing)}; it holds "
            f"{', '.join(names) or 'none'} (pass x_key/y_key)."
        )
    return found[x_key], found.get(y_key)


def read_mat(path: str | Path, keys: Iterable[str]) -> tuple[list[str], dict[str, Any]]:
    """The variables a MATLAB file (v5, or v7.3 by its HDF5 signature) holds, and some of them.

    It runs in this process: call it through `read_isolated` (a damaged file can crash it).

    Parameters
    ----------
    path : str or pathlib.Path
        The .mat file.
    keys : iterable of str
        The variables to read.

    Returns
    -------
    names : list of str
        The names of every variable the file holds, sorted.
    found : dict of str to array
        Those of `keys` it holds, in MATLAB's orientation; sparse ones are checked in full
        and built as CSC.

    Raises
    ------
    ValueError
        On anything unreadable, naming the file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from scipy.io import savemat
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "data.mat"
    ...     savemat(path, {"X": np.eye(2), "y": np.array([1, 2])})
    ...     names, found = read_mat(path, ["X", "w"])
    >>> names, sorted(found), found["X"].tolist()
    (['X', 'y'], ['X'], [[1.0, 0.0], [0.0, 1.0]])
    """
    path = Path(path)
    if _is_hdf5(path):
        return _read_mat73(path, keys)
    import scipy.io  # loads on first use: most commands never read a .mat file

    variables = _call(path, "MATLAB .mat", scipy.io.loadmat, path)
    names = sorted(k for k in variables if not k.startswith("__"))
    found = {k: variables[k] for k in keys if k in variables}
    for k, X in found.items():
        if sp.issparse(X):  # built by scipy without the full check: redone before any use
            found[k] = _sparse(
                path,
                [f"{k} ({part})" for part in ("data", "ir", "jc")],
                X.data,
                X.indices,
                X.indptr,
                X.shape,
                "csc",
            )
    return names, found


def _is_hdf5(path):
    """Whether a MATLAB file is v7.3 (HDF5), by the signature at byte 0 or 512."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(520)
    except OSError as err:
        raise ValueError(f"Cannot read {path}: {err.strerror}.") from None
    return _HDF5_SIGNATURE in (head[:8], head[512:520])


def mat_shapes(path):
    """The shapes of a MATLAB file's variables, read from its headers without loading the data.

    It runs in this process: call it through `read_isolated` (a damaged file can crash it).

    Parameters
    ----------
    path : str or pathlib.Path
        A MATLAB v5 or v7.3 (HDF5) file.

    Returns
    -------
    dict
        ``{name: shape}``, the shapes in MATLAB's orientation.

    Raises
    ------
    ValueError
        When the file cannot be read, or a v7.3 file needs h5py and it is missing.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from scipy.io import savemat
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "cache.mat"
    ...     savemat(path, {"feat": np.ones((4, 3)), "boxes": np.ones((4, 4))})
    ...     shapes = mat_shapes(path)
    >>> shapes == {"feat": (4, 3), "boxes": (4, 4)}
    True
    """
    path = Path(path)
    if _is_hdf5(path):
        h5py = _h5py(path)
        return _call(path, "MATLAB v7.3 (HDF5)", _h5_shapes, path, h5py)
    import scipy.io

    return {
        name: tuple(shape) for name, shape, _ in _call(path, "MATLAB .mat", scipy.io.whosmat, path)
    }


def _h5py(path):
    """h5py, to read the MATLAB v7.3 file ``path``; a ValueError saying how when it is missing."""
    try:
        import h5py
    except ImportError:
        raise ValueError(
            f"{path} is a MATLAB v7.3 (HDF5) file; reading it needs h5py "
            "(pip install h5py), or save it from MATLAB with -v7."
        ) from None
    return h5py


def _h5_shapes(path, h5py):
    shapes = {}
    with h5py.File(path, "r") as f:
        for name in f:
            node = f[name]
            if isinstance(node, h5py.Group):
                if "MATLAB_sparse" in node.attrs:
                    shapes[str(name)] = (
                        int(node.attrs["MATLAB_sparse"]),
                        max(node["jc"].shape[0] - 1, 0),
                    )
            else:
                shapes[str(name)] = tuple(reversed(node.shape))
    return shapes


def _read_mat73(path, keys):
    h5py = _h5py(path)
    names, found = _call(path, "MATLAB v7.3 (HDF5)", _read_h5, path, keys, h5py)
    return names, {
        k: _sparse(path, [f"{k}/data", f"{k}/ir", f"{k}/jc"], *v, "csc", spare=True)
        if isinstance(v, tuple)
        else v
        for k, v in found.items()
    }


def _read_h5(path, keys, h5py):
    """The names a MATLAB v7.3 file holds, and its variables ``keys`` as stored: an array
    (the transpose of MATLAB's, which is column-major), or for a sparse one (a CSC group) its
    (data, ir, jc, shape). Everything is read from the file here, so that one handler turns
    whatever h5py raises on a corrupt file (KeyError, OSError, RuntimeError ...) into a
    ValueError."""
    found = {}
    with h5py.File(path, "r") as f:
        names = sorted(str(name) for name in f)  # a damaged name reads as bytes
        for k in keys:
            if k not in f:
                continue
            node = f[k]
            if isinstance(node, h5py.Group):
                jc = node["jc"][()]
                data = node["data"][()] if "data" in node else np.empty(0)
                ir = node["ir"][()] if "ir" in node else np.empty(0, np.int64)
                found[k] = data, ir, jc, (int(node.attrs["MATLAB_sparse"]), max(jc.size - 1, 0))
            else:
                found[k] = node[()].T
    return names, found


def cache_arrays(data: PoseletData) -> dict[str, np.ndarray]:
    """The arrays of a `PoseletData` in the .npz cache layout (written by the caller).

    Parameters
    ----------
    data : PoseletData
        The data.

    Returns
    -------
    dict of str to numpy.ndarray
        The arrays `load_npz_cache` reads back, for ``numpy.savez``.

    Examples
    --------
    >>> from qs.data.synthetic import make_voc2011_actions
    >>> arrays = cache_arrays(make_voc2011_actions()["test"])
    >>> sorted(arrays)[:4]
    ['X_data', 'X_indices', 'X_indptr', 'X_shape']
    """
    X = data.X.tocsr()
    return {
        "X_data": X.data,
        "X_indices": X.indices,
        "X_indptr": X.indptr,
        "X_shape": np.array(X.shape),
        "y": data.labels,
        "image_names": data.image_names,
        "box_ids": data.box_ids,
        "boxes": data.boxes,
        "source": np.array(data.source),
        "bias": np.array(data.bias),
    }


def load_npz_cache(path: str | Path) -> PoseletData:
    """Read back a `PoseletData` saved from `cache_arrays`.

    Every field is checked against the others (one row of each per box).

    Parameters
    ----------
    path : str or pathlib.Path
        The .npz file.

    Returns
    -------
    PoseletData
        The data.

    Raises
    ------
    ValueError
        On a missing, unreadable or inconsistent file, naming it and the field.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.synthetic import make_voc2011_actions
    >>> data = make_voc2011_actions()["test"]
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "test.npz"
    ...     np.savez(path, **cache_arrays(data))
    ...     back = load_npz_cache(path)
    >>> (back.X != data.X).nnz, back.source == data.source
    (0, True)
    """
    path = Path(path)
    check_regular(path, "the .npz cache")
    with _open_npz(path) as npz:
        arrays = _npz_arrays(path, npz, _CACHE_KEYS)
    X, _ = _checked(path, _x_from(path, arrays), arrays["y"], None)
    X = sp.csr_matrix(X)
    n = X.shape[0]
    fields = [
        ("y", "iu", (n,), "integer box labels"),
        ("image_names", "U", (n,), "image names (strings)"),
        ("box_ids", "iu", (n,), "integer box ids"),
        ("boxes", "biuf", (n, 4), "box coordinates (min_x, min_y, width, height)"),
        ("source", "U", (), "one string"),
        ("bias", "b", (), "one bool"),
    ]
    for name, kinds, shape, what in fields:
        a = arrays[name]
        if a.dtype.kind not in kinds or a.shape != shape:
            raise ValueError(
                f"{path}: {name} must hold {what} of shape {shape}, one row per "
                f"row of X; got {a.dtype} of shape {a.shape}."
            )
    boxes = arrays["boxes"].astype(np.float64)
    _check_finite(path, "boxes", boxes)
    return PoseletData(
        X=X,
        labels=arrays["y"].astype(np.int64),
        image_names=arrays["image_names"],
        box_ids=arrays["box_ids"],
        boxes=boxes,
        source=str(arrays["source"]),
        bias=bool(arrays["bias"]),
    )

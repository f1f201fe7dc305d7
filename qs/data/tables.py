"""A researcher's own feature files as ``(X, y, feature names)``: CSV, TSV and Parquet tables
with a named label column, and the svmlight, .npz and .mat files of `qs.data.formats`; for
learning to rank, with the query id of each row (a table's group column, svmlight's ``qid:``,
an .npz file's ``groups``).

Every file is untrusted: only regular files are read, features must be numbers and finite,
labels present on every row; each problem is a one-line ValueError naming the file, the
column (or key) and the first row at fault. Nothing read runs code (.npz without pickle).
"""

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from qs.data.files import check_regular, shown
from qs.data.formats import KINDS, check_query_order, load_features, read_svmlight

__all__ = [
    "SUFFIXES",
    "LabelColumnError",
    "Table",
    "align_features",
    "column_fingerprint",
    "columns_in_use",
    "permuted_columns",
    "read_labels",
    "read_table",
    "take_columns",
]

#: the most columns a fingerprint describes (evenly spaced among those in use beyond that)
FINGERPRINT_COLUMNS = 512

#: suffix -> format: the tables with named columns, then the formats of qs.data.formats
TABLE_KINDS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet"}
SUFFIXES = {**TABLE_KINDS, **KINDS}


@dataclass(frozen=True)
class Table:
    """What a feature file holds, as `read_table` reads it.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix
        The features, float64.
    y : ndarray or None
        One label per row; None when the labels were not asked for or are absent.
    feature_names : list of str or None
        The column names of a table; None for other formats.
    path : pathlib.Path
        The file it came from.
    groups : ndarray or None, default None
        The query id of each row, each query's rows consecutive; None unless asked for.
    zero_based : bool or None, default None
        The index base an svmlight file was read with; None for other formats.

    Examples
    --------
    >>> import pathlib
    >>> table = Table(np.array([[1.0, 2.0]]), np.array([1]), ["b", "a"], pathlib.Path("x.csv"))
    >>> table.X.shape, table.groups is None
    ((1, 2), True)
    """

    X: Any
    y: Any
    feature_names: list | None
    path: Path
    groups: np.ndarray | None = None
    zero_based: bool | None = None


class LabelColumnError(ValueError):
    """A table's label column is not named, or is not among its columns: a ValueError.

    ``near`` is the column the name given most likely meant: one that differs from it only
    in case or surrounding spaces, else a close spelling; None when none is.

    Parameters
    ----------
    path : str or pathlib.Path
        The table.
    given : str or None
        The label column's name as given; None: none was.
    columns : sequence of str
        The table's columns.

    Examples
    --------
    >>> err = LabelColumnError("train.csv", "Label ", ["x", "label"])
    >>> err.near
    'label'
    >>> str(err)
    "train.csv: no label column 'Label ' (did you mean 'label'?); its columns: 'x', 'label'."
    """

    def __init__(self, path, given, columns):
        self.path, self.given, self.columns = path, given, [str(c) for c in columns]
        self.near = None if given is None else _near(str(given), self.columns)
        super().__init__(self.describe("name its label column"))

    def describe(self, how):
        """The message, worded with the way the caller names the column.

        Parameters
        ----------
        how : str
            How to name the column (a command line option, say), said when none was given.

        Returns
        -------
        str
            The message.

        Examples
        --------
        >>> LabelColumnError("train.csv", None, ["x", "label"]).describe("pass --label-column")
        "train.csv: pass --label-column; its columns: 'x', 'label'."
        """
        columns = _listed(self.columns) or "none"
        if self.given is None:
            return f"{self.path}: {how}; its columns: {columns}."
        near = f" (did you mean {shown(self.near)}?)" if self.near is not None else ""
        return (
            f"{self.path}: no label column {shown(str(self.given))}{near}; its columns: {columns}."
        )


def _near(name, columns):
    """The column of `columns` that `name` most likely meant (see `LabelColumnError`)."""
    key = name.strip().casefold()
    same = [c for c in columns if c.strip().casefold() == key]
    if same:
        return same[0]
    close = difflib.get_close_matches(name, columns, n=1, cutoff=0.8)
    return close[0] if close else None


def read_table(
    path: str | Path,
    *,
    label_column: str | None = None,
    labels: bool = True,
    group_column: str | None = None,
    groups: bool = False,
    zero_based: bool | str = "auto",
) -> Table:
    """Read a feature file, its format told by its suffix (`SUFFIXES`).

    A table (CSV, TSV, Parquet) needs `label_column`; every other column is a feature.
    svmlight, .npz (X, y) and .mat (X, y) files hold their labels themselves. A table's
    header must name each column once (a repeated name is refused). Its label column is read
    as text, and as numbers only when every value is a number written one way: "01" and "1"
    stay two classes. A timestamp column (Parquet) is refused as a feature.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    label_column : str or None, default None
        A table's column of labels.
    labels : bool, default True
        False reads data to score: the features alone, a table's label column dropped when
        it has one.
    group_column : str or None, default None
        A table's column of query ids (naming it is enough; it is not a feature).
    groups : bool, default False
        Learning to rank: read the query id of each row into ``Table.groups``, from a
        table's `group_column`, an svmlight/LETOR file's ``qid:`` or an .npz file's
        ``groups`` array. Rows keep the file's order; a query whose rows are not
        consecutive is refused naming the row (line) that breaks the order.
    zero_based : bool or str, default "auto"
        The index base of an svmlight file: True, False or "auto" (decided by this file:
        `qs.data.formats.read_svmlight`); the base read with is ``Table.zero_based``.

    Returns
    -------
    Table
        The features, labels, feature names (of a table), path, query ids and index base.

    Raises
    ------
    ValueError
        On an unknown suffix, an unreadable or malformed file, a label or group column
        that is missing or given for a format that holds its own, or no feature column
        (`LabelColumnError` names the columns when the label column is missing).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "train.csv"
    ...     _ = path.write_text("height,weight,kind\\n1.5,60,a\\n1.8,80,b\\n")
    ...     table = read_table(path, label_column="kind")
    >>> table.X.tolist(), table.y.tolist(), table.feature_names
    ([[1.5, 60.0], [1.8, 80.0]], ['a', 'b'], ['height', 'weight'])
    """
    path = Path(path)
    kind = _kind(path)
    check_regular(path, "the feature file")
    groups = groups or group_column is not None
    if kind not in ("csv", "tsv", "parquet"):
        if label_column is not None and labels:
            raise ValueError(
                f"{path}: a {path.suffix} file holds its labels itself (y); a "
                "label column applies to CSV, TSV and Parquet files only."
            )
        if group_column is not None:
            raise ValueError(
                f"{path}: a {path.suffix} file holds its query ids itself (qid: "
                "or groups); a group column applies to CSV, TSV and Parquet "
                "files only."
            )
        X: Any
        y: np.ndarray | None
        query: np.ndarray | None
        base: bool | None = None
        if kind == "svmlight":
            X, y, query, base = read_svmlight(path, zero_based=zero_based, query_id=groups)
            y = y if labels else None
        else:
            X, y, *rest = load_features(path, y_key="y" if labels else None, query_id=groups)
            query = rest[0] if groups else None
        if y is not None:
            y = _class_labels(y.astype(str) if y.dtype.kind in "SU" else y)
        return Table(X, y, None, path, query, base)
    frame = _read_frame(path, kind, text=label_column if labels else None)
    if labels and (label_column is None or label_column not in frame.columns):
        raise LabelColumnError(path, label_column, frame.columns)
    query = _groups(path, frame, group_column, label_column) if groups else None
    y = _labels(path, label_column, frame[label_column]) if labels else None
    dropped = [c for c in (label_column, group_column) if c is not None and c in frame.columns]
    features = frame.drop(columns=dropped)
    if features.shape[1] == 0:
        raise ValueError(
            f"{path}: no feature column besides the label and group columns "
            f"{_listed([str(c) for c in dropped])}."
        )
    return Table(_features(path, features), y, [str(c) for c in features.columns], path, query)


def read_labels(path: str | Path, *, label_column: str | None = None) -> np.ndarray:
    """The labels of a feature file, the other columns of a table unread.

    Parameters
    ----------
    path : str or pathlib.Path
        A table (CSV, TSV, Parquet), or an svmlight, .npz or .mat file.
    label_column : str or None, default None
        A table's column of labels (read as `read_table` reads it).

    Returns
    -------
    numpy.ndarray of shape (n_rows,)
        The labels: a table's `label_column`, or the y of another file.

    Raises
    ------
    ValueError
        On an unreadable file, or a table without `label_column` (`LabelColumnError`).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "test.csv"
    ...     _ = path.write_text("height,kind\\n1.5,01\\n1.8,1\\n")
    ...     labels = read_labels(path, label_column="kind")
    >>> labels.tolist()
    ['01', '1']
    """
    path = Path(path)
    if _kind(path) not in ("csv", "tsv", "parquet"):
        return read_table(path, label_column=label_column).y
    check_regular(path, "the label file")
    header = _read_frame(path, _kind(path), nrows=0)
    if label_column is None or label_column not in header.columns:
        raise LabelColumnError(path, label_column, header.columns)
    frame = _read_frame(path, _kind(path), columns=[label_column], text=label_column)
    return _labels(path, label_column, frame[label_column])


def align_features(table, feature_names, n_features, against):
    """A table's features in the expected columns: matched by name, or checked by count.

    An svmlight file, which leaves zeros out, may end before the last columns: they are
    zeros.

    Parameters
    ----------
    table : Table
        The file read.
    feature_names : list of str or None
        The expected columns' names, in order; None: compare the count alone (as also when
        the table has no names).
    n_features : int
        The expected number of columns.
    against : str
        Where the expected features come from (the training file, the model), for the
        message.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix
        ``table.X``, its columns in the order of ``feature_names``.

    Raises
    ------
    ValueError
        When a named column is missing or extra, or the number of columns differs.

    Examples
    --------
    >>> import pathlib
    >>> table = Table(np.array([[1.0, 2.0]]), None, ["b", "a"], pathlib.Path("test.csv"))
    >>> align_features(table, ["a", "b"], 2, "the model").tolist()
    [[2.0, 1.0]]
    >>> align_features(table, ["a", "c"], 2, "the model")
    Traceback (most recent call last):
        ...
    ValueError: test.csv: lacks the feature column(s) 'c' of the model; it has 'b' instead.
    """
    names = table.feature_names
    if names is not None and feature_names is not None:
        missing = [n for n in feature_names if n not in names]
        if missing:
            extra = [n for n in names if n not in feature_names]
            raise ValueError(
                f"{table.path}: lacks the feature column(s) {_listed(missing)} of {against}"
                + (f"; it has {_listed(extra)} instead" if extra else "")
                + "."
            )
        if len(names) != len(feature_names):
            extra = [n for n in names if n not in feature_names]
            raise ValueError(
                f"{table.path}: has feature column(s) {_listed(extra)} that {against} has not."
            )
        order = [names.index(n) for n in feature_names]
        return table.X[:, order]
    if SUFFIXES[table.path.suffix.lower()] == "svmlight" and table.X.shape[1] < n_features:
        X = table.X.copy()  # svmlight leaves zeros out: the last columns may be all zero
        X.resize((X.shape[0], n_features))
        return X
    if table.X.shape[1] != n_features:
        raise ValueError(
            f"{table.path}: has {table.X.shape[1]} features, but {against} has {n_features}."
        )
    return table.X


def columns_in_use(X):
    """The columns that are non-zero in some row, found without allocating per column.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix
        The features.

    Returns
    -------
    ndarray of int64
        The columns' indices, sorted.

    Examples
    --------
    >>> columns_in_use(sp.csr_matrix(([2.0, 0.0], [7, 3], [0, 2]), shape=(1, 10**12)))
    array([7])
    """
    if sp.issparse(X):
        X = X.tocsr()
        return np.unique(X.indices[X.data != 0]).astype(np.int64)
    return np.flatnonzero((np.asarray(X) != 0).any(axis=0))


def take_columns(X, columns):
    """Some columns of ``X``; for a sparse ``X``, in memory that grows with its entries alone.

    scipy's column indexing allocates one entry per column of ``X``.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix
        The features.
    columns : array-like of int
        The columns, sorted and distinct.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix
        ``X[:, columns]``.

    Examples
    --------
    >>> X = sp.csr_matrix(([1.0, 2.0, 3.0], [0, 5, 9], [0, 2, 3]), shape=(2, 10**12))
    >>> take_columns(X, np.array([5, 9])).toarray()
    array([[2., 0.],
           [0., 3.]])
    """
    columns = np.asarray(columns, dtype=np.int64)
    if not sp.issparse(X):
        return X[:, columns]
    X = X.tocsr()
    pos = np.searchsorted(columns, X.indices)
    keep = pos < columns.size
    keep[keep] = columns[pos[keep]] == X.indices[keep]
    indptr = np.concatenate([[0], np.cumsum(keep)])[X.indptr]
    return sp.csr_matrix((X.data[keep], pos[keep], indptr), shape=(X.shape[0], columns.size))


def column_fingerprint(X):
    """A fingerprint of the columns, to tell later whether a file without names holds the same.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix
        The features.

    Returns
    -------
    dict
        JSON-ready: ``count`` (columns), ``rows``, and the ``columns``, ``mean`` and
        ``std`` of up to `FINGERPRINT_COLUMNS` columns in use (non-zero somewhere).

    Examples
    --------
    >>> fp = column_fingerprint(np.array([[1.0, 0.0, 5.0], [3.0, 0.0, 7.0]]))
    >>> fp["count"], fp["columns"], fp["mean"], fp["std"]
    (3, [0, 2], [2.0, 6.0], [1.0, 1.0])
    """
    used = columns_in_use(X)
    if used.size > FINGERPRINT_COLUMNS:
        used = used[np.linspace(0, used.size - 1, FINGERPRINT_COLUMNS).round().astype(int)]
    mean, std = _moments(take_columns(X, used))
    return {
        "count": int(X.shape[1]),
        "rows": int(X.shape[0]),
        "columns": used.tolist(),
        "mean": [float(f"{m:.6g}") for m in mean],
        "std": [float(f"{v:.6g}") for v in std],
    }


def permuted_columns(fingerprint, X):
    """Whether the columns of ``X`` look permuted against the training columns' fingerprint.

    A column matches a training column when its mean lies within a quarter of that
    column's standard deviation (plus three standard errors) and its standard deviation
    within a factor 1.5; the columns look permuted when at least a quarter (and two) of
    them match not their own training column but another one.

    Parameters
    ----------
    fingerprint : dict
        `column_fingerprint` of the training columns.
    X : ndarray or scipy sparse matrix
        The features to check.

    Returns
    -------
    str or None
        None when the columns look the same or merely shifted, else a one-line
        description.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(200, 4)) * [1, 2, 3, 4] + [0, 10, 20, 30]
    >>> fingerprint = column_fingerprint(X)
    >>> permuted_columns(fingerprint, X) is None
    True
    >>> print(permuted_columns(fingerprint, X[:, ::-1]))
    4 of 4 columns compared look like other training columns (column 0 like training column 3); ...
    """
    columns = np.asarray(fingerprint["columns"], dtype=np.int64)
    if columns.size < 2 or X.shape[0] < 2 or X.shape[1] != fingerprint["count"]:
        return None
    ref_mean, ref_std = (np.asarray(fingerprint[k], dtype=np.float64) for k in ("mean", "std"))
    mean, std = _moments(take_columns(X, columns))
    tol = ref_std * (0.25 + 3 / np.sqrt(X.shape[0])) + 1e-9 * (1 + np.abs(ref_mean))
    close = np.abs(mean[:, None] - ref_mean[None, :]) <= tol[None, :]
    ratio = (std[:, None] + 1e-12) / (ref_std[None, :] + 1e-12)
    match = close & (ratio <= 1.5) & (ratio >= 1 / 1.5)
    own = np.diag(match)
    elsewhere = ~own & match.any(axis=1)
    if elsewhere.sum() < max(2, columns.size / 4):
        return None
    k = int(np.flatnonzero(elsewhere)[0])
    other = int(columns[np.flatnonzero(match[k])[0]])
    return (
        f"{int(elsewhere.sum())} of {columns.size} columns compared look like other "
        f"training columns (column {columns[k]} like training column {other}); its "
        "columns may be in another order than the training file's, which files without "
        "column names cannot show"
    )


def _moments(X):
    """Column means and standard deviations of ``X``, dense or sparse, without densifying."""
    if sp.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        var = np.asarray(X.multiply(X).mean(axis=0)).ravel() - mean**2
        return mean, np.sqrt(np.maximum(var, 0))
    return X.mean(axis=0), X.std(axis=0)


def _kind(path):
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"Cannot tell the format of {path}: expected a suffix among "
            f"{', '.join(SUFFIXES)}; got {path.suffix or 'none'!r}."
        )
    return kind


def _read_frame(path, kind, nrows=None, columns=None, text=None):
    """The table at ``path`` as a DataFrame, the column ``text`` (a CSV's label column) read
    as text; a ValueError naming it when it cannot be read or names a column twice."""
    sep = "\t" if kind == "tsv" else ","
    _check_names(path, _parquet_names(path) if kind == "parquet" else _csv_names(path, sep))
    try:
        if kind == "parquet":
            return pd.read_parquet(path, columns=columns)
        return pd.read_csv(
            path,
            sep=sep,
            nrows=nrows,
            usecols=columns,
            keep_default_na=False,
            na_values=[""],  # a class "NA" is text
            dtype=None if text is None else {text: str},
        )
    except ImportError:
        raise ValueError(
            f"{path}: reading Parquet needs pyarrow or fastparquet; install one "
            "(pip install pyarrow)."
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(
            f"{path}: the file is empty; expected a header line of column names."
        ) from None
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        reason = " ".join(str(err).split())[:200]
        raise ValueError(f"Cannot read {path} as {kind.upper()}: {reason}") from None


def _csv_names(path, sep):
    """The names of a CSV/TSV header line as written (pandas would rename repeats); none
    when it cannot be read (the reader then says why)."""
    try:
        header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError):
        return []
    return list(header.iloc[0]) if len(header) else []


def _parquet_names(path):
    """The column names a Parquet file's schema gives; none when pyarrow is missing or cannot
    read the schema (the reader then says why)."""
    try:
        import pyarrow.parquet as pq

        return pq.read_schema(path).names
    except Exception:
        return []


def _check_names(path, names):
    """Refuse a header that names a column twice: pandas would read the second as
    ``NAME.1``, a feature, so a repeated label column would leak the labels into the
    features."""
    seen = set()
    for name in map(str, names):
        if name in seen:
            raise ValueError(
                f"{path}: the column name {shown(name)} appears more than once "
                "in its header; expected each column named once (rename or "
                "drop the repeats)."
            )
        seen.add(name)


def _features(path, frame):
    """The feature columns as float64, refused when a column holds text, timestamps or
    durations, or a value is missing or infinite."""
    for name in frame.columns:
        column = frame[name]
        if column.dtype.kind in "mM":
            raise ValueError(
                f"{path}: feature column {shown(str(name))} holds "
                f"{'timestamps' if column.dtype.kind == 'M' else 'durations'} ({column.dtype}); "
                "qsrank does not convert them (their counts of time units since 1970 are no "
                "feature scale): "
                "encode them as numbers first, e.g. seconds since the epoch or a day of week."
            )
        if column.dtype.kind not in "biuf":
            numbers = pd.to_numeric(column, errors="coerce")
            bad = np.flatnonzero(numbers.isna().to_numpy() & column.notna().to_numpy())
            if bad.size:
                raise ValueError(
                    f"{path}: feature column {shown(str(name))} holds text, e.g. "
                    f"{shown(str(column.iloc[bad[0]]))} in {_row(bad[0], path)} ({bad.size} "
                    "non-numeric value(s)); features must be numbers (encode categories as "
                    "numbers first)."
                )
    X = frame.apply(pd.to_numeric).to_numpy(dtype=np.float64)
    rows, cols = np.nonzero(~np.isfinite(X))
    if rows.size:
        value = X[rows[0], cols[0]]
        what = "is missing (empty or NaN)" if np.isnan(value) else f"is {value}"
        raise ValueError(
            f"{path}: feature column {shown(str(frame.columns[cols[0]]))} {what} in "
            f"{_row(rows[0], path)} ({rows.size} non-finite value(s) in all); fill in or "
            "drop them first."
        )
    return X


def _labels(path, name, column):
    """The labels of a column, as numbers or strings; refused when one is missing. Text is
    taken as numbers only when every value is a number written one way (`_as_numbers`)."""
    missing = np.flatnonzero(column.isna().to_numpy())
    if missing.size:
        raise ValueError(
            f"{path}: label column {shown(str(name))} is empty in "
            f"{_row(missing[0], path)} ({missing.size} missing label(s))."
        )
    values = column.to_numpy()
    if values.dtype.kind in "biuf":
        return _class_labels(values)
    return _as_numbers(values.astype(str))


def _as_numbers(text):
    """Labels read as text: numbers when every one is a finite number and each number is
    written one way (``1`` and ``2``, or ``1.0`` and ``2.5``), else the text itself, so that
    "01" and "1" (or "1" and "1.0") stay two classes instead of merging into one."""
    numbers = pd.to_numeric(pd.Series(text), errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(numbers).all():
        return text
    spellings = pd.DataFrame({"number": numbers, "text": np.char.strip(text)})
    if (spellings.groupby("number")["text"].nunique() > 1).any():
        return text
    return _class_labels(numbers)


def _groups(path, frame, name, label_column):
    """A table's query ids: the column ``name``, numbers or strings, none missing, each
    query's rows consecutive."""
    if name is None:
        raise ValueError(
            f"{path}: name its group column, the query id of each row (one of {_columns(frame)})."
        )
    if name not in frame.columns:
        raise ValueError(
            f"{path}: no group column {shown(str(name))}; its columns: {_columns(frame)}."
        )
    if name == label_column:
        raise ValueError(
            f"{path}: the group column and the label column are both "
            f"{shown(str(name))}; expected two columns."
        )
    column = frame[name]
    missing = np.flatnonzero(column.isna().to_numpy())
    if missing.size:
        raise ValueError(
            f"{path}: group column {shown(str(name))} is empty in "
            f"{_row(missing[0], path)} ({missing.size} missing query id(s))."
        )
    values = column.to_numpy()
    values = _class_labels(values if values.dtype.kind in "biuf" else values.astype(str))
    check_query_order(path, values, lambda k: _row(k, path))
    return values


def _class_labels(y):
    """Labels as given, but whole numbers stored as floats (svmlight's 1.0, -1.0) as
    integers, so that a class is named 1, not 1.0."""
    if y.dtype.kind == "f" and np.isfinite(y).all() and (y == np.round(y)).all():
        return y.astype(np.int64)
    return y


def _row(k, path):
    """Data row ``k`` (0-based) of the table ``path`` as a user counts it: from 1, and for a
    text file (CSV, TSV) its line, after the header line."""
    if _kind(Path(path)) == "parquet":
        return f"data row {k + 1}"
    return f"data row {k + 1} (line {k + 2} of a text file)"


def _columns(frame):
    return _listed([str(c) for c in frame.columns]) or "none"


def _listed(names, most=8):
    shown_names = ", ".join(shown(n) for n in names[:most])
    return shown_names + (f" and {len(names) - most} more" if len(names) > most else "")

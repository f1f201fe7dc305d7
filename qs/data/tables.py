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

import numpy as np
import pandas as pd

from qs.data.files import check_regular, shown
from qs.data.formats import KINDS, check_query_order, load_features

__all__ = ["SUFFIXES", "LabelColumnError", "Table", "align_features", "read_labels",
           "read_table"]

#: suffix -> format: the tables with named columns, then the formats of qs.data.formats
TABLE_KINDS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet",
               ".pq": "parquet"}
SUFFIXES = {**TABLE_KINDS, **KINDS}


@dataclass(frozen=True)
class Table:
    """What a feature file holds: ``X`` (float64, dense or CSR), ``y`` (one label per row, or
    None when the labels were not asked for or are absent), ``feature_names`` (the column
    names of a table, else None), the file it came from, and ``groups`` (the query id of each
    row, each query's rows consecutive; None unless asked for)."""

    X: object
    y: object
    feature_names: list | None
    path: Path
    groups: np.ndarray | None = None


class LabelColumnError(ValueError):
    """A table's label column is not named (``given`` None), or is not among its
    ``columns``. ``near`` is the column the name given most likely meant: one that differs
    from it only in case or surrounding spaces, else a close spelling; None when none is.
    :meth:`describe` words the message with the way the caller names the column (a command
    line option, say)."""

    def __init__(self, path, given, columns):
        self.path, self.given, self.columns = path, given, [str(c) for c in columns]
        self.near = None if given is None else _near(str(given), self.columns)
        super().__init__(self.describe("name its label column"))

    def describe(self, how):
        """The message, with `how` saying how to name the column when none was given."""
        columns = _listed(self.columns) or "none"
        if self.given is None:
            return f"{self.path}: {how}; its columns: {columns}."
        near = f" (did you mean {shown(self.near)}?)" if self.near is not None else ""
        return (f"{self.path}: no label column {shown(str(self.given))}{near}; its columns: "
                f"{columns}.")


def _near(name, columns):
    """The column of `columns` that `name` most likely meant (see `LabelColumnError`)."""
    key = name.strip().casefold()
    same = [c for c in columns if c.strip().casefold() == key]
    if same:
        return same[0]
    close = difflib.get_close_matches(name, columns, n=1, cutoff=0.8)
    return close[0] if close else None


def read_table(path, *, label_column=None, labels=True, group_column=None, groups=False):
    """Read the feature file ``path``, its format told by its suffix (`SUFFIXES`).

    A table (CSV, TSV, Parquet) needs ``label_column``, the column of labels; every other
    column is a feature. svmlight, .npz (X, y) and .mat (X, y) files hold their labels
    themselves. ``labels=False`` reads data to score: the features alone, a table's label
    column dropped when it has one.

    Learning to rank: ``groups=True`` reads the query id of each row into ``Table.groups``:
    a table's ``group_column`` (naming it is enough; it is not a feature), an svmlight/LETOR
    file's ``qid:`` or an .npz file's ``groups`` array. Rows keep the file's order; a query
    whose rows are not consecutive is refused naming the row (line) that breaks the order.
    """
    path = Path(path)
    kind = _kind(path)
    check_regular(path, "the feature file")
    groups = groups or group_column is not None
    if kind not in ("csv", "tsv", "parquet"):
        if label_column is not None and labels:
            raise ValueError(f"{path}: a {path.suffix} file holds its labels itself (y); a "
                             "label column applies to CSV, TSV and Parquet files only.")
        if group_column is not None:
            raise ValueError(f"{path}: a {path.suffix} file holds its query ids itself (qid: "
                             "or groups); a group column applies to CSV, TSV and Parquet "
                             "files only.")
        X, y, *query = load_features(path, y_key="y" if labels else None, query_id=groups)
        if y is not None:
            y = _class_labels(y.astype(str) if y.dtype.kind in "SU" else y)
        return Table(X, y, None, path, query[0] if groups else None)
    frame = _read_frame(path, kind)
    if labels and (label_column is None or label_column not in frame.columns):
        raise LabelColumnError(path, label_column, frame.columns)
    query = _groups(path, frame, group_column, label_column) if groups else None
    y = _labels(path, label_column, frame[label_column]) if labels else None
    dropped = [c for c in (label_column, group_column) if c is not None and c in frame.columns]
    features = frame.drop(columns=dropped)
    if features.shape[1] == 0:
        raise ValueError(f"{path}: no feature column besides the label and group columns "
                         f"{_listed([str(c) for c in dropped])}.")
    return Table(_features(path, features), y, [str(c) for c in features.columns], path,
                 query)


def read_labels(path, *, label_column=None):
    """The labels of ``path``: a table's ``label_column`` (the other columns unread), or the
    y of an svmlight, .npz or .mat file."""
    path = Path(path)
    if _kind(path) not in ("csv", "tsv", "parquet"):
        return read_table(path, label_column=label_column).y
    check_regular(path, "the label file")
    header = _read_frame(path, _kind(path), nrows=0)
    if label_column is None or label_column not in header.columns:
        raise LabelColumnError(path, label_column, header.columns)
    frame = _read_frame(path, _kind(path), columns=[label_column])
    return _labels(path, label_column, frame[label_column])


def align_features(table, feature_names, n_features, against):
    """``table.X`` with its columns in the order of ``feature_names`` (a table's columns are
    matched by name), or checked to have ``n_features`` columns; ``against`` names where the
    expected features come from (the training file, the model) for the error. An svmlight
    file, which leaves zeros out, may end before the last columns: they are zeros."""
    names = table.feature_names
    if names is not None and feature_names is not None:
        missing = [n for n in feature_names if n not in names]
        if missing:
            extra = [n for n in names if n not in feature_names]
            raise ValueError(
                f"{table.path}: lacks the feature column(s) {_listed(missing)} of {against}"
                + (f"; it has {_listed(extra)} instead" if extra else "") + ".")
        if len(names) != len(feature_names):
            extra = [n for n in names if n not in feature_names]
            raise ValueError(f"{table.path}: has feature column(s) {_listed(extra)} that "
                             f"{against} has not.")
        order = [names.index(n) for n in feature_names]
        return table.X[:, order]
    if SUFFIXES[table.path.suffix.lower()] == "svmlight" and table.X.shape[1] < n_features:
        X = table.X.copy()  # svmlight leaves zeros out: the last columns may be all zero
        X.resize((X.shape[0], n_features))
        return X
    if table.X.shape[1] != n_features:
        raise ValueError(f"{table.path}: has {table.X.shape[1]} features, but {against} has "
                         f"{n_features}.")
    return table.X


def _kind(path):
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"Cannot tell the format of {path}: expected a suffix among "
                         f"{', '.join(SUFFIXES)}; got {path.suffix or 'none'!r}.")
    return kind


def _read_frame(path, kind, nrows=None, columns=None):
    """The table at ``path`` as a DataFrame; a ValueError naming it when it cannot be read."""
    try:
        if kind == "parquet":
            return pd.read_parquet(path, columns=columns)
        return pd.read_csv(path, sep="\t" if kind == "tsv" else ",", nrows=nrows,
                           usecols=columns)
    except ImportError:
        raise ValueError(f"{path}: reading Parquet needs pyarrow or fastparquet; install one "
                         "(pip install pyarrow).") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty; expected a header line of column "
                         "names.") from None
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        reason = " ".join(str(err).split())[:200]
        raise ValueError(f"Cannot read {path} as {kind.upper()}: {reason}") from None


def _features(path, frame):
    """The feature columns as float64, refused when a column holds text or a value is
    missing or infinite."""
    for name in frame.columns:
        column = frame[name]
        if column.dtype.kind not in "biuf":
            numbers = pd.to_numeric(column, errors="coerce")
            bad = np.flatnonzero(numbers.isna().to_numpy() & column.notna().to_numpy())
            if bad.size:
                raise ValueError(
                    f"{path}: feature column {shown(str(name))} holds text, e.g. "
                    f"{shown(str(column.iloc[bad[0]]))} in {_row(bad[0])} ({bad.size} "
                    "non-numeric value(s)); features must be numbers (encode categories as "
                    "numbers first).")
    X = frame.apply(pd.to_numeric).to_numpy(dtype=np.float64)
    rows, cols = np.nonzero(~np.isfinite(X))
    if rows.size:
        value = X[rows[0], cols[0]]
        what = "is missing (empty or NaN)" if np.isnan(value) else f"is {value}"
        raise ValueError(f"{path}: feature column {shown(str(frame.columns[cols[0]]))} {what} in "
                         f"{_row(rows[0])} ({rows.size} non-finite value(s) in all); fill in or "
                         "drop them first.")
    return X


def _labels(path, name, column):
    """The labels of a column, as numbers or strings; refused when one is missing."""
    missing = np.flatnonzero(column.isna().to_numpy())
    if missing.size:
        raise ValueError(f"{path}: label column {shown(str(name))} is empty in "
                         f"{_row(missing[0])} ({missing.size} missing label(s)).")
    values = column.to_numpy()
    return _class_labels(values if values.dtype.kind in "biuf" else values.astype(str))


def _groups(path, frame, name, label_column):
    """A table's query ids: the column ``name``, numbers or strings, none missing, each
    query's rows consecutive."""
    if name is None:
        raise ValueError(f"{path}: name its group column, the query id of each row (one of "
                         f"{_columns(frame)}).")
    if name not in frame.columns:
        raise ValueError(f"{path}: no group column {shown(str(name))}; its columns: "
                         f"{_columns(frame)}.")
    if name == label_column:
        raise ValueError(f"{path}: the group column and the label column are both "
                         f"{shown(str(name))}; expected two columns.")
    column = frame[name]
    missing = np.flatnonzero(column.isna().to_numpy())
    if missing.size:
        raise ValueError(f"{path}: group column {shown(str(name))} is empty in "
                         f"{_row(missing[0])} ({missing.size} missing query id(s)).")
    values = column.to_numpy()
    values = _class_labels(values if values.dtype.kind in "biuf" else values.astype(str))
    check_query_order(path, values, _row)
    return values


def _class_labels(y):
    """Labels as given, but whole numbers stored as floats (svmlight's 1.0, -1.0) as
    integers, so that a class is named 1, not 1.0."""
    if y.dtype.kind == "f" and np.isfinite(y).all() and (y == np.round(y)).all():
        return y.astype(np.int64)
    return y


def _row(k):
    """Data row ``k`` (0-based) as a user counts it: from 1, after the header line."""
    return f"data row {k + 1} (line {k + 2} of a text file)"


def _columns(frame):
    return _listed([str(c) for c in frame.columns]) or "none"


def _listed(names, most=8):
    shown_names = ", ".join(shown(n) for n in names[:most])
    return shown_names + (f" and {len(names) - most} more" if len(names) > most else "")

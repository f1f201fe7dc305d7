"""The checks of `qsrank fit`'s files: rows, classes, values that standardise and stay finite, and
the columns in use. Every refusal a ValueError naming the file."""

import numpy as np
import scipy.sparse as sp

from qs.data.files import shown
from qs.data.tables import columns_in_use, take_columns

#: sparse input at most this large as dense float64 (train and test rows) is made dense
DENSE_BYTES = 2**28


def columns_and_scaling(cfg, path, X_train, X_test):
    """The columns non-zero in some training row, the rows cut to them (every method gives the
    others weight 0), dense when small enough (`DENSE_BYTES`), and what the scaling does, in
    words."""
    columns = columns_in_use(X_train)
    if columns.size == 0:
        raise ValueError(
            f"{path}: every feature is zero in every training row; there is nothing to learn from."
        )
    X_train, X_test = take_columns(X_train, columns), take_columns(X_test, columns)
    dense_bytes = (X_train.shape[0] + X_test.shape[0]) * columns.size * 8
    if sp.issparse(X_train) and dense_bytes <= DENSE_BYTES:
        X_train, X_test = X_train.toarray(), X_test.toarray()
    if cfg["scale"] != "standard":
        how = "as given, for every method"
    elif not sp.issparse(X_train):
        how = "centred and scaled to unit variance on the training rows, for every method"
    else:
        how = (
            "scaled to unit variance on the training rows for every method, not centred: the "
            f"input is sparse and its dense form would take {dense_bytes / 2**30:.1f} GiB. "
            "RankSVM's AP and NDCG losses and LogisticRegression (unpenalised intercept) do not "
            "depend on centring; LinearSVC and the 0-1 RankSVM (penalised intercept) do"
        )
    return columns, X_train, X_test, how


def with_rows(table):
    """`table`, refused when it holds no rows."""
    if table.X.shape[0] == 0:
        raise ValueError(
            f"{table.path}: holds no rows (a header alone, or an empty file); "
            "nothing to train or test on."
        )
    return table


def check_test_classes(train_path, test_path, positives, y_test):
    """Refuse a test file where no positive class has both positive and negative rows."""
    y_test = np.asarray(y_test)
    if not any(0 < (y_test == c).sum() < y_test.size for c in positives):
        seen = ", ".join(shown(str(c)) for c in np.unique(y_test)[:10])
        raise ValueError(
            f"{test_path}: none of the positive classes of {train_path} "
            f"({', '.join(shown(str(c)) for c in positives[:10])}) has both "
            f"positive and negative test rows (its labels: {seen}); every test "
            "metric would be undefined."
        )


def check_scaling(table, mean, variance):
    """Refuse columns whose mean or variance overflows (values near the float64 limit)."""
    bad = np.flatnonzero(~(np.isfinite(mean) & np.isfinite(variance)))
    if bad.size:
        name = (
            shown(table.feature_names[bad[0]])
            if table.feature_names
            else f"{bad[0] + 1} (counting from 1)"
        )
        raise ValueError(
            f"{table.path}: column {name} has values too large to standardise "
            "(its mean or spread overflows float64); rescale it."
        )


def check_magnitude(path, X, where):
    """Refuse rows of `X` whose squared norm overflows float64; `where` names the row, ``{row}``."""
    with np.errstate(all="ignore"):
        norms = (
            np.asarray(X.multiply(X).sum(axis=1)).ravel()
            if sp.issparse(X)
            else np.einsum("ij,ij->i", X, X)
        )
    bad = np.flatnonzero(~np.isfinite(norms))
    if bad.size:
        raise ValueError(
            f"{path}: {where.format(row=bad[0] + 1)} holds values too large to "
            "train or score on (their squares overflow float64); rescale the "
            "features."
        )


def two_classes(path, y):
    """The classes of labels `y` (read from `path`), refused when there is one only."""
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(
            f"{path}: the labels hold one class only ({shown(str(classes[0]))}); "
            "ranking needs positives and negatives."
        )
    return classes


def positive_classes(path, classes, pos_label):
    """The positive class of each one-vs-rest model."""
    if pos_label is None:
        return [classes[1]] if classes.size == 2 else list(classes)
    match = [c for c in classes if str(c) == pos_label]
    if not match:
        raise ValueError(
            f"{path}: no class {pos_label!r} to take as positive; its classes: "
            f"{', '.join(shown(str(c)) for c in classes[:20])}."
        )
    return match

"""The `predict` and `evaluate` commands' work: a model's scores of a table's rows, and the
rank metrics of scores against labels, per positive class."""

import math
import sys

import numpy as np
import pandas as pd

from qs.data.files import check_regular
from qs.data.tables import align_features, permuted_columns, read_labels, read_table
from qsrank.pipelines._io import check_output, write_csv
from qsrank.pipelines.model import model_files, read_model, repeated

#: the metrics of each positive class: name -> what the tables call it
METRICS = {"ap": "AP", "ndcg": "NDCG", "voc_ap": "VOC AP", "roc_auc": "ROC AUC"}


def predict(model_path, data_path, out, label_column=None):
    """Score the rows of `data_path` with the model at `model_path` into the CSV `out` (a column per
    class); return the rows. `label_column` (default: the model's) is no feature."""
    json_path, weights = model_files(model_path)
    check_output(
        out, {"the model file": json_path, "the model weights": weights, "the data file": data_path}
    )
    model = read_model(model_path)
    label_column = label_column or model.meta.get("label_column")
    table = read_table(
        data_path,
        label_column=label_column,
        labels=False,
        zero_based=model.meta["svmlight_zero_based"],
    )
    if table.X.shape[0] == 0:
        raise ValueError(f"{table.path}: holds no rows to score.")
    X = align_features(
        table, model.meta["feature_names"], model.meta["n_features"], f"the model {model.path}"
    )
    if model.meta["column_fingerprint"] is not None and table.feature_names is None:
        warn_permuted(table.path, model.meta["column_fingerprint"], X, f"the model {model.path}")
    with np.errstate(all="ignore"):
        scores = model.scores(X)
    bad = np.flatnonzero(~np.isfinite(scores).all(axis=1))
    if bad.size:
        raise ValueError(
            f"{table.path}: {bad.size} of its {len(scores)} rows (the first: data "
            f"row {bad[0] + 1}) score inf or NaN under the model {model.path}; "
            "their values are too large for the model's weights and scaling."
        )
    frame = pd.DataFrame(scores, columns=[str(c) for c in model.meta["classes"]])
    write_csv(out, frame)
    return len(frame)


def warn_permuted(path, fingerprint, X, against):
    """One line on stderr when the columns of ``X`` look permuted against `fingerprint`."""
    found = permuted_columns(fingerprint, X)
    if found is not None:
        print(f"Warning: {path}: {found} ({against}).", file=sys.stderr)


def rank_metrics(relevant, scores):
    """AP, NDCG, VOC AP and ROC AUC of a ranking; NaN each without a positive or a negative."""
    relevant = np.asarray(relevant, dtype=bool)
    if relevant.all() or not relevant.any():
        return dict.fromkeys(METRICS, math.nan)
    from qs.metrics import average_precision, ndcg, voc_average_precision  # not for predict

    return {
        "ap": average_precision(relevant, scores),
        "ndcg": ndcg(relevant, scores),
        "voc_ap": voc_average_precision(relevant, scores),
        "roc_auc": roc_auc(relevant, scores),
    }


def roc_auc(relevant, scores):
    """ROC AUC as the Mann-Whitney statistic, ties counting half (as scikit-learn's, whose import
    would cost `qsrank evaluate` most of its start-up)."""
    _, where, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = ((ends - counts + 1 + ends) / 2)[where]  # 1-based, ties at their mean rank
    n_pos = int(relevant.sum())
    n_neg = relevant.size - n_pos
    return float((ranks[relevant].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(scores_path, labels_path, label_column=None, out=None):
    """The metrics of each score column of `scores_path` against the labels of `labels_path`, one
    class vs the rest; written to the CSV `out` when given."""
    if out is not None:
        check_output(out, {"the scores file": scores_path, "the labels file": labels_path})
    scores = _read_scores(scores_path)
    labels = np.asarray(read_labels(labels_path, label_column=label_column)).astype(str)
    if labels.size != len(scores):
        raise ValueError(
            f"{labels_path}: has {labels.size} labels but {scores_path} has "
            f"{len(scores)} rows of scores; expected one label per row."
        )
    if not set(scores.columns) & set(labels):
        raise ValueError(
            f"{scores_path}: none of its columns ({', '.join(scores.columns)}) "
            f"names a class of the labels of {labels_path}."
        )
    rows = [
        {
            "class": c,
            "positives": int((labels == c).sum()),
            **rank_metrics(labels == c, scores[c].to_numpy()),
        }
        for c in scores.columns
    ]
    frame = pd.DataFrame(rows)
    if out is not None:
        write_csv(out, frame)
    return frame


def _read_scores(path):
    """A scores CSV: numeric, finite columns named by class."""
    check_regular(path, "the scores file")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise ValueError(
            f"Cannot read {path} as a scores CSV: {' '.join(str(err).split())[:200]}"
        ) from None
    names = list(header.iloc[0]) if len(header) else []
    if len(set(names)) < len(names):  # pandas would score the repeat as a class "NAME.1"
        raise ValueError(
            f"{path}: the column name {repeated(names)} appears more than once in its "
            "header; expected one column per class."
        )
    numbers = frame.apply(pd.to_numeric, errors="coerce")
    if frame.empty or frame.shape[1] == 0 or not np.isfinite(numbers.to_numpy(float)).all():
        raise ValueError(
            f"{path}: expected a CSV of finite scores, one column per class, as "
            "`qsrank predict` writes it."
        )
    return numbers

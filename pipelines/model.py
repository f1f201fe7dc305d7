"""The model file of `qsrank fit`, and the `predict` and `evaluate` commands' work.

A model is data, never pickle: ``model.json`` (format and version, qsrank's version, the
features, the positive class of each one-vs-rest model, loss, C, scaling, the checksum of the
weights) beside ``model.npz`` (``coef``, ``intercept``, ``mean``, ``scale``; read with
``allow_pickle=False``). So loading a model from elsewhere runs no code, and a file of another
format, version or feature count is refused in one line naming it.
"""

import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from qsrank.pipelines._io import write_csv, write_json, write_npz
from qsrank.pipelines._provenance import _version
from qs.data.files import check_regular, read_bytes
from qs.data.tables import align_features, read_labels, read_table

FORMAT = "qsrank-linear-model"
VERSION = 1
JSON_NAME, WEIGHTS_NAME = "model.json", "model.npz"
ARRAYS = ("coef", "intercept", "mean", "scale")
METRICS = {"ap": "AP", "ndcg": "NDCG", "voc_ap": "VOC AP", "roc_auc": "ROC AUC"}
_JSON_BYTES = 2 ** 26  # feature names of a million features fit
_WEIGHTS_BYTES = 2 ** 33


@dataclass(frozen=True)
class Model:
    """A linear one-vs-rest model: the scores of X are ``((X - mean) / scale) @ coef.T +
    intercept``, one column per positive class of ``meta["classes"]``."""

    meta: dict
    coef: np.ndarray
    intercept: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    path: Path

    def scores(self, X):
        """(n_samples, n_classes) scores; X dense or scipy.sparse, never densified."""
        w = self.coef / self.scale
        return np.asarray(X @ w.T) + (self.intercept - w @ self.mean)


def write_model(directory, meta, **arrays):
    """Write model.npz (the `ARRAYS`) and model.json (`meta` with the format, version and
    the weights' checksum) into `directory`, each atomically; return the JSON's path."""
    directory = Path(directory)
    write_npz(directory / WEIGHTS_NAME, {k: np.asarray(arrays[k], np.float64) for k in ARRAYS})
    digest = hashlib.sha256((directory / WEIGHTS_NAME).read_bytes()).hexdigest()
    write_json(directory / JSON_NAME, {"format": FORMAT, "format_version": VERSION,
                                       "qsrank_version": _version("qsrank"), **meta,
                                       "weights": WEIGHTS_NAME, "weights_sha256": digest})
    return directory / JSON_NAME


def read_model(path):
    """The model at `path` (its model.json, or a run directory holding one), every field
    checked; a ValueError naming the file otherwise."""
    path = Path(path)
    if path.is_dir():
        path = path / JSON_NAME
    raw = read_bytes(path, "the model file", _JSON_BYTES)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a qsrank model file (expected the {JSON_NAME} that "
                         "`qsrank fit` writes).")
    if meta.get("format_version") != VERSION:
        raise ValueError(f"{path}: model format version {meta.get('format_version')!r}; this "
                         f"qsrank reads version {VERSION} (written by qsrank "
                         f"{meta.get('qsrank_version')}); refit the model.")
    n, classes, names = meta.get("n_features"), meta.get("classes"), meta.get("feature_names")
    if not (isinstance(n, int) and n > 0 and isinstance(classes, list) and classes
            and (names is None or isinstance(names, list) and len(names) == n)
            and isinstance(meta.get("weights"), str)):
        raise ValueError(f"{path}: damaged qsrank model file (n_features, feature_names, "
                         "classes or weights missing or inconsistent).")
    weights = path.parent / Path(meta["weights"]).name
    raw = read_bytes(weights, "the model weights", _WEIGHTS_BYTES)
    if hashlib.sha256(raw).hexdigest() != meta.get("weights_sha256"):
        raise ValueError(f"{weights}: its checksum differs from the one {path} records; the "
                         "weights belong to another model or were changed.")
    arrays = _weights(weights, raw, n, len(classes))
    return Model(meta, *(arrays[k] for k in ARRAYS), path)


def _weights(path, raw, n_features, n_classes):
    """The arrays of model.npz (its bytes `raw`), checked against the shapes the JSON
    gives."""
    shapes = {"coef": (n_classes, n_features), "intercept": (n_classes,),
              "mean": (n_features,), "scale": (n_features,)}
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in ARRAYS if k in npz.files}
    except Exception as err:  # zip, zlib, pickle refusal (ValueError), ...
        raise ValueError(f"{path}: not a readable .npz of model weights "
                         f"({type(err).__name__}).") from None
    for name, shape in shapes.items():
        a = arrays.get(name)
        if a is None or a.dtype.kind != "f" or a.shape != shape or not np.isfinite(a).all():
            raise ValueError(f"{path}: {name} must be finite floats of shape {shape}; got "
                             f"{'nothing' if a is None else f'{a.dtype} of shape {a.shape}'}.")
    if (arrays["scale"] <= 0).any():
        raise ValueError(f"{path}: scale must be > 0.")
    return arrays


def predict(model_path, data_path, out, label_column=None):
    """Score the rows of `data_path` with the model at `model_path` and write them to the CSV
    `out` (one column per positive class); return the number of rows. A table's
    `label_column` (default: the model's) is left out of the features."""
    model = read_model(model_path)
    label_column = label_column or model.meta.get("label_column")
    table = read_table(data_path, label_column=label_column, labels=False)
    X = align_features(table, model.meta["feature_names"], model.meta["n_features"],
                       f"the model {model.path}")
    frame = pd.DataFrame(model.scores(X), columns=[str(c) for c in model.meta["classes"]])
    write_csv(out, frame)
    return len(frame)


def rank_metrics(relevant, scores):
    """AP, NDCG, VOC AP (qs.metrics) and ROC AUC (`roc_auc`) of a ranking; NaN each when
    the labels hold no positive or no negative."""
    relevant = np.asarray(relevant, dtype=bool)
    if relevant.all() or not relevant.any():
        return dict.fromkeys(METRICS, math.nan)
    from qs.metrics import average_precision, ndcg, voc_average_precision  # not for predict

    return {"ap": average_precision(relevant, scores), "ndcg": ndcg(relevant, scores),
            "voc_ap": voc_average_precision(relevant, scores),
            "roc_auc": roc_auc(relevant, scores)}


def roc_auc(relevant, scores):
    """ROC AUC as the Mann-Whitney statistic: the share of (positive, negative) pairs the
    scores order right, a tie counting half (what scikit-learn's ``roc_auc_score`` gives;
    the tests compare them). Written here because importing scikit-learn's metrics costs
    `qsrank evaluate` most of its start-up."""
    _, where, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = ((ends - counts + 1 + ends) / 2)[where]  # 1-based, ties at their mean rank
    n_pos = int(relevant.sum())
    n_neg = relevant.size - n_pos
    return float((ranks[relevant].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(scores_path, labels_path, label_column=None, out=None):
    """The metrics of each score column of `scores_path` (as `predict` writes them), the
    column's class against the rest of the labels of `labels_path`; written to the CSV `out`
    when given. Returns a DataFrame: class, positives, then the `METRICS`."""
    scores = _read_scores(scores_path)
    labels = np.asarray(read_labels(labels_path, label_column=label_column)).astype(str)
    if labels.size != len(scores):
        raise ValueError(f"{labels_path}: has {labels.size} labels but {scores_path} has "
                         f"{len(scores)} rows of scores; expected one label per row.")
    if not set(scores.columns) & set(labels):
        raise ValueError(f"{scores_path}: none of its columns ({', '.join(scores.columns)}) "
                         f"names a class of the labels of {labels_path}.")
    rows = [{"class": c, "positives": int((labels == c).sum()),
             **rank_metrics(labels == c, scores[c].to_numpy())} for c in scores.columns]
    frame = pd.DataFrame(rows)
    if out is not None:
        write_csv(out, frame)
    return frame


def _read_scores(path):
    """A scores CSV: numeric, finite columns named by class."""
    check_regular(path, "the scores file")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"Cannot read {path} as a scores CSV: "
                         f"{' '.join(str(err).split())[:200]}") from None
    numbers = frame.apply(pd.to_numeric, errors="coerce")
    if frame.empty or frame.shape[1] == 0 or not np.isfinite(numbers.to_numpy(float)).all():
        raise ValueError(f"{path}: expected a CSV of finite scores, one column per class, as "
                         "`qsrank predict` writes it.")
    return numbers

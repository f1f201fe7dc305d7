"""The data of `qsrank train ltr`: each data set split by query and standardised on the training
documents."""

import importlib.util
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import GroupShuffleSplit
from sklearn.preprocessing import StandardScaler

from qs.data.letor import load_modechoice, make_letor
from qs.data.tables import align_features, read_table
from qsrank.pipelines._runs import digest_arrays


@dataclass(frozen=True)
class Split:
    """One data set split by query and standardised on the training documents."""

    X_train: np.ndarray
    y_train: np.ndarray
    g_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    g_test: np.ndarray
    note: str
    sha256: str


def load_data(cfg):
    """Every data set of the config, split by query and scaled: name -> `Split`."""
    for method in cfg["methods"]:
        library = {"lgbm": "lightgbm", "xgb": "xgboost"}.get(method.split("_")[0])
        if library and importlib.util.find_spec(library) is None:
            raise ValueError(
                f"method {method} needs {library}: install the ltr extra "
                "(pip install 'qsrank[ltr]') or leave the method out."
            )
    return {name: _split(cfg, name) for name in cfg["datasets"]}


def _split(cfg, name):
    """Data set `name` split by query (a seeded share of its queries held out) and scaled."""
    if name == "files":
        return _files(cfg)
    if name == "synthetic":
        s = cfg["synthetic"]
        data = make_letor(
            s["queries"],
            docs_per_query=s["docs_per_query"],
            n_features=s["features"],
            informative=min(24, s["features"]),
            seed=s["seed"],
        )
    else:
        data = load_modechoice()
    train, test = _hold_out(cfg, data.X, data.y, data.groups)
    where = (
        f"{np.unique(data.groups[test]).size} test queries (a {cfg['test_size']:g} share, "
        f"seed {cfg['seed']})"
    )
    parts = [a[rows] for rows in (train, test) for a in (data.X, data.y, data.groups)]
    return scaled(*parts, f"{data.source}; {where}")


def _hold_out(cfg, X, y, groups):
    """(train, test) row indices: a seeded `test_size` share of the queries held out."""
    split = GroupShuffleSplit(1, test_size=cfg["test_size"], random_state=cfg["seed"])
    return next(split.split(X, y, groups))


def _files(cfg):
    """The user's train (and test) files, read with their query ids."""
    if cfg["train"] is None:
        raise ValueError("data set 'files' needs the key train (a feature file with queries).")
    columns = {"label_column": cfg["label_column"], "group_column": cfg["group_column"]}
    train = read_table(cfg["train"], groups=True, **columns)
    y = _grades(train.path, train.y)
    if cfg["test"] is not None:
        test = read_table(cfg["test"], groups=True, **columns)
        X_test = align_features(
            test, train.feature_names, train.X.shape[1], f"the training file {train.path}"
        )
        parts = (train.X, y, train.groups, X_test, _grades(test.path, test.y), test.groups)
        where = f"test: {test.path} ({np.unique(test.groups).size} queries)"
    else:
        if np.unique(train.groups).size < 2:
            raise ValueError(
                f"{train.path}: one query only; give a test file (--test) or "
                "more queries to hold some out."
            )
        tr, te = _hold_out(cfg, train.X, y, train.groups)
        parts = (train.X[tr], y[tr], train.groups[tr], train.X[te], y[te], train.groups[te])
        where = (
            f"test: a {cfg['test_size']:g} share of its queries held out (seed "
            f"{cfg['seed']}), {np.unique(train.groups[te]).size} queries"
        )
    X = parts[0]
    note = (
        f"{train.path} ({np.unique(parts[2]).size} training queries, {X.shape[0]} "
        f"documents, {X.shape[1]} features); {where}"
    )
    return scaled(*parts, note)


def _grades(path, y):
    """Relevance grades: numbers; the boosters' rank objectives take integers 0-30."""
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        raise ValueError(
            f"{path}: the labels must be numeric relevance grades (0, 1, 2, ...); got {y.dtype}."
        )
    y = y.astype(np.float64)
    if np.any(y < 0) or np.any(y != np.rint(y)) or np.any(y > 30):
        raise ValueError(
            f"{path}: the labels must be integer grades 0-30 (LightGBM's and "
            f"XGBoost's ranking objectives take no others); got values from "
            f"{y.min():g} to {y.max():g}."
        )
    return y.astype(np.int64)


def scaled(X_train, y_train, g_train, X_test, y_test, g_test, note):
    """The `Split` of the parts, standardised on the training documents."""
    X_train = X_train.toarray() if hasattr(X_train, "toarray") else np.asarray(X_train)
    X_test = X_test.toarray() if hasattr(X_test, "toarray") else np.asarray(X_test)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    sha = digest_arrays(X_train, y_train, X_test, y_test)
    return Split(
        X_train, y_train, np.asarray(g_train), X_test, y_test, np.asarray(g_test), note, sha
    )

"""`qsrank fit` (docs/fit.md): a RankSVM for a rank-based loss on a user's feature files beside
LinearSVC and LogisticRegression, one unit per positive class, C fixed or by CV; writes the model
(`qsrank.pipelines.model`), metrics and table."""

import re
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import conint
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer, roc_auc_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from tqdm import tqdm

from qs.data.files import check_memory, shown
from qs.data.tables import align_features, column_fingerprint, read_table
from qs.estimators import RankSVM
from qs.metrics import average_precision, ndcg
from qs.model_selection import choose_C, estimator_fit_score
from qs.ssvm import SOLVERS
from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._runs import digest_arrays
from qsrank.pipelines.fit_data import (
    check_magnitude,
    check_scaling,
    check_test_classes,
    columns_and_scaling,
    positive_classes,
    two_classes,
    with_rows,
)
from qsrank.pipelines.fit_report import (
    METHODS,
    redraw,  # noqa: F401 (qsrank plot finds it here by name)
    write,
)
from qsrank.pipelines.scoring import rank_metrics, warn_permuted

EXPERIMENT = "fit"
#: what cross-validation may pick C by (qs.metrics for AP and NDCG, as `RankSVM.score`)
CV_METRICS = {"ap": average_precision, "ndcg": ndcg, "roc_auc": roc_auc_score}
SCALINGS = ("standard", "none")
#: the model's float64 arrays held this many times over while built and written
MODEL_COPIES = 3


class Config(S.Section):
    """The keys of a fit; `qsrank fit` sets them from its options."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    train: str = S.key("", "the training feature file")
    test: str | None = S.key(None, "the test feature file; null: a split of train")
    label_column: str | None = S.key(None, "the label column of a CSV/TSV/Parquet")
    pos_label: str | None = S.key(
        None, "the positive class; null: the larger of two, else every class one vs the rest"
    )
    loss: Literal["ap", "ndcg", "01"] = S.key("ap", "the loss RankSVM is trained for")
    C: S.C_GRID = S.key([0.1, 1.0, 10.0, 100.0], "RankSVM's C, or a grid for CV")
    baseline_C: S.C_GRID = S.key(
        [0.001, 0.01, 0.1, 1.0, 10.0, 100.0], "the baselines' C, or a grid for CV"
    )
    cv_folds: conint(ge=2) = S.key(5, "stratified folds choosing C")
    cv_metric: Literal[tuple(CV_METRICS)] = S.key("ap", "the metric CV chooses C by")
    solver: Literal[tuple(SOLVERS)] = S.key("cutting_plane", "RankSVM's solver")
    scale: Literal[tuple(SCALINGS)] = S.key("standard", "feature scaling fit on the training rows")
    zero_based: bool | None = S.key(
        None,
        "svmlight index base of every file of the model; null: the training file's "
        "(zero-based when it uses index 0), one-based when it is no svmlight file",
    )
    test_size: S.real(gt=0, lt=1) = S.key(
        0.25, "share of the training file held out for testing when no test file is given"
    )
    seed: conint(ge=0) = S.key(0, "seed of the split and the CV folds")
    force: bool = S.key(False, "retrain the classes the run directory holds")


@dataclass(frozen=True)
class FitData:
    """Scaled train and test rows (the `columns` in use), positive classes, the scaling over all
    columns, the data's note, digest and scaling text, the svmlight index base and the column
    fingerprint."""

    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    feature_names: list | None
    positives: list
    mean: np.ndarray
    scale: np.ndarray
    note: str
    sha256: str
    columns: np.ndarray
    scaling: str
    zero_based: bool
    fingerprint: dict | None


# ---------------------------------------------------------------------------- data


def load_data(cfg):
    """Read and check the files, split when there is no test file, choose the positive classes and
    scale; every bad input a ValueError naming its file."""
    base = cfg["zero_based"]
    train = with_rows(
        read_table(
            cfg["train"],
            label_column=cfg["label_column"],
            zero_based="auto" if base is None else base,
        )
    )
    base = bool(base) if train.zero_based is None else train.zero_based
    classes = two_classes(train.path, train.y)
    check_memory(
        f"{train.path}: a model of its {train.X.shape[1]:,} feature columns (the "
        "largest index), as float64 with its copies while written",
        MODEL_COPIES * ((len(classes) if len(classes) > 2 else 1) + 2) * train.X.shape[1] * 8,
    )
    fingerprint = column_fingerprint(train.X) if train.feature_names is None else None
    if cfg["test"] is not None:
        test = with_rows(read_table(cfg["test"], label_column=cfg["label_column"], zero_based=base))
        X_test = align_features(
            test, train.feature_names, train.X.shape[1], f"the training file {train.path}"
        )
        if fingerprint is not None and test.feature_names is None:
            warn_permuted(test.path, fingerprint, X_test, f"the training file {train.path}")
        X_train, y_train, y_test = train.X, train.y, test.y
        if y_train.dtype.kind != y_test.dtype.kind:  # 1 in one file, "1" in the other
            y_train, y_test = y_train.astype(str), y_test.astype(str)
            classes = np.unique(y_train)
        two_classes(test.path, y_test)
        split = f"test: {test.path} ({X_test.shape[0]} rows)"
    else:
        try:
            X_train, X_test, y_train, y_test = train_test_split(
                train.X,
                train.y,
                test_size=cfg["test_size"],
                stratify=train.y,
                random_state=cfg["seed"],
            )
        except ValueError as err:
            raise ValueError(
                f"{train.path}: cannot hold out a stratified test share of "
                f"{cfg['test_size']}: {err}"
            ) from None
        split = (
            f"test: a stratified {cfg['test_size']:g} of it held out (seed "
            f"{cfg['seed']}), {X_test.shape[0]} rows"
        )
    positives = positive_classes(train.path, classes, cfg["pos_label"])
    if cfg["test"] is not None:
        check_test_classes(train.path, test.path, positives, y_test)
    for c in positives:
        _check_cv(train.path, cfg, np.asarray(y_train) == c, c)
    n_features = X_train.shape[1]
    columns, X_train, X_test, scaling = columns_and_scaling(cfg, train.path, X_train, X_test)
    mean, scale = np.zeros(n_features), np.ones(n_features)
    if cfg["scale"] == "standard":
        scaler = StandardScaler(with_mean=not sp.issparse(X_train))
        with np.errstate(all="ignore"):
            scaler.fit(X_train)
        if scaler.with_mean:
            mean[columns] = scaler.mean_
        scale[columns] = scaler.scale_
        variance = np.ones(n_features)
        variance[columns] = scaler.var_  # not scale_: sklearn may take an overflow for 0
        check_scaling(train, mean, variance)
        with np.errstate(all="ignore"):
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    scaled = ", once scaled," if cfg["scale"] == "standard" else ""
    if cfg["test"] is not None:
        check_magnitude(train.path, X_train, "data row {row}" + scaled)
        check_magnitude(test.path, X_test, "data row {row}" + scaled)
    else:  # rows of a stratified split, in its order
        check_magnitude(train.path, X_train, "a training row" + scaled)
        check_magnitude(train.path, X_test, "a held-out test row" + scaled)
    note = (
        f"{train.path} ({X_train.shape[0]} training rows, {n_features} features, "
        f"{len(classes)} classes); {split}"
    )
    return FitData(
        X_train,
        y_train,
        X_test,
        y_test,
        train.feature_names,
        positives,
        mean,
        scale,
        note,
        digest_arrays(X_train, y_train, X_test, y_test),
        columns,
        scaling,
        base,
        fingerprint,
    )


def _check_cv(path, cfg, is_pos, c):
    """Enough positives and negatives of class `c` for each CV fold to hold some."""
    grids = (cfg["C"], cfg["baseline_C"])
    least = min(int(is_pos.sum()), int((~is_pos).sum()))
    if any(len(g) > 1 for g in grids) and least < cfg["cv_folds"]:
        raise ValueError(
            f"{path}: class {shown(str(c))} has {int(is_pos.sum())} positive and "
            f"{int((~is_pos).sum())} negative training rows, fewer than the "
            f"{cfg['cv_folds']} CV folds; lower the folds or fix C."
        )


# ---------------------------------------------------------------------------- training


def settings(cfg, data):
    """What a class's record depends on: the data and every key but `force`."""
    return {
        "data": data.note,
        "data_sha256": data.sha256,
        **{k: v for k, v in cfg.items() if k != "force"},
    }


def units(cfg, data):
    """One unit per positive class: (its index, its name made safe for a file name)."""
    return [
        (f"{k:03d}", re.sub(r"[^\w.-]", "_", str(c))[:40]) for k, c in enumerate(data.positives)
    ]


def warm_up(cfg, units=None):
    """Compile (or load) the LAI kernels of the RankSVM."""
    _methods.warm_up([(cfg["loss"], "auto")])


def estimator(cfg, name):
    """Method `name` with C still to set."""
    if name == "rank_svm":
        return RankSVM(loss=cfg["loss"], solver=cfg["solver"])
    if name == "linear_svc":
        return LinearSVC(max_iter=10_000, random_state=cfg["seed"])
    return LogisticRegression(max_iter=5_000)


def tune(cfg, est, grid, X, y):
    """`est` fitted with its C: the one given, or the best of `grid` by stratified CV on
    `cv_metric`. (estimator, C, CV score or None)."""
    if len(grid) == 1:
        return est.set_params(C=grid[0]).fit(X, y), grid[0], None
    folds = StratifiedKFold(cfg["cv_folds"], shuffle=True, random_state=cfg["seed"])
    scorer = make_scorer(CV_METRICS[cfg["cv_metric"]], response_method="decision_function")
    choice = choose_C(estimator_fit_score(est, X, y, scorer), grid, folds, X, y)
    return est.set_params(C=choice.C).fit(X, y), choice.C, choice.best_score


def run_unit(run, unit):
    """Fit the three methods for one positive class and score the test rows (with RankSVM's
    weights)."""
    cfg, data = run.cfg, run.data
    positive = data.positives[int(unit[0])]
    y_train, y_test = np.asarray(data.y_train) == positive, np.asarray(data.y_test) == positive
    record = {
        "class": positive.item() if hasattr(positive, "item") else positive,
        "train_positives": int(y_train.sum()),
        "test_positives": int(y_test.sum()),
        "methods": {},
    }
    with tqdm(
        METHODS, desc=f"class {str(positive)[:30]}", leave=False, disable=not run.progress
    ) as bar:
        for name in bar:
            grid = cfg["C"] if name == "rank_svm" else cfg["baseline_C"]
            start = time.perf_counter()
            est, C, cv_score = tune(cfg, estimator(cfg, name), grid, data.X_train, y_train)
            seconds = time.perf_counter() - start
            record["methods"][name] = {
                "C": C,
                "C_from": "fixed" if cv_score is None else f"{cfg['cv_folds']}-fold cv",
                "cv_score": cv_score,
                "train_s": seconds,
                **rank_metrics(y_test, est.decision_function(data.X_test)),
            }
            if name == "rank_svm":
                record.update(
                    coef=est.coef_[0].tolist(),
                    intercept=float(est.intercept_[0]),
                    n_iter=int(est.n_iter_),
                    converged=bool(est.converged_),
                )
    return record


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_data,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    warm_up=warm_up,
    unit_label="class",
    unit_text=lambda unit: f"class {unit[1]}",
)

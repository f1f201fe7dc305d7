"""`qsrank fit`: a RankSVM for a rank-based loss on a researcher's own feature files, beside
LinearSVC and LogisticRegression baselines (docs/fit.md). Each positive class is a unit;
C is fixed or chosen by stratified k-fold CV; the run directory gets the model (data, not
pickle: `qsrank.pipelines.model`), the test metrics (metrics.csv, table.md), config and provenance."""

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer, roc_auc_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from tqdm import tqdm

from qs.data.files import check_memory, shown
from qs.data.tables import (
    align_features,
    column_fingerprint,
    columns_in_use,
    read_table,
    take_columns,
)
from qs.estimators import RankSVM
from qs.metrics import average_precision, ndcg
from qs.model_selection import choose_C, estimator_fit_score
from qs.ssvm import SOLVERS
from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S
from qsrank.pipelines._io import read_csv, write_csv, write_text
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._runs import digest_arrays
from qsrank.pipelines._tables import bar_figure, frame_table
from qsrank.pipelines.model import METRICS, rank_metrics, warn_permuted, write_model

EXPERIMENT = "fit"
#: the methods of each class, the model's first: name -> what the table calls it
METHODS = {
    "rank_svm": "RankSVM",
    "linear_svc": "LinearSVC",
    "logistic_regression": "LogisticRegression",
}
#: what cross-validation may pick C by (qs.metrics for AP and NDCG, as `RankSVM.score`)
CV_METRICS = {"ap": average_precision, "ndcg": ndcg, "roc_auc": roc_auc_score}
SCALINGS = ("standard", "none")
#: sparse input at most this large as dense float64 (train and test rows) is made dense
DENSE_BYTES = 2**28
#: the model's float64 arrays held this many times over while built and written
MODEL_COPIES = 3


class Config(S.Section):
    """The keys of a fit; `qsrank fit` sets them from its options."""

    experiment: S.choice([EXPERIMENT]) = S.key(EXPERIMENT, "the pipeline this config runs")
    train: S.text() = S.key("", "the training feature file")
    test: S.optional(S.text()) = S.key(None, "the test feature file; null: a split of train")
    label_column: S.optional(S.text()) = S.key(None, "the label column of a CSV/TSV/Parquet")
    pos_label: S.optional(S.text()) = S.key(
        None, "the positive class; null: the larger of two, else every class one vs the rest"
    )
    loss: S.choice(["ap", "ndcg", "01"]) = S.key("ap", "the loss RankSVM is trained for")
    C: S.c_grid() = S.key([0.1, 1.0, 10.0, 100.0], "RankSVM's C, or a grid for CV")
    baseline_C: S.c_grid() = S.key(
        [0.001, 0.01, 0.1, 1.0, 10.0, 100.0], "the baselines' C, or a grid for CV"
    )
    cv_folds: S.number(integer=True, low=2) = S.key(5, "stratified folds choosing C")
    cv_metric: S.choice(CV_METRICS) = S.key("ap", "the metric CV chooses C by")
    solver: S.choice(SOLVERS) = S.key("cutting_plane", "RankSVM's solver")
    scale: S.choice(SCALINGS) = S.key("standard", "feature scaling fit on the training rows")
    zero_based: S.optional(S.flag()) = S.key(
        None,
        "svmlight index base of every file of the model; null: the training file's "
        "(zero-based when it uses index 0), one-based when it is no svmlight file",
    )
    test_size: S.number(low=0, strict=True, high=1) = S.key(
        0.25, "share of the training file held out for testing when no test file is given"
    )
    seed: S.number(integer=True, low=0) = S.key(0, "seed of the split and the CV folds")
    force: S.flag() = S.key(False, "retrain the classes the run directory holds")


@dataclass(frozen=True)
class FitData:
    """Scaled train and test rows (the `columns` of the files in use in training), the
    positive classes, the scaling (over every column of the files), the data's note, what the
    scaling did (`scaling`), the svmlight index base and the training columns' fingerprint
    (files without column names)."""

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
    """Read and check the files, split when no test file is given, choose the positive
    classes and scale; every bad input is a ValueError naming its file, raised before the
    run directory is claimed."""
    base = cfg["zero_based"]
    train = _rows(
        read_table(
            cfg["train"],
            label_column=cfg["label_column"],
            zero_based="auto" if base is None else base,
        )
    )
    base = bool(base) if train.zero_based is None else train.zero_based
    classes = _classes(train.path, train.y)
    check_memory(
        f"{train.path}: a model of its {train.X.shape[1]:,} feature columns (the "
        "largest index), as float64 with its copies while written",
        MODEL_COPIES * ((len(classes) if len(classes) > 2 else 1) + 2) * train.X.shape[1] * 8,
    )
    fingerprint = column_fingerprint(train.X) if train.feature_names is None else None
    if cfg["test"] is not None:
        test = _rows(read_table(cfg["test"], label_column=cfg["label_column"], zero_based=base))
        X_test = align_features(
            test, train.feature_names, train.X.shape[1], f"the training file {train.path}"
        )
        if fingerprint is not None and test.feature_names is None:
            warn_permuted(test.path, fingerprint, X_test, f"the training file {train.path}")
        X_train, y_train, y_test = train.X, train.y, test.y
        if y_train.dtype.kind != y_test.dtype.kind:  # 1 in one file, "1" in the other
            y_train, y_test = y_train.astype(str), y_test.astype(str)
            classes = np.unique(y_train)
        _classes(test.path, y_test)
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
    positives = _positives(train.path, classes, cfg["pos_label"])
    if cfg["test"] is not None:
        _check_test_classes(train.path, test.path, positives, y_test)
    for c in positives:
        _check_cv(train.path, cfg, np.asarray(y_train) == c, c)
    n_features = X_train.shape[1]
    columns, X_train, X_test, scaling = _in_use(cfg, train.path, X_train, X_test)
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
        _check_scaling(train, mean, variance)
        with np.errstate(all="ignore"):
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    scaled = ", once scaled," if cfg["scale"] == "standard" else ""
    if cfg["test"] is not None:
        _check_magnitude(train.path, X_train, "data row {row}" + scaled)
        _check_magnitude(test.path, X_test, "data row {row}" + scaled)
    else:  # rows of a stratified split, in its order
        _check_magnitude(train.path, X_train, "a training row" + scaled)
        _check_magnitude(train.path, X_test, "a held-out test row" + scaled)
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


def _in_use(cfg, path, X_train, X_test):
    """The columns non-zero in some training row, the train and test rows cut to them, and
    what the scaling does, in words for the table.

    Every method gives a column that is zero in every training row a weight of zero (their
    weights are combinations of training rows), so training on the columns in use alone gives
    the same models, in memory that grows with the data, not with the largest feature index.
    Sparse input is made dense, so centred as dense input is, when its dense form takes at most
    `DENSE_BYTES`; beyond that it stays sparse and is scaled without centring."""
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
        return columns, X_train, X_test, "as given, for every method"
    if not sp.issparse(X_train):
        return (
            columns,
            X_train,
            X_test,
            ("centred and scaled to unit variance on the training rows, for every method"),
        )
    return (
        columns,
        X_train,
        X_test,
        (
            "scaled to unit variance on the training rows for every method, not centred: the "
            "input is sparse and "
            f"its dense form would take {dense_bytes / 2**30:.1f} GiB. RankSVM's AP and NDCG "
            "losses and LogisticRegression (unpenalised intercept) do not depend on centring; "
            "LinearSVC and the 0-1 RankSVM (penalised intercept) do"
        ),
    )


def _rows(table):
    """`table`, refused when it holds no rows."""
    if table.X.shape[0] == 0:
        raise ValueError(
            f"{table.path}: holds no rows (a header alone, or an empty file); "
            "nothing to train or test on."
        )
    return table


def _check_test_classes(train_path, test_path, positives, y_test):
    """Refuse a test file on which no positive class has both positive and negative rows:
    every test metric would be undefined."""
    y_test = np.asarray(y_test)
    if not any(0 < (y_test == c).sum() < y_test.size for c in positives):
        seen = ", ".join(shown(str(c)) for c in np.unique(y_test)[:10])
        raise ValueError(
            f"{test_path}: none of the positive classes of {train_path} "
            f"({', '.join(shown(str(c)) for c in positives[:10])}) has both "
            f"positive and negative test rows (its labels: {seen}); every test "
            "metric would be undefined."
        )


def _check_scaling(table, mean, variance):
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


def _check_magnitude(path, X, where):
    """Refuse rows of `X` (read from `path`) whose values overflow float64 in the products
    that training and scoring take: the squared norm of every row must be finite. `where`
    says which row, ``{row}`` standing for its number."""
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


def _classes(path, y):
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(
            f"{path}: the labels hold one class only ({shown(str(classes[0]))}); "
            "ranking needs positives and negatives."
        )
    return classes


def _positives(path, classes, pos_label):
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
    """`est` fitted on (X, y) with its C: the one given, or the best of `grid` by stratified
    k-fold CV on `cfg["cv_metric"]` (the smallest of equals). Returns (estimator, C, CV
    score or None)."""
    if len(grid) == 1:
        return est.set_params(C=grid[0]).fit(X, y), grid[0], None
    folds = StratifiedKFold(cfg["cv_folds"], shuffle=True, random_state=cfg["seed"])
    scorer = make_scorer(CV_METRICS[cfg["cv_metric"]], response_method="decision_function")
    choice = choose_C(estimator_fit_score(est, X, y, scorer), grid, folds, X, y)
    return est.set_params(C=choice.C).fit(X, y), choice.C, choice.best_score


def run_unit(run, unit):
    """Fit the three methods for one positive class and score the test rows: the class's
    record, with the RankSVM's weights."""
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


# ---------------------------------------------------------------------------- outputs


def metrics_frame(records):
    """One row per class and method: C, how it was chosen, CV score, test metrics, time."""
    rows = [
        {"class": r["class"], "method": name, "test_positives": r["test_positives"], **m}
        for r in records
        for name, m in r["methods"].items()
    ]
    return pd.DataFrame(rows)


def table(records):
    """The Markdown table of test metrics per class and method (a mean per method over
    several classes)."""
    frame = metrics_frame(records)
    cells = frame[["class", "method", "C", *METRICS]].copy()
    cells["method"] = cells["method"].map(METHODS)
    if len(records) > 1:
        means = frame.groupby("method", sort=False)[list(METRICS)].mean().reset_index()
        means["method"] = means["method"].map(METHODS)
        cells = pd.concat([cells, means.assign(**{"class": "mean", "C": ""})], ignore_index=True)
    cells["class"] = cells["class"].astype(str)
    cells["C"] = cells["C"].map(lambda c: f"{c:g}" if isinstance(c, float) else str(c))
    return frame_table(cells.rename(columns=METRICS), dict.fromkeys(METRICS.values(), ".4f"))


def summary(cfg, records, note, scaling):
    """table.md: the data, the models, how C was chosen, the test metrics."""

    def how(grid):
        if len(grid) == 1:
            return f"C {grid[0]:g} (fixed)"
        return (
            f"C from {', '.join(f'{c:g}' for c in grid)} by {cfg['cv_folds']}-fold "
            f"stratified CV on the training rows ({cfg['cv_metric']})"
        )

    return (
        "\n\n".join(
            [
                f"# qsrank fit: RankSVM ({cfg['loss']} loss) beside LinearSVC and LogisticRegression",
                f"Data: {note}. Features {scaling}.",
                f"RankSVM (solver {cfg['solver']}): {how(cfg['C'])}. LinearSVC and "
                f"LogisticRegression: {how(cfg['baseline_C'])}.",
                "Test metrics, each class one vs the rest (its positive class named in `class`):",
                table(records),
            ]
        )
        + "\n"
    )


def write(run, records):
    """metrics.csv, table.md and the model (model.json + model.npz)."""
    write_csv(run.out / "metrics.csv", metrics_frame(records))
    write_text(run.out / "table.md", summary(run.cfg, records, run.data.note, run.data.scaling))
    data, cfg = run.data, run.cfg
    meta = {
        "n_features": int(data.mean.size),
        "feature_names": data.feature_names,
        "label_column": cfg["label_column"],
        "classes": [r["class"] for r in records],
        "loss": cfg["loss"],
        "solver": cfg["solver"],
        "C": [r["methods"]["rank_svm"]["C"] for r in records],
        "scaling": cfg["scale"],
        "svmlight_zero_based": data.zero_based,
        "column_fingerprint": data.fingerprint,
    }
    coef = np.zeros((len(records), data.mean.size))
    coef[:, data.columns] = [r["coef"] for r in records]
    write_model(
        run.out,
        meta,
        coef=coef,
        intercept=[r["intercept"] for r in records],
        mean=data.mean,
        scale=data.scale,
    )


def redraw(run_dir, kind="tables"):
    """Draw the run's test metrics (metrics.csv) as a figure, figure.png and .pdf: test AP
    per class, grouped bars per method; return their paths."""
    metrics = read_csv(Path(run_dir) / "metrics.csv", ["class", "method", "ap"])
    table = metrics.pivot_table(index="class", columns="method", values="ap", sort=False)
    names = {m: label for m, label in METHODS.items() if m in table.columns}
    return bar_figure(
        table[list(names)].reset_index(),
        "class",
        names,
        "test AP",
        "qsrank fit: test AP per class, one vs the rest",
        Path(run_dir) / "figure",
    )


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

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
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from tqdm import tqdm

from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S
from qsrank.pipelines._io import read_csv, write_csv, write_text
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._runs import digest_arrays
from qsrank.pipelines._tables import bar_figure, frame_table
from qsrank.pipelines.model import METRICS, rank_metrics, write_model
from qs.data.files import shown
from qs.data.tables import align_features, read_table
from qs.estimators import RankSVM
from qs.metrics import average_precision, ndcg
from qs.ssvm import SOLVERS

EXPERIMENT = "fit"
#: the methods of each class, the model's first: name -> what the table calls it
METHODS = {"rank_svm": "RankSVM", "linear_svc": "LinearSVC",
           "logistic_regression": "LogisticRegression"}
#: what cross-validation may pick C by (qs.metrics for AP and NDCG, as `RankSVM.score`)
CV_METRICS = {"ap": average_precision, "ndcg": ndcg, "roc_auc": roc_auc_score}
SCALINGS = ("standard", "none")


class Config(S.Section):
    """The keys of a fit; `qsrank fit` sets them from its options."""

    experiment: S.choice([EXPERIMENT]) = S.key(EXPERIMENT, "the pipeline this config runs")
    train: S.text() = S.key("", "the training feature file")
    test: S.optional(S.text()) = S.key(None, "the test feature file; null: a split of train")
    label_column: S.optional(S.text()) = S.key(None, "the label column of a CSV/TSV/Parquet")
    pos_label: S.optional(S.text()) = S.key(None, "the positive class; null: the larger of "
                                            "two, else every class one vs the rest")
    loss: S.choice(["ap", "ndcg", "01"]) = S.key("ap", "the loss RankSVM is trained for")
    C: S.c_grid() = S.key([0.1, 1.0, 10.0, 100.0], "RankSVM's C, or a grid for CV")
    baseline_C: S.c_grid() = S.key([0.001, 0.01, 0.1, 1.0, 10.0, 100.0],
                                   "the baselines' C, or a grid for CV")
    cv_folds: S.number(integer=True, low=2) = S.key(5, "stratified folds choosing C")
    cv_metric: S.choice(CV_METRICS) = S.key("ap", "the metric CV chooses C by")
    solver: S.choice(SOLVERS) = S.key("cutting_plane", "RankSVM's solver")
    scale: S.choice(SCALINGS) = S.key("standard", "feature scaling fit on the training rows")
    test_size: S.number(low=0, strict=True, high=1) = S.key(
        0.25, "share of the training file held out for testing when no test file is given")
    seed: S.number(integer=True, low=0) = S.key(0, "seed of the split and the CV folds")
    force: S.flag() = S.key(False, "retrain the classes the run directory holds")


@dataclass(frozen=True)
class FitData:
    """Scaled train and test rows, the positive classes, the scaling and the data's note."""

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


# ---------------------------------------------------------------------------- data

def load_data(cfg):
    """Read and check the files, split when no test file is given, choose the positive
    classes and scale; every bad input is a ValueError naming its file, raised before the
    run directory is claimed."""
    train = read_table(cfg["train"], label_column=cfg["label_column"])
    classes = _classes(train.path, train.y)
    if cfg["test"] is not None:
        test = read_table(cfg["test"], label_column=cfg["label_column"])
        X_test = align_features(test, train.feature_names, train.X.shape[1],
                                f"the training file {train.path}")
        X_train, y_train, y_test = train.X, train.y, test.y
        if y_train.dtype.kind != y_test.dtype.kind:  # 1 in one file, "1" in the other
            y_train, y_test = y_train.astype(str), y_test.astype(str)
            classes = np.unique(y_train)
        _classes(test.path, y_test)
        split = f"test: {test.path} ({X_test.shape[0]} rows)"
    else:
        try:
            X_train, X_test, y_train, y_test = train_test_split(
                train.X, train.y, test_size=cfg["test_size"], stratify=train.y,
                random_state=cfg["seed"])
        except ValueError as err:
            raise ValueError(f"{train.path}: cannot hold out a stratified test share of "
                             f"{cfg['test_size']}: {err}") from None
        split = (f"test: a stratified {cfg['test_size']:g} of it held out (seed "
                 f"{cfg['seed']}), {X_test.shape[0]} rows")
    positives = _positives(train.path, classes, cfg["pos_label"])
    for c in positives:
        _check_cv(train.path, cfg, np.asarray(y_train) == c, c)
    scaler = StandardScaler(with_mean=not sp.issparse(X_train))
    if cfg["scale"] == "standard":
        scaler.fit(X_train)
        mean = scaler.mean_ if scaler.with_mean else np.zeros(X_train.shape[1])
        scale = scaler.scale_
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    else:
        mean, scale = np.zeros(X_train.shape[1]), np.ones(X_train.shape[1])
    note = (f"{train.path} ({X_train.shape[0]} training rows, {X_train.shape[1]} features, "
            f"{len(classes)} classes); {split}")
    return FitData(X_train, y_train, X_test, y_test, train.feature_names, positives, mean,
                   scale, note, digest_arrays(X_train, y_train, X_test, y_test))


def _classes(path, y):
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"{path}: the labels hold one class only ({shown(str(classes[0]))}); "
                         "ranking needs positives and negatives.")
    return classes


def _positives(path, classes, pos_label):
    """The positive class of each one-vs-rest model."""
    if pos_label is None:
        return [classes[1]] if classes.size == 2 else list(classes)
    match = [c for c in classes if str(c) == pos_label]
    if not match:
        raise ValueError(f"{path}: no class {pos_label!r} to take as positive; its classes: "
                         f"{', '.join(shown(str(c)) for c in classes[:20])}.")
    return match


def _check_cv(path, cfg, is_pos, c):
    """Enough positives and negatives of class `c` for each CV fold to hold some."""
    grids = (cfg["C"], cfg["baseline_C"])
    least = min(int(is_pos.sum()), int((~is_pos).sum()))
    if any(len(g) > 1 for g in grids) and least < cfg["cv_folds"]:
        raise ValueError(f"{path}: class {shown(str(c))} has {int(is_pos.sum())} positive and "
                         f"{int((~is_pos).sum())} negative training rows, fewer than the "
                         f"{cfg['cv_folds']} CV folds; lower the folds or fix C.")


# ---------------------------------------------------------------------------- training

def settings(cfg, data):
    """What a class's record depends on: the data and every key but `force`."""
    return {"data": data.note, "data_sha256": data.sha256,
            **{k: v for k, v in cfg.items() if k != "force"}}


def units(cfg, data):
    """One unit per positive class: (its index, its name made safe for a file name)."""
    return [(f"{k:03d}", re.sub(r"[^\w.-]", "_", str(c))[:40])
            for k, c in enumerate(data.positives)]


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
    k-fold CV on `cfg["cv_metric"]` (the first of equals). Returns (estimator, C, CV score or
    None)."""
    if len(grid) == 1:
        return est.set_params(C=grid[0]).fit(X, y), grid[0], None
    folds = StratifiedKFold(cfg["cv_folds"], shuffle=True, random_state=cfg["seed"])
    scorer = make_scorer(CV_METRICS[cfg["cv_metric"]], response_method="decision_function")
    search = GridSearchCV(est, {"C": grid}, scoring=scorer, cv=folds, error_score="raise")
    search.fit(X, y)
    return search.best_estimator_, search.best_params_["C"], float(search.best_score_)


def run_unit(run, unit):
    """Fit the three methods for one positive class and score the test rows: the class's
    record, with the RankSVM's weights."""
    cfg, data = run.cfg, run.data
    positive = data.positives[int(unit[0])]
    y_train, y_test = np.asarray(data.y_train) == positive, np.asarray(data.y_test) == positive
    record = {"class": positive.item() if hasattr(positive, "item") else positive,
              "train_positives": int(y_train.sum()), "test_positives": int(y_test.sum()),
              "methods": {}}
    with tqdm(METHODS, desc=f"class {str(positive)[:30]}", leave=False,
              disable=not run.progress) as bar:
        for name in bar:
            grid = cfg["C"] if name == "rank_svm" else cfg["baseline_C"]
            start = time.perf_counter()
            est, C, cv_score = tune(cfg, estimator(cfg, name), grid, data.X_train, y_train)
            seconds = time.perf_counter() - start
            record["methods"][name] = {
                "C": C, "C_from": "fixed" if cv_score is None else f"{cfg['cv_folds']}-fold cv",
                "cv_score": cv_score, "train_s": seconds,
                **rank_metrics(y_test, est.decision_function(data.X_test))}
            if name == "rank_svm":
                record.update(coef=est.coef_[0].tolist(), intercept=float(est.intercept_[0]),
                              n_iter=int(est.n_iter_), converged=bool(est.converged_))
    return record


# ---------------------------------------------------------------------------- outputs

def metrics_frame(records):
    """One row per class and method: C, how it was chosen, CV score, test metrics, time."""
    rows = [{"class": r["class"], "method": name, "test_positives": r["test_positives"], **m}
            for r in records for name, m in r["methods"].items()]
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
    return frame_table(cells.rename(columns=METRICS), {v: ".4f" for v in METRICS.values()})


def summary(cfg, records, note):
    """table.md: the data, the models, how C was chosen, the test metrics."""
    def how(grid):
        if len(grid) == 1:
            return f"C {grid[0]:g} (fixed)"
        return (f"C from {', '.join(f'{c:g}' for c in grid)} by {cfg['cv_folds']}-fold "
                f"stratified CV on the training rows ({cfg['cv_metric']})")
    scaling = "standardised on the training rows" if cfg["scale"] == "standard" else "as given"
    return "\n\n".join([
        f"# qsrank fit: RankSVM ({cfg['loss']} loss) beside LinearSVC and LogisticRegression",
        f"Data: {note}. Features {scaling}.",
        f"RankSVM (solver {cfg['solver']}): {how(cfg['C'])}. LinearSVC and "
        f"LogisticRegression: {how(cfg['baseline_C'])}.",
        "Test metrics, each class one vs the rest (its positive class named in `class`):",
        table(records),
    ]) + "\n"


def write(run, records):
    """metrics.csv, table.md and the model (model.json + model.npz)."""
    write_csv(run.out / "metrics.csv", metrics_frame(records))
    write_text(run.out / "table.md", summary(run.cfg, records, run.data.note))
    data, cfg = run.data, run.cfg
    meta = {"n_features": int(data.mean.size), "feature_names": data.feature_names,
            "label_column": cfg["label_column"], "classes": [r["class"] for r in records],
            "loss": cfg["loss"], "solver": cfg["solver"],
            "C": [r["methods"]["rank_svm"]["C"] for r in records], "scaling": cfg["scale"]}
    write_model(run.out, meta, coef=[r["coef"] for r in records],
                intercept=[r["intercept"] for r in records], mean=data.mean, scale=data.scale)


def redraw(run_dir, kind="tables"):
    """Draw the run's test metrics (metrics.csv) as a figure, figure.png and .pdf: test AP
    per class, grouped bars per method; return their paths."""
    metrics = read_csv(Path(run_dir) / "metrics.csv", ["class", "method", "ap"])
    table = metrics.pivot_table(index="class", columns="method", values="ap", sort=False)
    names = {m: label for m, label in METHODS.items() if m in table.columns}
    return bar_figure(table[list(names)].reset_index(), "class", names, "test AP",
                      "qsrank fit: test AP per class, one vs the rest", Path(run_dir) / "figure")


SPEC = Experiment(name=EXPERIMENT, schema=Config, load_data=load_data, settings=settings,
                  units=units, run_unit=run_unit, write=write, warm_up=warm_up,
                  unit_label="class", unit_text=lambda unit: f"class {unit[1]}")

"""Real-data example (docs/experiments/digits.md): AP-SVM against the 0-1 SVM and LinearSVC on
scikit-learn's digits, one-vs-rest, ranked by AP on a stratified test half. C is fixed or chosen
by CV, on one scale for all three (`MeanLossLinearSVC`)."""

import hashlib
import time
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import conint
from sklearn.datasets import load_digits
from sklearn.metrics import average_precision_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import LinearSVC

from qs.estimators import RankSVM
from qs.inference import METHODS as LAI_METHODS
from qs.model_selection import choose_C, estimator_fit_score
from qs.ssvm import SOLVERS
from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S
from qsrank.pipelines._io import read_csv, write_csv, write_text
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._runs import digest_arrays
from qsrank.pipelines._tables import bar_figure, frame_table, mark, unconverged_note

EXPERIMENT = "digits"
#: table columns, in order: method name -> loss of RankSVM (None: LinearSVC)
METHODS = {"ap_svm": "ap", "zero_one_svm": "01", "linear_svc": None}
SCALERS = {"standard": StandardScaler, "minmax": MinMaxScaler}
DATA_NOTE = "scikit-learn load_digits (1797 images, 8x8, real data)"
RUN_COLUMNS = [
    "digit",
    "method",
    "C",
    "C_from",
    "test_ap",
    "train_s",
    "lai_calls",
    "lai_time_s",
    "n_iter",
    "converged",
]

AP_INFERENCES = tuple(sorted(m for m, losses in LAI_METHODS.items() if "ap" in losses))
C_VALUE = S.real(gt=0) | Literal["cv"]
GRID = S.C_GRID


def _digit(value):
    """The CLI's --class gives digits as text."""
    return int(value) if isinstance(value, str) and value.isdecimal() else value


class CPerMethod(S.Section):
    ap_svm: C_VALUE = S.key("cv", "C of the AP-SVM, or cv")
    zero_one_svm: C_VALUE = S.key("cv", "C of the 0-1 SVM (the mean hinge's weight), or cv")
    linear_svc: C_VALUE = S.key(
        "cv",
        "C of LinearSVC on the RankSVMs' scale (the mean squared "
        "hinge's weight: liblinear's C x n_samples), or cv",
    )


class Grids(S.Section):
    ap_svm: GRID = S.key([0.1, 1.0, 10.0, 100.0], "C values the AP-SVM's CV tries")
    zero_one_svm: GRID = S.key([0.1, 1.0, 10.0, 100.0], "C values the 0-1 SVM's CV tries")
    linear_svc: GRID = S.key(
        [0.1, 1.0, 10.0, 100.0], "C values LinearSVC's CV tries (on the RankSVMs' scale)"
    )


class CV(S.Section):
    folds: conint(ge=2) = S.key(5, "stratified folds on the train half")
    grid: Grids = S.key(Grids, "per method, the C values tried")


class Config(S.Section):
    """The digits experiment: every key a config may set; configs/digits.yaml sets a few."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    seed: conint(ge=0) = S.key(0, "seed of the stratified split and CV folds")
    test_size: S.real(gt=0, lt=1) = S.key(0.5, "fraction of the images in the test half")
    classes: S.distinct(conint(ge=0, le=9), _digit) = S.key(
        list(range(10)), "digits, each one-vs-rest"
    )
    scaler: Literal[tuple(SCALERS)] = S.key("standard", "feature scaling fit on the train half")
    solver: Literal[tuple(SOLVERS)] = S.key("cutting_plane", "RankSVM solver of both RankSVMs")
    inference: Literal[tuple(AP_INFERENCES)] = S.key(
        "auto", "LAI method of the AP-SVM; the 0-1 SVM always uses zero_one"
    )
    tol: S.real(ge=0) = S.key(1e-3, "RankSVM's stopping tolerance")
    max_iter: conint(ge=1) = S.key(1000, "RankSVM's most iterations")
    C: CPerMethod = S.key(
        CPerMethod,
        "per method: a fixed C, or cv for k-fold CV over "
        "cv.grid (RankSVM's C weighs the loss-scale slack)",
    )
    cv: CV = S.key(CV, "cross-validation of C")
    force: bool = S.key(False, "retrain the digits and methods the run directory holds")


# ---------------------------------------------------------------------------- data


def load_data(cfg):
    """The seeded stratified split scaled on the train half: (X_train, X_test, y_train, y_test,
    note)."""
    X, y = load_digits(return_X_y=True)
    digest = hashlib.sha256(np.ascontiguousarray(X).tobytes() + y.tobytes()).hexdigest()[:16]
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=cfg["test_size"], stratify=y, random_state=cfg["seed"]
    )
    scaler = SCALERS[cfg["scaler"]]().fit(X_train)
    note = (
        f"{DATA_NOTE}; sha256(X, y) {digest}; stratified split seed {cfg['seed']}: "
        f"{len(y_train)} train / {len(y_test)} test; {cfg['scaler']} scaling fit on train"
    )
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test, note


# ---------------------------------------------------------------------------- training


class MeanLossLinearSVC(LinearSVC):
    """LinearSVC whose C weighs the mean squared hinge (sample weights 1 / n_samples), as RankSVM's
    C weighs its mean loss: one C grid means the same for the three methods."""

    def fit(self, X, y, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("MeanLossLinearSVC sets the sample weights itself")
        return super().fit(X, y, sample_weight=np.full(X.shape[0], 1.0 / X.shape[0]))


def _estimator(cfg, name, C):
    loss = METHODS[name]
    if loss is None:
        return MeanLossLinearSVC(C=C, max_iter=10_000, random_state=cfg["seed"])
    inference = cfg["inference"] if loss == "ap" else "zero_one"
    solver = {k: cfg[k] for k in ("solver", "tol", "max_iter")}
    return RankSVM(loss=loss, inference=inference, C=C, **solver)


def warm_up(cfg, units=None):
    """Compile (or load) the LAI kernels of both RankSVMs."""
    _methods.warm_up([("ap", cfg["inference"]), ("01", "zero_one")])


def fit_one(cfg, name, X, y):
    """Fit method `name` on (X, y), C fixed or chosen by CV: (estimator, C, C_from, seconds)."""
    C = cfg["C"][name]
    C_from = "fixed"
    if C == "cv":
        folds = StratifiedKFold(cfg["cv"]["folds"], shuffle=True, random_state=cfg["seed"])
        step = estimator_fit_score(_estimator(cfg, name, 1.0), X, y, "average_precision")
        C = choose_C(step, cfg["cv"]["grid"][name], folds, X, y).C
        C_from = f"{cfg['cv']['folds']}-fold cv"
    start = time.perf_counter()
    est = _estimator(cfg, name, float(C)).fit(X, y)
    return est, float(C), C_from, time.perf_counter() - start


def settings(cfg, data):
    """What a digit x method record depends on: the split, scaled data, every key but the digits."""
    sha = digest_arrays(*data[:4])  # the arrays the fits see (split and scaled)
    return {
        "data": data[-1],
        "data_sha256": sha,
        **{k: v for k, v in cfg.items() if k not in ("classes", "force")},
    }


def units(cfg, data):
    """One unit per digit and method, digits outer."""
    return [(digit, name) for digit in cfg["classes"] for name in METHODS]


def run_unit(run, unit):
    """Fit method `name` for `digit` one-vs-rest and rank the test half: a row of runs.csv."""
    digit, name = unit
    X_train, X_test, y_train, y_test, _ = run.data
    est, C, C_from, train_s = fit_one(run.cfg, name, X_train, y_train == digit)
    ap = average_precision_score(y_test == digit, est.decision_function(X_test))
    record = {
        "digit": digit,
        "method": name,
        "C": C,
        "C_from": C_from,
        "test_ap": float(ap),
        "train_s": float(train_s),
    }
    if METHODS[name] is not None:
        record.update(
            lai_calls=int(est.lai_calls_),
            lai_time_s=float(est.lai_time_),
            n_iter=int(est.n_iter_),
            converged=bool(est.converged_),
        )
    else:  # liblinear stops at max_iter when it has not converged (and warns so itself)
        record.update(n_iter=int(est.n_iter_), converged=bool(est.n_iter_ < est.max_iter))
    return record


# ---------------------------------------------------------------------------- outputs


def ap_table(runs):
    """Test AP per digit (rows) and method (columns), with a last row `mean`."""
    table = runs.pivot(index="digit", columns="method", values="test_ap")[list(METHODS)]
    table.index = table.index.astype(str)
    table.loc["mean"] = table.mean(axis=0)
    table.columns.name = None
    return table.rename_axis("digit").reset_index()


def timing_table(runs):
    """Per method: total fit time and, for the RankSVMs, total LAI time and calls."""
    grouped = runs.groupby("method", sort=False)
    table = pd.DataFrame(
        {
            "train_s": grouped["train_s"].sum(),
            "lai_time_s": grouped["lai_time_s"].sum(min_count=1),
            "lai_calls": grouped["lai_calls"].sum(min_count=1),
        }
    )
    table["lai_ms_per_call"] = 1e3 * table["lai_time_s"] / table["lai_calls"]
    return table.reindex(list(METHODS)).rename_axis("method").reset_index()


def _marked_ap_table(runs):
    """The test-AP table as text, cells of unconverged fits marked; and the number marked."""
    table = ap_table(runs)
    cells = table.map(lambda v: v if isinstance(v, str) else "-" if pd.isna(v) else f"{v:.4f}")
    early = runs[runs["converged"].eq(False)]
    for digit, method in zip(early["digit"], early["method"]):
        row = cells.index[cells["digit"] == str(digit)][0]
        cells.loc[row, method] = mark(cells.loc[row, method], True)
    return cells, len(early)


def summary(cfg, runs, note):
    """table.md: the data, how C was chosen, test AP per digit, and times per method."""
    how_C = "; ".join(
        f"{name}: {cfg['cv']['folds']}-fold stratified CV on the train half by AP over "
        f"{cfg['cv']['grid'][name]}"
        if cfg["C"][name] == "cv"
        else f"{name}: fixed {cfg['C'][name]}"
        for name in METHODS
    )
    chosen = runs.pivot(index="digit", columns="method", values="C")[list(METHODS)]
    chosen = chosen.rename_axis("digit").reset_index()
    ap_cells, n_early = _marked_ap_table(runs)
    timing_formats = {
        "train_s": ".3f",
        "lai_time_s": ".4f",
        "lai_calls": ".0f",
        "lai_ms_per_call": ".4f",
    }
    parts = [
        "# Digits one-vs-rest: test AP of the AP-SVM, the 0-1 SVM and LinearSVC",
        f"Data: {note}. Real data; not a data set of the paper.",
        f"Models: RankSVM (solver {cfg['solver']}, tol {cfg['tol']:g}, max_iter "
        f"{cfg['max_iter']}; AP-SVM LAI method {cfg['inference']}, 0-1 SVM zero_one) and "
        "sklearn LinearSVC (squared hinge, the outside reference). C, on one scale for the "
        "three (the weight of the mean loss; LinearSVC's liblinear C is this C / n_samples): "
        f"{how_C}.",
        "## Test average precision",
        frame_table(ap_cells, {}),
        unconverged_note(n_early, "fit"),
        "## Time per method, summed over the digits",
        "Final fits only (CV fits excluded), each timed once (one measurement per digit, "
        "not a median of repeats); LAI time measured inside RankSVM, numba compilation "
        "excluded by a warm-up call.",
        frame_table(timing_table(runs), timing_formats),
        "## C used per digit",
        frame_table(chosen, {}),
    ]
    return "\n\n".join(filter(None, parts)) + "\n"


def write(run, records):
    """runs.csv, table.csv (test AP per digit and method) and table.md."""
    runs = pd.DataFrame(records, columns=RUN_COLUMNS)
    for name, frame in (("table.csv", ap_table(runs)), ("runs.csv", runs)):
        write_csv(run.out / name, frame)
    write_text(run.out / "table.md", summary(run.cfg, runs, run.data[-1]))


def redraw(run_dir, kind="tables"):
    """Draw table.csv as grouped bars per digit, figure.png and .pdf; return their paths."""
    table = read_csv(Path(run_dir) / "table.csv", ["digit", *METHODS])
    return bar_figure(
        table,
        "digit",
        {m: m for m in METHODS},
        "test AP",
        "Digits one-vs-rest: test AP per digit (mean last)",
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
)

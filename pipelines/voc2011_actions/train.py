"""Training for Tables 1-4: one unit per class x method (C fixed or chosen by
cross-validation), evaluated on the test boxes; the experiment's declaration (`SPEC`)."""

import hashlib
import time

from sklearn.model_selection import StratifiedKFold

from qs.estimators import RankSVM
from qs.metrics import average_precision, ndcg, voc_average_precision
from qs.model_selection import choose_C, estimator_fit_score
from qsrank.pipelines import _methods
from qsrank.pipelines._experiment_common import is_synthetic
from qsrank.pipelines._io import write_npz
from qsrank.pipelines._replay import Recorder, replay
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines.voc2011_actions.config import EXPERIMENT, METHODS, Config
from qsrank.pipelines.voc2011_actions.data import (
    class_data,
    data_note,
    digest,
    load_checked,
)
from qsrank.pipelines.voc2011_actions.outputs import write_tables


def warm_up(methods):
    """Compile (or load) the LAI kernels of the methods named."""
    _methods.warm_up(METHODS[name] for name in methods)


def _estimator(cfg, name, C, bias, lai_callback=None):
    loss, method = METHODS[name]
    # the poselet features carry a constant-1 column, so the 0-1 SVM learns its bias there
    return RankSVM(
        loss=loss,
        inference=method,
        solver=cfg["solver"],
        C=float(C),
        tol=cfg["tol"],
        max_iter=cfg["max_iter"],
        fit_intercept=not bias,
        lai_callback=lai_callback,
    )


def train_one(cfg, name, C, X, y, bias):
    """Fit method `name` at `C`; the estimator and a record of its training, with the total
    LAI time of each of ``lai_repeats`` replays of its recorded calls (`lai_replay_s`)."""
    recorder = Recorder() if cfg["lai_repeats"] else None
    est = _estimator(cfg, name, C, bias, recorder)
    start = time.perf_counter()
    est.fit(X, y)
    train_s = time.perf_counter() - start
    loss, method = METHODS[name]
    replayed = replay(recorder.calls, loss, method, cfg["lai_repeats"]) if recorder else []
    record = {
        "method": name,
        "loss": loss,
        "inference": method,
        "solver": cfg["solver"],
        "C": float(C),
        "n_train": int(X.shape[0]),
        "n_pos": int(y.sum()),
        "lai_calls": int(est.lai_calls_),
        "lai_time_s": float(est.lai_time_),
        "lai_ms_per_call": 1e3 * float(est.lai_time_per_call_),
        "n_iter": int(est.n_iter_),
        "converged": bool(est.converged_),
        "train_s": train_s,
        "lai_replay_s": replayed,
    }
    return est, record


def _ap_scorer(est, X, y):
    return average_precision(y == est.classes_[1], est.decision_function(X))


def _ndcg_scorer(est, X, y):
    return ndcg(y == est.classes_[1], est.decision_function(X))


def cross_validate(cfg, loss, X, y, bias):
    """5-fold (cv.folds) CV of C over cv.grid for `loss`, with the fastest exact LAI (every
    exact method gives the same weights). Selected by validation NDCG for loss ndcg, by AP
    otherwise (the 0-1 SVM included, as the paper compares it in AP); ties: the smallest C."""
    name = {"01": "0-1", "ap": "ap_auto", "ndcg": "ndcg_auto"}[loss]
    grid = sorted(cfg["cv"]["grid"][loss])
    folds = StratifiedKFold(cfg["cv"]["folds"], shuffle=True, random_state=cfg["seed"])
    scoring = {"ap": _ap_scorer, "ndcg": _ndcg_scorer}
    step = estimator_fit_score(_estimator(cfg, name, grid[0], bias), X, y, scoring)
    key = "ndcg" if loss == "ndcg" else "ap"
    choice = choose_C(step, grid, folds, X, y, select=key)
    means = choice.mean_scores
    return {
        "loss": loss,
        "C": float(choice.C),
        "grid": [float(c) for c in grid],
        "selected_by": key,
        "cv_ap": float(means["ap"][choice.index]),
        "cv_ndcg": float(means["ndcg"][choice.index]),
        "mean_test_ap": [float(v) for v in means["ap"]],
        "mean_test_ndcg": [float(v) for v in means["ndcg"]],
    }


def settings(cfg, splits):
    """What a class x method training depends on besides the unit: the data's contents, so
    that a change to the generator retrains, and the training's keys."""
    return {
        "data": [splits["trainval"].source, splits["test"].source],
        "data_sha256": [digest(splits["trainval"]), digest(splits["test"])],
        "seed": cfg["seed"],
        "max_boxes": cfg["max_boxes"],
        "solver": cfg["solver"],
        "tol": float(cfg["tol"]),
        "max_iter": cfg["max_iter"],
        "lai_repeats": cfg["lai_repeats"],
        "C": cfg["C"] if cfg["C"] != "cv" else {"cv": cfg["cv"]},
    }


def units(cfg, splits):
    return [(a, m) for a in cfg["classes"] for m in _methods.selected_methods(METHODS, cfg)]


def run_unit(run, unit):
    """Train method `name` on class `action` (C fixed or by CV, resumable), evaluate it on
    the test boxes, and keep its weights in runs/<class>__<method>.npz."""
    action, name = unit
    cfg, train, test = run.cfg, run.data["trainval"], run.data["test"]
    X, y_all, ignore = class_data(train, action)
    X, y = X[~ignore], y_all[~ignore]
    Xt, yt, ignore_t = class_data(test, action)
    cv_done = run.cache.setdefault("cv_done", set())
    C, cv = _C_for(cfg, run.store, action, METHODS[name][0], X, y, train.bias, cv_done)
    est, record = train_one(cfg, name, C, X, y, train.bias)
    scores = est.decision_function(Xt)
    record.update(
        {
            "class": action,
            "C_from": "cv" if cv else "fixed",
            "test_ap": voc_average_precision(yt, scores, ignore=ignore_t),
            "test_ndcg": ndcg(yt[~ignore_t], scores[~ignore_t]),
            "cv_ap": cv.get("cv_ap") if cv else None,
            "cv_ndcg": cv.get("cv_ndcg") if cv else None,
            "w_sha256": hashlib.sha256(est.coef_.tobytes()).hexdigest(),
        }
    )
    write_npz(
        run.store.path(f"{action}__{name}").with_suffix(".npz"),
        {"coef": est.coef_[0], "intercept": est.intercept_},
    )
    return record


def write(run, records):
    """Tables 1-4 from every class x method record of the directory trained under these
    settings (an earlier run's other classes included)."""
    records = [r for r in run.store.records("*__*.json") if "method" in r]
    write_tables(run.out, records, run.cfg, data_note(run.data), is_synthetic(run.data))


def _C_for(cfg, store, action, loss, X, y, bias, cv_done):
    """(C, cv record or None): the fixed C of the loss, or its CV choice (resumable; done
    once per class and loss in a run, as every exact method of a loss shares it)."""
    if cfg["C"] != "cv":
        return cfg["C"][loss], None
    name = f"cv-{action}__{loss}"
    cv = store.get(name)
    if cv is None or (cfg["force"] and (action, loss) not in cv_done):
        cv = {**cross_validate(cfg, loss, X, y, bias), "class": action}
        store.put(name, cv)
    cv_done.add((action, loss))
    return cv["C"], cv


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_checked,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    warm_up=lambda cfg, units: warm_up(dict.fromkeys(m for _, m in units)),
    note=lambda cfg, splits: data_note(splits),
    unit_label="run",
    report=tuple(f"table{k}.md" for k in range(1, 5)),
)

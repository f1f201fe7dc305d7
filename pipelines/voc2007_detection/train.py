"""Training for Table 5: one unit per class x method (C chosen once per class and loss),
evaluated by detection AP on the test images; the experiment's declaration (`SPEC`)."""

import hashlib
import time
from contextlib import contextmanager, nullcontext

import numpy as np

from qs import model_selection
from qs.data.voc2007 import CLASSES
from qs.detection import dask_scheduler
from qs.estimators import LatentRankSVM
from qs.metrics import voc_detection_ap
from qsrank.pipelines import _methods
from qsrank.pipelines._experiment_common import is_synthetic
from qsrank.pipelines._io import write_npz
from qsrank.pipelines._replay import Recorder, replay
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines.voc2007_detection import lockstep
from qsrank.pipelines.voc2007_detection.config import (
    EXPERIMENT,
    GRID_METHOD,
    METHODS,
    SPLITS,
    WORKING_SET,
    Config,
    selected_methods,
)
from qsrank.pipelines.voc2007_detection.data import (
    check_class,
    data_note,
    holdout,
    load_data,
)
from qsrank.pipelines.voc2007_detection.tables import write_tables


def _blas_threads(n):
    """A context limiting BLAS to `n` threads (None: unchanged): a cutting-plane iteration's
    small matrix-vector product gains nothing from more on a loaded machine."""
    if n is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


def train_one(cfg, name, train, labels, C, scheduler=None, repeats=0):
    """Fit method `name` with `C` on the trainval bags; the estimator and a record of its
    training (the initial boxes are found before the clock starts), with the total LAI time
    of each of `repeats` replays of its recorded calls (`lai_replay_s`)."""
    loss, method = METHODS[name]
    init = (
        train.mean_difference_boxes(labels, scheduler) if cfg["init"] == "image_means" else "random"
    )
    k = cfg["working_set"]
    if k is None:
        k = WORKING_SET if train.data is None else 0
    recorder = Recorder() if repeats else None
    est = LatentRankSVM(
        loss=loss,
        inference=method,
        C=C,
        tol=cfg["tol"],
        max_iter=cfg["max_iter"],
        max_outer=cfg["max_outer"],
        min_outer=cfg["min_outer"][loss],
        init=init,
        random_state=cfg["seed"],
        scheduler=scheduler,
        working_set=k or None,
        lai_callback=recorder,
    )
    start = time.perf_counter()
    train.fit(est, labels)
    train_s = time.perf_counter() - start
    called = "zero_one" if loss == "01" and method == "auto" else method  # as the estimator
    replayed = replay(recorder.calls, loss, called, repeats) if recorder else []
    record = {
        "method": name,
        "loss": loss,
        "inference": method,
        "C": C,
        "n_images": int(labels.size),
        "n_pos": int(labels.sum()),
        "n_boxes": train.n_boxes,
        "lai_calls": int(est.lai_calls_),
        "lai_time_s": float(est.lai_time_),
        "n_outer": int(est.n_outer_),
        "n_iter": int(est.n_iter_),
        "converged": bool(est.converged_),
        "train_s": train_s,
        "passes": float(est.passes_),
        "working_set": k,
        "lai_replay_s": replayed,
    }
    return est, record


def choose_C(cfg, loss, train, labels, cls, scheduler=None):
    """The C of `loss` for class `cls`: the only one given, or the grid's value whose model
    trained on a held-out split of trainval (:func:`holdout`) gives the best detection AP on
    the images held out (the smallest such C on a tie). Returns (C, {C: validation AP})."""
    grid = cfg["C"][loss]
    if len(grid) == 1:
        return grid[0], {}
    k = CLASSES.index(cls)
    fit_idx, val_idx = holdout(labels, cfg["validation_fraction"], cfg["seed"], k)
    if not train.subset(val_idx).has_object(k):
        raise ValueError(
            f"class {cls!r}: choosing C needs ground-truth objects (other than "
            "difficult ones) in the held-out trainval images; give C as one number"
        )

    def fit_score(C, fit_rows, val_rows):
        fit = train.subset(fit_rows)
        est, _ = train_one(cfg, GRID_METHOD[loss], fit, labels[fit_rows], C, scheduler)
        return detection_ap(est, train.subset(val_rows), cls, cfg["nms_threshold"], scheduler)

    choice = model_selection.choose_C(fit_score, grid, [(fit_idx, val_idx)])
    return choice.C, dict(zip(grid, map(float, choice.mean_scores[model_selection.SCORE])))


def detection_ap(est, split, cls, threshold, scheduler=None):
    """VOC2007 detection AP of a fitted model on the :class:`~qs.data.bags.BagSet` `split`
    for class `cls`."""
    found = split.detections(est.coef_, est.intercept_, threshold, scheduler)
    return voc_detection_ap(*found, split.ground_truth(CLASSES.index(cls)))


def load_checked(cfg):
    """The splits and every selected class's trainval labels, each class checked to be
    trainable and evaluable before any training."""
    splits = load_data(cfg)
    return {**splits, "labels": {cls: check_class(splits, cls) for cls in cfg["classes"]}}


def _splits(data):
    return {split: data[split] for split in SPLITS}


def settings(cfg, data):
    """What a class x method training depends on besides the unit: a stored record is reused
    only when these match (the data's contents too). How the data are read (in memory, out
    of core, the scheduler) is not among them: it changes no number."""
    return {
        "data": [data[s].source for s in SPLITS],
        "data_sha256": [data["digests"][s] for s in SPLITS],
        "seed": cfg["seed"],
        "init": cfg["init"],
        "C": cfg["C"],
        "validation_fraction": float(cfg["validation_fraction"]),
        "tol": float(cfg["tol"]),
        "max_iter": cfg["max_iter"],
        "max_outer": cfg["max_outer"],
        "min_outer": cfg["min_outer"],
        **({} if cfg["lockstep"] else {"lai_repeats": cfg["lai_repeats"]}),
        "nms_threshold": float(cfg["nms_threshold"]),
        **(
            {"lockstep": {"verify": cfg["verify"], "working_set": cfg["working_set"]}}
            if cfg["lockstep"]
            else {}
        ),
    }


def units(cfg, data):
    """(class, method) pairs: class by class; with ``lockstep``, method by method, since a
    loss's first unit trains every class and the progress bar then counts what is done."""
    if cfg["lockstep"]:
        return [(c, m) for m in selected_methods(cfg) for c in cfg["classes"]]
    return [(c, m) for c in cfg["classes"] for m in selected_methods(cfg)]


def warm_up(cfg, units):
    """Compile (or load) the kernels of the units' LAI methods and of the C grid's method."""
    _methods.warm_up(METHODS[name] for _, m in units for name in (m, GRID_METHOD[METHODS[m][0]]))


@contextmanager
def session(run):
    """BLAS threads limited, and the Dask scheduler that scores boxes read out of core (from
    stores, or generated)."""
    cfg, data = run.cfg, run.data
    out_of_core = any(data[s].data is None for s in SPLITS)
    with (
        _blas_threads(cfg["blas_threads"]),
        dask_scheduler(cfg["scheduler"] if out_of_core else "sync") as scheduler,
    ):
        run.cache["scheduler"] = scheduler
        yield


def run_unit(run, unit):
    """Train method `name` on class `cls` (C chosen once per class and loss), evaluate it on
    test, keep its weights in runs/; with ``lockstep``, the loss's lockstep record."""
    cls, name = unit
    cfg, train, test = run.cfg, run.data["trainval"], run.data["test"]
    labels, scheduler = run.data["labels"][cls], run.cache["scheduler"]
    loss = METHODS[name][0]
    if cfg["lockstep"]:
        return lockstep.records(run, loss)[cls, name]
    chosen = run.cache.setdefault("chosen", {})  # (class, loss) -> C, once per run
    if (cls, loss) not in chosen:
        chosen[cls, loss] = _chosen_C(cfg, run.store, loss, train, labels, cls, scheduler)
    est, record = train_one(
        cfg, name, train, labels, chosen[cls, loss], scheduler, repeats=cfg["lai_repeats"]
    )
    w = np.append(est.coef_, est.intercept_)
    record.update(
        {
            "class": cls,
            "test_ap": detection_ap(est, test, cls, cfg["nms_threshold"], scheduler),
            "w_sha256": hashlib.sha256(w.tobytes()).hexdigest(),
        }
    )
    write_npz(
        run.store.path(f"{cls}__{name}").with_suffix(".npz"),
        {"coef": est.coef_, "intercept": est.intercept_},
    )
    return record


def write(run, records):
    """Table 5 from every class x method record of the directory made under these settings
    (an earlier run's other classes included)."""
    records = [
        r
        for r in run.store.records("*__*.json")
        if r.get("method") in METHODS and r.get("class") in CLASSES
    ]
    splits = _splits(run.data)
    write_tables(run.out, records, run.cfg, data_note(splits), is_synthetic(splits))


def _chosen_C(cfg, store, loss, train, labels, cls, scheduler):
    """C of `loss` for `cls`: the choice kept in runs/, or a new one (also with force)."""
    key = f"{cls}__C-{loss}"
    record = None if cfg["force"] else store.get(key)
    if record is None:
        C, scores = choose_C(cfg, loss, train, labels, cls, scheduler)
        record = {
            "class": cls,
            "loss": loss,
            "C": C,
            "validation_ap": {f"{c:g}": ap for c, ap in scores.items()},
        }
        store.put(key, record)
    return record["C"]


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_checked,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    warm_up=warm_up,
    note=lambda cfg, data: data_note(_splits(data)),
    session=session,
    unit_label="run",
    report=("table5.md",),
)

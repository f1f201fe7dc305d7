"""VOC2011 action classification (Mohapatra et al., CVPR 2018, Section 4.1): Tables 1-4 and Figures
2-3.

For each action class, the ranking structured SVM (:class:`qs.estimators.RankSVM`) is trained
on the trainval person boxes with every method the paper compares, named as the paper names
them: ``0-1`` (binary hinge SVM), ``ap`` (AP loss, LAI of Yue et al.), ``ap_qs`` (AP, the
paper's quicksort-flavoured LAI), ``ap_search`` (AP, the NIPS 2014 binary search), ``ndcg``
(NDCG loss, LAI of Chakrabarti et al.), ``ndcg_qs`` (NDCG, quicksort-flavoured), plus our
fastest exact method ``ap_auto`` / ``ndcg_auto``. All exact methods of one loss give the
same weights; only their LAI time differs. Each training records its LAI calls and time,
iterations and convergence, and is evaluated on the test boxes by VOC devkit AP and NDCG,
"difficult" boxes (label 0) left out of both.

- :func:`run` writes Tables 1-4 (LAI time in total and per call, test AP and NDCG per class,
  the paper's numbers beside ours) into a run directory. Each finished class x method is
  kept as ``runs/<class>__<method>.json``; running again into the same directory resumes,
  retraining only what is missing or was trained under other settings (or all, with
  ``force``).
- :func:`figure_run` writes one of the scaling experiments of Figures 2-3 (class phoning:
  negatives varied at 227 positives, positives varied at 200 negatives, or the total at
  1:10), total LAI time per training against the varied count, resumable the same way;
  several varies (and both losses) may share one directory, and its figure shows them all.

Data: ``data: synthetic`` (the seeded look-alike of :func:`qs.data.make_voc2011_actions`,
never reported as the paper's data), or ``data: {trainval: PATH, test: PATH}`` where each
PATH is a poselet list file (feature files beside it or in ``features_dir``) or an .npz cache
written by ``qsrank load poselet --out``. Numba is warmed up on every LAI method before any
timed training, so compilation never lands in an LAI time.
"""

import hashlib
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator
from pydantic import model_validator
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from tqdm import tqdm

from pipelines import _runner
from pipelines import _schema as S
from pipelines._runner import Experiment, resume_status
from pipelines._config import dump_config, merge, new_run_dir
from pipelines._io import (atomic_path, read_csv, run_data_note, save_figure, write_npz,
                           write_text)
from pipelines._provenance import recording_interruption, write_provenance
from pipelines._runs import RunStore, claim_run_dir, digest_arrays, settings_key
from pipelines._tables import (CVPR2018, FULL_VERSION, fmt, mark, markdown_table, ours_label,
                               unconverged_note)
from pipelines.scaling import size_pairs
from qs.data import (
    ACTIONS,
    PoseletData,
    load_npz_cache,
    load_poselet,
    make_voc2011_actions,
)
from qs.estimators import RankSVM
from qs.inference import lai
from qs.metrics import average_precision, ndcg, voc_average_precision
from qs.ssvm import SOLVERS

EXPERIMENT = "voc2011_actions"

#: paper name -> (loss, LAI method)
METHODS = {
    "0-1": ("01", "zero_one"),
    "ap": ("ap", "yue"),
    "ap_qs": ("ap", "qs"),
    "ap_search": ("ap", "search"),
    "ap_auto": ("ap", "auto"),
    "ndcg": ("ndcg", "chakrabarti"),
    "ndcg_qs": ("ndcg", "qs"),
    "ndcg_auto": ("ndcg", "auto"),
}
LOSSES = ("01", "ap", "ndcg")
INFERENCES = tuple(dict.fromkeys(m for _, m in METHODS.values()))
#: (baseline, faster) pairs whose time ratio the tables report; the first two are the paper's
RATIOS = (("ap", "ap_qs"), ("ndcg", "ndcg_qs"), ("ap", "ap_search"), ("ap", "ap_auto"),
          ("ndcg", "ndcg_auto"))
#: the curves of each figure, as the paper's captions split them
FIGURE_METHODS = {"ap": ("0-1", "ap", "ap_qs", "ap_search"), "ndcg": ("0-1", "ndcg", "ndcg_qs")}
FIGURE_NUMBER = {"ap": 2, "ndcg": 3}
VARIES = ("total", "negatives", "positives")  # the paper's panel order

# The paper's numbers. Tables 1-2: Mohapatra et al., CVPR 2018; ap_search (AP-SVM-SEARCH):
# its full version (arXiv:1604.08269), Tables 2-3 (the CVPR paper quotes its 0.0985 s in the
# text). The full version times the 0-1 ("Binary SVM") LAI at 0.1434 s in total and 1.872 ms
# per call; we set the CVPR paper's numbers beside ours.
PAPER_TOTAL_S = {"0-1": 0.0694, "ap": 0.7154, "ap_qs": 0.0625, "ap_search": 0.0985,
                 "ndcg": 6.8019, "ndcg_qs": 0.0473}
PAPER_MS_PER_CALL = {"0-1": (0.48, 0.03), "ap": (16.29, 0.18), "ap_qs": (1.48, 0.39),
                     "ap_search": (2.323, 0.200), "ndcg": (71.07, 1.57), "ndcg_qs": (0.55, 0.11)}
# Tables 3-4 of Mohapatra et al., CVPR 2018 (test AP; NDCG, which the paper reports as the mean
# over the five cross-validation folds), per class in ACTIONS order: (0-1 loss, rank loss), in
# percent.
PAPER_AP = dict(zip(ACTIONS, [(52.580, 55.230), (32.090, 32.630), (35.210, 41.180),
                              (27.410, 26.600), (72.240, 81.060), (79.820, 83.290),
                              (73.090, 76.850), (21.880, 25.980), (30.620, 32.050),
                              (54.400, 57.090)]))
PAPER_NDCG = dict(zip(ACTIONS, [(86.409, 87.895), (73.134, 76.733), (81.533, 83.666),
                                (74.528, 75.588), (94.928, 95.958), (96.160, 96.875),
                                (93.766, 93.776), (74.058, 76.701), (79.518, 78.276),
                                (89.789, 89.742)]))
CLASS_NAMES = dict(zip(ACTIONS, ["Jumping", "Phoning", "Playing instrument", "Reading",
                                 "Riding bike", "Riding horse", "Running", "Taking photo",
                                 "Using computer", "Walking"]))

# Fixed C of the quick default, one per loss: the value 5-fold cross-validation (C: cv, the
# grid below) chose most often over the 10 classes on the synthetic data, seed 0 (01: 100 for
# 9 classes; ap: 1000 for 6; ndcg: 10 for 5, 1000 for 4). C is on the scale of the
# loss: for 0-1 the slack is the mean hinge, so C = LinearSVC's C x n_samples.
FIXED_C = {"01": 100.0, "ap": 1000.0, "ndcg": 10.0}

SIZE_KEYS = {"negatives": ("fixed", "values"), "positives": ("fixed", "values"),
             "total": ("neg_per_pos", "values")}

FIGURE_PRESETS = {
    # class phoning has 227 trainval positives and, in the synthetic set, 3085 trainval
    # negatives: every size fits the trainval boxes
    "paper": {
        "negatives": {"fixed": 227, "values": [250, 500, 1000, 2000, 3000]},
        "positives": {"fixed": 200, "values": [25, 50, 100, 150, 227]},
        "total": {"neg_per_pos": 10, "values": [275, 550, 1100, 1650, 2497]},
    },
    "quick": {
        "negatives": {"fixed": 10, "values": [30, 60]},
        "positives": {"fixed": 30, "values": [5, 10]},
        "total": {"neg_per_pos": 10, "values": [33, 66]},
    },
}
COUNTS = S.distinct_list(S.number(integer=True, low=1), "counts >= 1")


def _all_classes(value):
    return list(ACTIONS) if value == "all" else value


def _data(value):
    if value == "synthetic":
        return value
    if (not isinstance(value, dict) or set(value) != {"trainval", "test"}
            or not all(isinstance(v, str) and v for v in value.values())):
        raise ValueError
    return {"trainval": value["trainval"], "test": value["test"]}


PER_LOSS = S.per_key(S.number(low=0, strict=True), LOSSES, FIXED_C, "a number > 0", float)
C_OR_CV = S.either(PER_LOSS, "cv")


class Grid(S.Section):
    zero_one: S.c_grid() = S.key([1.0, 10.0, 100.0, 1000.0, 10000.0], "C values of the 0-1 SVM",
                                 name="01")
    ap: S.c_grid() = S.key([0.1, 1.0, 10.0, 100.0, 1000.0], "C values of the AP-SVM")
    ndcg: S.c_grid() = S.key([0.1, 1.0, 10.0, 100.0, 1000.0], "C values of the NDCG-SVM")


class CV(S.Section):
    folds: S.number(integer=True, low=2) = S.key(5, "stratified folds on trainval")
    grid: Grid = S.key(Grid, "per loss, the C values tried")


def _presets(value):
    """figures.presets: the built-in presets with the config's laid over them, key by key;
    per preset and vary, the count that stays (`fixed`; total: `neg_per_pos`) and `values`."""
    count = S.checker(S.number(integer=True, low=1))
    counts = S.checker(COUNTS)
    presets = merge(FIGURE_PRESETS, value)
    for name, preset in presets.items():
        for vary, spec in (preset.items() if isinstance(preset, dict) else [(None, None)]):
            where = f"{name}.{vary}" if vary else str(name)
            if vary not in SIZE_KEYS or not isinstance(spec, dict) \
                    or set(spec) != set(SIZE_KEYS[vary]):
                raise S.Expected(PRESETS_EXPECTED, f"{where}: {S.shown(spec)}")
            try:
                count(spec[SIZE_KEYS[vary][0]])
                counts(spec["values"])
            except S.Expected as err:
                raise S.Expected(PRESETS_EXPECTED, f"{where}: {err.given or S.shown(spec)}") \
                    from None
    return presets


PRESETS_EXPECTED = ("per preset name, a mapping of negatives and positives ({fixed, values}) "
                    "and total ({neg_per_pos, values}) to counts >= 1")


class Figures(S.Section):
    """Figures 2-3 (`qsrank bench --experiment voc2011_actions`)."""

    class_: S.choice(ACTIONS) = S.key("phoning", "the action class whose boxes are subsampled",
                                      name="class")
    vary: S.choice(VARIES) = S.key("negatives", "which count grows")
    loss: S.choice(("ap", "ndcg", "all")) = S.key("all", "ap (Figure 2), ndcg (Figure 3) or all")
    methods: S.optional(S.names(METHODS, "method")) = S.key(
        None, "null: the paper's curves of each figure")
    preset: S.text() = S.key("paper", "the sizes: a name in figures.presets")
    repeats: S.number(integer=True, low=1) = S.key(
        3, "trainings per point; the fastest one's total LAI time is plotted")
    pool: S.choice(("trainval", "trainval+test")) = S.key(
        "trainval", "boxes to subsample from (trainval+test for more)")
    C: S.optional(PER_LOSS) = S.key(
        {"01": 100.0, "ap": 10.0, "ndcg": 10.0},
        "C per loss (what 5-fold CV chose for phoning on the synthetic data); null: the tables'")
    presets: S.custom(_presets, PRESETS_EXPECTED) = S.key(
        FIGURE_PRESETS, "per preset and vary: the count that stays and the varied counts")


class Config(S.Section):
    """The VOC2011 action experiment (Tables 1-4; Figures 2-3 under `figures`)."""

    experiment: S.choice([EXPERIMENT]) = S.key(EXPERIMENT, "the pipeline this config runs")
    seed: S.number(integer=True, low=0) = S.key(0, "the synthetic data, subsampling and CV folds")
    data: S.custom(_data, "'synthetic' or a mapping {trainval: PATH, test: PATH}, each a "
                   "poselet list file or an .npz cache from `qsrank load poselet --out`") = S.key(
        "synthetic", "synthetic, or {trainval: PATH, test: PATH} (list files or .npz caches)")
    features_dir: S.optional(S.text()) = S.key(
        None, "feature files of list-file data; null: beside each list file")
    max_boxes: S.optional(S.number(integer=True, low=2)) = S.key(
        None, "keep at most this many boxes of each split (seeded; for quick looks)")
    classes: S.names(ACTIONS, "action class", _all_classes) = S.key(
        list(ACTIONS), "action classes to train (or all)")
    methods: S.names(METHODS, "method") = S.key(list(METHODS), "methods, as the paper names them")
    loss: S.optional(S.choice(LOSSES)) = S.key(None, "run only the methods of this loss")
    inference: S.optional(S.choice(INFERENCES)) = S.key(
        None, "run only the methods of this LAI method")
    solver: S.choice(SOLVERS) = S.key("cutting_plane", "structured SVM solver")
    C: C_OR_CV = S.key(dict(FIXED_C), "a number, one per loss, or cv (folds over cv.grid)")
    cv: CV = S.key(CV, "cross-validation of C (C: cv)")
    tol: S.number(low=0) = S.key(1e-3, "the solver's stopping tolerance")
    max_iter: S.number(integer=True, low=1) = S.key(1000, "the solver's most iterations")
    force: S.flag() = S.key(False, "retrain finished class x method runs")
    figures: Figures = S.key(Figures, "Figures 2-3: LAI time in training as the data grow")

    @model_validator(mode="after")
    def _consistent(self):
        cfg = self.model_dump(by_alias=True)
        if cfg["data"] == "synthetic" and cfg["features_dir"] is not None:
            raise ValueError("features_dir applies to list-file data only; data is 'synthetic'")
        if not selected_methods(cfg):
            raise ValueError(f"no method of {cfg['methods']} has "
                             + " and ".join(f"{k} {cfg[k]!r}" for k in ("loss", "inference")
                                            if cfg[k] is not None))
        fig = cfg["figures"]
        if not figure_methods(cfg):
            raise ValueError(f"figures.methods {fig['methods']} hold no method of loss "
                             f"{fig['loss']!r} (or 0-1)")
        if fig["preset"] not in fig["presets"]:
            raise ValueError(f"figures.preset: expected one of {', '.join(fig['presets'])}; "
                             f"got {S.shown(fig['preset'])}")
        if fig["vary"] not in fig["presets"][fig["preset"]]:
            raise ValueError(f"figures.presets.{fig['preset']} defines no sizes for vary "
                             f"{fig['vary']!r}")
        figure_sizes(cfg)
        return self


def load_config(path=None, sets=None, **overrides):
    """The config of `path` with `sets` (`--set` keys) laid over it, then the non-None
    `overrides`, checked; `overrides` may hold a partial ``figures`` mapping, whose None
    entries are dropped too."""
    if isinstance(overrides.get("figures"), dict):
        overrides["figures"] = {k: v for k, v in overrides["figures"].items() if v is not None}
    return _runner.load_config(SPEC, path, sets, **overrides)


def selected_methods(cfg):
    """The configured methods that pass the loss and inference filters, in config order."""
    return [m for m in cfg["methods"]
            if cfg["loss"] in (None, METHODS[m][0])
            and cfg["inference"] in (None, METHODS[m][1])]


def figure_methods(cfg):
    """The methods of the figure run: the loss's paper curves, or figures.methods filtered."""
    fig = cfg["figures"]
    losses = ("ap", "ndcg") if fig["loss"] == "all" else (fig["loss"],)
    if fig["methods"] is None:
        return list(dict.fromkeys(m for loss in losses for m in FIGURE_METHODS[loss]))
    return [m for m in fig["methods"] if METHODS[m][0] in losses + ("01",)]


def figure_sizes(cfg):
    """The (n_pos, n_neg) pairs of the figure run, smallest first."""
    fig = cfg["figures"]
    vary = fig["vary"]
    spec = fig["presets"][fig["preset"]][vary]
    return size_pairs(vary, spec, sorted(set(spec["values"])),
                      f"figures.presets.{fig['preset']}.{vary}")


# ---------------------------------------------------------------------------- data

def load_data(cfg):
    """``{"trainval": PoseletData, "test": PoseletData}`` as the config names them."""
    if cfg["data"] == "synthetic":
        splits = make_voc2011_actions(cfg["seed"])
    else:
        splits = {split: _read_split(path, cfg["features_dir"])
                  for split, path in cfg["data"].items()}
        d_train, d_test = (splits[s].X.shape[1] for s in ("trainval", "test"))
        if d_train != d_test:
            raise ValueError(f"trainval has {d_train} feature columns but test has {d_test}; "
                             "both splits must come from the same feature extraction")
    if cfg["max_boxes"] is not None:
        splits = {split: _subsample(d, cfg["max_boxes"], cfg["seed"], split)
                  for split, d in splits.items()}
    return splits


def _read_split(path, features_dir):
    path = Path(path)
    if path.suffix == ".npz":
        if not path.is_file():
            raise ValueError(f"data cache {path} does not exist (write it with `qsrank load "
                             "poselet LIST --out CACHE.npz`)")
        return load_npz_cache(path)
    return load_poselet(path, feature_dir=features_dir)


def _subsample(data, max_boxes, seed, split):
    """At most `max_boxes` boxes of `data`, a seeded uniform draw kept in the original order."""
    n = data.X.shape[0]
    if n <= max_boxes:
        return data
    salt = int.from_bytes(hashlib.sha256(split.encode()).digest()[:4], "little")
    keep = np.sort(np.random.default_rng([seed, salt]).choice(n, max_boxes, replace=False))
    return PoseletData(X=data.X[keep], labels=data.labels[keep],
                       image_names=data.image_names[keep], box_ids=data.box_ids[keep],
                       boxes=data.boxes[keep], bias=data.bias,
                       source=f"{data.source}; subsampled to at most {max_boxes} boxes "
                              f"per split (seed {seed})")


def data_note(splits):
    """One line saying where the data came from, and that our numbers are synthetic if so."""
    sources = dict.fromkeys(d.source for d in splits.values())
    text = "; ".join(f"{split}: {d.source}" for split, d in splits.items())
    if len(sources) == 1:
        text = next(iter(sources))
    if is_synthetic(splits):
        return (f"Data: {text}. Our numbers are synthetic: they come from a generated "
                "look-alike of the VOC2011 action poselet features, not from the paper's data.")
    return f"Data: {text}."


def is_synthetic(splits):
    return any(d.source.startswith("synthetic") for d in splits.values())


def _class_data(split, action, *, require=True):
    """Features, binary labels (1/0) and ignore mask of one class in one split."""
    labels, ignore = split.targets(action)
    if require:
        n_pos = int(labels[~ignore].sum())
        if n_pos == 0 or n_pos == int((~ignore).sum()):
            kind = "positive" if n_pos == 0 else "negative"
            raise ValueError(f"class {action!r} has no {kind} box in {split.source}; it cannot "
                             "be trained or evaluated (drop it from classes)")
    return split.X, labels, ignore


# ---------------------------------------------------------------------------- training

def warm_up(methods):
    """Call every method's LAI on small inputs so numba compiles (or loads) its kernels now,
    not inside the first timed training."""
    rng = np.random.default_rng(0)
    for n_pos, n_neg in ((3, 7), (60, 600)):
        scores = rng.normal(size=n_pos + n_neg)
        labels = np.repeat(np.array([1, 0], dtype=np.int8), [n_pos, n_neg])
        for name in methods:
            loss, method = METHODS[name]
            lai(scores, labels, loss=loss, method=method)


def _estimator(cfg, name, C, bias):
    loss, method = METHODS[name]
    # the poselet features carry a constant-1 column, so the 0-1 SVM learns its bias there
    return RankSVM(loss=loss, inference=method, solver=cfg["solver"], C=float(C),
                   tol=cfg["tol"], max_iter=cfg["max_iter"], fit_intercept=not bias)


def train_one(cfg, name, C, X, y, bias):
    """Fit method `name` at `C`; the estimator and a record of its training."""
    est = _estimator(cfg, name, C, bias)
    start = time.perf_counter()
    est.fit(X, y)
    train_s = time.perf_counter() - start
    loss, method = METHODS[name]
    record = {"method": name, "loss": loss, "inference": method, "solver": cfg["solver"],
              "C": float(C), "n_train": int(X.shape[0]), "n_pos": int(y.sum()),
              "lai_calls": int(est.lai_calls_), "lai_time_s": float(est.lai_time_),
              "lai_ms_per_call": 1e3 * float(est.lai_time_per_call_),
              "n_iter": int(est.n_iter_), "converged": bool(est.converged_), "train_s": train_s}
    return est, record


def _ap_scorer(est, X, y):
    return average_precision(y == est.classes_[1], est.decision_function(X))


def _ndcg_scorer(est, X, y):
    return ndcg(y == est.classes_[1], est.decision_function(X))


def cross_validate(cfg, loss, X, y, bias):
    """5-fold (cv.folds) CV of C over cv.grid for `loss`, with the fastest exact LAI (every
    exact method gives the same weights). Selected by validation NDCG for loss ndcg, by AP
    otherwise (the 0-1 SVM included, as the paper compares it in AP); ties: the smaller C."""
    name = {"01": "0-1", "ap": "ap_auto", "ndcg": "ndcg_auto"}[loss]
    grid = sorted(cfg["cv"]["grid"][loss])
    folds = StratifiedKFold(cfg["cv"]["folds"], shuffle=True, random_state=cfg["seed"])
    search = GridSearchCV(_estimator(cfg, name, grid[0], bias), {"C": grid}, cv=folds,
                          scoring={"ap": _ap_scorer, "ndcg": _ndcg_scorer}, refit=False,
                          error_score="raise")
    search.fit(X, y)
    res = search.cv_results_
    key = "ndcg" if loss == "ndcg" else "ap"
    best = int(np.argmax(res[f"mean_test_{key}"]))
    return {"loss": loss, "C": float(grid[best]), "grid": [float(c) for c in grid],
            "selected_by": key, "cv_ap": float(res["mean_test_ap"][best]),
            "cv_ndcg": float(res["mean_test_ndcg"][best]),
            "mean_test_ap": [float(v) for v in res["mean_test_ap"]],
            "mean_test_ndcg": [float(v) for v in res["mean_test_ndcg"]]}


def _settings(cfg, splits):
    """The settings as a store key (the code's version added): a stored record is reused
    only when these match."""
    return settings_key(**settings(cfg, splits))


def _digest(split):
    """SHA-256 of a split's features and labels."""
    X = split.X.tocsr()
    return digest_arrays(X.data, X.indices, X.indptr, np.asarray(X.shape), split.labels)


def load_checked(cfg):
    """The data, every selected class checked to have positive and negative boxes in both
    splits before any training."""
    splits = load_data(cfg)
    for action in cfg["classes"]:
        _class_data(splits["trainval"], action)
        _class_data(splits["test"], action)
    return splits


def settings(cfg, splits):
    """What a class x method training depends on besides the unit: the data's contents, so
    that a change to the generator retrains, and the training's keys."""
    return {"data": [splits["trainval"].source, splits["test"].source],
            "data_sha256": [_digest(splits["trainval"]), _digest(splits["test"])],
            "seed": cfg["seed"], "max_boxes": cfg["max_boxes"], "solver": cfg["solver"],
            "tol": float(cfg["tol"]), "max_iter": cfg["max_iter"],
            "C": cfg["C"] if cfg["C"] != "cv" else {"cv": cfg["cv"]}}


def units(cfg, splits):
    return [(a, m) for a in cfg["classes"] for m in selected_methods(cfg)]


def run_unit(run, unit):
    """Train method `name` on class `action` (C fixed or by CV, resumable), evaluate it on
    the test boxes, and keep its weights in runs/<class>__<method>.npz."""
    action, name = unit
    cfg, train, test = run.cfg, run.data["trainval"], run.data["test"]
    X, y_all, ignore = _class_data(train, action)
    X, y = X[~ignore], y_all[~ignore]
    Xt, yt, ignore_t = _class_data(test, action)
    cv_done = run.cache.setdefault("cv_done", set())
    C, cv = _C_for(cfg, run.store, action, METHODS[name][0], X, y, train.bias, cv_done)
    est, record = train_one(cfg, name, C, X, y, train.bias)
    scores = est.decision_function(Xt)
    record.update(
        {"class": action, "C_from": "cv" if cv else "fixed",
         "test_ap": voc_average_precision(yt, scores, ignore=ignore_t),
         "test_ndcg": ndcg(yt[~ignore_t], scores[~ignore_t]),
         "cv_ap": cv.get("cv_ap") if cv else None,
         "cv_ndcg": cv.get("cv_ndcg") if cv else None,
         "w_sha256": hashlib.sha256(est.coef_.tobytes()).hexdigest()})
    write_npz(run.store.path(f"{action}__{name}").with_suffix(".npz"),
              {"coef": est.coef_[0], "intercept": est.intercept_})
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


# ---------------------------------------------------------------------------- tables

def timings_frame(records):
    """One row per class x method, in config order."""
    columns = ["class", "method", "loss", "inference", "solver", "C", "C_from", "n_train",
               "n_pos", "lai_calls", "lai_time_s", "lai_ms_per_call", "n_iter", "converged",
               "test_ap", "test_ndcg", "cv_ap", "cv_ndcg", "train_s"]
    frame = pd.DataFrame([{c: r.get(c) for c in columns} for r in records], columns=columns)
    order = {m: i for i, m in enumerate(METHODS)}
    cls = {a: i for i, a in enumerate(ACTIONS)}
    if not frame.empty:
        frame = frame.sort_values(["class", "method"], key=lambda s: s.map(
            cls if s.name == "class" else order)).reset_index(drop=True)
    return frame


def table1(frame):
    """Total LAI time per training (s), averaged over classes, per method."""
    g = frame.groupby("method", sort=False)
    out = pd.DataFrame({"method": list(g.groups),
                        "lai_time_s": g["lai_time_s"].mean().to_numpy(),
                        "n_classes": g["class"].nunique().to_numpy(),
                        "lai_calls": g["lai_calls"].mean().to_numpy()})
    out["paper_lai_time_s"] = out["method"].map(PAPER_TOTAL_S)
    return out[["method", "lai_time_s", "paper_lai_time_s", "lai_calls", "n_classes"]]


def table2(frame):
    """Mean ms per LAI call (per training, then mean and std over classes), per method."""
    g = frame.groupby("method", sort=False)["lai_ms_per_call"]
    out = pd.DataFrame({"method": list(g.groups), "ms_per_call": g.mean().to_numpy(),
                        "ms_per_call_std": g.std(ddof=0).to_numpy(),
                        "n_classes": g.count().to_numpy()})
    out["paper_ms_per_call"] = out["method"].map(lambda m: PAPER_MS_PER_CALL.get(m, (None,))[0])
    out["paper_ms_per_call_std"] = out["method"].map(
        lambda m: PAPER_MS_PER_CALL.get(m, (None, None))[1])
    return out[["method", "ms_per_call", "ms_per_call_std", "paper_ms_per_call",
                "paper_ms_per_call_std", "n_classes"]]


def ratios(frame):
    """Baseline / faster time ratios, ours and the paper's, total and per call; ours over the
    classes both methods were trained on (a partial run may lack some)."""
    rows = []
    for slow, fast in RATIOS:
        a = frame[frame["method"] == slow].set_index("class")
        b = frame[frame["method"] == fast].set_index("class")
        shared = a.index.intersection(b.index)
        if shared.empty:
            continue
        a, b = a.loc[shared], b.loc[shared]
        paper_total = (PAPER_TOTAL_S[slow] / PAPER_TOTAL_S[fast]
                       if fast in PAPER_TOTAL_S else None)
        paper_call = (PAPER_MS_PER_CALL[slow][0] / PAPER_MS_PER_CALL[fast][0]
                      if fast in PAPER_MS_PER_CALL else None)
        rows.append({"ratio": f"{slow} / {fast}",
                     "total_time": a["lai_time_s"].mean() / b["lai_time_s"].mean(),
                     "paper_total_time": paper_total,
                     "per_call": a["lai_ms_per_call"].mean() / b["lai_ms_per_call"].mean(),
                     "paper_per_call": paper_call})
    return pd.DataFrame(rows, columns=["ratio", "total_time", "paper_total_time", "per_call",
                                       "paper_per_call"])


def _metric_table(frame, metric, rank_methods, paper):
    """Per class: the 0-1 SVM and the rank-loss SVM's test metric (percent), paper beside.

    The rank-loss column takes the first of `rank_methods` trained for the class (they give
    the same weights); also returns the largest spread of the metric among them."""
    rows, spread = [], 0.0
    for action in dict.fromkeys(frame["class"]):
        mine = frame[frame["class"] == action].set_index("method")[metric]
        zero_one = mine.get("0-1")
        ranked = [mine[m] for m in rank_methods if m in mine.index]
        if len(ranked) > 1:
            spread = max(spread, float(np.ptp(ranked)))
        if zero_one is None and not ranked:
            continue
        rows.append({"class": action, "object_class": CLASS_NAMES[action],
                     "zero_one": None if zero_one is None else 100 * zero_one,
                     "rank_loss": 100 * ranked[0] if ranked else None,
                     "paper_zero_one": paper[action][0], "paper_rank_loss": paper[action][1]})
    out = pd.DataFrame(rows, columns=["class", "object_class", "zero_one", "rank_loss",
                                      "paper_zero_one", "paper_rank_loss"])
    return out, 100 * spread


def table3(frame):
    out, spread = _metric_table(frame, "test_ap", ("ap_qs", "ap", "ap_search", "ap_auto"),
                                PAPER_AP)
    return out.rename(columns={"zero_one": "ap_0-1", "rank_loss": "ap_ap",
                               "paper_zero_one": "paper_ap_0-1",
                               "paper_rank_loss": "paper_ap_ap"}), spread


def table4(frame):
    out, spread = _metric_table(frame, "test_ndcg", ("ndcg_qs", "ndcg", "ndcg_auto"), PAPER_NDCG)
    return out.rename(columns={"zero_one": "ndcg_0-1", "rank_loss": "ndcg_ndcg",
                               "paper_zero_one": "paper_ndcg_0-1",
                               "paper_rank_loss": "paper_ndcg_ndcg"}), spread


def _setting_line(cfg, frame):
    if frame.empty:
        return ""
    Cs = ", ".join(f"{loss}: {'/'.join(f'{c:g}' for c in sorted(set(g['C'])))}"
                   for loss, g in frame.groupby("loss", sort=False))
    how = "chosen by 5-fold CV per class" if cfg["C"] == "cv" else "fixed per loss"
    if cfg["C"] == "cv" and cfg["cv"]["folds"] != 5:
        how = f"chosen by {cfg['cv']['folds']}-fold CV per class"
    n_conv = int(frame["converged"].sum())
    return (f"Solver {cfg['solver']} (tol {cfg['tol']:g}, max_iter {cfg['max_iter']}); C {how} "
            f"({Cs}). {n_conv} of {len(frame)} trainings converged. Time: wall time of the "
            "LAI calls inside one training per class and method, each timed once (one "
            "measurement, not a median of repeats; numba warmed up beforehand), this machine.")


def write_tables(out, records, cfg, note, synthetic):
    """timings.csv, table1-4 .csv/.md, ratios.csv and summary.md from the run records."""
    frame = timings_frame(records)
    ours = ours_label(synthetic)
    data_col = note
    setting = _setting_line(cfg, frame)
    early = frame[~frame["converged"].astype(bool)] if len(frame) else frame
    early_methods = set(early["method"]) if len(early) else set()
    early_note = unconverged_note(len(early))
    with atomic_path(out / "timings.csv") as tmp:
        frame.to_csv(tmp, index=False)

    t1, t2 = table1(frame), table2(frame)
    r = ratios(frame)
    t3, spread_ap = table3(frame)
    t4, spread_ndcg = table4(frame)
    for name, table in (("table1", t1), ("table2", t2), ("ratios", r), ("table3", t3),
                        ("table4", t4)):
        with atomic_path(out / f"{name}.csv") as tmp:
            table.assign(data=data_col).to_csv(tmp, index=False)

    ratio_md = markdown_table(
        ["ratio", f"total time, {ours}", "total time, paper", f"per call, {ours}",
         "per call, paper"],
        [[row.ratio, fmt(row.total_time, 1), fmt(row.paper_total_time, 1),
          fmt(row.per_call, 1), fmt(row.paper_per_call, 1)] for row in r.itertuples()])
    paper_src = (f"Paper: {CVPR2018}, Table 1 (ap_search: {FULL_VERSION}, Table 2, also quoted in "
                 "the CVPR paper's text); blank where the paper has no such method.")
    md1 = "\n\n".join(filter(None, [
        "# Table 1: total loss-augmented inference time during training (s), mean over classes",
        note, setting, paper_src,
        markdown_table(["method", f"{ours} (s)", "paper (s)", "LAI calls (mean)", "classes"],
                       [[mark(row.method, row.method in early_methods), fmt(row.lai_time_s, 4),
                         fmt(row.paper_lai_time_s, 4), fmt(row.lai_calls, 1), row.n_classes]
                        for row in t1.itertuples()]),
        early_note, "Speed-up (baseline time / faster time):", ratio_md])) + "\n"
    md2 = "\n\n".join(filter(None, [
        "# Table 2: mean time per loss-augmented inference call (ms)",
        note, setting,
        ("Ours: each training's mean time per call, then mean ± standard deviation over "
         f"classes. Paper: {CVPR2018}, Table 2 (ap_search: {FULL_VERSION}, Table 3)."),
        markdown_table(
            ["method", f"{ours} (ms)", "paper (ms)", "classes"],
            [[mark(row.method, row.method in early_methods),
              f"{fmt(row.ms_per_call, 3)} ± {fmt(row.ms_per_call_std, 3)}",
              "" if pd.isna(row.paper_ms_per_call)
              else f"{row.paper_ms_per_call:g} ± {row.paper_ms_per_call_std:g}",
              row.n_classes] for row in t2.itertuples()]),
        early_note, "Speed-up (baseline time / faster time):", ratio_md])) + "\n"
    md3 = _metric_md(3, "test AP (%, VOC devkit AP, difficult boxes ignored)", "ap", t3,
                     spread_ap, note, setting, ours, early,
                     f"Paper: {CVPR2018}, Table 3 (VOC2011 test set, evaluation server).",
                     "ap, ap_qs, ap_search and ap_auto")
    md4 = _metric_md(4, "test NDCG (%, difficult boxes ignored)", "ndcg", t4, spread_ndcg,
                     note, setting, ours, early,
                     f"Paper: {CVPR2018}, Table 4 (its NDCG is the mean over the five "
                     "cross-validation folds, not the test set).", "ndcg, ndcg_qs and ndcg_auto")
    for name, text in (("table1", md1), ("table2", md2), ("table3", md3), ("table4", md4)):
        write_text(out / f"{name}.md", text)
    write_text(out / "summary.md", f"{md1}\n\n{md2}\n\n{md3}\n\n{md4}")


def _metric_md(number, what, loss, table, spread, note, setting, ours, early, paper_src,
               same):
    """Table 3 or 4 as Markdown; a cell whose training (any of the methods of the loss, for
    the rank-loss column) stopped before converging is marked."""
    cols = list(table.columns)
    early_losses = set(zip(early["class"], early["loss"]))
    n_marked = 0
    rows = []
    for _, row in table.iterrows():
        cells = [fmt(row[c], 3) for c in cols[2:6]]
        for i, trained in enumerate(("01", loss)):
            if (row["class"], trained) in early_losses and cells[i]:
                cells[i] = mark(cells[i], True)
                n_marked += 1
        rows.append([row["object_class"], *cells])
    if len(table):
        means = table[cols[2:6]].mean()
        rows.append(["**mean**", *(fmt(means[c], 3) for c in cols[2:6])])
    header = ["Object class", f"0-1 loss, {ours}", f"{loss} loss, {ours}", "0-1 loss, paper",
              f"{loss} loss, paper"]
    return "\n\n".join(filter(None, [
        f"# Table {number}: {what}, 0-1 loss vs {loss} loss",
        note, setting, paper_src, markdown_table(header, rows),
        unconverged_note(n_marked, "cell"),
        (f"{same} train to the same weights (exact LAI); the largest difference of the "
         f"metric between them over the classes is {spread:.2g} points.")])) + "\n"


def report(run_dir):
    """The Markdown of a finished table or figure run (what the CLI prints)."""
    run_dir = Path(run_dir)
    if (run_dir / "table1.md").is_file():
        return "\n".join((run_dir / f"table{k}.md").read_text(encoding="utf-8")
                         for k in range(1, 5))
    return (run_dir / "summary.md").read_text(encoding="utf-8")


def results_table(run_dir):
    """timings.csv of a run as a DataFrame (one row per class x method, or per figure point)."""
    return pd.read_csv(Path(run_dir) / "timings.csv")


# ---------------------------------------------------------------------------- figures

FIGURE_COLUMNS = ["vary", "loss", "method", "inference", "class", "n_pos", "n_neg", "C",
                  "lai_calls", "lai_time_s", "lai_time_median_s", "lai_time_max_s",
                  "lai_ms_per_call", "n_iter", "converged", "train_s", "repeats"]
#: what the figures' legends call each method: the LAI method by its authors, not a bare loss
METHOD_LABELS = {"0-1": "0-1 (hinge SVM)", "ap": "ap (Yue et al.)", "ap_qs": "ap_qs (QS)",
                 "ap_search": "ap_search (binary search)", "ap_auto": "ap_auto (default)",
                 "ndcg": "ndcg (Chakrabarti et al.)", "ndcg_qs": "ndcg_qs (QS)",
                 "ndcg_auto": "ndcg_auto (default)"}
COLORS = {"0-1": "C0", "ap": "C1", "ndcg": "C1", "ap_qs": "C2", "ndcg_qs": "C2",
          "ap_search": "C3", "ap_auto": "C4", "ndcg_auto": "C4"}


def _pool(cfg, splits, action):
    """Features and labels of the boxes of `action` to subsample from (difficult ones out)."""
    parts = ["trainval"] + (["test"] if cfg["figures"]["pool"] == "trainval+test" else [])
    Xs, ys = [], []
    for part in parts:
        X, y, ignore = _class_data(splits[part], action)
        Xs.append(X[~ignore])
        ys.append(y[~ignore])
    return sp.vstack(Xs, format="csr"), np.concatenate(ys)


def figure_run(config, out_dir=None, progress=True):
    """Train every figure method at every size of figures.vary; write the run dir, return it.

    The boxes of figures.class are subsampled: a seeded order of its positives and one of
    its negatives, the first n_pos and n_neg taken, so that every smaller training set is
    part of every larger one. Each point is trained figures.repeats times (the same weights
    each time: the solvers are deterministic); the record keeps every repeat's total LAI time,
    and the figure and summary show their median with the fastest and slowest.
    Each finished point is runs/<vary>__p<P>_n<N>__<method>.json; a rerun resumes, and
    timings.csv, figure.png/.pdf and summary.md cover every point in the directory.
    """
    cfg = _runner.resolve(SPEC, config)
    fig = cfg["figures"]
    splits = load_data(cfg)
    action, vary = fig["class"], fig["vary"]
    X, y = _pool(cfg, splits, action)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    pairs = figure_sizes(cfg)
    big_p, big_n = max(p for p, _ in pairs), max(n for _, n in pairs)
    if big_p > pos.size or big_n > neg.size:
        raise ValueError(
            f"figures.presets.{fig['preset']}.{vary} asks for up to {big_p} positives and "
            f"{big_n} negatives of class {action!r}, but the {fig['pool']} boxes hold "
            f"{pos.size} and {neg.size}; lower the sizes"
            + (" or set figures.pool: trainval+test" if fig["pool"] == "trainval" else ""))
    rng = np.random.default_rng([cfg["seed"], ACTIONS.index(action)])
    pos, neg = rng.permutation(pos), rng.permutation(neg)
    Cs = fig["C"] or (cfg["C"] if cfg["C"] != "cv" else dict(FIXED_C))
    methods = figure_methods(cfg)
    settings = {**_settings(cfg, splits), "C": Cs, "class": action, "pool": fig["pool"],
                "repeats": fig["repeats"]}
    out = claim_run_dir(out_dir or new_run_dir(EXPERIMENT, f"figure-{vary}"), EXPERIMENT,
                        "figure")
    store = RunStore(out, settings)
    name_of = {(p, n, m): f"{vary}__p{p}_n{n}__{m}" for p, n in pairs for m in methods}
    todo = [key for key in name_of if cfg["force"] or not store.done(name_of[key])]
    status = resume_status(len(name_of), len(todo), "points")
    if progress and status:
        print(f"figure {vary}: {status}", file=sys.stderr)
    note = data_note(splits)
    command = {**settings, "vary": vary, "preset": fig["preset"], "methods": methods}
    with recording_interruption(out, cfg["seed"], note, command, settings["data_sha256"]):
        if todo:
            warm_up(dict.fromkeys(m for *_, m in todo))
        with tqdm(total=len(todo), desc=f"figure {vary}", unit="point",
                  disable=not progress) as bar:
            for n_pos, n_neg, name in todo:
                bar.set_postfix_str(f"{name} P={n_pos} N={n_neg}")
                rows = np.sort(np.concatenate([pos[:n_pos], neg[:n_neg]]))
                Xs, ys = X[rows], y[rows]
                runs = [train_one(cfg, name, Cs[METHODS[name][0]], Xs, ys,
                                  splits["trainval"].bias)[1] for _ in range(fig["repeats"])]
                times = [r["lai_time_s"] for r in runs]
                record = {**runs[0], "vary": vary, "class": action, "n_neg": n_neg,
                          "lai_time_s": float(min(times)),
                          "lai_time_median_s": float(np.median(times)), "lai_times_s": times,
                          "train_s": float(np.median([r["train_s"] for r in runs])),
                          "repeats": fig["repeats"]}
                record["lai_ms_per_call"] = 1e3 * record["lai_time_s"] / record["lai_calls"]
                store.put(name_of[(n_pos, n_neg, name)], record)
                bar.update()
        frame = figure_frame(store.records("*__p*_n*__*.json"))
        with atomic_path(out / "timings.csv") as tmp:
            frame.to_csv(tmp, index=False)
        write_text(out / "config.yaml", dump_config(cfg))
        write_text(out / "summary.md", figure_summary(frame, cfg, note))
        plot_figure(frame, out / "figure", synthetic=is_synthetic(splits))
    write_provenance(out, cfg["seed"], note, command, settings["data_sha256"])
    return out


def figure_frame(records):
    """One row per figure point and method: ``lai_time_s`` the fastest of its repeated
    trainings, ``lai_time_median_s`` their median and ``lai_time_max_s`` the slowest."""
    records = [{**r, "lai_time_max_s": max(r.get("lai_times_s") or [r["lai_time_s"]])}
               for r in records]
    frame = pd.DataFrame([{c: r.get(c) for c in FIGURE_COLUMNS} for r in records],
                         columns=FIGURE_COLUMNS)
    order = {m: i for i, m in enumerate(METHODS)}
    vary = {v: i for i, v in enumerate(VARIES)}
    if frame.empty:
        return frame
    frame["_v"], frame["_m"] = frame["vary"].map(vary), frame["method"].map(order)
    return frame.sort_values(["_v", "_m", "n_pos", "n_neg"]).drop(columns=["_v", "_m"]) \
        .reset_index(drop=True)


def _x(frame, vary):
    return {"negatives": frame["n_neg"], "positives": frame["n_pos"],
            "total": frame["n_pos"] + frame["n_neg"]}[vary]


def _xlabel(frame, vary):
    if vary == "negatives":
        return f"negatives (positives = {frame['n_pos'].iloc[0]})"
    if vary == "positives":
        return f"positives (negatives = {frame['n_neg'].iloc[0]})"
    per_pos = round(float((frame["n_neg"] / frame["n_pos"]).median()))
    return f"samples (positives : negatives = 1 : {per_pos})"


def _figure_rows(frame):
    """The rank losses present (a row of panels each), or just 0-1."""
    return [loss for loss in ("ap", "ndcg") if (frame["loss"] == loss).any()] or ["01"]


def figure_summary(frame, cfg, note):
    """summary.md of a figure run: total LAI time per size and method, and speed-ups."""
    action = cfg["figures"]["class"]
    parts = [f"# Figures 2-3: total LAI time during training as the data grow (class {action})",
             note,
             (f"Solver {cfg['solver']} (tol {cfg['tol']:g}, max_iter {cfg['max_iter']}), C "
              f"fixed per loss; each point is the median over {cfg['figures']['repeats']} "
              "identical trainings of the total wall time of their LAI calls, [fastest, "
              "slowest] beside it (numba warmed up beforehand); the speed-ups are ratios of "
              f"medians. Boxes subsampled from the {cfg['figures']['pool']} boxes of the "
              "class, smaller sets nested in larger ones.")]
    for loss in _figure_rows(frame):
        mine = frame[frame["loss"].isin((loss, "01"))]
        for vary in [v for v in VARIES if (mine["vary"] == v).any()]:
            part = mine[mine["vary"] == vary]
            table, low, high = (
                part.pivot_table(index=["n_pos", "n_neg"], columns="method", values=v,
                                 sort=False)
                for v in ("lai_time_median_s", "lai_time_s", "lai_time_max_s"))
            table = table[[m for m in METHODS if m in table.columns]]
            calls = part.pivot_table(index=["n_pos", "n_neg"], columns="loss",
                                     values="lai_calls", aggfunc="max", sort=False)
            header = ["n_pos", "n_neg", *(f"{m} (s)" for m in table.columns)]
            slow, fast = {"ap": ("ap", "ap_qs"), "ndcg": ("ndcg", "ndcg_qs")}.get(loss, (0, 0))
            speed = slow in table.columns and fast in table.columns
            if speed:
                header.append(f"{slow} / {fast}")
            header += [f"LAI calls ({'0-1' if k == '01' else k})" for k in calls.columns]
            rows = []
            for (p, n), values in zip(table.index, table.to_numpy()):
                row = [p, n, *(f"{fmt(v, 4)} [{fmt(low.loc[(p, n), m], 4)}, "
                               f"{fmt(high.loc[(p, n), m], 4)}]" if fmt(v, 4) else ""
                               for m, v in zip(table.columns, values))]
                if speed:
                    row.append(fmt(table.loc[(p, n), slow] / table.loc[(p, n), fast], 1))
                row += [fmt(v, 0) for v in calls.loc[(p, n)]]
                rows.append(row)
            title = (f"## Figure {FIGURE_NUMBER[loss]} ({loss}), varying the {vary}"
                     if loss in FIGURE_NUMBER else f"## 0-1, varying the {vary}")
            parts += [title, markdown_table(header, rows)]
    return "\n\n".join(parts) + "\n"


def plot_figure(frame, stem, synthetic=True):
    """Log-log total LAI time per training against the varied count, the median of the
    repeated trainings with bars from the fastest to the slowest: a row of panels per figure
    (ap: Figure 2, ndcg: Figure 3), a panel per vary. Writes stem.png and stem.pdf."""
    rows = _figure_rows(frame)
    varies = [v for v in VARIES if (frame["vary"] == v).any()] or ["negatives"]
    fig = Figure(figsize=(4.6 * len(varies), 3.8 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), len(varies), squeeze=False)
    for i, loss in enumerate(rows):
        for j, vary in enumerate(varies):
            ax = axes[i][j]
            part = frame[(frame["vary"] == vary) & frame["loss"].isin((loss, "01"))]
            for name in [m for m in METHODS if (part["method"] == m).any()]:
                line = part[part["method"] == name]
                median = line["lai_time_median_s"].to_numpy()
                spread = [median - line["lai_time_s"], line["lai_time_max_s"] - median]
                ax.errorbar(_x(line, vary), median, yerr=spread, marker="o", markersize=3,
                            capsize=2, label=METHOD_LABELS.get(name, name),
                            color=COLORS.get(name, "k"))
            ax.set(xscale="log", yscale="log",
                   ylabel="total LAI time in training (s),\nmedian [fastest, slowest]")
            if not part.empty:
                ax.set_xlabel(_xlabel(part, vary))
                xs = sorted(set(_x(part, vary)))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xticks(xs, [str(v) for v in xs], fontsize="small")
            label = f"Figure {FIGURE_NUMBER[loss]}" if loss in FIGURE_NUMBER else "0-1"
            source = ("synthetic look-alike of VOC2011 actions" if synthetic
                      else "VOC2011 actions poselet features")
            ax.set_title(f"{label}: varying {vary}\n({source})", fontsize="medium")
            ax.grid(True, which="major", alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize="small")
    return save_figure(fig, stem)


def redraw(run_dir, kind):
    """Redraw figure.png and .pdf of a figure run (`qsrank bench --experiment
    voc2011_actions`) from its timings.csv; return their paths. A table run draws none."""
    if kind != "figure":
        raise ValueError(f"{run_dir} holds the VOC2011 actions Tables 1-4, which have no "
                         "figure; Figures 2-3 are drawn by the runs of qsrank bench "
                         "--experiment voc2011_actions (make reproduce-figure2/3)")
    frame = read_csv(Path(run_dir) / "timings.csv", FIGURE_COLUMNS)
    synthetic = "Our numbers are synthetic" in run_data_note(run_dir)
    return plot_figure(frame, Path(run_dir) / "figure", synthetic=synthetic)


SPEC = Experiment(name=EXPERIMENT, schema=Config, load_data=load_checked, settings=settings,
                  units=units, run_unit=run_unit, write=write,
                  warm_up=lambda cfg, units: warm_up(dict.fromkeys(m for _, m in units)),
                  note=lambda cfg, splits: data_note(splits), unit_label="run")

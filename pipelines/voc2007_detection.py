"""VOC2007 weakly supervised detection with the latent AP-SVM (Mohapatra et al., CVPR 2018, Section
4.2): Table 5 and the LAI time of its training.

For each object class, the latent structured SVM of :class:`qs.estimators.LatentRankSVM`
is trained on the trainval images (each a bag of candidate boxes, the object's box latent)
with every method compared, named as in Tables 1-4: ``0-1`` (the latent 0-1 SVM, the
baseline), ``ap`` (the latent AP-SVM with the LAI of Yue et al.), ``ap_qs`` (the paper's
quicksort-flavoured LAI) and ``ap_auto`` (our default, the fastest exact method). The three
AP methods are exact, so they train the same weights; the run checks that and says so, and
only their LAI time differs.

On the test images every box is scored, the boxes of each image are non-maximum suppressed
(``nms_threshold``, R-CNN's 0.3 by default), and the surviving boxes of all images are the
class's detections for the VOC2007 detection AP (:func:`qs.metrics.voc_detection_ap`).

:func:`run` writes ``table5.md`` (test AP per class of the latent 0-1 SVM and AP-SVM beside
the paper's Table 5, and the total LAI time per class with each AP method beside the paper's
7.623 s and 0.5214 s), ``results.csv`` (the AP table), ``timings.csv`` (one row per class x
method), ``figure.png``/``.pdf``, ``config.yaml`` and ``provenance.json``. Each finished
class x method is kept as ``runs/<class>__<method>.json`` (its weights beside it as
``.npz``); running again into the same directory resumes.

Data: one function, :func:`load_data`, gives both splits as :class:`qs.data.bags.BagSet`: ``data:
synthetic`` (the seeded look-alike of :func:`qs.data.voc2007.make_voc2007_detection`, sized by
``synthetic:``; never reported as the paper's data), ``data: {trainval: DIR, test: DIR}``,
directories of R-CNN per-image ``.mat`` caches (:func:`qs.data.load_rcnn_cache`), or
``store: {trainval: PATH, test: PATH}``, two box-feature stores written by ``qsrank load
cnn`` (:func:`qs.data.store.open_store`). A store whose features take at most
``in_memory_max_gb`` as float32 is loaded in memory; a larger one is read block by block as a
Dask array, in training (:class:`qs.estimators.LatentRankSVM` on padded bags) and in
evaluation (:func:`qs.detection.score_bags`), on the threaded scheduler or on the
``dask.distributed`` cluster that ``scheduler:`` names. A store's labels and ground truth are
used as they are.

Both losses start from the same initial boxes (``init``) and take C by the same rule: a list of
C values is a grid, and each class and loss takes the value whose model, trained on a
stratified ``1 - validation_fraction`` of trainval, gives the best detection AP on the rest;
the model is then trained on all of trainval with it.
"""

import hashlib
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pydantic import model_validator

from pipelines import _schema as S
from pipelines._io import (atomic_path, read_csv, run_data_note, save_figure, write_npz,
                           write_text)
from pipelines._runner import Experiment
from pipelines._runs import digest_arrays
from pipelines._tables import CVPR2018, fmt, mark, markdown_table, ours_label, unconverged_note
from qs.data import load_rcnn_cache
from qs.data.bags import BagSet
from qs.data.store import open_store
from qs.data.voc2007 import CLASSES, make_voc2007_detection
from qs.detection import dask_scheduler
from qs.estimators import LatentRankSVM
from qs.inference import lai
from qs.metrics import voc_detection_ap

EXPERIMENT = "voc2007_detection"

#: method name -> (loss, LAI method); the names of Tables 1-4
METHODS = {
    "0-1": ("01", "zero_one"),
    "ap": ("ap", "yue"),
    "ap_qs": ("ap", "qs"),
    "ap_auto": ("ap", "auto"),
}
LOSSES = ("01", "ap")
INFERENCES = tuple(m for _, m in METHODS.values())
#: the AP methods, all exact: the same weights, in the order the AP column takes them
AP_METHODS = ("ap_qs", "ap", "ap_auto")
#: (slower, faster) pairs of the LAI-time table; the first is the paper's
RATIOS = (("ap", "ap_qs"), ("ap", "ap_auto"))

# Mohapatra et al., CVPR 2018, Table 5: test AP (%) per class, (0-1 loss, AP loss), in CLASSES
# order.
PAPER_AP = dict(zip(CLASSES, [
    (46.60, 48.18), (48.53, 61.45), (33.31, 36.73), (15.23, 19.66), (6.10, 1.01),
    (37.01, 49.51), (61.28, 66.78), (38.12, 40.77), (2.71, 3.23), (21.06, 38.52),
    (14.20, 39.53), (33.55, 36.25), (46.14, 53.86), (29.97, 34.81), (29.58, 30.41),
    (21.27, 23.03), (11.65, 32.20), (36.66, 42.03), (29.71, 37.10), (27.31, 37.26)]))
# Mohapatra et al., CVPR 2018, Section 4.2: total LAI time during training, averaged over the 20
# classes (s)
PAPER_LAI_S = {"ap": 7.623, "ap_qs": 0.5214}
CLASS_NAMES = dict(zip(CLASSES, [
    "Aeroplane", "Bicycle", "Bird", "Boat", "Bottle", "Bus", "Car", "Cat", "Chair", "Cow",
    "Dining-table", "Dog", "Horse", "Motorbike", "Person", "Potted-plant", "Sheep", "Sofa",
    "Train", "TV-monitor"]))

INITS = ("image_means", "random")
SPLITS = ("trainval", "test")
#: the method that trains the models of a C grid, per loss (the AP methods train one model)
GRID_METHOD = {"01": "0-1", "ap": "ap_auto"}
C_GRID = [10.0, 100.0, 1000.0]
#: boxes per image of the training working set when the data are read out of core
WORKING_SET = 10


def _c_values(value):
    """A C value > 0 or a non-empty list of them, as a list of floats without repeats."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError
    entry = S.checker(S.number(low=0, strict=True))
    return [float(entry(c)) for c in dict.fromkeys(values)]


def _split_paths(value):
    """{trainval: PATH, test: PATH} with two non-empty strings, else a ValueError."""
    if (not isinstance(value, dict) or set(value) != set(SPLITS)
            or not all(isinstance(value[k], str) and value[k] for k in SPLITS)):
        raise ValueError
    return {k: value[k] for k in SPLITS}


def _data(value):
    return value if value == "synthetic" else _split_paths(value)


def _scheduler(value):
    if not isinstance(value, str) or not value:
        raise ValueError
    return value


C_VALUES = S.custom(_c_values, "a C value > 0 or a non-empty list of them")


class Synthetic(S.Section):
    """The synthetic data's size (qs.data.voc2007.make_voc2007_detection)."""

    scale: S.number(low=0, strict=True, high=1, high_strict=False) = S.key(
        0.5, "fraction of VOC2007's 5011 / 4952 images")
    boxes_per_image: S.number(integer=True, low=2) = S.key(8, "candidate boxes per image")
    n_features: S.number(integer=True, low=1) = S.key(16, "features per box")
    signal: S.number(low=0) = S.key(4.0, "strength of the objects' signal")
    noise: S.number(low=0) = S.key(1.0, "feature noise")
    difficult_rate: S.number(low=0, high=1, high_strict=False) = S.key(
        0.1, "fraction of objects marked difficult")


class Config(S.Section):
    """The VOC2007 detection experiment (Table 5)."""

    experiment: S.choice([EXPERIMENT]) = S.key(EXPERIMENT, "the pipeline this config runs")
    seed: S.number(integer=True, low=0) = S.key(0, "the synthetic data, init and holdout")
    data: S.custom(_data, "'synthetic' or a mapping {trainval: DIR, test: DIR} of "
                   "directories of R-CNN .mat feature caches") = S.key(
        "synthetic", "synthetic, or {trainval: DIR, test: DIR} of R-CNN .mat caches")
    store: S.optional(S.custom(_split_paths, "a mapping {trainval: PATH, test: PATH}, each "
                               "a box-feature store written by `qsrank load cnn`")) = S.key(
        None, "or {trainval: PATH, test: PATH}: stores written by `qsrank load cnn`")
    in_memory_max_gb: S.number(low=0) = S.key(
        1.0, "a store's features up to this size are loaded in memory, larger read by block")
    scheduler: S.optional(S.custom(_scheduler, "threads, sync, processes or the address of "
                                   "a dask.distributed scheduler")) = S.key(
        None, "where a store read by block is scored: null (Dask's threads), threads, sync, "
        "processes, or tcp://HOST:PORT")
    synthetic: Synthetic = S.key(Synthetic, "the synthetic data's size")
    classes: S.names(CLASSES, "object class", lambda v: list(CLASSES) if v == "all" else v) \
        = S.key(list(CLASSES), "object classes to train (or all)")
    methods: S.names(METHODS, "method") = S.key(list(METHODS), "methods to train")
    loss: S.optional(S.choice(LOSSES)) = S.key(None, "run only the methods of this loss")
    inference: S.optional(S.choice(INFERENCES)) = S.key(
        None, "run only the methods of this LAI method")
    solver: S.choice(("cutting_plane",)) = S.key(
        "cutting_plane", "the inner solver of the CCCP loop (the only one it has)")
    init: S.choice(INITS) = S.key(
        "image_means", "initial boxes of the positive images: image_means (the best box under "
        "a centroid classifier of whole images) or random (seeded)")
    C: S.per_key(C_VALUES, LOSSES, {loss: list(C_GRID) for loss in LOSSES},
                 "a C value > 0 or a non-empty list of them") = S.key(
        list(C_GRID), "a number, a grid (the best detection AP on a held-out part of "
        "trainval), or one such per loss")
    validation_fraction: S.number(low=0, strict=True, high=1) = S.key(
        0.25, "the stratified part of trainval held out to choose C")
    tol: S.number(low=0, strict=True) = S.key(1e-3, "cutting-plane tolerance")
    max_iter: S.number(integer=True, low=1) = S.key(
        20000, "cutting-plane iterations per outer step")
    max_outer: S.number(integer=True, low=1) = S.key(400, "most outer (CCCP) steps")
    min_outer: S.per_key(S.number(integer=True, low=1), LOSSES, {"01": 2, "ap": 2},
                         "an integer >= 1", int) = S.key(
        2, "fewest outer steps, a number or one per loss (the released code: 2)")
    nms_threshold: S.number(low=0, high=1, high_strict=False) = S.key(
        0.3, "IoU above which a lower-scoring box of the same image is dropped")
    working_set: S.optional(S.number(integer=True, low=0)) = S.key(
        None, "boxes per image held in memory between passes over every box in training "
        "(exact; 0: none, every LAI call scores every box); null: 10 for a store read out of "
        "core, 0 otherwise")
    blas_threads: S.optional(S.number(integer=True, low=1)) = S.key(
        1, "BLAS threads while training and scoring (null: the library's)")
    force: S.flag() = S.key(False, "retrain finished class x method runs")

    @model_validator(mode="after")
    def _consistent(self):
        if self.scheduler is not None and self.store is None:
            raise ValueError("scheduler applies to data read from stores (store: {trainval: "
                             "PATH, test: PATH}); the data in memory are scored in memory")
        if self.store is not None and self.data != "synthetic":
            raise ValueError("give either data (synthetic or R-CNN cache directories) or "
                             "store, not both")
        cfg = self.model_dump()
        if not selected_methods(cfg):
            raise ValueError(
                f"no method of {cfg['methods']} has "
                + " and ".join(f"{k} {cfg[k]!r}" for k in ("loss", "inference")
                               if cfg[k] is not None)
                + f" (methods: {', '.join(f'{m} = {l}/{i}' for m, (l, i) in METHODS.items())})")
        return self


def selected_methods(cfg):
    """The configured methods that pass the loss and inference filters, in config order."""
    return [m for m in cfg["methods"]
            if cfg["loss"] in (None, METHODS[m][0])
            and cfg["inference"] in (None, METHODS[m][1])]


# ---------------------------------------------------------------------------- data

def load_data(cfg):
    """``{"trainval": BagSet, "test": BagSet, "digests": {split: SHA-256}}`` from the config's
    data source: the one place that knows where the boxes come from. A digest is the split's
    identity in the resume key."""
    if cfg["store"] is not None:
        return _load_stores(cfg)
    if cfg["data"] == "synthetic":
        made = make_voc2007_detection(cfg["seed"], **cfg["synthetic"])
        return {**{split: BagSet.in_memory(made[split]) for split in SPLITS},
                "digests": {split: _digest(made[split]) for split in SPLITS}}
    splits, digests = {}, {}
    for split, path in cfg["data"].items():
        if not Path(path).is_dir():
            raise ValueError(f"data.{split}: {path} is not a directory of R-CNN .mat caches")
        data = load_rcnn_cache(path)
        splits[split], digests[split] = BagSet.in_memory(data), _digest(data)
    d_train, d_test = (splits[s].d for s in SPLITS)
    if d_train != d_test:
        raise ValueError(f"trainval boxes have {d_train} features but test boxes {d_test}; "
                         "both splits must come from the same feature extraction")
    return {**{split: splits[split] for split in SPLITS}, "digests": digests}


def _load_stores(cfg):
    stores = {split: open_store(cfg["store"][split]) for split in SPLITS}
    train, test = stores["trainval"], stores["test"]
    if train.classes != test.classes:
        raise ValueError(f"the stores' classes disagree: {train.path} has "
                         f"{', '.join(train.classes)}, {test.path} {', '.join(test.classes)}")
    if train.classes != CLASSES:
        raise ValueError(f"{train.path} holds the classes {', '.join(train.classes)}; this "
                         f"experiment trains VOC2007's {len(CLASSES)}")
    if train.d != test.d:
        raise ValueError(f"{train.path} has {train.d} features per box but {test.path} "
                         f"{test.d}; both splits must come from the same feature extraction")
    if test.gt_offsets is None:
        raise ValueError(f"{test.path} has no ground-truth objects: the test split needs them "
                         "for detection AP")
    # of the bytes on disk: a damaged store stops here, named by its checksums
    digests = {split: stores[split].data_checksum() for split in SPLITS}
    max_bytes = cfg["in_memory_max_gb"] * 1e9
    return {**{split: BagSet.from_store(stores[split], max_bytes, cfg["scheduler"])
               for split in SPLITS}, "digests": digests}


def is_synthetic(splits):
    return any(d.source.startswith("synthetic") for d in splits.values())


def data_note(splits):
    """One line saying where the data came from and how they were read, and that our numbers
    are synthetic if so."""
    text = "; ".join(f"{split}: {d.source}" for split, d in splits.items())
    shape = "; ".join(f"{split} {d.n_images} images, {d.n_boxes} boxes of {d.d} features, "
                      f"{d.where}" for split, d in splits.items())
    if is_synthetic(splits):
        return (f"Data: {text} ({shape}). Our numbers are synthetic: they come from a "
                "generated look-alike of VOC2007's bags of boxes, not from the paper's data.")
    return f"Data: {text} ({shape})."


def _digest(data):
    """SHA-256 of a split's features, bags, boxes and ground truth."""
    gt = [np.concatenate([b.reshape(-1), c.astype(float), d.astype(float)])
          for b, c, d in data.objects]
    return digest_arrays(data.X, data.offsets, data.boxes, data.image_ids.astype(str),
                         np.array([g.size for g in gt]), np.concatenate(gt))


def check_class(splits, cls):
    """Labels of class `cls` in trainval; a ValueError when it cannot be trained (a label
    unknown, no positive or no negative image) or evaluated (no non-difficult object in
    test)."""
    k = CLASSES.index(cls)
    train, test = splits["trainval"], splits["test"]
    labels = train.image_labels(k)
    unknown = int((labels < 0).sum())
    if unknown:
        raise ValueError(f"class {cls!r}: {unknown} trainval images have no label for it "
                         f"({train.source}); it cannot be trained (drop it from classes)")
    n_pos = int(labels.sum())
    if n_pos == 0 or n_pos == labels.size:
        kind = "positive" if n_pos == 0 else "negative"
        raise ValueError(f"class {cls!r} has no {kind} image in trainval ({train.source}); it "
                         "cannot be trained (drop it from classes)")
    if not test.has_object(k):
        raise ValueError(f"class {cls!r} has no object (other than difficult ones) in test "
                         f"({test.source}); its AP is undefined (drop it from classes)")
    return labels


def holdout(labels, fraction, seed, k):
    """(fit, validation) image indices, sorted: a seeded `fraction` of the positive and of the
    negative images of class `k` (at least one of each, one of each left to fit) held out."""
    parts = ([], [])
    rng = np.random.default_rng([seed, k])
    for kind, group in (("positive", np.flatnonzero(labels == 1)),
                        ("negative", np.flatnonzero(labels != 1))):
        if group.size < 2:
            raise ValueError(f"class {CLASSES[k]!r} has {group.size} {kind} trainval image(s): "
                             "too few to hold some out for choosing C (give C as one number)")
        n_val = min(group.size - 1, max(1, round(fraction * group.size)))
        shuffled = rng.permutation(group)
        parts[0].append(shuffled[n_val:])
        parts[1].append(shuffled[:n_val])
    return tuple(np.sort(np.concatenate(p)) for p in parts)


# ---------------------------------------------------------------------------- training

def warm_up(methods):
    """Call every LAI method on small inputs of each shape the default method tells apart
    (negatives spread, negatives below the positives, many negatives), so that numba compiles
    (or loads) its kernels now, not inside a timed training."""
    rng = np.random.default_rng(0)
    for n_pos, n_neg, shift in ((3, 7, 0.0), (60, 600, 0.0), (60, 600, 5.0), (20, 9000, 0.0)):
        scores = rng.normal(size=n_pos + n_neg)
        scores[:n_pos] += shift
        labels = np.repeat(np.array([1, 0], dtype=np.int8), [n_pos, n_neg])
        for name in methods:
            loss, method = METHODS[name]
            lai(scores, labels, loss=loss, method=method)


def _blas_threads(n):
    """A context limiting BLAS to `n` threads (None: unchanged). Scoring a few thousand boxes
    is a small matrix-vector product per cutting-plane iteration; on a loaded machine extra
    BLAS threads made it 20x slower here."""
    if n is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


def train_one(cfg, name, train, labels, C, scheduler=None):
    """Fit method `name` with `C` on the trainval bags; the estimator and a record of its
    training (the initial boxes are found before the clock starts)."""
    loss, method = METHODS[name]
    init = train.mean_difference_boxes(labels, scheduler) if cfg["init"] == "image_means" \
        else "random"
    k = cfg["working_set"]
    if k is None:
        k = WORKING_SET if train.data is None else 0
    est = LatentRankSVM(loss=loss, inference=method, C=C, tol=cfg["tol"],
                        max_iter=cfg["max_iter"], max_outer=cfg["max_outer"],
                        min_outer=cfg["min_outer"][loss], init=init, random_state=cfg["seed"],
                        scheduler=scheduler, working_set=k or None)
    start = time.perf_counter()
    train.fit(est, labels)
    train_s = time.perf_counter() - start
    record = {"method": name, "loss": loss, "inference": method, "C": C,
              "n_images": int(labels.size), "n_pos": int(labels.sum()),
              "n_boxes": train.n_boxes, "lai_calls": int(est.lai_calls_),
              "lai_time_s": float(est.lai_time_), "n_outer": int(est.n_outer_),
              "n_iter": int(est.n_iter_), "converged": bool(est.converged_),
              "train_s": train_s, "passes": float(est.passes_), "working_set": k}
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
        raise ValueError(f"class {cls!r}: choosing C needs ground-truth objects (other than "
                         "difficult ones) in the held-out trainval images; give C as one number")
    fit, val = train.subset(fit_idx), train.subset(val_idx)
    scores = {}
    for C in grid:
        est, _ = train_one(cfg, GRID_METHOD[loss], fit, labels[fit_idx], C, scheduler)
        scores[C] = detection_ap(est, val, cls, cfg["nms_threshold"], scheduler)
    return max(grid, key=lambda c: (scores[c], -c)), scores


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
    return {"data": [data[s].source for s in SPLITS],
            "data_sha256": [data["digests"][s] for s in SPLITS],
            "seed": cfg["seed"], "init": cfg["init"], "C": cfg["C"],
            "validation_fraction": float(cfg["validation_fraction"]),
            "tol": float(cfg["tol"]), "max_iter": cfg["max_iter"],
            "max_outer": cfg["max_outer"], "min_outer": cfg["min_outer"],
            "nms_threshold": float(cfg["nms_threshold"])}


def units(cfg, data):
    return [(c, m) for c in cfg["classes"] for m in selected_methods(cfg)]


def _warm_up(cfg, units):
    warm_up(dict.fromkeys([m for _, m in units] + [GRID_METHOD[METHODS[m][0]]
                                                   for _, m in units]))


@contextmanager
def session(run):
    """BLAS threads limited, and the Dask scheduler that scores stores read out of core."""
    cfg, data = run.cfg, run.data
    out_of_core = cfg["store"] is not None and any(data[s].data is None for s in SPLITS)
    with _blas_threads(cfg["blas_threads"]), \
            dask_scheduler(cfg["scheduler"] if out_of_core else "sync") as scheduler:
        run.cache["scheduler"] = scheduler
        yield


def run_unit(run, unit):
    """Train method `name` on class `cls` (C chosen once per class and loss, kept in runs/),
    evaluate its detections on test, keep its weights in runs/<class>__<method>.npz."""
    cls, name = unit
    cfg, train, test = run.cfg, run.data["trainval"], run.data["test"]
    labels, scheduler = run.data["labels"][cls], run.cache["scheduler"]
    loss = METHODS[name][0]
    chosen = run.cache.setdefault("chosen", {})  # (class, loss) -> C, once per run
    if (cls, loss) not in chosen:
        chosen[cls, loss] = _chosen_C(cfg, run.store, loss, train, labels, cls, scheduler)
    est, record = train_one(cfg, name, train, labels, chosen[cls, loss], scheduler)
    w = np.append(est.coef_, est.intercept_)
    record.update({"class": cls,
                   "test_ap": detection_ap(est, test, cls, cfg["nms_threshold"], scheduler),
                   "w_sha256": hashlib.sha256(w.tobytes()).hexdigest()})
    write_npz(run.store.path(f"{cls}__{name}").with_suffix(".npz"),
              {"coef": est.coef_, "intercept": est.intercept_})
    return record


def write(run, records):
    """Table 5 from every class x method record of the directory made under these settings
    (an earlier run's other classes included)."""
    records = [r for r in run.store.records("*__*.json") if r.get("method") in METHODS
               and r.get("class") in CLASSES]
    splits = _splits(run.data)
    write_tables(run.out, records, run.cfg, data_note(splits), is_synthetic(splits))


def _chosen_C(cfg, store, loss, train, labels, cls, scheduler):
    """C of `loss` for `cls`: the choice kept in runs/, or a new one (also with force)."""
    key = f"{cls}__C-{loss}"
    record = None if cfg["force"] else store.get(key)
    if record is None:
        C, scores = choose_C(cfg, loss, train, labels, cls, scheduler)
        record = {"class": cls, "loss": loss, "C": C,
                  "validation_ap": {f"{c:g}": ap for c, ap in scores.items()}}
        store.put(key, record)
    return record["C"]


# ---------------------------------------------------------------------------- tables

TIMING_COLUMNS = ["class", "method", "loss", "inference", "C", "n_images", "n_pos", "n_boxes",
                  "lai_calls", "lai_time_s", "train_s", "n_outer", "n_iter", "converged",
                  "passes", "working_set", "test_ap", "w_sha256"]


def timings_frame(records):
    """One row per class x method, in class then method order."""
    frame = pd.DataFrame([{c: r.get(c) for c in TIMING_COLUMNS} for r in records],
                         columns=TIMING_COLUMNS)
    if frame.empty:
        return frame
    order = {**{m: i for i, m in enumerate(METHODS)}, **{c: i for i, c in enumerate(CLASSES)}}
    return frame.sort_values(["class", "method"], key=lambda s: s.map(order)) \
        .reset_index(drop=True)


def ap_table(frame):
    """Per class: test AP (%) of the latent 0-1 SVM and AP-SVM, the paper's beside, and
    whether the AP methods trained for the class gave bit-identical weights."""
    rows = []
    for cls in dict.fromkeys(frame["class"]):
        mine = frame[frame["class"] == cls].set_index("method")
        ap = [m for m in AP_METHODS if m in mine.index]
        if "0-1" not in mine.index and not ap:
            continue
        rows.append({
            "class": cls, "object_class": CLASS_NAMES[cls],
            "ap_0-1": 100 * mine.loc["0-1", "test_ap"] if "0-1" in mine.index else np.nan,
            "ap_ap": 100 * mine.loc[ap[0], "test_ap"] if ap else np.nan,
            "paper_ap_0-1": PAPER_AP[cls][0], "paper_ap_ap": PAPER_AP[cls][1],
            "ap_methods": " ".join(m for m in METHODS if m in ap),
            "ap_models_identical": mine.loc[ap, "w_sha256"].nunique() == 1 if ap else None})
    return pd.DataFrame(rows, columns=["class", "object_class", "ap_0-1", "ap_ap",
                                       "paper_ap_0-1", "paper_ap_ap", "ap_methods",
                                       "ap_models_identical"])


def lai_table(frame):
    """Per class: total LAI time (s) of each AP method and the time ratios."""
    ap = frame[frame["loss"] == "ap"]
    if ap.empty:
        return pd.DataFrame()
    table = ap.pivot_table(index="class", columns="method", values="lai_time_s", sort=False)
    table = table[[m for m in METHODS if m in table.columns]]
    for slow, fast in RATIOS:
        if slow in table and fast in table:
            table[f"{slow} / {fast}"] = table[slow] / table[fast]
    table["lai_calls"] = ap.groupby("class", sort=False)["lai_calls"].max()
    if "ap" in ap["method"].values:
        yue = ap[ap["method"] == "ap"].set_index("class")
        table["lai_share_ap"] = yue["lai_time_s"] / yue["train_s"]
    return table.reset_index()


def _ap_md(t5, ours, early=frozenset()):
    """Table 5 as Markdown; `early`: the (class, loss) pairs with a training that stopped
    before converging, whose cells are marked."""
    rows = [[r["object_class"], mark(fmt(r["ap_0-1"], 2), (r["class"], "01") in early),
             mark(fmt(r["ap_ap"], 2), (r["class"], "ap") in early),
             fmt(r["paper_ap_0-1"], 2), fmt(r["paper_ap_ap"], 2)] for _, r in t5.iterrows()]
    if len(t5):
        means = t5[["ap_0-1", "ap_ap", "paper_ap_0-1", "paper_ap_ap"]].mean()
        label = "**mean**" if len(t5) == len(CLASSES) else f"**mean** ({len(t5)} classes)"
        rows.append([label, *(fmt(means[c], 2) for c in means.index)])
    header = ["Object category", f"0-1 loss, {ours}", f"AP loss, {ours}", "0-1 loss, paper",
              "AP loss, paper"]
    return markdown_table(header, rows)


def _identical_line(t5):
    checked = t5[t5["ap_methods"].str.count(" ") >= 1]
    if checked.empty:
        return "Only one AP method per class was trained: no comparison of their weights."
    same = checked["ap_models_identical"].astype(bool)
    names = ", ".join(dict.fromkeys(m for ms in checked["ap_methods"] for m in ms.split()))
    if same.all():
        return (f"Exact LAI: {names} trained bit-identical weights for every one of the "
                f"{len(checked)} classes trained with more than one of them.")
    bad = ", ".join(checked.loc[~same, "class"])
    return (f"**Warning**: {names} should train identical weights (all are exact), but their "
            f"weights differ for {bad}; the AP column shows {AP_METHODS[0]} where present.")


def _lai_md(lt, ours, early=frozenset()):
    methods = [m for m in METHODS if m in lt.columns]
    names = {"ap": "Yue", "ap_qs": "QS", "ap_auto": "default"}
    ratios = [c for c in (f"{a} / {b}" for a, b in RATIOS) if c in lt.columns]
    header = ["Object category", *(f"{names[m]} (s)" for m in methods),
              *(" / ".join(names[p] for p in r.split(" / ")) for r in ratios), "LAI calls"]
    share = "lai_share_ap" in lt.columns
    if share:
        header.append("LAI share of training (Yue)")
    rows = []
    for _, r in lt.iterrows():
        row = [CLASS_NAMES[r["class"]],
               *(mark(fmt(r[m], 4), (r["class"], m) in early) for m in methods),
               *(fmt(r[c], 1) for c in ratios), fmt(r["lai_calls"], 0)]
        rows.append(row + ([f"{100 * r['lai_share_ap']:.0f}%"] if share else []))
    means = lt[methods].mean()
    mean_ratio = {f"{a} / {b}": means[a] / means[b] for a, b in RATIOS
                  if a in means and b in means}
    label = f"**mean**, {ours}" if len(lt) == len(CLASSES) else \
        f"**mean** ({len(lt)} classes), {ours}"
    rows.append([label, *(fmt(means[m], 4) for m in methods),
                 *(fmt(mean_ratio[c], 1) for c in ratios), fmt(lt["lai_calls"].mean(), 0)]
                + ([f"{100 * lt['lai_share_ap'].mean():.0f}%"] if share else []))
    paper = {m: PAPER_LAI_S.get(m) for m in methods}
    rows.append(["**paper** (mean over 20 classes)", *(fmt(paper[m], 4) for m in methods),
                 *(fmt(PAPER_LAI_S[r.split(' / ')[0]] / PAPER_LAI_S[r.split(' / ')[1]], 1)
                   if r == "ap / ap_qs" else "" for r in ratios), ""]
                + ([""] if share else []))
    return markdown_table(header, rows)


INIT_TEXT = {
    "image_means": ("each positive image's best box under the difference between the mean box "
                    "feature of the positive and of the negative images"),
    "random": "a random box per positive image (seed {seed})"}


def _setting_line(cfg, frame):
    Cs = ", ".join(f"{loss}: {'/'.join(f'{c:g}' for c in sorted(set(g['C'])))}"
                   for loss, g in frame.groupby("loss", sort=False))
    grids = {loss: cfg["C"][loss] for loss in dict.fromkeys(frame["loss"])}
    if any(len(g) > 1 for g in grids.values()):
        how = ("; ".join(f"{loss} from {{{', '.join(f'{c:g}' for c in g)}}}"
                         for loss, g in grids.items())
               + f", per class by detection AP on a stratified "
               f"{100 * cfg['validation_fraction']:g}% of trainval held out, then trained on "
               "all of trainval")
        Cs = f"{Cs} (chosen: {how})"
    n_conv = int(frame["converged"].sum())
    low = ", ".join(f"{loss}: {cfg['min_outer'][loss]}" for loss in dict.fromkeys(frame["loss"]))
    init = INIT_TEXT[cfg["init"]].format(seed=cfg["seed"])
    return (f"Latent SVM by CCCP around the 1-slack cutting plane (tol {cfg['tol']:g}, at most "
            f"{cfg['max_iter']} iterations per outer step, at least {low} and at most "
            f"{cfg['max_outer']} outer steps), C {Cs}. Initial boxes, the same for both "
            f"losses: {init}. {n_conv} of {len(frame)} trainings converged. Test: every box "
            f"scored, per-image NMS at IoU {cfg['nms_threshold']:g}, VOC2007 detection AP "
            "(11-point, IoU >= 0.5, difficult objects ignored).")


def write_tables(out, records, cfg, note, synthetic):
    """timings.csv, results.csv, table5.md and figure.png/.pdf from the run records."""
    frame = timings_frame(records)
    ours = ours_label(synthetic)
    with atomic_path(out / "timings.csv") as tmp:
        frame.to_csv(tmp, index=False)
    t5, lt = ap_table(frame), lai_table(frame)
    with atomic_path(out / "results.csv") as tmp:
        t5.assign(data=note).to_csv(tmp, index=False)
    parts = ["# Table 5: test detection AP (%) per class, latent 0-1 SVM vs latent AP-SVM",
             note]
    early = frame[~frame["converged"].astype(bool)] if len(frame) else frame
    if not frame.empty:
        parts += [_setting_line(cfg, frame),
                  (f"Paper: {CVPR2018}, Table 5 (VOC2007 test, 5011 trainval images of about "
                   "2000 selective-search boxes with 4096-d CNN features)."),
                  _ap_md(t5, ours, set(zip(early["class"], early["loss"]))),
                  unconverged_note(len(early)), _identical_line(t5)]
    if not lt.empty:
        parts += [
            "## Total loss-augmented inference time per class during training (s)",
            ("Ours: total wall time of the LAI calls of one AP-SVM training per class and "
             "method, timed once (one measurement, not a median of repeats; numba warmed up "
             "beforehand; the methods run one after another on this machine, so load changes "
             f"between them show). Paper: {CVPR2018}, Section 4.2, total LAI time averaged over "
             "the 20 classes, at 5011 trainval images. Yue's method costs O(N P) per call and "
             "QS O(N log P), so the ratio grows with the number of images: at fewer images "
             "than the paper's it is smaller."),
            _lai_md(lt, ours, set(zip(early["class"], early["method"])))]
    write_text(out / "table5.md", "\n\n".join(filter(None, parts)) + "\n")
    if not frame.empty:
        plot(t5, lt, out / "figure", synthetic)


def plot(t5, lt, stem, synthetic):
    """Two panels: test AP per class (0-1 vs AP loss), and total LAI time per class of each
    AP method (log scale). Writes stem.png and stem.pdf."""
    tag = (" (synthetic look-alike of VOC2007 detection)" if synthetic
           else " (VOC2007 box features)")
    panels = 2 if not lt.empty else 1
    fig = Figure(figsize=(11, 3.6 * panels), layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    x = np.arange(len(t5))
    for k, (col, label) in enumerate((("ap_0-1", "0-1 loss"), ("ap_ap", "AP loss"))):
        axes[0].bar(x + (k - 0.5) * 0.4, t5[col], width=0.4, label=label, color=f"C{k}")
    axes[0].set_xticks(x, t5["class"], rotation=45, ha="right", fontsize="small")
    axes[0].set(ylabel="test detection AP (%)", title=f"Table 5: latent SVMs{tag}")
    axes[0].legend(fontsize="small", loc="lower right", bbox_to_anchor=(1, 1), ncols=3,
                       frameon=False)
    if panels == 2:
        methods = [m for m in METHODS if m in lt.columns]
        names = {"ap": "Yue", "ap_qs": "QS", "ap_auto": "default"}
        xl = np.arange(len(lt))
        width = 0.8 / len(methods)
        for k, m in enumerate(methods):
            axes[1].bar(xl + (k - (len(methods) - 1) / 2) * width, lt[m], width=width,
                        label=names[m], color=f"C{k + 2}")
        axes[1].set_xticks(xl, lt["class"], rotation=45, ha="right", fontsize="small")
        axes[1].set(yscale="log", ylabel="total LAI time in training (s)",
                    title=f"AP-SVM training: LAI time per class{tag}")
        axes[1].legend(fontsize="small", loc="lower right", bbox_to_anchor=(1, 1), ncols=3,
                       frameon=False)
    return save_figure(fig, stem)


def redraw(run_dir, kind="tables"):
    """Redraw figure.png and .pdf of a run from its timings.csv; return their paths."""
    frame = timings_frame(read_csv(Path(run_dir) / "timings.csv", TIMING_COLUMNS)
                          .to_dict("records"))
    if frame.empty:
        raise ValueError(f"{Path(run_dir) / 'timings.csv'} holds no trainings to plot")
    synthetic = "Our numbers are synthetic" in run_data_note(run_dir)
    return plot(ap_table(frame), lai_table(frame), Path(run_dir) / "figure", synthetic)


def report(run_dir):
    """The Markdown of a finished run (what the CLI prints): table5.md."""
    return (Path(run_dir) / "table5.md").read_text(encoding="utf-8")


def results_table(run_dir):
    """results.csv of a run (the AP table) as a DataFrame."""
    return pd.read_csv(Path(run_dir) / "results.csv")


SPEC = Experiment(name=EXPERIMENT, schema=Config, load_data=load_checked, settings=settings,
                  units=units, run_unit=run_unit, write=write, warm_up=_warm_up,
                  note=lambda cfg, data: data_note(_splits(data)), session=session,
                  unit_label="run")

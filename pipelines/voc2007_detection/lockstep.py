"""Table 5 with every class of a loss trained at once (``lockstep: true``), one pass over every
box per round (:func:`qs.ssvm.lockstep.latent_lockstep`): the first selected method of the loss
trains, the others are timed on the same LAI calls. The state is stored after every pass
(``runs/lockstep__<loss>.npz``) to resume; ``lockstep.json`` holds the passes and their times."""

import hashlib
import json
import resource
import sys
import time

import numpy as np
from tqdm import tqdm

from qs.data.voc2007 import CLASSES, SPLIT_SIZES
from qs.estimators import append_ones
from qs.metrics import voc_detection_ap
from qs.ssvm.lockstep import LockstepOptions, LockstepState, latent_lockstep
from qsrank.pipelines._io import write_json, write_npz, write_text
from qsrank.pipelines._runs import same
from qsrank.pipelines.voc2007_detection.config import METHODS, WORKING_SET, selected_methods

#: the paper's boxes per image and features per box (for the projection in lockstep.md)
PAPER_BOXES, PAPER_FEATURES = 2000, 4096


def records(run, loss):
    """``{(class, method): record}`` of every selected class and method of `loss`, trained
    in lockstep (or resumed) and evaluated on test; kept in ``run.cache`` for the run."""
    done = run.cache.setdefault("lockstep", {})
    if loss not in done:
        done[loss] = _train_and_test(run, loss)
    return done[loss]


def _train_and_test(run, loss):
    cfg, train, test = run.cfg, run.data["trainval"], run.data["test"]
    scheduler = run.cache["scheduler"]
    classes = cfg["classes"]
    labels = np.stack([run.data["labels"][c] for c in classes], axis=1)
    methods = [m for m in selected_methods(cfg) if METHODS[m][0] == loss]
    inference = METHODS[methods[0]][1]
    bias = loss == "01"  # the constant feature that carries the 0-1 SVM's bias
    features, counts = (
        (train.data.X, train.sizes) if train.data is not None else (train.features, train.counts)
    )
    if bias:
        features = append_ones(features)
    init = "random"
    if cfg["init"] == "image_means":
        init = _mean_difference_weights(train, labels, scheduler, bias)
    k = cfg["working_set"] or WORKING_SET
    path = run.store.root / f"lockstep__{loss}.npz"
    state = None if cfg["force"] else _stored_state(path, run.store.settings)
    if state is not None and run.progress:
        print(
            f"lockstep {loss}: resuming from the stored state after pass {state.passes} "
            f"({sum(c.n_outer for c in state.classes)} outer steps)",
            file=sys.stderr,
        )
    C = cfg["C"][loss][0]
    run.store.root.mkdir(parents=True, exist_ok=True)  # also the working sets' file's place
    with tqdm(desc=f"lockstep {loss}", unit="pass", disable=not run.progress, leave=False) as bar:
        held = {"rows": 0, "bytes": 0}  # the most the working sets held at once

        def saved(state):
            held.update(
                rows=max(held["rows"], state.rows_held), bytes=max(held["bytes"], state.row_bytes)
            )
            write_npz(
                path, {**state.to_arrays(), "settings": np.array(json.dumps(run.store.settings))}
            )
            bar.total = state.passes + round(_passes_left(state, cfg["min_outer"][loss]))
            bar.update(state.passes - bar.n)
            bar.set_postfix_str(f"{sum(not c.done for c in state.classes)} classes left")

        options = LockstepOptions(
            C=C,
            loss=loss,
            method=inference,
            timed_methods=tuple(METHODS[m][1] for m in methods[1:]),
            tol=cfg["tol"],
            max_iter=cfg["max_iter"],
            max_outer=cfg["max_outer"],
            min_outer=cfg["min_outer"][loss],
            init=init,
            random_state=cfg["seed"],
            working_set_size=k,
            verify=cfg["verify"],
        )
        start = time.perf_counter()
        state = latent_lockstep(
            features,
            counts,
            labels,
            options,
            scheduler=scheduler,
            state=state,
            callback=saved,
            spill_dir=run.store.root,
        )
        train_s = time.perf_counter() - start
    W = state.W
    coef, intercepts = (W[:-1], W[-1]) if bias else (W, np.zeros(W.shape[1]))
    start = time.perf_counter()
    found = test.class_detections(coef, intercepts, cfg["nms_threshold"], scheduler)
    test_s = time.perf_counter() - start
    out = {}
    for j, cls in enumerate(classes):
        c = state.classes[j]
        ap = voc_detection_ap(*found[j], test.ground_truth(CLASSES.index(cls)))
        w = np.append(coef[:, j], intercepts[j])
        write_npz(
            run.store.path(f"{cls}__{loss}-lockstep").with_suffix(".npz"),
            {"coef": coef[:, j], "intercept": intercepts[j]},
        )
        for name in methods:
            times = np.array(c.lai_times[METHODS[name][1]])
            out[cls, name] = {
                "method": name,
                "loss": loss,
                "inference": METHODS[name][1],
                "C": C,
                "n_images": int(labels.shape[0]),
                "n_pos": int(labels[:, j].sum()),
                "n_boxes": train.n_boxes,
                "lai_calls": int(times.size),
                "lai_time_s": float(times.sum()),
                "n_outer": c.n_outer,
                "n_iter": int(sum(c.n_iter)),
                "converged": c.converged,
                "train_s": c.seconds,
                "passes": float(c.passes),
                "working_set": k,
                "repeats": c.repeats,
                "trained_by": methods[0],
                "class": cls,
                "test_ap": ap,
                "w_sha256": hashlib.sha256(w.tobytes()).hexdigest(),
            }
    _write_summary(run, loss, state, train_s, test_s, k, held)
    return out


def _mean_difference_weights(train, labels, scheduler, bias):
    """(d, n_classes): per class, the mean box feature of its positive images minus that of
    its negative images (the weights whose best boxes start both losses; as
    :meth:`qs.data.bags.BagSet.mean_difference_boxes`)."""
    means = train.image_means(scheduler)
    pos = labels == 1
    W = np.stack([means[p].mean(axis=0) - means[~p].mean(axis=0) for p in pos.T], axis=1)
    return np.vstack([W, np.zeros((1, W.shape[1]))]) if bias else W


def _stored_state(path, settings):
    """The lockstep state stored at `path` under these settings, or None."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as stored:
        arrays = dict(stored)
    try:
        kept = json.loads(str(arrays.pop("settings")))
    except (KeyError, ValueError):
        return None
    return LockstepState.from_arrays(arrays) if same(kept, settings) else None


def _passes_left(state, min_outer):
    """An estimate of the passes to come: the most, over the unfinished classes, of the outer
    steps a class still needs (at least one) times the rounds its steps took so far."""
    return max(
        (
            max(1, min_outer - c.n_outer) * (1 + c.repeats / max(1, c.n_outer))
            for c in state.classes
            if not c.done
        ),
        default=0,
    )


def _write_summary(run, loss, state, train_s, test_s, k, held):
    """``lockstep.json`` and its table ``lockstep.md``: per loss, the passes and their times,
    the most the working sets held at once, the process's peak memory so far."""
    path = run.out / "lockstep.json"
    summary = {}
    if path.exists():
        summary = json.loads(path.read_text(encoding="utf-8"))
    train = run.data["trainval"]
    summary[loss] = {
        "passes": state.passes,
        "resumed": state.resumed,
        "boxes": train.n_boxes,
        "features": train.d,
        "pass_s": state.pass_seconds,
        "train_s": train_s,
        "test_s": test_s,
        "working_set": k,
        "verify": run.cfg["verify"],
        "outer_steps": sum(c.n_outer for c in state.classes),
        "repeats": sum(c.repeats for c in state.classes),
        "working_set_rows": held["rows"],
        "working_set_gb": held["bytes"] / 1e9,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    }
    write_json(path, summary)
    write_text(run.out / "lockstep.md", _summary_table(summary))


def _summary_table(summary):
    """Markdown of ``lockstep.json``: one row per loss ("-" for a field its entry lacks, one
    written before the field was recorded); with the paper's 4096 features, what its passes
    would take at the paper's box count at the measured rate."""
    rows = [
        "| Loss | Trainval boxes x features | Passes (resumed) | Outer steps | Repeats | "
        "Training (s) | Mean pass (s) | Pass per 10^6 boxes (s) | Test scoring (s) | "
        "Working sets (GB) | Peak memory (GB) |",
        "|" + "---|" * 11,
    ]
    rates = []
    for loss, s in summary.items():
        mean = sum(s["pass_s"]) / len(s["pass_s"]) if s.get("pass_s") else None
        rate = mean / s["boxes"] if mean is not None and s.get("boxes") else None
        rates.append(rate if s.get("features") == PAPER_FEATURES else None)
        size = f"{s['boxes']:,} x {s['features']}" if "boxes" in s and "features" in s else "-"
        cells = [
            loss,
            size,
            f"{_cell(s, 'passes', '')} ({_cell(s, 'resumed', '')})",
            _cell(s, "outer_steps", ""),
            _cell(s, "repeats", ""),
            _cell(s, "train_s", ".1f"),
            "-" if mean is None else f"{mean:.2f}",
            "-" if rate is None else f"{rate * 1e6:.2f}",
            _cell(s, "test_s", ".1f"),
            _cell(s, "working_set_gb", ".3f"),
            _cell(s, "peak_rss_gb", ".2f"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    if rates and None not in rates:
        rate = sum(rates) / len(rates)
        train, test = (rate * n * PAPER_BOXES for n in SPLIT_SIZES.values())
        passes = sum(s["passes"] for s in summary.values())
        rows.append(
            f"\nAt the mean rate per pass measured here ({rate * 1e6:.1f} s per 10^6 boxes), a "
            f"pass over the paper's {SPLIT_SIZES['trainval']} x {PAPER_BOXES} trainval boxes "
            f"would take about {train:,.0f} s and one over its {SPLIT_SIZES['test']} x "
            f"{PAPER_BOXES} test boxes {test:,.0f} s: the {passes} passes of these trainings "
            f"and one test scoring pass per loss about "
            f"{(passes * train + len(summary) * test) / 3600:.1f} h "
            "(the inner solves come on top; they grow with the images and the working sets, "
            "not with the boxes)."
        )
    return "\n".join(rows) + "\n"


def _cell(entry, key, spec):
    """``entry[key]`` formatted by ``spec``, or "-" where the entry lacks it."""
    return "-" if entry.get(key) is None else format(entry[key], spec)

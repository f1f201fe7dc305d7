"""Replay benchmark (`qsrank bench --replay`): every exact LAI method on the score vectors of
the VOC2011 action trainings.

Training calls LAI on scores that change as the weights learn (all zero at first, then most
negatives below every positive). This records the score vector of every LAI call of a
cutting-plane training on one class's trainval boxes of the configured VOC2011 action data
(the tables' C per loss), then, in each of ``repeats`` rounds, gives every vector in turn to
every method (in a seeded order shuffled per round, so that no method always follows one
that ran the same kernel), each writing into its own workspace as in training. A method's
time per call is, per vector, the fastest of its rounds, averaged over the vectors; the
first vector (all scores zero) is shown apart.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from qs.inference import Workspace, lai
from qs.ssvm import cutting_plane
from qsrank.pipelines._io import write_csv, write_text
from qsrank.pipelines._replay import time_calls
from qsrank.pipelines._runner import run_dir
from qsrank.pipelines._tables import markdown_table
from qsrank.pipelines.voc2011_actions.config import FIXED_C
from qsrank.pipelines.voc2011_actions.data import class_data, load_data

#: the exact methods replayed per loss (with the 0-1 call as the reference)
METHODS = {
    "ap": ("auto", "qs", "bucket", "bucket_sort", "sort_dc", "search", "yue"),
    "ndcg": ("auto", "qs", "bucket", "bucket_sort", "sort_dc", "chakrabarti"),
}
COLUMNS = ["class", "loss", "method", "call", "round", "seconds"]


def record(cfg, action, loss):
    """(score vectors of every LAI call, 1/0 labels) of one cutting-plane training."""
    splits = load_data(cfg)
    X, labels, ignore = class_data(splits["trainval"], action)
    X, y = X[~ignore], labels[~ignore]
    C = cfg["C"]
    C = C[loss] if isinstance(C, dict) else FIXED_C[loss] if C == "cv" else C
    seen = []
    cutting_plane(
        X,
        y,
        C=C,
        loss=loss,
        tol=cfg["tol"],
        max_iter=cfg["max_iter"],
        callback=lambda progress: seen.append(progress.scores),
    )
    return seen, y.astype(np.int8)


def time_methods(vectors, labels, loss, methods, repeats):
    """Rows (method, call, round, seconds): each round, every method (in a seeded shuffled
    order) on every vector in turn, each method with its own :class:`~qs.inference.Workspace`."""
    calls = [("zero_one", "01")] + [(m, loss) for m in methods]
    spaces = {method: Workspace() for method, _ in calls}  # as a solver holds one
    for method, call_loss in calls:  # untimed: kernels loaded
        lai(vectors[0], labels, call_loss, method, workspace=spaces[method])
    inputs = [(scores, labels) for scores in vectors]
    rows = []
    rng = np.random.default_rng(0)
    for r in range(repeats):
        for i in rng.permutation(len(calls)):
            method, call_loss = calls[i]
            seconds = time_calls(inputs, call_loss, method, spaces[method])
            rows += [(method, k, r, s) for k, s in enumerate(seconds)]
    return rows


def run(cfg, classes, losses, repeats, out_dir=None):
    """Record and replay each class x loss; write timings.csv, summary.md, config.yaml and
    provenance.json into the run directory, which is returned."""
    settings = {"classes": list(classes), "losses": list(losses), "repeats": repeats}
    note = f"score vectors of cutting-plane trainings on the {cfg['data']} VOC2011 action data"
    with run_dir(
        "scaling", "replay", out_dir, {**cfg, "replay": settings}, note, settings, label="replay"
    ) as out:
        frames = []
        for action in classes:
            for loss in losses:
                vectors, labels = record(cfg, action, loss)
                rows = time_methods(vectors, labels, loss, METHODS[loss], repeats)
                frame = pd.DataFrame(rows, columns=COLUMNS[2:])
                frame.insert(0, "loss", loss)
                frame.insert(0, "class", action)
                frames.append(frame)
        timings = pd.concat(frames, ignore_index=True)
        write_csv(out / "timings.csv", timings)
        write_text(out / "summary.md", summary(timings))
    return out


def per_call(timings):
    """(class, loss, method) -> (mean over calls of the fastest round, first call's fastest,
    number of calls)."""
    fastest = timings.groupby(["class", "loss", "method", "call"])["seconds"].min()
    table = fastest.groupby(["class", "loss", "method"]).agg(["mean", "first", "size"])
    return table.rename(columns={"mean": "per_call", "first": "first_call", "size": "calls"})


def summary(timings):
    """summary.md: per class and loss, each method's time per call, against 0-1 and the
    fastest exact method."""
    table = per_call(timings)
    parts = [
        "# LAI replay: the score vectors of real trainings, every method",
        __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
    ]
    for (action, loss), group in table.groupby(level=["class", "loss"]):
        group = group.droplevel(["class", "loss"])
        zero_one = group.loc["zero_one", "per_call"]
        exact = group.drop(index="zero_one")
        best = exact["per_call"].min()
        rows = [
            [
                m,
                f"{g.per_call * 1e6:.1f}",
                f"{g.per_call / zero_one:.2f}",
                "" if m == "zero_one" else f"{g.per_call / best:.2f}",
                f"{g.first_call * 1e6:.1f}",
            ]
            for m, g in group.sort_values("per_call").iterrows()
        ]
        parts += [
            f"## {action}, {loss} loss: {int(group['calls'].iloc[0])} LAI calls",
            markdown_table(
                ["method", "us per call", "x 0-1", "x fastest exact", "first call (scores 0), us"],
                rows,
            ),
        ]
    return "\n\n".join(parts) + "\n"


def read_summary(run_dir):
    return (Path(run_dir) / "summary.md").read_text(encoding="utf-8")

"""The outputs of a `qsrank fit` run: metrics.csv, table.md, the model files and the figure."""

from pathlib import Path

import numpy as np
import pandas as pd

from qsrank.pipelines._io import read_csv, write_csv, write_text
from qsrank.pipelines._tables import bar_figure, frame_table
from qsrank.pipelines.model import write_model
from qsrank.pipelines.scoring import METRICS

#: the methods of each class, the model's first: name -> what the table calls it
METHODS = {
    "rank_svm": "RankSVM",
    "linear_svc": "LinearSVC",
    "logistic_regression": "LogisticRegression",
}


def metrics_frame(records):
    """One row per class and method: C, how it was chosen, CV score, test metrics, time."""
    rows = [
        {"class": r["class"], "method": name, "test_positives": r["test_positives"], **m}
        for r in records
        for name, m in r["methods"].items()
    ]
    return pd.DataFrame(rows)


def table(records):
    """Test metrics per class and method in Markdown (a mean per method over several classes)."""
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

    parts = [
        f"# qsrank fit: RankSVM ({cfg['loss']} loss) beside LinearSVC and LogisticRegression",
        f"Data: {note}. Features {scaling}.",
        f"RankSVM (solver {cfg['solver']}): {how(cfg['C'])}. LinearSVC and "
        f"LogisticRegression: {how(cfg['baseline_C'])}.",
        "Test metrics, each class one vs the rest (its positive class named in `class`):",
        table(records),
    ]
    return "\n\n".join(parts) + "\n"


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
    """Draw metrics.csv's test AP per class as grouped bars, figure.png and .pdf; return paths."""
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

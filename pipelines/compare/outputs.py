"""What `qsrank compare` writes: per-seed results, the summary over the seeds, one Markdown
table per data set (tables.md), the history per epoch, and a figure of the test metric
against training time."""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from qsrank.pipelines._experiment_common import paragraphs
from qsrank.pipelines._io import read_csv, save_figure, write_csv, write_text
from qsrank.pipelines._tables import markdown_table
from qsrank.pipelines.compare import classification, retrieval
from qsrank.pipelines.compare.methods import BASELINES, METHODS

DATASETS = classification.DATASETS + retrieval.DATASETS
FAMILY_OF = {
    **dict.fromkeys(classification.DATASETS, "classification"),
    **dict.fromkeys(retrieval.DATASETS, "retrieval"),
}
#: per family: its test metrics (results.csv name -> table column, decimals), and the one
#: the figure plots
METRICS = {"classification": classification.METRICS, "retrieval": retrieval.METRICS}
PLOTTED = {
    "classification": ("test_ap", "test AP (mean over classes)"),
    "retrieval": ("map_at_r", "mAP@R (held-out classes)"),
}
TIMES = {"train_s": ("train s", 2), "loss_ms_per_step": ("loss ms/step", 3)}


def columns(families):
    """results.csv's value columns for data sets of `families`: their metrics, then times."""
    metrics = {k: v for f in METRICS if f in families for k, v in METRICS[f].items()}
    return {**metrics, **TIMES}


def results_frame(records, families=("classification",)):
    """One row per (data set, method, seed)."""
    cols = ["dataset", "method", "seed", "epoch", "steps", *columns(families)]
    return pd.DataFrame([{k: r.get(k, np.nan) for k in cols} for r in records], columns=cols)


def summary_frame(results, methods):
    """Per data set and method: the mean and standard deviation over the seeds."""
    values = list(results.columns[5:])
    grouped = results.groupby(["dataset", "method"], sort=False)
    mean, std = grouped[values].mean(), grouped[values].std(ddof=1)
    frame = mean.join(std.add_suffix("_sd")).reset_index()  # pandas 2 and 3 alike
    frame["seeds"] = grouped.size().values
    order = {m: k for k, m in enumerate(methods)}
    return frame.sort_values(
        ["dataset", "method"],
        key=lambda c: c.map(order) if c.name == "method" else c.map(DATASETS.index),
        kind="stable",
    )


def dataset_table(summary, dataset):
    """One Markdown table: a row per method, each value as mean ± sd over the seeds."""
    cols = {**METRICS[FAMILY_OF[dataset]], **TIMES}
    rows = []
    for r in summary[summary.dataset == dataset].itertuples():
        cells = [f"{r.method}", METHODS[r.method].kind]
        for col, (_, digits) in cols.items():
            mean, sd = getattr(r, col), getattr(r, f"{col}_sd")
            cells.append(f"{mean:.{digits}f}" + ("" if np.isnan(sd) else f" ± {sd:.{digits}f}"))
        rows.append(cells)
    return markdown_table(["method", "kind", *(label for label, _ in cols.values())], rows)


def _model_line(cfg, dataset):
    section = cfg[dataset]
    if FAMILY_OF[dataset] == "retrieval":
        shape = f"MLP, {section['hidden']} hidden units (ReLU)" if section["hidden"] else "linear"
        return (
            f"{shape} to {section['dim']} dimensions, L2-normalised; Adam, lr "
            f"{section['lr']:g}, batches of {section['classes_per_batch']} classes x "
            f"{section['samples_per_class']} samples"
        )
    model = (
        "PL-CNN, widths " + str(section["widths"]) + f", after "
        f"{section['warm_start_epochs']} shared cross-entropy epochs"
        if dataset == "cifar10"
        else "linear"
    )
    return f"{model}; Adam, lr {section['lr']:g}, batch {section['batch_size']}"


def report_text(cfg, summary, notes):
    """tables.md: what the cells are, then per data set its data, model, budget and table."""
    families = {FAMILY_OF[d] for d in cfg["datasets"]}
    tested = []
    if "classification" in families:
        tested.append("Test metrics are means over the classes, one-vs-rest.")
    if "retrieval" in families:
        tested.append(
            "Retrieval: each test sample of the held-out classes a query against the "
            "other test samples by cosine similarity; mAP@R and Recall@k over the "
            "queries."
        )
    title = (
        "Training for AP and NDCG"
        if "classification" in families
        else "Training embeddings for AP, tested on held-out classes"
    )
    output = "scores" if families == {"classification"} else "model's output"
    parts = [
        f"# {title}: the methods side by side (`qsrank compare`)",
        (
            "Each cell: mean ± standard deviation over the seeds "
            f"{', '.join(map(str, cfg['seeds']))} (initialisation and batch order; the data "
            f"split is fixed). {' '.join(tested)} Train s: "
            "the training steps only; loss ms/step: the loss's forward and backward to the "
            f"{output}, per step."
            + (f" Models and losses ran on {cfg['device']}." if cfg["device"] != "cpu" else "")
        ),
    ]
    for dataset in cfg["datasets"]:
        section = cfg[dataset]
        budget = " and ".join(
            b
            for b in (
                f"{section['epochs']} epochs" if section["epochs"] is not None else None,
                f"{section['seconds']:g} s" if section["seconds"] is not None else None,
            )
            if b
        )
        parts += [
            f"## {dataset}",
            f"Data: {notes[dataset]}. Model: {_model_line(cfg, dataset)}; budget: {budget}.",
            dataset_table(summary, dataset),
        ]
    return paragraphs(*parts)


def plot(history, datasets, methods):
    """The test metric against training time, per data set: the mean over the seeds per
    epoch (`history`: one row per data set, method, seed and epoch, as history.csv)."""
    fig = Figure(figsize=(5.2 * len(datasets), 4.4))
    axes = fig.subplots(1, len(datasets), squeeze=False)[0]
    # one colour per method (more than ten): tab20's dark shades, then its light ones
    colours = colormaps["tab20"].colors
    for ax, dataset in zip(axes, datasets):
        metric, label = PLOTTED[FAMILY_OF[dataset]]
        for i, method in enumerate(methods):
            rows = history[(history.dataset == dataset) & (history.method == method)]
            if rows.empty:
                continue
            curve = rows.groupby("epoch")[["train_s", metric]].mean()
            ax.plot(
                curve.train_s,
                curve[metric],
                marker="o",
                markersize=3,
                label=method,
                color=colours[2 * i % 20 + i // 10 % 2],
                linestyle="--" if method in BASELINES else "-",
            )
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # no crowded labels
        ax.set_xlabel("training time (s, log scale)")
        ax.set_ylabel(label)
        ax.set_title(dataset, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def write(out, cfg, records, notes):
    """tables.md, results.csv, summary.csv, history.csv, figure.png/pdf."""
    results = results_frame(records, {FAMILY_OF[d] for d in cfg["datasets"]})
    summary = summary_frame(results, cfg["methods"])
    history = pd.DataFrame(
        [
            {"dataset": r["dataset"], "method": r["method"], "seed": r["seed"], **h}
            for r in records
            for h in r["history"]
        ]
    )
    for name, frame in (
        ("results.csv", results),
        ("summary.csv", summary),
        ("history.csv", history),
    ):
        write_csv(out / name, frame)
    write_text(out / "tables.md", report_text(cfg, summary, notes))
    save_figure(plot(history, cfg["datasets"], cfg["methods"]), out / "figure")


def redraw(run_dir, kind="tables"):
    """Redraw figure.png and .pdf of a compare run from its history.csv; return their
    paths."""
    history = read_csv(Path(run_dir) / "history.csv", ["dataset", "method", "epoch", "train_s"])
    datasets = [d for d in dict.fromkeys(history.dataset) if d in FAMILY_OF]
    if not datasets:
        raise ValueError(f"{Path(run_dir) / 'history.csv'} holds no known data set's rows")
    for dataset in datasets:
        metric = PLOTTED[FAMILY_OF[dataset]][0]
        if metric not in history.columns:
            raise ValueError(f"{Path(run_dir) / 'history.csv'} lacks column {metric}")
    methods = list(dict.fromkeys(history.method))
    return save_figure(plot(history, datasets, methods), Path(run_dir) / "figure")

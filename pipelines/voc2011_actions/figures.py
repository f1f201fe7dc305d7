"""Figures 2-3 (`qsrank bench --experiment voc2011_actions`): the total LAI time of whole
trainings on class phoning's boxes, subsampled, as the negatives, positives or total grow."""

from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from qs.data import ACTIONS
from qsrank.pipelines._experiment_common import is_synthetic
from qsrank.pipelines._io import read_csv, run_data_note, save_figure, write_csv, write_text
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._sizes import varied
from qsrank.pipelines._tables import fmt, markdown_table
from qsrank.pipelines.voc2011_actions import train
from qsrank.pipelines.voc2011_actions.config import (
    EXPERIMENT,
    FIXED_C,
    METHODS,
    VARIES,
    Config,
    figure_methods,
    figure_sizes,
)
from qsrank.pipelines.voc2011_actions.data import class_data, data_note
from qsrank.pipelines.voc2011_actions.data import load_data as load_data_splits

FIGURE_NUMBER = {"ap": 2, "ndcg": 3}
FIGURE_COLUMNS = [
    "vary",
    "loss",
    "method",
    "inference",
    "class",
    "n_pos",
    "n_neg",
    "C",
    "lai_calls",
    "lai_time_s",
    "lai_time_median_s",
    "lai_time_max_s",
    "lai_ms_per_call",
    "n_iter",
    "converged",
    "train_s",
    "repeats",
]
#: per LAI method: what the legends call it (by its authors, not a bare loss), and its colour
LAI_LEGEND = {
    "zero_one": ("hinge SVM", "C0"),
    "yue": ("Yue et al.", "C1"),
    "chakrabarti": ("Chakrabarti et al.", "C1"),
    "qs": ("QS", "C2"),
    "search": ("binary search", "C3"),
    "auto": ("default", "C4"),
}


def load_data(cfg):
    """The splits and the boxes of figures.class in the pool, its positives and negatives in a
    seeded order: the first n_pos and n_neg are a point's training set (smaller sets nested)."""
    fig = cfg["figures"]
    splits = load_data_splits(cfg)
    parts = ["trainval"] + (["test"] if fig["pool"] == "trainval+test" else [])
    boxes = [class_data(splits[part], fig["class"]) for part in parts]
    X = sp.vstack([X[~ignore] for X, _, ignore in boxes], format="csr")
    y = np.concatenate([y[~ignore] for _, y, ignore in boxes])
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    pairs = figure_sizes(cfg)
    big_p, big_n = max(p for p, _ in pairs), max(n for _, n in pairs)
    if big_p > pos.size or big_n > neg.size:
        raise ValueError(
            f"figures.presets.{fig['preset']}.{fig['vary']} asks for up to {big_p} positives "
            f"and {big_n} negatives of class {fig['class']!r}, but the {fig['pool']} boxes hold "
            f"{pos.size} and {neg.size}; lower the sizes"
            + (" or set figures.pool: trainval+test" if fig["pool"] == "trainval" else "")
        )
    rng = np.random.default_rng([cfg["seed"], ACTIONS.index(fig["class"])])
    return {
        "splits": splits,
        "X": X,
        "y": y,
        "pos": rng.permutation(pos),
        "neg": rng.permutation(neg),
    }


def _C(cfg):
    """C per loss of the figure's trainings."""
    return cfg["figures"]["C"] or (cfg["C"] if cfg["C"] != "cv" else dict(FIXED_C))


def settings(cfg, data):
    """What a point depends on: the tables' training settings with the figure's C, class,
    pool and repeats (not the vary: several share one directory)."""
    fig = cfg["figures"]
    extra = {k: fig[k] for k in ("class", "pool", "repeats")}
    return {**train.settings(cfg, data["splits"]), "C": _C(cfg), **extra}


def units(cfg, data):
    """One unit per size and method: (vary, p<P>_n<N>, method)."""
    return [
        (cfg["figures"]["vary"], f"p{p}_n{n}", m)
        for p, n in figure_sizes(cfg)
        for m in figure_methods(cfg)
    ]


def run_unit(run, unit):
    """Train one method figures.repeats times on one size (the same weights each time: the
    solvers are deterministic); the record keeps every repeat's total LAI time."""
    vary, size, name = unit
    n_pos, n_neg = map(int, size[1:].split("_n"))
    cfg, data = run.cfg, run.data
    rows = np.sort(np.concatenate([data["pos"][:n_pos], data["neg"][:n_neg]]))
    X, y, bias = data["X"][rows], data["y"][rows], data["splits"]["trainval"].bias
    C = _C(cfg)[METHODS[name][0]]
    runs = [train.train_one(cfg, name, C, X, y, bias)[1] for _ in range(cfg["figures"]["repeats"])]
    times = [r["lai_time_s"] for r in runs]
    record = {
        **runs[0],
        "vary": vary,
        "class": cfg["figures"]["class"],
        "n_neg": n_neg,
        "lai_time_s": float(min(times)),
        "lai_time_median_s": float(np.median(times)),
        "lai_times_s": times,
        "train_s": float(np.median([r["train_s"] for r in runs])),
        "repeats": cfg["figures"]["repeats"],
    }
    record["lai_ms_per_call"] = 1e3 * record["lai_time_s"] / record["lai_calls"]
    return record


def write(run, records):
    """timings.csv, summary.md and the figure, over every point in the directory (each vary
    run into it)."""
    frame = figure_frame(run.store.records("*__p*_n*__*.json"))
    write_csv(run.out / "timings.csv", frame)
    note = data_note(run.data["splits"])
    write_text(run.out / "summary.md", figure_summary(frame, run.cfg, note))
    plot_figure(frame, run.out / "figure", synthetic=is_synthetic(run.data["splits"]))


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_data,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    kind="figure",
    warm_up=lambda cfg, units: train.warm_up(dict.fromkeys(u[2] for u in units)),
    note=lambda cfg, data: data_note(data["splits"]),
    unit_label="point",
    label=lambda cfg: f"figure {cfg['figures']['vary']}",
    command=lambda cfg: {
        "vary": cfg["figures"]["vary"],
        "preset": cfg["figures"]["preset"],
        "methods": figure_methods(cfg),
    },
    report=("summary.md",),
)


def figure_frame(records):
    """One row per figure point and method: ``lai_time_s`` the fastest of its repeated
    trainings, ``lai_time_median_s`` their median and ``lai_time_max_s`` the slowest."""
    records = [
        {**r, "lai_time_max_s": max(r.get("lai_times_s") or [r["lai_time_s"]])} for r in records
    ]
    frame = pd.DataFrame(
        [{c: r.get(c) for c in FIGURE_COLUMNS} for r in records], columns=FIGURE_COLUMNS
    )
    order = {m: i for i, m in enumerate(METHODS)}
    vary = {v: i for i, v in enumerate(VARIES)}
    if frame.empty:
        return frame
    frame["_v"], frame["_m"] = frame["vary"].map(vary), frame["method"].map(order)
    return (
        frame.sort_values(["_v", "_m", "n_pos", "n_neg"])
        .drop(columns=["_v", "_m"])
        .reset_index(drop=True)
    )


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
    parts = [
        f"# Figures 2-3: total LAI time during training as the data grow (class {action})",
        note,
        (
            f"Solver {cfg['solver']} (tol {cfg['tol']:g}, max_iter {cfg['max_iter']}), C "
            f"fixed per loss; each point is the median over {cfg['figures']['repeats']} "
            "identical trainings of the total wall time of their LAI calls, [fastest, "
            "slowest] beside it (numba warmed up beforehand); the speed-ups are ratios of "
            f"medians. Boxes subsampled from the {cfg['figures']['pool']} boxes of the "
            "class, smaller sets nested in larger ones."
        ),
    ]
    for loss in _figure_rows(frame):
        mine = frame[frame["loss"].isin((loss, "01"))]
        for vary in [v for v in VARIES if (mine["vary"] == v).any()]:
            part = mine[mine["vary"] == vary]
            table, low, high = (
                part.pivot_table(index=["n_pos", "n_neg"], columns="method", values=v, sort=False)
                for v in ("lai_time_median_s", "lai_time_s", "lai_time_max_s")
            )
            table = table[[m for m in METHODS if m in table.columns]]
            calls = part.pivot_table(
                index=["n_pos", "n_neg"],
                columns="loss",
                values="lai_calls",
                aggfunc="max",
                sort=False,
            )
            header = ["n_pos", "n_neg", *(f"{m} (s)" for m in table.columns)]
            slow, fast = {"ap": ("ap", "ap_qs"), "ndcg": ("ndcg", "ndcg_qs")}.get(loss, (0, 0))
            speed = slow in table.columns and fast in table.columns
            if speed:
                header.append(f"{slow} / {fast}")
            header += [f"LAI calls ({'0-1' if k == '01' else k})" for k in calls.columns]
            rows = []
            for (p, n), values in zip(table.index, table.to_numpy()):
                row = [
                    p,
                    n,
                    *(
                        f"{fmt(v, 4)} [{fmt(low.loc[(p, n), m], 4)}, {fmt(high.loc[(p, n), m], 4)}]"
                        if fmt(v, 4)
                        else ""
                        for m, v in zip(table.columns, values)
                    ),
                ]
                if speed:
                    row.append(fmt(table.loc[(p, n), slow] / table.loc[(p, n), fast], 1))
                row += [fmt(v, 0) for v in calls.loc[(p, n)]]
                rows.append(row)
            name = f"Figure {FIGURE_NUMBER[loss]} ({loss})" if loss in FIGURE_NUMBER else "0-1"
            parts += [f"## {name}, varying the {vary}", markdown_table(header, rows)]
    return "\n\n".join(parts) + "\n"


def plot_figure(frame, stem, synthetic=True):
    """Log-log total LAI time per training against the varied count, the median of the
    repeated trainings with bars from the fastest to the slowest: a row of panels per figure
    (ap: Figure 2, ndcg: Figure 3), a panel per vary. Writes stem.png and stem.pdf."""
    rows = _figure_rows(frame)
    source = (
        "synthetic look-alike of VOC2011 actions"
        if synthetic
        else "VOC2011 actions poselet features"
    )
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
                ax.errorbar(
                    varied(line, vary),
                    median,
                    yerr=spread,
                    marker="o",
                    markersize=3,
                    capsize=2,
                    label=f"{name} ({LAI_LEGEND[METHODS[name][1]][0]})",
                    color=LAI_LEGEND[METHODS[name][1]][1],
                )
            ax.set(
                xscale="log",
                yscale="log",
                ylabel="total LAI time in training (s),\nmedian [fastest, slowest]",
            )
            if not part.empty:
                ax.set_xlabel(_xlabel(part, vary))
                xs = sorted(set(varied(part, vary)))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xticks(xs, [str(v) for v in xs], fontsize="small")
            label = f"Figure {FIGURE_NUMBER[loss]}" if loss in FIGURE_NUMBER else "0-1"
            ax.set_title(f"{label}: varying {vary}\n({source})", fontsize="medium")
            ax.grid(True, which="major", alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize="small")
    return save_figure(fig, stem)


def redraw(run_dir, kind):
    """Redraw figure.png and .pdf of a figure run from its timings.csv; return their paths."""
    if kind != "figure":
        raise ValueError(
            f"{run_dir} holds the VOC2011 actions Tables 1-4, which have no "
            "figure; Figures 2-3 are drawn by the runs of qsrank bench "
            "--experiment voc2011_actions (make reproduce-figure2/3)"
        )
    frame = read_csv(Path(run_dir) / "timings.csv", FIGURE_COLUMNS)
    synthetic = "Our numbers are synthetic" in run_data_note(run_dir)
    return plot_figure(frame, Path(run_dir) / "figure", synthetic=synthetic)

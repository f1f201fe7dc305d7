"""What a scaling run reports: median tables, summary.md with its ratios, and the figure."""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from qsrank.pipelines._io import read_csv, save_figure
from qsrank.pipelines._sizes import varied
from qsrank.pipelines._tables import markdown_table
from qsrank.pipelines.scaling.config import (
    COLD_COLUMNS,
    COLORS,
    LABELS,
    LOSSES,
    REUSED_OUTPUTS,
    ROTATION_BYTES,
    SHARED,
    SKIPPED,
    TIMING_COLUMNS,
)
from qsrank.pipelines.scaling.share import plot_share, share_markdown
from qsrank.pipelines.scaling.timing import data_note


def _panels(frame):
    """One panel per loss present; just 0-1 and the references when no rank loss ran."""
    return [loss for loss in LOSSES if (frame["loss"] == loss).any()] or ["-"]


def _title(panel):
    return f"{panel} loss" if panel in LOSSES else "0-1 and references"


def _medians(timings, cold, panel, statistic="median"):
    """Median seconds per call (`statistic` "spread": interquartile range / median): rows (n_pos,
    n_neg), columns the panel's curves; NaN = skipped."""
    mine = cold[cold["loss"].isin((panel,) + SHARED)]
    names = list(dict.fromkeys(mine["curve"]))  # names are unique within a panel
    warm = timings[timings["loss"].isin((panel,) + SHARED)]
    seconds = warm.groupby(["n_pos", "n_neg", "curve"])["seconds"]
    table = seconds.median()
    if statistic == "spread":
        table = (seconds.quantile(0.75) - seconds.quantile(0.25)) / table
    table = table.unstack("curve")
    index = pd.MultiIndex.from_frame(mine[["n_pos", "n_neg"]].drop_duplicates())
    return table.reindex(index=index, columns=names)


def _size_table(table, blank):
    """A (n_pos, n_neg) x curve table in Markdown, values to 3 significant digits."""
    rows = [
        [str(p), str(n), *(blank if np.isnan(v) else f"{v:.3g}" for v in values)]
        for (p, n), values in zip(table.index, table.to_numpy())
    ]
    return markdown_table(["n_pos", "n_neg", *table.columns], rows)


def report(run_dir):
    """What `qsrank bench` prints of a finished run: the grid table of a share run, else the
    median seconds per call, a table per loss."""
    grid = Path(run_dir) / "grid.csv"
    if grid.is_file():
        return share_markdown(read_csv(grid))
    timings = read_csv(Path(run_dir) / "timings.csv", TIMING_COLUMNS)
    cold = read_csv(Path(run_dir) / "compile.csv", COLD_COLUMNS)
    return "\n\n".join(
        f"{_title(panel)}: median seconds per call\n\n"
        + _size_table(_medians(timings, cold, panel), SKIPPED)
        for panel in _panels(cold)
    )


def summary(cfg, timings, cold):
    """summary.md: data note, medians, ratios to the paper's baseline and to 0-1, cold calls."""
    parts = [
        f"# Scaling of loss-augmented inference: varying the {cfg['vary']}",
        f"Data: {data_note(cfg)}. Preset `{cfg['preset']}` (Mohapatra et al., CVPR 2018, "
        "Figures 2-3). Each "
        f"cell is the median of {cfg['repeats']} warm calls through `qs.inference.lai`, each on "
        "the next of a rotation of different score vectors of that size (at least "
        f"{ROTATION_BYTES >> 20} MB of them) "
        "(np.max, np.partition and np.sort run on the negatives alone). The first, cold call "
        "at each size, which includes numba compilation or cache loading, is not in the "
        f"medians; see the last table. `{SKIPPED}`: the call was predicted to take more than "
        f"{cfg['budget_s']:g} s, so it and every larger size were not run.",
    ]
    for panel in _panels(cold):
        table = _medians(timings, cold, panel)
        parts += [
            f"## {_title(panel)}",
            "Median seconds per call:",
            _size_table(table, SKIPPED),
            "Spread of the repeats: interquartile range / median:",
            _size_table(_medians(timings, cold, panel, "spread"), SKIPPED),
        ]
        baseline = [(panel, f"the paper's baseline `{panel}`")] if panel in LOSSES else []
        for name, label in baseline + [("0-1", "`0-1`")]:
            if name in table.columns:
                parts += [
                    f"Time relative to {label} (below 1 is faster):",
                    _size_table(table.div(table[name], axis=0), "n/a"),
                ]
    first = cold[cold["status"] == "ok"].drop_duplicates(["loss", "curve"])
    warm = timings.groupby(["loss", "curve", "n_pos", "n_neg"])["seconds"].median()
    rows = [
        [
            r.curve,
            r.loss,
            r.method,
            str(r.n_pos),
            str(r.n_neg),
            f"{r.seconds:.3g}",
            f"{warm[(r.loss, r.curve, r.n_pos, r.n_neg)]:.3g}",
        ]
        for r in first.itertuples()
    ]
    header = [
        "curve",
        "loss",
        "method",
        "n_pos",
        "n_neg",
        "cold first call (s, one call)",
        "warm median (s)",
    ]
    parts += [
        "## Cold first call at the smallest size (numba compile or cache load included)",
        markdown_table(header, rows),
    ]
    return "\n\n".join(parts) + "\n"


def plot(timings, stem):
    """Log-log median seconds per call against the varied count, a panel per loss, the quartiles as
    a band; writes `stem`.png and .pdf."""
    vary = timings["vary"].iloc[0]
    grouped = timings.groupby(["loss", "curve", "method", "n_pos", "n_neg"], sort=False)
    med = grouped["seconds"].median().reset_index()
    med["q1"] = grouped["seconds"].quantile(0.25).to_numpy()
    med["q3"] = grouped["seconds"].quantile(0.75).to_numpy()
    med["x"] = varied(med, vary)
    xlabel = {
        "negatives": f"negatives N (P = {med['n_pos'].iloc[0]})",
        "positives": f"positives P (N = {med['n_neg'].iloc[0]})",
        "total": "samples P + N",
    }[vary]
    panels = _panels(med)
    fig = Figure(figsize=(5.5 * len(panels), 4.2), layout="constrained")
    for ax, panel in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        mine = med[med["loss"].isin((panel,) + SHARED)]
        for (loss, curve, method), line in mine.groupby(["loss", "curve", "method"], sort=False):
            style = "--" if loss == "-" else ":" if curve in REUSED_OUTPUTS else "-"
            color = COLORS.get(method, "k")
            ax.plot(
                line["x"],
                line["seconds"],
                marker="o",
                markersize=3,
                label=LABELS.get(curve, curve),
                color=color,
                linestyle=style,
            )
            ax.fill_between(line["x"], line["q1"], line["q3"], color=color, alpha=0.15, linewidth=0)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=xlabel,
            ylabel="seconds per LAI call,\nmedian and quartiles of the repeats",
            title=f"{_title(panel)} (synthetic scores)",
        )
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    return save_figure(fig, stem)


def redraw(run_dir, kind="bench"):
    """Redraw RUN_DIR/scaling.png and .pdf from RUN_DIR/timings.csv; return their paths."""
    if kind != "bench":
        raise ValueError(f"{run_dir} holds a scaling {kind} run, which draws no figure")
    timings = read_csv(Path(run_dir) / "timings.csv", TIMING_COLUMNS)
    if timings.empty:
        raise ValueError(f"{Path(run_dir) / 'timings.csv'} holds no timings to plot")
    if (timings["vary"] == "share").all():
        return plot_share(timings, Path(run_dir) / "scaling")
    return plot(timings, Path(run_dir) / "scaling")

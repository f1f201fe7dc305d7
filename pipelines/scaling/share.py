"""`vary: share`: the grid of negatives x share of positives, every near-linear exact method and the
0-1 LAI timed in shuffled rounds; the grid table and figure."""

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from qsrank.pipelines._io import save_figure, write_csv, write_text
from qsrank.pipelines._tables import cell, markdown_table
from qsrank.pipelines.scaling.config import COLORS, LABELS, LOSSES, SHARED, curves, sizes
from qsrank.pipelines.scaling.timing import data_note, time_grid

#: cells with N times repeats above this run fewer repeats (at least 3): N = 10^7 cells take
#: seconds per call of the slower methods
SHARE_WORK = 2 * 10**7
SHARE_COLUMNS = [
    "loss",
    "n_neg",
    "share",
    "n_pos",
    "default_s",
    "default_spread",
    "ns_per_score",
    "vs_zero_one",
    "vs_zero_one_spread",
    "fastest_other",
    "vs_fastest_other",
    "vs_fastest_other_spread",
    "batch_vs_lai",
    "vs_argsort",
    "vs_argsort_spread",
]


def _predicted_share(last, method, n_pos, n_neg):
    """Seconds per call extrapolated from the same share at a smaller N: linear in N + P, but
    search's scan costs up to P^2."""
    if last is None:
        return 0.0
    p0, n0, seconds = last
    if method == "search":
        return seconds * (n_pos**2 + n_neg) / (p0**2 + n0)
    return seconds * (n_pos + n_neg) / (p0 + n0)


def _nearest_share(shares, n_pos, n_neg):
    """Index of the (first) share that a cell (n_pos, n_neg) was made from."""
    return min(range(len(shares)), key=lambda i: abs(max(1, round(shares[i] * n_neg)) - n_pos))


def time_share(cfg, progress):
    """Every curve at every cell of the grid: (timings, cold) frames."""
    shares = cfg["presets"][cfg["preset"]]["share"]["shares"]
    return time_grid(
        cfg,
        curves(cfg),
        sizes(cfg),
        progress,
        predict=_predicted_share,
        repeats=lambda n_neg: min(cfg["repeats"], max(3, SHARE_WORK // n_neg)),
        rng=np.random.default_rng(cfg["seed"]),
        group=lambda n_pos, n_neg: _nearest_share(shares, n_pos, n_neg),
    )


def write_share(cfg, out, timings):
    """The grid table (grid.csv, summary.md) and the figure of a share run."""
    table = share_table(timings, cfg["presets"][cfg["preset"]]["share"]["shares"])
    write_csv(out / "grid.csv", table)
    write_text(out / "summary.md", share_summary(cfg, table))
    plot_share(timings, out / "scaling")


def _ratio(a, b, name=None):
    """The median of the per-round ratios of two curves' samples (same round); with `name`, as
    the columns {name: median, name_spread: "min-max"}."""
    ratios = np.asarray(a) / np.asarray(b)
    if name is None:
        return float(np.median(ratios))
    return {
        name: float(np.median(ratios)),
        f"{name}_spread": f"{ratios.min():.2f}-{ratios.max():.2f}",
    }


def share_table(timings, shares):
    """One row per loss and cell: the default's median time and spread, time per score, and its
    per-round ratios to the 0-1 LAI, the fastest other exact method and np.argsort, and
    lai_batch's over lai's."""
    rows = []
    samples = {
        key: frame.sort_values("repeat")["seconds"].to_numpy()
        for key, frame in timings.groupby(["loss", "curve", "n_pos", "n_neg"])
    }
    zero_one = timings[timings["curve"] == "0-1"]
    for loss in LOSSES:
        mine = timings[timings["loss"] == loss]
        if mine.empty:
            continue
        default = f"{loss}_auto"
        for (n_pos, n_neg), grid_cell in mine.groupby(["n_pos", "n_neg"], sort=False):
            if (loss, default, n_pos, n_neg) not in samples:
                continue
            own = samples[loss, default, n_pos, n_neg]
            share = shares[_nearest_share(shares, n_pos, n_neg)]
            row = {
                "loss": loss,
                "n_neg": n_neg,
                "share": share,
                "n_pos": n_pos,
                "default_s": float(np.median(own)),
                "default_spread": f"{own.min():.3g}-{own.max():.3g}",
                "ns_per_score": 1e9 * float(np.median(own)) / (n_pos + n_neg),
            }
            if not zero_one[(zero_one["n_pos"] == n_pos) & (zero_one["n_neg"] == n_neg)].empty:
                row.update(_ratio(own, samples["01", "0-1", n_pos, n_neg], "vs_zero_one"))
            others = {
                c: samples[loss, c, n_pos, n_neg]
                for c in grid_cell["curve"].unique()
                if c not in (default, f"{loss}_batch")
            }
            if others:
                best = min(others, key=lambda c: np.median(others[c]))
                row.update(fastest_other=best, **_ratio(own, others[best], "vs_fastest_other"))
            if ("-", "np.argsort", n_pos, n_neg) in samples:
                row.update(_ratio(own, samples["-", "np.argsort", n_pos, n_neg], "vs_argsort"))
            if (loss, f"{loss}_batch", n_pos, n_neg) in samples:
                row["batch_vs_lai"] = _ratio(samples[loss, f"{loss}_batch", n_pos, n_neg], own)
            rows.append(row)
    return pd.DataFrame(rows, columns=SHARE_COLUMNS)


def share_markdown(table):
    """The grid table in Markdown (ratios to 2 decimals, times to 3 significant digits)."""
    rows = [
        [cell(getattr(r, column), spec, "n/a") for column, _, spec in _MARKDOWN]
        for r in table.itertuples(index=False)
    ]
    return markdown_table([header for _, header, _ in _MARKDOWN], rows)


#: the grid table's columns in Markdown: (column, header, format spec)
_MARKDOWN = (
    ("loss", "loss", ""),
    ("n_neg", "N", ""),
    ("share", "P/N", "g"),
    ("n_pos", "P", ""),
    ("default_s", "default (s)", ".3g"),
    ("default_spread", "spread (s)", ""),
    ("ns_per_score", "ns per score", ".3g"),
    ("vs_zero_one", "default / 0-1", ".2f"),
    ("vs_zero_one_spread", "spread", ""),
    ("fastest_other", "fastest other exact", ""),
    ("vs_fastest_other", "default / it", ".2f"),
    ("vs_fastest_other_spread", "spread", ""),
    ("batch_vs_lai", "lai_batch / lai", ".2f"),
    ("vs_argsort", "default / np.argsort", ".2f"),
    ("vs_argsort_spread", "spread", ""),
)


def share_summary(cfg, table):
    """summary.md of a share grid: what was timed and the grid table."""
    text = (
        f"Data: {data_note(cfg)}. N negatives and P = max(1, round(share N)) positives. The "
        'default is `lai(..., method="auto")`; `lai_batch / lai` is the default through '
        "`lai_batch` (one query) over it. Each ratio is the median over rounds of the ratio "
        "of two samples of the same round (the curves run in a shuffled order in each round), "
        f"with its min-max; up to {cfg['repeats']} rounds, fewer where N is large "
        f"(N x rounds <= {SHARE_WORK:.0e}, at least 3), timed by the {cfg['clock']} clock "
        "(cpu: the process's CPU time, all threads). The fastest other exact method is the "
        "one of least median time among bucket, bucket_sort, qs, sort_dc and search (AP). "
        "`np.argsort` sorts the same N + P scores (the order an exact LAI has to learn; "
        "a sort of the values alone gives none)."
    )
    title = "# Loss-augmented inference across the share of positives"
    return "\n\n".join([title, text, share_markdown(table)]) + "\n"


def plot_share(timings, stem):
    """Time per score against P/N, a panel per loss and N; writes `stem`.png and .pdf."""
    med = timings.groupby(["loss", "curve", "method", "n_pos", "n_neg"], sort=False)["seconds"]
    med = med.median().reset_index()
    med["x"] = med["n_pos"] / med["n_neg"]
    med["per_score"] = med["seconds"] / (med["n_pos"] + med["n_neg"])
    losses = [loss for loss in LOSSES if (med["loss"] == loss).any()]
    counts = sorted(med["n_neg"].unique())
    fig = Figure(figsize=(3.6 * len(counts), 3.3 * len(losses)), layout="constrained")
    axes = fig.subplots(len(losses), len(counts), squeeze=False)
    for row, loss in zip(axes, losses):
        for ax, n_neg in zip(row, counts):
            mine = med[med["loss"].isin((loss, *SHARED)) & (med["n_neg"] == n_neg)]
            for (_, curve, method), line in mine.groupby(["loss", "curve", "method"], sort=False):
                style = ":" if method == "batch" else "--" if method == "zero_one" else "-"
                ax.plot(
                    line["x"],
                    line["per_score"],
                    marker="o",
                    markersize=3,
                    label=LABELS.get(curve, curve),
                    color=COLORS.get(method, "k"),
                    linestyle=style,
                    linewidth=2.2 if method == "auto" else 1.0,
                )
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="share of positives P/N",
                ylabel="median seconds per score",
                title=f"{loss}, N = {n_neg:.0e} (synthetic scores)",
            )
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize="xx-small")
    return save_figure(fig, stem)

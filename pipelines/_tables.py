"""Markdown tables readable as plain text, number cells, and labels beside the paper's numbers."""

import math

#: how tables and captions cite the papers whose results they set beside ours
CVPR2018 = "Mohapatra et al., CVPR 2018"
FULL_VERSION = "Mohapatra et al., arXiv:1604.08269 (full version)"


#: the mark of a table row or cell whose training stopped before converging
UNCONVERGED = "†"


def mark(label, unconverged):
    """`label`, followed by the `UNCONVERGED` mark when `unconverged` is true."""
    return f"{label} {UNCONVERGED}" if unconverged else str(label)


def unconverged_note(n, what="training"):
    """The line under a table with marked rows or cells: what the mark means ('' for none)."""
    if not n:
        return ""
    return (
        f"{UNCONVERGED}: {n} {what}{'s' if n > 1 else ''} stopped at the iteration cap "
        "before converging (scikit-learn's ConvergenceWarning); the marked numbers come from "
        "weights short of the optimum."
    )


def markdown_table(header, rows):
    """A Markdown pipe table with padded columns; a '|' escaped and control characters written as
    escapes, so each row stays one line."""
    header = [_text(c) for c in header]
    rows = [[_text(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row):
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"

    return "\n".join(
        [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]
    )


def _text(value):
    text = str(value).replace("|", "\\|")
    return (
        text
        if text.isprintable()
        else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    )


def fmt(value, digits):
    """`value` with `digits` decimals; blank for a missing value (None or NaN)."""
    return cell(value, f".{digits}f", "")


def cell(value, spec="", missing="-"):
    """`value` formatted by `spec`; `missing` for a missing value (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(value, spec)


def ours_label(synthetic):
    """The heading of our column beside the paper's: says when our data are synthetic."""
    return "ours (synthetic)" if synthetic else "ours"


def frame_table(frame, formats):
    """A DataFrame as a Markdown table; `formats` maps a column to a format spec, NaN: '-'."""
    rows = [
        [cell(v, formats.get(c, "")) for c, v in zip(frame.columns, row)]
        for row in frame.itertuples(False)
    ]
    return markdown_table(frame.columns, rows)


def bar_figure(frame, groups, bars, ylabel, title, stem):
    """A table as grouped bars, one group per row (`groups`), one bar per column of `bars` (->
    legend label); written to stem.png and .pdf."""
    from matplotlib.figure import Figure

    from qsrank.pipelines._io import save_figure

    fig = Figure(figsize=(min(12.0, max(6.4, 0.3 * len(frame) * len(bars))), 4.2))
    ax = fig.add_subplot()
    width = 0.8 / len(bars)
    for k, (column, label) in enumerate(bars.items()):
        ax.bar(
            [i + (k - (len(bars) - 1) / 2) * width for i in range(len(frame))],
            frame[column],
            width,
            label=label,
            color=f"C{k}",
        )
    ax.set_xticks(range(len(frame)), [str(g) for g in frame[groups]])
    low = min(float(frame[list(bars)].min().min()), 1.0)
    ax.set_ylim(max(0.0, low - 0.05), 1.0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", framealpha=0.9)
    fig.tight_layout()
    return save_figure(fig, stem)

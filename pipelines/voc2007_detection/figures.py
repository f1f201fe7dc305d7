"""The figure of a run: test AP per class and the LAI time per class of each AP method."""

import numpy as np
from matplotlib.figure import Figure

from qsrank.pipelines._io import save_figure
from qsrank.pipelines.voc2007_detection.config import LAI_NAMES, METHODS


def plot(t5, lt, stem, synthetic):
    """Two panels: test AP per class (0-1 vs AP loss), and total LAI time per class of each
    AP method (log scale). Writes stem.png and stem.pdf."""
    tag = " (synthetic look-alike of VOC2007 detection)" if synthetic else " (VOC2007 box features)"
    panels = 2 if not lt.empty else 1
    fig = Figure(figsize=(11, 3.6 * panels), layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    x = np.arange(len(t5))
    for k, (col, label) in enumerate((("ap_0-1", "0-1 loss"), ("ap_ap", "AP loss"))):
        axes[0].bar(x + (k - 0.5) * 0.4, t5[col], width=0.4, label=label, color=f"C{k}")
    axes[0].set_xticks(x, t5["class"], rotation=45, ha="right", fontsize="small")
    axes[0].set(ylabel="test detection AP (%)", title=f"Table 5: latent SVMs{tag}")
    axes[0].legend(
        fontsize="small", loc="lower right", bbox_to_anchor=(1, 1), ncols=3, frameon=False
    )
    if panels == 2:
        methods = [m for m in METHODS if m in lt.columns]
        xl = np.arange(len(lt))
        width = 0.8 / len(methods)
        for k, m in enumerate(methods):
            axes[1].bar(
                xl + (k - (len(methods) - 1) / 2) * width,
                lt[m],
                width=width,
                label=LAI_NAMES[m],
                color=f"C{k + 2}",
            )
        axes[1].set_xticks(xl, lt["class"], rotation=45, ha="right", fontsize="small")
        axes[1].set(
            yscale="log",
            ylabel="total LAI time in training (s)",
            title=f"AP-SVM training: LAI time per class{tag}",
        )
        axes[1].legend(
            fontsize="small", loc="lower right", bbox_to_anchor=(1, 1), ncols=3, frameon=False
        )
    return save_figure(fig, stem)

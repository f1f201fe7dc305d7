"""VOC2011 action classification (Mohapatra et al., CVPR 2018, Section 4.1): Tables 1-4 and
Figures 2-3.

Per action class, :class:`qs.estimators.RankSVM` is trained on the trainval person boxes with
every method the paper compares, named as the paper names them (``0-1``; ``ap``, ``ap_qs``,
``ap_search``; ``ndcg``, ``ndcg_qs``; plus our ``ap_auto`` / ``ndcg_auto``), and evaluated on
the test boxes by VOC devkit AP and NDCG, difficult boxes left out. The exact methods of one
loss give the same weights; only their LAI time differs. ``SPEC`` writes Tables 1-4;
:func:`figure_run` one panel of Figures 2-3 (class phoning, total LAI time per training as
the negatives, positives or total grow). Both resume unit by unit.

Data: ``synthetic`` (the seeded look-alike of :func:`qs.data.make_voc2011_actions`, never
reported as the paper's data) or ``{trainval: PATH, test: PATH}`` (poselet list files or
.npz caches of ``qsrank load poselet --out``).

The package: `config` (the schema), `data`, `train` (Tables 1-4's units and `SPEC`), `tables`,
`figures` (Figures 2-3); and `replay`, the benchmark of every exact method on the score
vectors of these trainings.
"""

from pipelines import _runner
from pipelines.voc2011_actions.config import FIGURE_PRESETS, figure_methods, figure_sizes
from pipelines.voc2011_actions.data import load_data
from pipelines.voc2011_actions.figures import figure_run, redraw
from pipelines.voc2011_actions.tables import ratios, report
from pipelines.voc2011_actions.train import SPEC, cross_validate, train_one

__all__ = ["FIGURE_PRESETS", "SPEC", "cross_validate", "figure_methods", "figure_run",
           "figure_sizes", "load_config", "load_data", "ratios", "redraw", "report",
           "train_one"]


def load_config(path=None, sets=None, **overrides):
    """The config of `path` with `sets` (`--set` keys) laid over it, then the non-None
    `overrides`, checked; `overrides` may hold a partial ``figures`` mapping, whose None
    entries are dropped too."""
    if isinstance(overrides.get("figures"), dict):
        overrides["figures"] = {k: v for k, v in overrides["figures"].items() if v is not None}
    return _runner.load_config(SPEC, path, sets, **overrides)

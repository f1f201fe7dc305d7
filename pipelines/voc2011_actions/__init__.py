"""VOC2011 action classification (Mohapatra et al., CVPR 2018, Section 4.1): Tables 1-4 and Figures
2-3.

For each action class, the ranking structured SVM (:class:`qs.estimators.RankSVM`) is trained
on the trainval person boxes with every method the paper compares, named as the paper names
them: ``0-1`` (binary hinge SVM), ``ap`` (AP loss, LAI of Yue et al.), ``ap_qs`` (AP, the
paper's quicksort-flavoured LAI), ``ap_search`` (AP, the NIPS 2014 binary search), ``ndcg``
(NDCG loss, LAI of Chakrabarti et al.), ``ndcg_qs`` (NDCG, quicksort-flavoured), plus our
fastest exact method ``ap_auto`` / ``ndcg_auto``. All exact methods of one loss give the
same weights; only their LAI time differs. Each training records its LAI calls and time,
iterations and convergence, and is evaluated on the test boxes by VOC devkit AP and NDCG,
"difficult" boxes (label 0) left out of both.

- :func:`run` writes Tables 1-4 (LAI time in total and per call, test AP and NDCG per class,
  the paper's numbers beside ours) into a run directory. Each finished class x method is
  kept as ``runs/<class>__<method>.json``; running again into the same directory resumes,
  retraining only what is missing or was trained under other settings (or all, with
  ``force``).
- :func:`figure_run` writes one of the scaling experiments of Figures 2-3 (class phoning:
  negatives varied at 227 positives, positives varied at 200 negatives, or the total at
  1:10), total LAI time per training against the varied count, resumable the same way;
  several varies (and both losses) may share one directory, and its figure shows them all.

Data: ``data: synthetic`` (the seeded look-alike of :func:`qs.data.make_voc2011_actions`,
never reported as the paper's data), or ``data: {trainval: PATH, test: PATH}`` where each
PATH is a poselet list file (feature files beside it or in ``features_dir``) or an .npz cache
written by ``qsrank load poselet --out``. Numba is warmed up on every LAI method before any
timed training, so compilation never lands in an LAI time.

The package: `config` (the schema), `data`, `train` (the units of Tables 1-4 and the
experiment's declaration `SPEC`), `tables`, `figures` (Figures 2-3); and `replay`, the
benchmark of every exact method on the score vectors of these trainings.
"""

from pipelines import _runner
from pipelines.voc2011_actions.config import (
    EXPERIMENT,
    FIGURE_PRESETS,
    FIXED_C,
    METHODS,
    Config,
    figure_methods,
    figure_sizes,
    selected_methods,
)
from pipelines.voc2011_actions.data import class_data, data_note, load_data
from pipelines.voc2011_actions.figures import figure_run, redraw
from pipelines.voc2011_actions.tables import ratios, report
from pipelines.voc2011_actions.train import SPEC, cross_validate, train_one

__all__ = ["EXPERIMENT", "FIGURE_PRESETS", "FIXED_C", "METHODS", "SPEC", "Config",
           "class_data", "cross_validate", "data_note", "figure_methods", "figure_run",
           "figure_sizes", "load_config", "load_data", "ratios", "redraw", "report",
           "selected_methods",
           "train_one"]


def load_config(path=None, sets=None, **overrides):
    """The config of `path` with `sets` (`--set` keys) laid over it, then the non-None
    `overrides`, checked; `overrides` may hold a partial ``figures`` mapping, whose None
    entries are dropped too."""
    if isinstance(overrides.get("figures"), dict):
        overrides["figures"] = {k: v for k, v in overrides["figures"].items() if v is not None}
    return _runner.load_config(SPEC, path, sets, **overrides)

"""VOC2011 action classification (Mohapatra et al., CVPR 2018, Section 4.1): Tables 1-4
(``SPEC``: class x method trainings of :class:`qs.estimators.RankSVM`) and Figures 2-3
(``FIGURES``: the total LAI time of trainings on one class's boxes as the counts grow)."""

from qsrank.pipelines.voc2011_actions.config import FIGURE_PRESETS, figure_methods, figure_sizes
from qsrank.pipelines.voc2011_actions.data import load_data
from qsrank.pipelines.voc2011_actions.figures import SPEC as FIGURES
from qsrank.pipelines.voc2011_actions.figures import redraw
from qsrank.pipelines.voc2011_actions.tables import ratios
from qsrank.pipelines.voc2011_actions.train import SPEC, cross_validate, train_one

__all__ = [
    "FIGURES",
    "FIGURE_PRESETS",
    "SPEC",
    "cross_validate",
    "figure_methods",
    "figure_sizes",
    "load_data",
    "ratios",
    "redraw",
    "train_one",
]

"""VOC2007 weakly supervised detection with the latent AP-SVM (Mohapatra et al., CVPR 2018,
Section 4.2): Table 5 and the LAI time of its training (docs/experiments/voc2007_detection.md).
Modules: `config`, `data`, `train` (the units and `SPEC`), `lockstep`, `tables`, `figures`."""

from qsrank.pipelines.voc2007_detection.config import (
    AP_METHODS,
    CLASS_NAMES,
    LOSSES,
    METHODS,
    PAPER_AP,
)
from qsrank.pipelines.voc2007_detection.data import holdout, load_data
from qsrank.pipelines.voc2007_detection.tables import ap_table, redraw, write_tables
from qsrank.pipelines.voc2007_detection.train import SPEC, choose_C, detection_ap, train_one

__all__ = [
    "AP_METHODS",
    "CLASS_NAMES",
    "LOSSES",
    "METHODS",
    "PAPER_AP",
    "SPEC",
    "ap_table",
    "choose_C",
    "detection_ap",
    "holdout",
    "load_data",
    "redraw",
    "train_one",
    "write_tables",
]

"""VOC2007 weakly supervised detection with the latent AP-SVM (Mohapatra et al., CVPR 2018, Section
4.2): Table 5 and the LAI time of its training.

For each object class, the latent structured SVM of :class:`qs.estimators.LatentRankSVM`
is trained on the trainval images (each a bag of candidate boxes, the object's box latent)
with every method compared, named as in Tables 1-4: ``0-1`` (the latent 0-1 SVM, the
baseline), ``ap`` (the latent AP-SVM with the LAI of Yue et al.), ``ap_qs`` (the paper's
quicksort-flavoured LAI) and ``ap_auto`` (our default, the fastest exact method). The three
AP methods are exact, so they train the same weights; the run checks that and says so, and
only their LAI time differs.

On the test images every box is scored, the boxes of each image are non-maximum suppressed
(``nms_threshold``, R-CNN's 0.3 by default), and the surviving boxes of all images are the
class's detections for the VOC2007 detection AP (:func:`qs.metrics.voc_detection_ap`).

:func:`run` writes ``table5.md`` (test AP per class of the latent 0-1 SVM and AP-SVM beside
the paper's Table 5, and the total LAI time per class with each AP method beside the paper's
7.623 s and 0.5214 s), ``results.csv`` (the AP table), ``timings.csv`` (one row per class x
method), ``figure.png``/``.pdf``, ``config.yaml`` and ``provenance.json``. Each finished
class x method is kept as ``runs/<class>__<method>.json`` (its weights beside it as
``.npz``); running again into the same directory resumes.

Data: one function, :func:`load_data`, gives both splits as :class:`qs.data.bags.BagSet`: ``data:
synthetic`` (the seeded look-alike of :func:`qs.data.voc2007.make_voc2007_detection`, sized by
``synthetic:``; never reported as the paper's data), ``data: {trainval: DIR, test: DIR}``,
directories of R-CNN per-image ``.mat`` caches (:func:`qs.data.load_rcnn_cache`), or
``store: {trainval: PATH, test: PATH}``, two box-feature stores written by ``qsrank load
cnn`` (:func:`qs.data.store.open_store`). A store whose features take at most
``in_memory_max_gb`` as float32 is loaded in memory; a larger one is read block by block as a
Dask array, in training (:class:`qs.estimators.LatentRankSVM` on padded bags) and in
evaluation (:func:`qs.detection.score_bags`), on the threaded scheduler or on the
``dask.distributed`` cluster that ``scheduler:`` names. A store's labels and ground truth are
used as they are.

Both losses start from the same initial boxes (``init``) and take C by the same rule: a list of
C values is a grid, and each class and loss takes the value whose model, trained on a
stratified ``1 - validation_fraction`` of trainval, gives the best detection AP on the rest;
the model is then trained on all of trainval with it.

The package: `config` (the names and the schema), `data`, `train` (the units of Table 5 and
the experiment's declaration `SPEC`), `tables` and `figures`.
"""

from qsrank.pipelines.voc2007_detection.config import (
    AP_METHODS,
    C_GRID,
    CLASS_NAMES,
    EXPERIMENT,
    GRID_METHOD,
    INFERENCES,
    INITS,
    LOSSES,
    METHODS,
    PAPER_AP,
    PAPER_LAI_S,
    RATIOS,
    SPLITS,
    WORKING_SET,
    Config,
    Synthetic,
    selected_methods,
)
from qsrank.pipelines.voc2007_detection.data import (
    check_class,
    data_note,
    holdout,
    is_synthetic,
    load_data,
)
from qsrank.pipelines.voc2007_detection.figures import plot
from qsrank.pipelines.voc2007_detection.tables import (
    TIMING_COLUMNS,
    ap_table,
    lai_table,
    redraw,
    report,
    results_table,
    timings_frame,
    write_tables,
)
from qsrank.pipelines.voc2007_detection.train import (
    SPEC,
    choose_C,
    detection_ap,
    load_checked,
    run_unit,
    settings,
    train_one,
    units,
    warm_up,
)

__all__ = [
    "AP_METHODS",
    "CLASS_NAMES",
    "C_GRID",
    "EXPERIMENT",
    "GRID_METHOD",
    "INFERENCES",
    "INITS",
    "LOSSES",
    "METHODS",
    "PAPER_AP",
    "PAPER_LAI_S",
    "RATIOS",
    "SPEC",
    "SPLITS",
    "TIMING_COLUMNS",
    "WORKING_SET",
    "Config",
    "Synthetic",
    "ap_table",
    "check_class",
    "choose_C",
    "data_note",
    "detection_ap",
    "holdout",
    "is_synthetic",
    "lai_table",
    "load_checked",
    "load_data",
    "plot",
    "redraw",
    "report",
    "results_table",
    "run_unit",
    "selected_methods",
    "settings",
    "timings_frame",
    "train_one",
    "units",
    "warm_up",
    "write_tables",
]

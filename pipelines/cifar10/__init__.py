"""CIFAR-10 (Mohapatra et al., CVPR 2018, Section 4.3): the PL-CNN trained for the 0-1, AP and NDCG
losses.

The network (:class:`qs.nets.PLCNN`) is warm-started as in the paper, by a few epochs of
Adadelta (cross-entropy epochs, then multi-class hinge epochs), and from that one warm start
every method is trained on its structured hinge, one ranking per class per mini-batch
(``qs.torch.rank_hinge_loss`` on the 10 x batch class scores), either end to end by SGD
(``training: end_to_end``, the default) or by the paper's layer-wise SVM training
(``training: layerwise``: per layer, last to first, the activation pattern fixed, a
proximal structured SVM solved by block-coordinate Frank-Wolfe over the mini-batches). The
methods: ``zero_one`` (the binary hinge of each class), ``ap_yue`` and ``ap_qs`` (AP loss;
LAI of Yue et al. or the paper's quicksort-flavoured LAI), and ``ndcg_chakrabarti`` and
``ndcg_qs`` (NDCG loss); ``ap_auto`` and ``ndcg_auto`` (our fastest exact LAI) on request.
The exact methods of one loss give the same subgradients, so they train the same network;
only their LAI time differs. Batch norm is frozen (running statistics, an affine map)
during the rank-loss training, as in the paper.

Each phase (``warm_cross_entropy``, ``warm_hinge``, then each method) keeps a checkpoint per
epoch (layer-wise: per layer solved) in ``checkpoints/<phase>.pt``; running again into the
same directory resumes, skipping finished phases unless ``force``. Training time counts the
steps only (evaluation apart); LAI time is the time inside ``rank_hinge_loss``'s forward
(the exact LAI of the 10 queries and its bookkeeping), numba compiled beforehand.

Data: ``data: null`` is digits-as-CIFAR (scikit-learn's digits upsampled to 32x32x3, no
download), never reported as CIFAR-10; ``data: PATH`` reads the CIFAR-10 python or binary
batches (:func:`qs.data.cifar10.load_cifar10`). Images are normalised per channel by the
training split's mean and standard deviation.

The package: `config` (the names, presets and schema), `phases` (the training of one phase),
`train` (the units, the run's outputs and the experiment's declaration `SPEC`), `tables` and
`figures`.
"""

from pipelines.cifar10.config import (
    DEVICES,
    EVAL_BATCH,
    EXPERIMENT,
    INFERENCES,
    LOSSES,
    METHODS,
    PAPER_HOURS,
    PAPER_MAP,
    PAPER_NDCG,
    PRESETS,
    TRAININGS,
    WARM_OPTIMIZERS,
    WARM_PHASES,
    Config,
    Layerwise,
    Split,
    WarmStart,
)
from pipelines.cifar10.figures import plot, redraw
from pipelines.cifar10.phases import evaluate, train_phase, warm_up_lai
from pipelines.cifar10.tables import report, results_frame, summary
from pipelines.cifar10.train import (
    SPEC,
    load_data,
    model_with,
    prepare,
    run_unit,
    settings,
    units,
    warm_up,
    write,
)

__all__ = ["DEVICES", "EVAL_BATCH", "EXPERIMENT", "INFERENCES", "LOSSES", "METHODS",
           "PAPER_HOURS", "PAPER_MAP", "PAPER_NDCG", "PRESETS", "SPEC", "TRAININGS",
           "WARM_OPTIMIZERS", "WARM_PHASES", "Config", "Layerwise", "Split", "WarmStart",
           "evaluate", "load_data", "model_with", "plot", "prepare", "redraw",
           "report", "results_frame", "run_unit", "settings", "summary", "train_phase",
           "units", "warm_up", "warm_up_lai", "write"]

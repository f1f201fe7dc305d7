"""CIFAR-10 (Mohapatra et al., CVPR 2018, Section 4.3): the PL-CNN trained for the 0-1, AP and
NDCG losses.

One warm start (Adadelta: cross-entropy, then multi-class hinge epochs) is shared by every
method, each then trained on its structured hinge, one ranking per class per mini-batch
(``qs.torch.rank_hinge_loss``), end to end by SGD or by the paper's layer-wise SVM training.
The exact methods of one loss train the same network; only their LAI time differs. Each
phase keeps a checkpoint per epoch (layer-wise: per layer) and resumes from it. ``data:
null`` is digits-as-CIFAR (no download), never reported as CIFAR-10; ``data: PATH`` reads the
CIFAR-10 batches.

The package: `config` (names, presets, schema), `phases` (one phase's training), `train`
(units, outputs, the declaration `SPEC`), `tables` and `figures`.
"""

from pipelines.cifar10.figures import plot, redraw
from pipelines.cifar10.tables import report
from pipelines.cifar10.train import SPEC, load_data

__all__ = ["SPEC", "load_data", "plot", "redraw", "report"]

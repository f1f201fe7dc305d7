"""SoDeep (Engilberge et al., CVPR 2019): a learned differentiable sorter, frozen inside the
AP and Spearman losses.

A sorter maps a vector of d scores to their normalised ranks. The convention is the paper's:
rank 1 is the highest score and ranks are divided by d, so the exact rank of score i is
``r_i = (1 + #{j : s_j > s_i}) / d`` in {1/d, ..., 1} (the top score gets 1/d, the lowest 1).
Tied scores all get the largest rank of their group, ``#{j : s_j >= s_i} / d`` (the paper
breaks ties arbitrarily; with this choice AP from exact ranks equals scikit-learn's AP even
with ties).

Both networks see each score vector standardised (shifted to mean 0 and scaled to unit
standard deviation, `standardise`): the map is increasing, so the ranks are unchanged,
and the network meets every vector on one scale whatever the units of the scores (the paper
feeds raw scores). Their last affine layer gives a logit per position, mapped into the
range of the ranks by ``1/d + (1 - 1/d) sigmoid(logit)`` (the paper's LSTM ends on the affine
layer; its released CNN ends on a sigmoid).

- `LSTMSorter`: a 2-layer bidirectional LSTM over the scores and a 1-D convolution of
  kernel 1 on top (the same affine map at every position) giving each position its logit.
- `CNNSorter`: 8 blocks of 1-D convolution + batch norm + ReLU over the scores, then a
  convolution whose kernel spans the whole vector and whose d output channels are the logits.
- `HandcraftedSorter`: the paper's untrained baseline, one plus a sum of sigmoids of
  pairwise differences.

Sorters are trained once on synthetic score vectors (`synthetic_scores`) with an L1
loss against the exact ranks and Adam (`train_sorter`), then frozen. A trained sorter
is tied to its length d (the paper trains one per length and neither pads nor chunks): a
score vector of another length is an error. The package ships trained checkpoints at
`DEFAULT_LENGTH` (`load_sorter`). Needs the ``[torch]`` extra.

Modules: `qs.surrogates.sodeep.sorters` (the networks and the exact ranks),
`qs.surrogates.sodeep.training`, `qs.surrogates.sodeep.checkpoints`,
`qs.surrogates.sodeep.losses`; every public name is importable from here.
"""

from qs.surrogates.sodeep.checkpoints import (
    FORMAT,
    FORMAT_VERSION,
    load_sorter,
    shipped_checkpoint,
    sorter_from_state,
    sorter_state,
)
from qs.surrogates.sodeep.losses import sodeep_ap_loss, sodeep_spearman_loss
from qs.surrogates.sodeep.sorters import (
    DEFAULT_LENGTH,
    KINDS,
    SIZES,
    SORTERS,
    CNNSorter,
    HandcraftedSorter,
    LSTMSorter,
    bounded_ranks,
    build_sorter,
    exact_ranks,
    n_parameters,
    standardise,
)
from qs.surrogates.sodeep.training import (
    CHECK_VECTORS,
    LEARNING_RATES,
    PAPER_L1,
    TEST_SEED,
    rank_l1_error,
    synthetic_scores,
    train_sorter,
)

__all__ = [
    "CHECK_VECTORS",
    "DEFAULT_LENGTH",
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "LEARNING_RATES",
    "PAPER_L1",
    "SIZES",
    "SORTERS",
    "TEST_SEED",
    "CNNSorter",
    "HandcraftedSorter",
    "LSTMSorter",
    "bounded_ranks",
    "build_sorter",
    "exact_ranks",
    "load_sorter",
    "n_parameters",
    "rank_l1_error",
    "shipped_checkpoint",
    "sodeep_ap_loss",
    "sodeep_spearman_loss",
    "sorter_from_state",
    "sorter_state",
    "standardise",
    "synthetic_scores",
    "train_sorter",
]

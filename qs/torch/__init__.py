"""Ranking losses for torch on exact loss-augmented inference (the ``[torch]`` extra;
``import qs`` never imports torch).

:mod:`qs.torch.losses` holds the structured hinge of AP, NDCG and 0-1 over score tensors,
:func:`rank_hinge_loss` and :class:`RankHingeLoss`, re-exported here. Beside it:
:mod:`qs.torch.retrieval` (the loss over embeddings and class labels),
:mod:`qs.torch.memory` (against a memory bank of past embeddings),
:mod:`qs.torch.distributed` (over the global batch of a process group),
:mod:`qs.torch.dlm` (direct loss minimization), :mod:`qs.torch.layerwise` (layer-wise SVM
training of a network) and :mod:`qs.torch.checks` (the input checks they share).
"""

try:
    import torch  # noqa: F401
except ImportError as err:  # name the extra, not only the missing module
    raise ImportError(
        "qs.torch needs PyTorch: install the [torch] extra (pip install -e '.[torch]' from a clone)"
    ) from err

from qs.torch.losses import RankHingeLoss, rank_hinge_loss

__all__ = ["RankHingeLoss", "rank_hinge_loss"]

"""Ranking losses for torch on exact loss-augmented inference (the ``[torch]`` extra;
``import qs`` never imports torch).

`qs.torch.losses` holds the structured hinge of AP, NDCG and 0-1 over score tensors,
`rank_hinge_loss` and `RankHingeLoss`, re-exported here. Beside it:
`qs.torch.retrieval` (the loss over embeddings and class labels),
`qs.torch.memory` (against a memory bank of past embeddings),
`qs.torch.distributed` (over the global batch of a process group),
`qs.torch.dlm` (direct loss minimization), `qs.torch.layerwise` (layer-wise SVM
training of a network) and `qs.torch.checks` (the input checks they share).
"""

try:
    import torch  # noqa: F401
except ImportError as err:  # name the extra, not only the missing module
    raise ImportError(
        "qs.torch needs PyTorch: install the [torch] extra (pip install -e '.[torch]' from a clone)"
    ) from err

from qs.torch.losses import RankHingeLoss, rank_hinge_loss

__all__ = ["RankHingeLoss", "rank_hinge_loss"]

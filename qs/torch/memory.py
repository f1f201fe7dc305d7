"""Cross-batch memory (Wang et al., CVPR 2020) for the exact rank losses.

:class:`CrossBatchMemory` keeps the embeddings and labels of the last ``size`` samples it has
seen (detached, first in first out) and ranks each query of a batch against the other
samples of the batch and every sample in memory: rankings of ``B - 1 + M`` samples per
query, found by exact inference as in :func:`qs.torch.retrieval.retrieval_loss`. The batch
is stored after its loss is made, so a sample is never its own positive. With cosine
similarity the memory holds the normalised embeddings, so a call normalises only its batch.
The memory is a pair of module buffers: it follows ``.to(device)`` and the state dict. A
store writes new buffers rather than the old ones in place (a copy of the memory per call),
so a loss may be backpropagated after later calls, as with gradient accumulation.
"""

import torch

from qs.torch import rank_hinge_loss
from qs.torch.retrieval import _check_options, check_embeddings, off_diagonal

__all__ = ["CrossBatchMemory"]


class CrossBatchMemory(torch.nn.Module):
    """Rank each batch against itself and the last ``size`` embeddings seen.

    Parameters
    ----------
    size : int > 0, the number of past samples kept.
    loss, similarity, method, reduction : as :func:`qs.torch.retrieval.retrieval_loss`.

    ``forward(embeddings (B, d), labels (B,))`` returns the loss and then stores the batch;
    every call must give the same embedding size ``d``. :meth:`reset` empties the memory.
    """

    def __init__(self, size, loss="ap", similarity="cosine", method="auto", reduction="mean"):
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive integer; got {size!r}.")
        _check_options(loss, similarity, reduction)
        self.size, self.loss, self.similarity = size, loss, similarity
        self.method, self.reduction = method, reduction
        self.register_buffer("memory", torch.empty(0, 0))
        self.register_buffer("memory_labels", torch.empty(0, dtype=torch.int64))
        self.filled = 0  # samples in memory
        self.next = 0  # where the next one goes

    def forward(self, embeddings, labels):
        embeddings, labels, _, _ = check_embeddings(embeddings, labels)
        if self.memory.numel() and self.memory.shape[1] != embeddings.shape[1]:
            raise ValueError(f"the memory holds embeddings of size {self.memory.shape[1]}; got "
                             f"a batch of size {embeddings.shape[1]} (shape "
                             f"{tuple(embeddings.shape)}). Call reset() to start over.")
        if self.similarity == "cosine":
            embeddings = torch.nn.functional.normalize(embeddings, dim=1)
        scores = off_diagonal(embeddings @ embeddings.T)  # the batch, each query left out
        positive = off_diagonal(labels[:, None] == labels[None, :])
        if self.filled:
            stored = self.memory[: self.filled].to(embeddings.dtype)
            scores = torch.cat([scores, embeddings @ stored.T], dim=1)
            positive = torch.cat([positive, labels[:, None] == self.memory_labels[None, :]
                                  [:, : self.filled]], dim=1)
        value = rank_hinge_loss(scores, positive, self.loss, self.method, self.reduction)
        self._store(embeddings.detach(), labels)
        return value

    def reset(self):
        """Forget every stored sample (and the embedding size)."""
        self.memory = torch.empty(0, 0, device=self.memory.device)
        self.memory_labels = torch.empty(0, dtype=torch.int64, device=self.memory.device)
        self.filled = self.next = 0

    def stored(self):
        """(embeddings, labels) in memory, oldest first (normalised for cosine similarity)."""
        if self.filled < self.size:  # not yet wrapped: written from the start
            return self.memory[: self.filled], self.memory_labels[: self.filled]
        order = torch.arange(self.next, self.next + self.size) % self.size
        return self.memory[order], self.memory_labels[order]

    def _store(self, embeddings, labels):
        if not self.memory.numel():
            self.memory = embeddings.new_zeros((self.size, embeddings.shape[1]))
            self.memory_labels = labels.new_zeros(self.size, dtype=torch.int64)
        embeddings, labels = embeddings[-self.size :], labels[-self.size :]
        at = (self.next + torch.arange(len(labels), device=labels.device)) % self.size
        # out of place: a graph not yet backpropagated may hold the old memory
        self.memory = self.memory.index_copy(0, at, embeddings.to(self.memory.dtype))
        self.memory_labels = self.memory_labels.index_copy(0, at, labels.to(torch.int64))
        self.next = (self.next + len(labels)) % self.size
        self.filled = min(self.size, self.filled + len(labels))

    def extra_repr(self):
        return (f"size={self.size}, loss={self.loss!r}, similarity={self.similarity!r}, "
                f"method={self.method!r}, reduction={self.reduction!r}")

"""Cross-batch memory (Wang et al., CVPR 2020) for the exact rank losses.

`CrossBatchMemory` keeps the embeddings and labels of the last ``size`` samples it has
seen (detached, first in first out) and ranks each query of a batch against the other
samples of the batch and every sample in memory: rankings of ``B - 1 + M`` samples per
query, found by exact inference as in `qs.torch.retrieval.retrieval_loss`. The batch
is stored after its loss is made (at the next call), so a sample is never its own
positive. With cosine similarity the memory holds the normalised embeddings, so a call
normalises only its batch. The memory is a pair of module buffers (and the fill count as
extra state): it follows ``.to(device)`` and the state dict. A batch is written over the
oldest samples in place: the backward of a call reads nothing of the memory (the gradient's
product with it is made in the forward pass, `qs.torch.retrieval.ranked_against`), so
two calls before one backward (gradient accumulation) each keep the gradient of the memory
they were ranked against. The module also keeps, from call to call, the work arrays of the
(B, M) similarities and positives, which are not part of its state.
"""

import torch

from qs.torch.checks import check_embeddings, check_retrieval_options
from qs.torch.losses import hinge_solve, rank_hinge_loss
from qs.torch.retrieval import off_diagonal, ranked_against

__all__ = ["CrossBatchMemory"]


class CrossBatchMemory(torch.nn.Module):
    """Rank each batch against itself and the last ``size`` embeddings seen.

    Parameters
    ----------
    size : int
        The number of past samples kept (> 0).
    loss, similarity, method, reduction : str
        As in `qs.torch.retrieval.retrieval_loss`.

    Notes
    -----
    ``forward(embeddings (B, d), labels (B,))`` returns the loss and then stores the batch;
    every call must give the same embedding size ``d``. `reset` empties the memory.

    Examples
    --------
    >>> memory = CrossBatchMemory(3)
    >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> memory(emb[:2], [0, 1])  # no other sample of a class yet: no ranking
    tensor(0.)
    >>> memory(emb[2:], [0, 1])  # ranked against the batch and the first one, stored
    tensor(1.5515)
    """

    def __init__(self, size, loss="ap", similarity="cosine", method="auto", reduction="mean"):
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive integer; got {size!r}.")
        check_retrieval_options(loss, similarity, reduction)
        hinge_solve(loss, method)  # an unknown method, or one that does not support the loss
        self.size, self.loss, self.similarity = size, loss, similarity
        self.method, self.reduction = method, reduction
        self.register_buffer("memory", torch.empty(0, 0))
        self.register_buffer("memory_labels", torch.empty(0, dtype=torch.int64))
        self.filled = 0  # samples in memory
        self.next = 0  # where the next one goes
        self._pending = None  # the last batch, stored at the next call
        self._work = {}  # ranked_against's work arrays

    def forward(self, embeddings, labels):
        """The loss of the batch ranked against itself and the memory; the batch is then kept.

        Parameters
        ----------
        embeddings : torch.Tensor of shape (B, d)
            The batch's embeddings, of the memory's size ``d``.
        labels : torch.Tensor or array-like of shape (B,)
            Their classes.

        Returns
        -------
        torch.Tensor
            The reduced loss.

        Raises
        ------
        ValueError
            On bad embeddings or labels, or a size other than the memory's.

        Examples
        --------
        >>> memory = CrossBatchMemory(3)
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> _ = memory(emb[:2], [0, 1])
        >>> memory(emb[2:], [1, 0])  # ranked against the batch and the memory
        tensor(1.5494)
        """
        embeddings, labels, _, _ = check_embeddings(embeddings, labels)
        self._flush()
        if self.memory.numel() and self.memory.shape[1] != embeddings.shape[1]:
            raise ValueError(
                f"the memory holds embeddings of size {self.memory.shape[1]}; got "
                f"a batch of size {embeddings.shape[1]} (shape "
                f"{tuple(embeddings.shape)}). Call reset() to start over."
            )
        if self.similarity == "cosine":
            embeddings = torch.nn.functional.normalize(embeddings, dim=1)
        scores = off_diagonal(embeddings @ embeddings.T)  # the batch, each query left out
        positive = off_diagonal(labels[:, None] == labels[None, :])
        if not self.filled:
            value = rank_hinge_loss(
                scores, positive, self.loss, self.method, self.reduction, dim=-1
            )
        else:
            value = ranked_against(
                embeddings,
                labels,
                self.memory[: self.filled].to(embeddings.dtype),
                self.memory_labels[: self.filled],
                hinge_solve(self.loss, self.method),
                self.reduction,
                lead=scores,
                lead_positive=positive,
                work=self._work,
            )
        self._pending = (embeddings.detach(), labels)
        return value

    def reset(self):
        """Forget every stored sample (and the embedding size).

        Examples
        --------
        >>> memory = CrossBatchMemory(3)
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> _ = memory(emb[:2], [0, 1])
        >>> memory.reset()
        >>> memory.stored()[1].tolist(), memory.filled
        ([], 0)
        """
        self.memory = torch.empty(0, 0, device=self.memory.device)
        self.memory_labels = torch.empty(0, dtype=torch.int64, device=self.memory.device)
        self.filled = self.next = 0
        self._pending = None

    def stored(self):
        """The samples in memory, oldest first.

        Returns
        -------
        embeddings : torch.Tensor of shape (filled, d)
            Normalised for cosine similarity.
        labels : torch.Tensor of shape (filled,)
            Their classes.

        Examples
        --------
        >>> memory = CrossBatchMemory(3)
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> _ = memory(emb[:2], [0, 1])
        >>> _ = memory(emb[2:], [0, 1])
        >>> embeddings, labels = memory.stored()  # the last 3: the oldest dropped
        >>> embeddings.shape, labels.tolist()
        (torch.Size([3, 2]), [1, 0, 1])
        """
        self._flush()
        if self.filled < self.size:  # not yet wrapped: written from the start
            return self.memory[: self.filled], self.memory_labels[: self.filled]
        order = torch.arange(self.next, self.next + self.size) % self.size
        return self.memory[order], self.memory_labels[order]

    def _flush(self):
        """Store the last batch."""
        if self._pending is not None:
            embeddings, labels = self._pending
            self._pending = None
            self._store(embeddings, labels)

    def _store(self, embeddings, labels):
        if not self.memory.numel():
            self.memory = embeddings.new_zeros((self.size, embeddings.shape[1]))
            self.memory_labels = labels.new_zeros(self.size, dtype=torch.int64)
        embeddings, labels = embeddings[-self.size :], labels[-self.size :]
        at = (self.next + torch.arange(len(labels), device=self.memory.device)) % self.size
        self.memory.index_copy_(0, at, embeddings.to(self.memory))
        self.memory_labels.index_copy_(0, at, labels.to(self.memory_labels))
        self.next = (self.next + len(labels)) % self.size
        self.filled = min(self.size, self.filled + len(labels))

    def __getstate__(self):
        """Pickled (``torch.save`` of the module, ``copy.deepcopy``) without the work arrays."""
        return {**self.__dict__, "_work": {}}

    def get_extra_state(self):
        """The memory's fill and write position, saved in its ``state_dict``.

        Returns
        -------
        dict
            ``filled`` (samples in memory) and ``next`` (where the next one goes).

        Examples
        --------
        >>> memory = CrossBatchMemory(3)
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> _ = memory(emb, [0, 1, 0, 1])
        >>> memory.get_extra_state()  # stored at the next call or save
        {'filled': 0, 'next': 0}
        >>> memory.stored()[0].shape, memory.get_extra_state()
        (torch.Size([3, 2]), {'filled': 3, 'next': 0})
        """
        return {"filled": self.filled, "next": self.next}

    def set_extra_state(self, state):
        """Restore the fill and write position of a saved ``state_dict``.

        Parameters
        ----------
        state : dict
            As `get_extra_state` gives it.

        Examples
        --------
        >>> memory = CrossBatchMemory(3)
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> _ = memory(emb, [0, 1, 0, 1])
        >>> saved = memory.state_dict()
        >>> restored = CrossBatchMemory(3)
        >>> _ = restored.load_state_dict(saved)
        >>> restored.get_extra_state()
        {'filled': 3, 'next': 0}
        """
        self.filled, self.next = int(state["filled"]), int(state["next"])

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self._flush()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("memory", "memory_labels"):  # the saved shapes, not the current ones
            if prefix + name in state_dict:
                setattr(
                    self,
                    name,
                    torch.empty_like(state_dict[prefix + name], device=getattr(self, name).device),
                )
        self._pending = None
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self):
        """The module's options, as its ``repr`` shows them.

        Returns
        -------
        str
            The options.

        Examples
        --------
        >>> CrossBatchMemory(128)
        CrossBatchMemory(size=128, loss='ap', similarity='cosine', method='auto', reduction='mean')
        """
        return (
            f"size={self.size}, loss={self.loss!r}, similarity={self.similarity!r}, "
            f"method={self.method!r}, reduction={self.reduction!r}"
        )

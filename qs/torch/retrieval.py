"""Rank losses over embeddings, in the form metric-learning code uses them.

``retrieval_loss(embeddings, labels)`` takes a batch of embeddings and their class labels,
makes the similarity of every pair (cosine or dot product), and ranks, for every sample as a
query, the other samples of the batch: those of its class are its positives. The rankings
are those of :func:`qs.torch.rank_hinge_loss` with the query itself left out, so the loss
is the exact structured hinge (AP or NDCG) averaged over the queries, and its gradient flows
through the similarities to the embeddings. With ``ref_emb`` and ``ref_labels`` (as
pytorch-metric-learning's ``ref_emb``) the queries are ranked against that other set
instead, nothing masked.
"""

import torch

from qs.torch import REDUCTIONS, rank_hinge_loss

__all__ = ["RetrievalLoss", "SIMILARITIES", "off_diagonal", "retrieval_loss", "similarities"]

SIMILARITIES = ("cosine", "dot")


def similarities(queries, refs, similarity="cosine"):
    """(Q, n) similarities of each query embedding (Q, d) to each reference (n, d)."""
    if similarity == "cosine":
        queries = torch.nn.functional.normalize(queries, dim=1)
        refs = torch.nn.functional.normalize(refs, dim=1)
    return queries @ refs.T


def retrieval_loss(embeddings, labels, ref_emb=None, ref_labels=None, *, loss="ap",
                   similarity="cosine", method="auto", reduction="mean"):
    """The exact AP or NDCG hinge of every query ranked against the references.

    Parameters
    ----------
    embeddings : float tensor (B, d): the queries.
    labels : tensor (B,) of class labels (integers or bools).
    ref_emb, ref_labels : optional (n, d) and (n,): the set each query is ranked against.
        Without them each query is ranked against the other B - 1 embeddings of the batch.
    loss : "ap" or "ndcg". similarity : "cosine" or "dot".
    method, reduction : as :func:`qs.torch.rank_hinge_loss`; a query whose class has no other
        member among the references (or no other class) has no ranking: zero, and left out
        of the mean.
    """
    embeddings, labels, refs, ref_labels = check_embeddings(embeddings, labels, ref_emb,
                                                            ref_labels)
    _check_options(loss, similarity, reduction)
    scores = similarities(embeddings, refs, similarity)
    positive = labels[:, None] == ref_labels[None, :]
    if ref_emb is None:  # each query against the others
        scores, positive = off_diagonal(scores), off_diagonal(positive)
    return rank_hinge_loss(scores, positive, loss, method, reduction)


def off_diagonal(x):
    """The (B, B - 1) entries of a square (B, B) tensor off its diagonal, row by row in
    column order (differentiable): each query's row without itself, without a mask."""
    b = x.shape[0]
    if b < 2:
        return x[:, :0]
    return x.flatten()[1:].view(b - 1, b + 1)[:, :-1].reshape(b, b - 1)


class RetrievalLoss(torch.nn.Module):
    """:func:`retrieval_loss` as a module: ``RetrievalLoss("ap")(embeddings, labels)``."""

    def __init__(self, loss="ap", similarity="cosine", method="auto", reduction="mean"):
        super().__init__()
        _check_options(loss, similarity, reduction)
        self.loss, self.similarity = loss, similarity
        self.method, self.reduction = method, reduction

    def forward(self, embeddings, labels, ref_emb=None, ref_labels=None):
        return retrieval_loss(embeddings, labels, ref_emb, ref_labels, loss=self.loss,
                              similarity=self.similarity, method=self.method,
                              reduction=self.reduction)

    def extra_repr(self):
        return (f"loss={self.loss!r}, similarity={self.similarity!r}, method={self.method!r}, "
                f"reduction={self.reduction!r}")


def _check_options(loss, similarity, reduction):
    if loss not in ("ap", "ndcg"):
        raise ValueError(f"loss must be 'ap' or 'ndcg' for a retrieval loss; got {loss!r}.")
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {list(SIMILARITIES)}; got {similarity!r}.")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {list(REDUCTIONS)}; got {reduction!r}.")


def check_embeddings(embeddings, labels, ref_emb=None, ref_labels=None):
    """Validate embeddings (B, d) and labels (B,), and the references when given; return
    (embeddings, labels, refs, ref_labels) as tensors on the embeddings' device, the
    references being the embeddings themselves when none are given."""
    _check_matrix(embeddings, "embeddings")
    labels = _check_labels(labels, embeddings, "labels", "embeddings")
    if (ref_emb is None) != (ref_labels is None):
        raise ValueError("ref_emb and ref_labels go together: give both or neither.")
    if ref_emb is None:
        return embeddings, labels, embeddings, labels
    _check_matrix(ref_emb, "ref_emb")
    if ref_emb.shape[1] != embeddings.shape[1]:
        raise ValueError(f"ref_emb must have the embeddings' size {embeddings.shape[1]}; got "
                         f"shape {tuple(ref_emb.shape)}.")
    ref_labels = _check_labels(ref_labels, ref_emb, "ref_labels", "ref_emb")
    return embeddings, labels, ref_emb.to(embeddings.device), ref_labels.to(embeddings.device)


def _check_matrix(x, name):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}.")
    if not x.is_floating_point() or x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D floating-point tensor (samples, size); got "
                         f"dtype {x.dtype} and shape {tuple(x.shape)}.")
    if not torch.isfinite(x.detach()).all():
        raise ValueError(f"{name} must be finite; got NaN or inf.")


def _check_labels(labels, embeddings, name, of):
    labels = torch.as_tensor(labels, device=embeddings.device)
    if labels.ndim != 1 or len(labels) != len(embeddings):
        raise ValueError(f"{name} must be 1-D with one class per row of {of}; got shape "
                         f"{tuple(labels.shape)} for {of} of shape {tuple(embeddings.shape)}.")
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"{name} must hold integer (or bool) class labels; got dtype "
                         f"{labels.dtype}.")
    return labels

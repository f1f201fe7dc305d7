"""Rank losses over embeddings, in the form metric-learning code uses them.

``retrieval_loss(embeddings, labels)`` takes a batch of embeddings and their class labels,
makes the similarity of every pair (cosine or dot product), and ranks, for every sample as a
query, the other samples of the batch: those of its class are its positives. The rankings
are those of `qs.torch.rank_hinge_loss` with the query itself left out, so the loss
is the exact structured hinge (AP or NDCG) averaged over the queries, and its gradient flows
through the similarities to the embeddings. With ``ref_emb`` and ``ref_labels`` (as
pytorch-metric-learning's ``ref_emb``) the queries are ranked against that other set
instead, nothing masked.

Against references (and in `qs.torch.memory`, against a memory bank) the similarities
and the loss are one autograd function (`ranked_against`): the product of the queries
with the references is written into the score matrix the inference reads, and the gradient
matrix's product with the references is made in the forward pass, as soon as the inference
is done; the backward only scales that (Q, d) result per query (and, when the references
want a gradient, makes the product of the gradient matrix's transpose with the queries). No
graph over the (Q, n) product, no copy of it into a concatenation, no (Q, n) gradient kept
for the backward unless the references need it, and no (Q, n) product of the gradient with
the loss's weights.
"""

import math

import numpy as np
import torch

from qs.torch.checks import SIMILARITIES, check_embeddings, check_retrieval_options
from qs.torch.losses import hinge_solve, rank_hinge_loss, reduce_rows

__all__ = [
    "SIMILARITIES",
    "RetrievalLoss",
    "off_diagonal",
    "ranked_against",
    "retrieval_loss",
    "similarities",
]


def similarities(queries, refs, similarity="cosine"):
    """The similarity of each query embedding to each reference.

    Parameters
    ----------
    queries : torch.Tensor of shape (Q, d)
        The query embeddings.
    refs : torch.Tensor of shape (n, d)
        The references.
    similarity : str, default "cosine"
        "cosine" or "dot".

    Returns
    -------
    torch.Tensor of shape (Q, n)
        The similarities.

    Examples
    --------
    >>> similarities(torch.tensor([[3.0, 4.0]]), torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    tensor([[0.6000, 0.8000]])
    """
    if similarity == "cosine":
        queries = torch.nn.functional.normalize(queries, dim=1)
        refs = torch.nn.functional.normalize(refs, dim=1)
    return queries @ refs.T


def retrieval_loss(
    embeddings,
    labels,
    ref_emb=None,
    ref_labels=None,
    *,
    loss="ap",
    similarity="cosine",
    method="auto",
    reduction="mean",
):
    """The exact AP or NDCG hinge of every query ranked against the references.

    Parameters
    ----------
    embeddings : Tensor
        Float (B, d): the queries.
    labels : Tensor
        (B,) class labels (integers or bools).
    ref_emb, ref_labels : Tensor, optional
        (n, d) and (n,): the set each query is ranked against. Without them each query is
        ranked against the other B - 1 embeddings of the batch.
    loss : str, default "ap"
        "ap" or "ndcg".
    similarity : str, default "cosine"
        "cosine" or "dot".
    method, reduction : str
        As in `qs.torch.rank_hinge_loss`; a query whose class has no other member among the
        references (or no other class) has no ranking: zero, and left out of the mean.

    Returns
    -------
    torch.Tensor
        The reduced loss; with reduction "none", one per query (B,).

    Examples
    --------
    >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> retrieval_loss(emb, [0, 0, 1, 1])  # every query's own class nearest: no loss
    tensor(0.)
    >>> retrieval_loss(emb, [0, 1, 0, 1])
    tensor(1.5515)
    """
    embeddings, labels, refs, ref_labels = check_embeddings(embeddings, labels, ref_emb, ref_labels)
    check_retrieval_options(loss, similarity, reduction)
    if ref_emb is None:  # each query against the others
        scores = similarities(embeddings, refs, similarity)
        positive = labels[:, None] == ref_labels[None, :]
        return rank_hinge_loss(
            off_diagonal(scores), off_diagonal(positive), loss, method, reduction, dim=-1
        )
    if similarity == "cosine":
        embeddings = torch.nn.functional.normalize(embeddings, dim=1)
        refs = torch.nn.functional.normalize(refs, dim=1)
    return ranked_against(
        embeddings, labels, refs, ref_labels, hinge_solve(loss, method), reduction
    )


def ranked_against(
    queries, labels, refs, ref_labels, solve, reduction, *, lead=None, lead_positive=None, work=None
):
    """The loss of each query ranked against the references by similarity ``queries @ refs.T``.

    The backward reads neither the references nor the queries unless the references want
    a gradient: a memory bank may be written over before it runs.

    Parameters
    ----------
    queries : torch.Tensor of shape (B, d)
        The query embeddings.
    labels : torch.Tensor of shape (B,)
        Their classes.
    refs : torch.Tensor of shape (n, d)
        The references.
    ref_labels : torch.Tensor of shape (n,)
        Their classes: a reference is a positive of the queries of its class.
    solve : callable
        `qs.torch.losses.hinge_solve`'s solver.
    reduction : str
        As `qs.torch.rank_hinge_loss` takes it.
    lead : torch.Tensor of shape (B, k) or None, default None
        Scores of each query's own, ranked before the references' (a memory bank's batch
        part).
    lead_positive : torch.Tensor of shape (B, k), bool, or None, default None
        Which of ``lead`` are positives.
    work : dict or None, default None
        A dict the caller keeps from call to call, in which the (B, n) similarities and
        positives are written.

    Returns
    -------
    torch.Tensor
        The reduced loss; with reduction "none", one per query (B,).

    Examples
    --------
    >>> from qs.torch.losses import hinge_solve
    >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> ranked_against(emb[:2], torch.tensor([0, 1]), emb, torch.tensor([0, 0, 1, 1]),
    ...                hinge_solve("ap", "auto"), "none")
    tensor([0.0000, 2.0233])
    """
    if lead is not None:
        lead = (lead, lead_positive)
    positive = _positives(labels, ref_labels, work)
    if torch.is_grad_enabled() and any(
        x is not None and x.requires_grad for x in (lead and lead[0], queries, refs)
    ):
        values, valid = _AgainstRefs.apply(
            queries, refs, positive, solve, lead, work, *(lead or ())
        )
    else:
        product = _product(queries.detach(), refs.detach(), work)
        values, _, valid = solve(
            product, positive, lead=lead and (lead[0].detach().to(product.dtype), lead[1])
        )
    return reduce_rows(values.to(queries.dtype), valid, reduction)


def off_diagonal(x):
    """The entries of a square tensor off its diagonal: each query's row without itself.

    Differentiable, and without a mask.

    Parameters
    ----------
    x : torch.Tensor of shape (B, B)
        The square tensor.

    Returns
    -------
    torch.Tensor of shape (B, B - 1)
        Row by row, in column order.

    Examples
    --------
    >>> off_diagonal(torch.arange(9.0).view(3, 3))
    tensor([[1., 2.],
            [3., 5.],
            [6., 7.]])
    """
    b = x.shape[0]
    if b < 2:
        return x[:, :0]
    return x.flatten()[1:].view(b - 1, b + 1)[:, :-1].reshape(b, b - 1)


class _AgainstRefs(torch.autograd.Function):
    """The loss per query of the rows ``[lead | queries @ refs.T]`` by ``solve`` (the lead
    read from its own tensor, `qs.inference.batch.lai_batch`), and the gradients of
    the lead, the queries and the references. The forward pass makes the product of the
    gradient matrix's reference part with the references, the queries' gradient before its
    scaling per query, and keeps the (B, n) part only when the references want a gradient
    (its transpose times the queries, scaled, in the backward)."""

    @staticmethod
    def forward(ctx, queries, refs, positive, solve, lead, work, *lead_tensors):
        product = _product(queries.detach(), refs.detach(), work)
        if lead is not None:
            lead = (lead[0].detach().to(product.dtype), lead[1])
        value, grad, valid = solve(product, positive, lead=lead)
        k = grad.shape[1] - refs.shape[0]
        part = grad[:, k:]
        wants = ctx.needs_input_grad
        to_queries = part @ refs.detach().to(grad.dtype) if wants[0] else None
        to_lead = grad[:, :k].clone() if k and wants[6] else None
        for_refs = (part, queries.detach()) if wants[1] else (None, None)
        ctx.save_for_backward(to_queries, to_lead, *for_refs)
        ctx.dtypes = queries.dtype, refs.dtype
        ctx.mark_non_differentiable(valid)
        return value.to(grad.dtype), valid

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, _):
        to_queries, to_lead, part, queries = ctx.saved_tensors
        q_dtype, r_dtype = ctx.dtypes
        g_queries = g_refs = g_lead = None
        if to_queries is not None:
            g_queries = (to_queries * grad_out[:, None].to(to_queries.dtype)).to(q_dtype)
        if part is not None:
            weight = grad_out[:, None].to(part.dtype)
            g_refs = (part.T @ (queries.to(part.dtype) * weight)).to(r_dtype)
        if to_lead is not None:
            g_lead = to_lead * grad_out[:, None].to(to_lead.dtype)
        grads = (g_queries, g_refs, None, None, None, None, g_lead, None)
        return grads[: len(ctx.needs_input_grad)]


def _held(work, name, shape, dtype, device):
    """An uninitialised tensor of ``shape``: a view of the array ``work[name]`` (made, or
    made anew, larger, when it is too small or of another dtype or device), or a new tensor
    when ``work`` is None. Arrays of (64, 10^5) made afresh at every call cost the faults of
    their new pages (CPU time of a memory bank's step, M = 10^5, 64 queries: 105 ms, 83 ms
    without them)."""
    if work is None:
        return torch.empty(shape, dtype=dtype, device=device)
    size = math.prod(shape)
    held = work.get(name)
    if held is None or held.numel() < size or held.dtype != dtype or held.device != device:
        held = work[name] = torch.empty(size, dtype=dtype, device=device)
    return held[:size].view(shape)


def _product(queries, refs, work):
    """``queries @ refs.T`` (B, n), into ``work`` (`_held`) when given."""
    out = _held(work, "product", (queries.shape[0], refs.shape[0]), queries.dtype, queries.device)
    return torch.mm(queries, refs.T, out=out)


def _positives(labels, ref_labels, work=None):
    """The (B, n) bool matrix ``labels[:, None] == ref_labels[None, :]`` (on the CPU by
    numpy, which took a quarter of torch's time at 64 x 10^5), into ``work`` when given."""
    out = _held(work, "positive", (len(labels), len(ref_labels)), torch.bool, labels.device)
    if labels.is_cuda:
        return torch.eq(labels[:, None], ref_labels[None, :], out=out)
    np.equal(labels.numpy()[:, None], ref_labels.numpy()[None, :], out=out.numpy())
    return out


class RetrievalLoss(torch.nn.Module):
    """`retrieval_loss` as a module: ``RetrievalLoss("ap")(embeddings, labels)``.

    Parameters
    ----------
    loss : str, default "ap"
        "ap" or "ndcg".
    similarity : str, default "cosine"
        "cosine" or "dot".
    method : str, default "auto"
        As in `qs.torch.rank_hinge_loss`.
    reduction : str, default "mean"
        As in `qs.torch.rank_hinge_loss`.

    Examples
    --------
    >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> RetrievalLoss("ndcg")(emb, [0, 1, 0, 1])
    tensor(1.3848)
    """

    def __init__(self, loss="ap", similarity="cosine", method="auto", reduction="mean"):
        super().__init__()
        check_retrieval_options(loss, similarity, reduction)
        self.loss, self.similarity = loss, similarity
        self.method, self.reduction = method, reduction

    def forward(self, embeddings, labels, ref_emb=None, ref_labels=None):
        """The loss of the batch, as `retrieval_loss` computes it with the module's options.

        Parameters
        ----------
        embeddings : torch.Tensor of shape (B, d)
            The queries.
        labels : torch.Tensor or array-like of shape (B,)
            Their classes.
        ref_emb : torch.Tensor of shape (n, d) or None, default None
            The references; None: the other embeddings of the batch.
        ref_labels : torch.Tensor or array-like of shape (n,) or None, default None
            Their classes, given with ``ref_emb``.

        Returns
        -------
        torch.Tensor
            The reduced loss.

        Examples
        --------
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> RetrievalLoss()(emb[:2], [0, 1], emb, [0, 0, 1, 1])
        tensor(1.1236)
        """
        return retrieval_loss(
            embeddings,
            labels,
            ref_emb,
            ref_labels,
            loss=self.loss,
            similarity=self.similarity,
            method=self.method,
            reduction=self.reduction,
        )

    def extra_repr(self):
        """The module's options, as its ``repr`` shows them.

        Returns
        -------
        str
            The options.

        Examples
        --------
        >>> RetrievalLoss("ndcg")
        RetrievalLoss(loss='ndcg', similarity='cosine', method='auto', reduction='mean')
        """
        return (
            f"loss={self.loss!r}, similarity={self.similarity!r}, method={self.method!r}, "
            f"reduction={self.reduction!r}"
        )

"""The exact rank losses over the global batch of a ``torch.distributed`` process group.

Each process holds its part of the batch. :func:`distributed_retrieval_loss` gathers every
process's embeddings and labels, and ranks each of its own samples, as a query, against the
whole global batch (itself left out): each query is solved once, by the process that holds
it. :func:`distributed_rank_hinge_loss` does the same for scores of Q queries whose samples
are spread over the processes: it gathers the scores and spreads the queries (query q on
process ``q % world_size``).

The value returned is the loss of the global batch, the same on every process (the mean
over the queries with a positive and a negative, all processes together). Its backward
gives each process the exact gradient of that global loss with respect to its own
embeddings or scores: the gradients that a process's queries send to the other processes'
samples are summed across the group (an all-reduce in the backward of the gather). So every
process must call backward, as in any data-parallel step. ``DistributedDataParallel``
averages the parameters' gradients over the processes, which divides the global loss's
gradient by the world size: multiply the loss by the world size to undo that.

Before the data, each call exchanges the shapes and dtypes of every process's inputs; if the
processes disagree (another embedding size, another number of queries), every process raises
the same ValueError instead of waiting on a collective that would never complete, and a
process whose input is refused (NaN, labels of the wrong shape) raises its error while the
others raise one naming it.
"""

import torch
import torch.distributed as dist

from qs.torch import _check, rank_hinge_loss, ranked_queries
from qs.torch.retrieval import _check_options, check_embeddings, similarities

__all__ = ["distributed_rank_hinge_loss", "distributed_retrieval_loss", "gather_rows"]

#: dtypes sent through the collectives as they are; others go as float32 (exactly)
_SENT_AS_IS = (torch.float32, torch.float64)
_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def distributed_retrieval_loss(embeddings, labels, *, loss="ap", similarity="cosine",
                               method="auto", group=None):
    """:func:`qs.torch.retrieval.retrieval_loss` of the global batch (the concatenation of
    every process's embeddings, in rank order), from this process's part of it.

    embeddings : float tensor (b, d), this process's samples (b may differ between
        processes, and be 0). labels : (b,) integer class labels.
    """
    try:
        embeddings, labels, _, _ = check_embeddings(embeddings, labels)
        _check_options(loss, similarity, "mean")
    except (TypeError, ValueError) as error:
        _agree(group, None, None, ["embedding size", "dtype"])
        raise error
    sizes = _agree(group, embeddings.shape[0], [embeddings.shape[1], _code(embeddings)],
                   ["embedding size", "dtype"])
    rank = dist.get_rank(group)
    start = sum(sizes[:rank])
    refs = gather_rows(embeddings, sizes, group)
    ref_labels = _gather_plain(labels.to(torch.int64), sizes, group)
    scores = similarities(embeddings, refs, similarity)
    positive = labels[:, None].to(torch.int64) == ref_labels[None, :]
    mask = torch.zeros_like(positive)
    own = torch.arange(len(labels), device=mask.device)
    mask[own, start + own] = True
    values = rank_hinge_loss(scores, positive, loss, method, "none", mask=mask)
    counted = ranked_queries(positive, ~mask).sum()
    return _global_mean(values.sum(), counted, group)


def distributed_rank_hinge_loss(scores, labels, loss="ap", method="auto", group=None):
    """:func:`qs.torch.rank_hinge_loss` ("mean") of the global scores (Q, sum of the n_r),
    this process's samples' columns concatenated in rank order, from its part (Q, n_r).

    scores : float tensor (Q, n_r), Q the same on every process. labels : the same shape.
    """
    try:
        pos = _check(scores, labels, loss, method, "mean")
        if scores.ndim != 2:
            raise ValueError(f"scores must be 2-D (queries, this process's samples); got "
                             f"shape {tuple(scores.shape)}.")
    except (TypeError, ValueError) as error:
        _agree(group, None, None, ["number of queries", "dtype"])
        raise error
    sizes = _agree(group, scores.shape[1], [scores.shape[0], _code(scores)],
                   ["number of queries", "dtype"])
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    every = gather_rows(scores.T, sizes, group).T  # (Q, n)
    every_pos = _gather_plain(pos.T.to(torch.uint8), sizes, group).T.bool()
    mine = torch.arange(rank, scores.shape[0], world, device=scores.device)
    values = rank_hinge_loss(every[mine], every_pos[mine], loss, method, "none")
    counted = ranked_queries(every_pos[mine]).sum()
    return _global_mean(values.sum(), counted, group)


def gather_rows(x, sizes, group=None):
    """The rows of every process's ``x`` (``sizes[r]`` rows on process r), concatenated in
    rank order; differentiable: the backward sums the gradient over the processes and
    returns this process's rows of it."""
    return _GatherRows.apply(x, tuple(sizes), group)


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, sizes, group):
        ctx.sizes, ctx.group = sizes, group
        return _gather_plain(x, sizes, group)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        wire = grad.contiguous() if grad.dtype in _SENT_AS_IS else grad.float()
        dist.all_reduce(wire, group=ctx.group)
        rank = dist.get_rank(ctx.group)
        start = sum(ctx.sizes[:rank])
        return wire[start : start + ctx.sizes[rank]].to(grad.dtype), None, None


def _gather_plain(x, sizes, group):
    """all_gather of rows of unequal counts: padded to the largest, then trimmed."""
    wire = x.detach().contiguous()
    if wire.is_floating_point() and wire.dtype not in _SENT_AS_IS:
        wire = wire.float()
    padded = wire.new_zeros((max(sizes),) + tuple(wire.shape[1:]))
    padded[: len(wire)] = wire
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded, group=group)
    return torch.cat([p[:s] for p, s in zip(parts, sizes)]).to(x.dtype)


def _code(x):
    return _DTYPES.index(x.dtype) if x.dtype in _DTYPES else -1


def _agree(group, rows, header, names):
    """Exchange (rows, *header) with every process; return the rows of each, or raise the
    same ValueError everywhere when a header differs between processes. ``rows`` None: this
    process refused its input (it raises its own error after the exchange); the others
    raise one that names it."""
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("the distributed losses need an initialised torch.distributed "
                         "process group (torch.distributed.init_process_group).")
    refused = rows is None
    mine = torch.tensor([-1 if refused else rows]
                        + ([-1] * len(names) if refused else list(header)), dtype=torch.int64)
    if dist.get_backend(group) == "nccl":
        mine = mine.cuda()
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(every, mine, group=group)
    table = torch.stack(every).cpu()
    if refused:
        return None
    bad = torch.nonzero(table[:, 0] < 0).flatten().tolist()
    if bad:
        raise ValueError(f"the loss was refused on process(es) {bad} (see the error there); "
                         "no process computes it.")
    for k, name in enumerate(names, start=1):
        if (table[:, k] != table[0, k]).any():
            values = ", ".join(f"rank {r}: {_shown(name, int(v))}"
                               for r, v in enumerate(table[:, k]))
            raise ValueError(f"the processes disagree on the {name} ({values}); every "
                             f"process must pass the same {name}.")
    return [int(v) for v in table[:, 0]]


def _shown(name, value):
    return str(_DTYPES[value]) if name == "dtype" and value >= 0 else str(value)


def _global_mean(local_sum, local_count, group):
    """The global mean, the same on every process, whose gradient is this process's
    ``local_sum`` over the global count (the other processes' parts reach it through the
    gathers' backward)."""
    totals = torch.stack([local_sum.detach().to(torch.float64),
                          local_count.to(torch.float64)])
    if dist.get_backend(group) != "nccl":
        totals = totals.cpu()
    dist.all_reduce(totals, group=group)
    count = totals[1].clamp(min=1).to(local_sum.device, local_sum.dtype)
    local = local_sum / count
    return local + (totals[0].to(local.device, local.dtype) / count - local).detach()

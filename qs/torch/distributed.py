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
embeddings or scores. So every process must call backward, as in any data-parallel step.
``DistributedDataParallel`` averages the parameters' gradients over the processes, which
divides the global loss's gradient by the world size: multiply the loss by the world size to
undo that.

Round trips are what a step costs on a CPU backend (gloo: about 0.1-1 ms each), so each
exchange is one collective. The shapes, dtypes and data of every process travel together:
one ``all_gather`` of a byte buffer, a fixed header (rows, the values the processes must
agree on, payload bytes) and the payload padded to a capacity that every process knows
alike (the largest payload of the previous call on the group), so that a step of the same
shapes as the last is one collective; a payload that outgrew it is sent in a second one.
If the processes disagree (another embedding size, another number of queries), every
process raises the same ValueError, read from the same headers, instead of waiting on a
collective that would never complete; a process whose input is refused (NaN, labels of the
wrong shape) sends a header saying so and raises its error while the others raise one
naming it. Then the score loss needs one more collective, in the forward pass: every
process's loss values and gradient rows (the coefficients of its queries' rankings), from
which each process takes the columns of its own scores, so its backward is local. The
retrieval loss sums its values across the group (one all-reduce) and, in the backward,
sums the gradient its queries send to the other processes' embeddings (one all-reduce of
the (B, d) gradient, smaller than the B x B coefficients).
"""

import weakref

import torch
import torch.distributed as dist

from qs.torch import _check, _solve, rank_hinge_loss, ranked_queries
from qs.torch.retrieval import _check_options, check_embeddings, similarities

__all__ = ["distributed_rank_hinge_loss", "distributed_retrieval_loss"]

#: dtypes the gradient all-reduce sends as they are; others go as float32 (exactly)
_SENT_AS_IS = (torch.float32, torch.float64)
_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
#: int64 words of an exchange's header: rows, two values agreed on, payload bytes
_HEADER = 4
#: per process group, the payload bytes every process pads its part to (the largest payload
#: of the previous exchange, which every process read from the same headers)
_capacity = weakref.WeakKeyDictionary()


def distributed_retrieval_loss(embeddings, labels, *, loss="ap", similarity="cosine",
                               method="auto", group=None):
    """:func:`qs.torch.retrieval.retrieval_loss` of the global batch (the concatenation of
    every process's embeddings, in rank order), from this process's part of it.

    embeddings : float tensor (b, d), this process's samples (b may differ between
        processes, and be 0). labels : (b,) integer class labels.
    """
    names = ("embedding size", "dtype")
    try:
        embeddings, labels, _, _ = check_embeddings(embeddings, labels)
        _check_options(loss, similarity, "mean")
    except (TypeError, ValueError) as error:
        _exchange(group, None, names)
        raise error
    b, d = embeddings.shape
    sizes, every = _exchange(group, b, names, (d, _code(embeddings)),
                             [labels.to(torch.int64), embeddings.detach()])
    label_parts, emb_parts = [], []
    for s, rows in enumerate(sizes):
        label_parts.append(_read(every[s], 0, torch.int64, (rows,)))
        emb_parts.append(_read(every[s], 8 * rows, embeddings.dtype, (rows, d)))
    rank = dist.get_rank(group)
    start = sum(sizes[:rank])
    refs = _RowsOfAll.apply(embeddings, emb_parts, start, group)
    ref_labels = torch.cat(label_parts).to(labels.device)
    scores = similarities(embeddings, refs, similarity)
    positive = labels[:, None].to(torch.int64) == ref_labels[None, :]
    mask = torch.zeros_like(positive)
    own = torch.arange(b, device=mask.device)
    mask[own, start + own] = True
    values = rank_hinge_loss(scores, positive, loss, method, "none", mask=mask)
    counted = ranked_queries(positive, ~mask).sum()
    return _global_mean(values.sum(), counted, group)


def distributed_rank_hinge_loss(scores, labels, loss="ap", method="auto", group=None):
    """:func:`qs.torch.rank_hinge_loss` ("mean") of the global scores (Q, sum of the n_r),
    this process's samples' columns concatenated in rank order, from its part (Q, n_r).

    scores : float tensor (Q, n_r), Q the same on every process. labels : the same shape.
    """
    names = ("number of queries", "dtype")
    try:
        pos = _check(scores, labels, loss, method, "mean")
        if scores.ndim != 2:
            raise ValueError(f"scores must be 2-D (queries, this process's samples); got "
                             f"shape {tuple(scores.shape)}.")
    except (TypeError, ValueError) as error:
        _exchange(group, None, names)
        raise error
    return _GlobalRankLoss.apply(scores, pos, loss, method, group)


class _GlobalRankLoss(torch.autograd.Function):
    """The global mean hinge from this process's columns; the forward pass exchanges the
    scores and labels (one collective), solves this process's queries, and exchanges the
    loss values and gradient rows (one more), keeping this process's columns of the
    gradient for the backward pass."""

    @staticmethod
    def forward(ctx, scores, pos, loss, method, group):
        q, n_r = scores.shape
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        sizes, every = _exchange(group, n_r, ("number of queries", "dtype"),
                                 (q, _code(scores)), [scores.detach(), pos])
        width = scores.element_size()
        mine_scores, mine_pos = [], []
        for s, cols in enumerate(sizes):  # this process's queries: rows rank, rank + world...
            mine_scores.append(_read(every[s], 0, scores.dtype, (q, cols))[rank::world])
            mine_pos.append(_read(every[s], width * q * cols, torch.bool, (q, cols))[rank::world])
        mine_scores = torch.cat(mine_scores, dim=1).to(scores.device)
        mine_pos = torch.cat(mine_pos, dim=1).to(scores.device)
        values, coef = _solve(mine_scores, mine_pos, loss=loss, method=method)
        # one row per query of this process, padded to the most any process has:
        # (value, counted, its gradient over the n global columns)
        per = -(-q // world)
        rows = coef.new_zeros((per, 2 + coef.shape[1]))
        rows[: len(values), 0] = values.to(rows.dtype)
        rows[: len(values), 1] = ranked_queries(mine_pos).to(rows.dtype)
        rows[: len(values), 2:] = coef
        table = _all_gather(rows.to(_wire_device(group)), group).to(scores.device)
        start = sum(sizes[:rank])
        # (world, per, ...) -> query order: query k * world + s is row k of process s
        values = table[:, :, 0].T.reshape(-1)[:q]
        count = table[:, :, 1].T.reshape(-1)[:q].to(torch.int64).sum().clamp(min=1)
        mine = table[:, :, 2 + start : 2 + start + n_r].transpose(0, 1)
        mine = mine.reshape(per * world, n_r)[:q]
        ctx.save_for_backward(mine, count)
        return values.sum() / count

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        coef, count = ctx.saved_tensors
        return grad / count * coef, None, None, None, None


class _RowsOfAll(torch.autograd.Function):
    """Every process's rows (``parts``, already exchanged) concatenated in rank order, as a
    function of this process's ``x``; the backward sums the gradient over the processes
    and returns this process's rows of it."""

    @staticmethod
    def forward(ctx, x, parts, start, group):
        ctx.start, ctx.rows, ctx.group = start, x.shape[0], group
        return torch.cat(parts).to(x.device)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        wire = grad.contiguous() if grad.dtype in _SENT_AS_IS else grad.float()
        dist.all_reduce(wire, group=ctx.group)
        return wire[ctx.start : ctx.start + ctx.rows].to(grad.dtype), None, None, None


def _exchange(group, rows, names, agreed=None, payload=()):
    """Send (rows, *agreed) and the ``payload`` tensors (their bytes, in order) to every
    process; return the rows of each process and a (world, bytes) uint8 tensor of their
    payloads. One collective when every payload fits the capacity agreed at the previous
    exchange, two otherwise. ``rows`` None: this process refused its input (it raises its
    own error after); the others raise one naming it. The same ValueError on every process
    when the ``agreed`` values (named by ``names``) differ."""
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("the distributed losses need an initialised torch.distributed "
                         "process group (torch.distributed.init_process_group).")
    key = dist.group.WORLD if group is None else group
    capacity = _capacity.get(key, 0)
    device = _wire_device(group)
    data = [t.contiguous().view(-1).view(torch.uint8) for t in payload]
    size = sum(t.numel() for t in data)
    refused = rows is None
    header = torch.tensor([-1 if refused else rows, *(agreed or (-1, -1)), size],
                          dtype=torch.int64)
    head = 8 * _HEADER
    send = _packed([header.view(torch.uint8)] + (data if size <= capacity else []),
                   head + capacity, device)
    every = _all_gather(send, group)
    table = every[:, :head].cpu().contiguous().view(torch.int64).tolist()
    needed = -(-max(header[-1] for header in table) // 8) * 8  # 8-byte aligned rows
    _capacity[key] = needed
    if refused:
        return None, None
    _check_headers(table, names)
    if needed > capacity:
        every = _all_gather(_packed(data, needed, device), group)
    else:
        every = every[:, head:]
    return [header[0] for header in table], every


def _packed(data, length, device):
    """The bytes of ``data`` one after the other, zero-padded to ``length``."""
    buffer = torch.zeros(length, dtype=torch.uint8, device=device)
    at = 0
    for t in data:
        buffer[at : at + t.numel()] = t
        at += t.numel()
    return buffer


def _all_gather(x, group):
    """(world, *x.shape): every process's ``x``, in rank order."""
    every = x.new_empty((dist.get_world_size(group) * x.shape[0],) + tuple(x.shape[1:]))
    dist.all_gather_single(every, x, group=group)
    return every.view((-1,) + tuple(x.shape))


def _read(payload, at, dtype, shape):
    """The tensor of ``dtype`` and ``shape`` whose bytes start at byte ``at`` of a payload."""
    count = 1
    for dim in shape:
        count *= dim
    width = torch.empty((), dtype=dtype).element_size()
    return payload[at : at + count * width].view(dtype).view(shape)


def _check_headers(table, names):
    """Raise the same ValueError on every process when one refused its input or the
    processes disagree on a value that ``names`` names (``table``: a header per process)."""
    bad = [r for r, header in enumerate(table) if header[0] < 0]
    if bad:
        raise ValueError(f"the loss was refused on process(es) {bad} (see the error there); "
                         "no process computes it.")
    for k, name in enumerate(names, start=1):
        if any(header[k] != table[0][k] for header in table):
            values = ", ".join(f"rank {r}: {_shown(name, header[k])}"
                               for r, header in enumerate(table))
            raise ValueError(f"the processes disagree on the {name} ({values}); every "
                             f"process must pass the same {name}.")


def _wire_device(group):
    """Where the collectives' buffers live: the current CUDA device for NCCL, else the CPU."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _code(x):
    return _DTYPES.index(x.dtype) if x.dtype in _DTYPES else -1


def _shown(name, value):
    return str(_DTYPES[value]) if name == "dtype" and value >= 0 else str(value)


def _global_mean(local_sum, local_count, group):
    """The global mean, the same on every process, whose gradient is this process's
    ``local_sum`` over the global count (the other processes' parts reach it through
    :class:`_RowsOfAll`'s backward)."""
    totals = torch.stack([local_sum.detach().to(torch.float64),
                          local_count.to(torch.float64)]).to(_wire_device(group))
    dist.all_reduce(totals, group=group)
    count = totals[1].clamp(min=1).to(local_sum.device, local_sum.dtype)
    local = local_sum / count
    return local + (totals[0].to(local.device, local.dtype) / count - local).detach()

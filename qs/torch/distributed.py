"""The exact rank losses over the global batch of a ``torch.distributed`` process group.

Each process holds its part of the batch. `distributed_retrieval_loss` gathers every
process's embeddings and labels, and ranks each of its own samples, as a query, against the
whole global batch (itself left out): each query is solved once, by the process that holds
it. `distributed_rank_hinge_loss` does the same for scores of Q queries whose samples
are spread over the processes: it gathers the scores and spreads the queries (query q on
process ``q % world_size``).

The value returned is the loss of the global batch, the same on every process (the mean
over the queries with a positive and a negative, all processes together). Its backward
gives each process the exact gradient of that global loss with respect to its own
embeddings or scores. So every process must call backward, as in any data-parallel step.
``DistributedDataParallel`` averages the parameters' gradients over the processes, which
divides the global loss's gradient by the world size: multiply the loss by the world size to
undo that.

Round trips are what a step costs on a CPU backend (on gloo, a fraction of a millisecond
each), so each exchange is one collective, an ``all_to_all`` (on gloo about half the latency
of an ``all_gather``). The shapes, dtypes and data of every process travel together: to each
process a byte chunk made of a fixed header (rows, the values the processes must agree on,
chunk bytes) and the data, padded to a capacity that every process knows alike (the largest
chunk of the previous exchange on the group), so that a step of the same shapes as the last
is one collective; a chunk that outgrew it is sent in a second one. If the processes
disagree (another embedding size, another number of queries), every process raises the same
ValueError, read from the same headers, instead of waiting on a collective that would never
complete; a process whose input is refused (NaN, labels of the wrong shape) sends a header
saying so and raises its error while the others raise one naming it.

The score loss sends each process the rows of its queries only; after the inference, one
more collective in the forward pass sends each process the loss values of every query and
their gradient over its own columns (the coefficients of the rankings), so its backward is
local: two collectives a step. The retrieval loss sends every process the whole batch, sums
its values across the group (one all-reduce) and, in the backward, the gradient its queries
send to the other processes' embeddings (one all-reduce of the (B, d) gradient, smaller than
the B x B coefficients): three.

On a CPU backend a process polls each collective, yielding its core between polls, before
it blocks (`_finish`): waking a core that fell idle can cost more than the exchange.
"""

import math
import os
import time
import weakref

import torch
import torch.distributed as dist

from qs.torch.checks import check_embeddings, check_retrieval_options, check_score_input
from qs.torch.losses import hinge_solve, rank_hinge_loss, ranked_queries, rows_of_queries
from qs.torch.retrieval import similarities

__all__ = ["distributed_rank_hinge_loss", "distributed_retrieval_loss"]

#: dtypes the gradient all-reduce sends as they are; others go as float32 (exactly)
_SENT_AS_IS = (torch.float32, torch.float64)
_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
#: int64 words of an exchange's header: rows, two values agreed on, chunk bytes
_HEADER = 4
#: seconds a process polls a collective on a CPU backend before it blocks in ``wait``: the
#: exchanges of a step take a fraction of a millisecond, a peer still computing may take longer
POLL_S = 0.01
#: per process group, the bytes every process pads its chunks to (the largest chunk of the
#: previous exchange, which every process read from the same headers)
_capacity: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def distributed_retrieval_loss(
    embeddings, labels, *, loss="ap", similarity="cosine", method="auto", group=None
):
    """`qs.torch.retrieval.retrieval_loss` of the global batch, from this process's part of it.

    The global batch is the concatenation of every process's embeddings, in rank order.
    Every process of the group calls it.

    Parameters
    ----------
    embeddings : torch.Tensor of shape (b, d)
        This process's samples, float (b may differ between processes, and be 0).
    labels : torch.Tensor or array-like of shape (b,)
        Their integer class labels.
    loss : str, default "ap"
        "ap" or "ndcg".
    similarity : str, default "cosine"
        "cosine" or "dot".
    method : str, default "auto"
        As in `qs.torch.rank_hinge_loss`.
    group : torch.distributed.ProcessGroup or None, default None
        The processes; None: the default group.

    Returns
    -------
    torch.Tensor
        The mean loss over the global batch's ranked queries, the same on every process.

    Raises
    ------
    ValueError
        On bad input, on every process (the others are told), or without a process group.

    Examples
    --------
    >>> import tempfile
    >>> import torch.distributed as dist
    >>> tmp = tempfile.TemporaryDirectory()
    >>> dist.init_process_group("gloo", init_method=f"file://{tmp.name}/rendezvous", rank=0,
    ...                         world_size=1)  # a world of one process
    >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> distributed_retrieval_loss(emb, torch.tensor([0, 1, 0, 1]))
    tensor(1.5515)
    >>> dist.destroy_process_group()
    >>> tmp.cleanup()
    """
    _require_group()
    names = ("embedding size", "dtype")
    try:
        embeddings, labels, _, _ = check_embeddings(embeddings, labels)
        check_retrieval_options(loss, similarity, "mean")
    except (TypeError, ValueError) as error:
        _exchange(group, None, names)
        raise error
    b, d = embeddings.shape
    chunk = [labels.to(torch.int64), embeddings.detach()]
    sizes, every = _exchange(
        group, b, names, (d, _code(embeddings)), [chunk] * dist.get_world_size(group)
    )
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
    values = rank_hinge_loss(scores, positive, loss, method, "none", dim=-1, mask=mask)
    counted = ranked_queries(positive, ~mask).sum()
    return _global_mean(values.sum(), counted, group)


def distributed_rank_hinge_loss(scores, labels, loss="ap", method="auto", group=None, *, dim=0):
    """`qs.torch.rank_hinge_loss` ("mean") of the global scores, from this process's part.

    Every process's samples are concatenated in rank order along ``dim``. Every process of
    the group calls it.

    Parameters
    ----------
    scores : torch.Tensor
        2-D float: this process's samples along ``dim`` (0 by default, the (n_r, Q) logits
        of its part of the batch; -1 for (Q, n_r)), the Q queries the same on every
        process.
    labels : torch.Tensor or array-like
        Binary labels of the scores' shape.
    loss : str, default "ap"
        As in `qs.torch.rank_hinge_loss`.
    method : str, default "auto"
        As in `qs.torch.rank_hinge_loss`.
    group : torch.distributed.ProcessGroup or None, default None
        The processes; None: the default group.
    dim : int, default 0
        The dimension of the samples.

    Returns
    -------
    torch.Tensor
        The mean loss over the queries, the same on every process.

    Raises
    ------
    ValueError
        On bad input, on every process (the others are told), or without a process group.

    Examples
    --------
    >>> import tempfile
    >>> import torch.distributed as dist
    >>> tmp = tempfile.TemporaryDirectory()
    >>> dist.init_process_group("gloo", init_method=f"file://{tmp.name}/rendezvous", rank=0,
    ...                         world_size=1)  # a world of one process
    >>> logits = torch.tensor([[2.0, 0.1], [0.3, 1.5], [1.1, -0.2], [-0.5, 0.4]])
    >>> distributed_rank_hinge_loss(logits, [[1, 0], [0, 1], [0, 0], [1, 1]])
    tensor(0.7333)
    >>> dist.destroy_process_group()
    >>> tmp.cleanup()
    """
    _require_group()
    names = ("number of queries", "dtype")
    try:
        pos = check_score_input(scores, labels, loss, method, "mean")
        if scores.ndim != 2:
            raise ValueError(
                f"scores must be 2-D (this process's samples along dim, and the "
                f"queries); got shape {tuple(scores.shape)}."
            )
        scores, pos, _ = rows_of_queries(dim, scores, pos)
    except (TypeError, ValueError) as error:
        _exchange(group, None, names)
        raise error
    return _GlobalRankLoss.apply(scores, pos, loss, method, group)


class _GlobalRankLoss(torch.autograd.Function):
    """The global mean hinge from this process's columns. The forward pass sends each
    process the rows of its queries (one collective), solves this process's queries, and
    sends each process these queries' loss values and gradient over its columns (one
    more), which it keeps for the backward pass."""

    @staticmethod
    def forward(ctx, scores, pos, loss, method, group):
        q, n_r = scores.shape
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        x = scores.detach()
        # to process s: its queries' rows (s, s + world, ...) of this process's columns
        sizes, every = _exchange(
            group,
            n_r,
            ("number of queries", "dtype"),
            (q, _code(scores)),
            [[x[s::world], pos[s::world]] for s in range(world)],
        )
        mine, width = len(range(rank, q, world)), x.element_size()
        parts = [
            (
                _read(every[r], 0, x.dtype, (mine, n)).to(x.device),
                _read(every[r], width * mine * n, torch.bool, (mine, n)).to(x.device),
            )
            for r, n in enumerate(sizes)
        ]
        # process 0's columns lead each row (read from their own block, not joined here)
        rest = parts[1:] or [(x[:mine, :0], pos[:mine, :0])]
        values, coef, counts = hinge_solve(loss, method)(
            _side_by_side([p[0] for p in rest]), _side_by_side([p[1] for p in rest]), lead=parts[0]
        )
        # to process s: each query's value, whether it counts and its gradient on s's
        # columns, in rows padded to the most queries a process solves, so that what comes
        # back is one (world, most, 2 + n_r) block whose rows interleave into query order
        most = -(-q // world)
        send = coef.new_empty(most * (2 * world + sum(sizes)))
        at = start = 0
        for n in sizes:
            block = send[at : at + most * (2 + n)].view(most, 2 + n)
            block[:mine, 0], block[:mine, 1] = values, counts
            block[:mine, 2:] = coef[:, start : start + n]
            at, start = at + most * (2 + n), start + n
        got = _all_to_all(
            send.to(_wire_device(group)),
            [most * (2 + n) for n in sizes],
            [most * (2 + n_r)] * world,
            group,
        ).to(x.device)
        got = got.view(world, most, 2 + n_r).transpose(0, 1).reshape(most * world, 2 + n_r)[:q]
        count = got[:, 1].to(torch.int64).sum().clamp(min=1)
        ctx.save_for_backward(got[:, 2:], count)
        return got[:, 0].sum() / count

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
        _all_reduce(wire, ctx.group)
        return wire[ctx.start : ctx.start + ctx.rows].to(grad.dtype), None, None, None


def _exchange(group, rows, names, agreed=None, chunks=None):
    """Send (rows, *agreed) to every process, and to process s the bytes of the tensors of
    ``chunks[s]`` one after the other; return the rows of each process and a (world, bytes)
    uint8 tensor whose row r holds what process r sent this one. One collective when every
    chunk fits the capacity agreed at the previous exchange, two otherwise. ``rows`` None:
    this process refused its input (it raises its own error after); the others raise one
    naming it. The same ValueError on every process when the ``agreed`` values (named by
    ``names``) differ."""
    key = dist.group.WORLD if group is None else group
    capacity = _capacity.get(key, 0)
    device = _wire_device(group)
    world = dist.get_world_size(group)
    chunks = chunks or [[]] * world
    size = max(sum(t.numel() * t.element_size() for t in chunk) for chunk in chunks)
    refused = rows is None
    header = torch.tensor([-1 if refused else rows, *(agreed or (-1, -1)), size], dtype=torch.int64)
    head = 8 * _HEADER
    fits = size <= capacity
    send = torch.zeros((world, head + capacity), dtype=torch.uint8, device=device)
    send[:, :head] = header.view(torch.uint8)
    if fits:
        _pack(send[:, head:], chunks)
    every = _all_to_all(send, None, None, group)
    table = every[:, :head].cpu().view(torch.int64).tolist()
    needed = -(-max(header[-1] for header in table) // 8) * 8  # 8-byte aligned rows
    _capacity[key] = needed
    if refused:
        return None, None
    _check_headers(table, names)
    if needed > capacity:
        send = torch.zeros((world, needed), dtype=torch.uint8, device=device)
        _pack(send, chunks)
        return [header[0] for header in table], _all_to_all(send, None, None, group)
    return [header[0] for header in table], every[:, head:]


def _pack(rows, chunks):
    """Write into row s of the uint8 matrix ``rows`` the bytes of the tensors of
    ``chunks[s]`` one after the other (each starting at a multiple of its element size:
    the widest first)."""
    for row, chunk in zip(rows, chunks):
        at = 0
        for t in chunk:
            size = t.numel() * t.element_size()
            row[at : at + size].view(t.dtype).view(t.shape).copy_(t)
            at += size


def _all_to_all(send, send_counts, receive_counts, group):
    """``all_to_all_single`` of a tensor, sent as bytes (any dtype goes through gloo): equal
    parts along its first dimension when the counts are None, else (1-D) ``send_counts[s]``
    elements to process s and ``receive_counts[r]`` from process r. On gloo, about half the
    latency of an ``all_gather`` of the same chunks (2 processes on loopback)."""
    if send_counts is None:
        receive = torch.empty_like(send)
        _finish(dist.all_to_all_single(receive, send, group=group, async_op=True), send)
        return receive
    width = send.element_size()
    receive = send.new_empty(sum(receive_counts) * width, dtype=torch.uint8)
    _finish(
        dist.all_to_all_single(
            receive,
            send.view(torch.uint8),
            [c * width for c in receive_counts],
            [c * width for c in send_counts],
            group=group,
            async_op=True,
        ),
        send,
    )
    return receive.view(send.dtype)


def _all_reduce(tensor, group):
    """Sum ``tensor`` over the processes, in place."""
    _finish(dist.all_reduce(tensor, group=group, async_op=True), tensor)


def _finish(work, tensor):
    """Wait for the collective ``work`` on ``tensor``'s device. On the CPU, poll it (yielding
    the core to any other runnable thread between polls) for up to `POLL_S`, then block:
    gloo hands the collective between threads several times, and each hand-off to a core that
    went idle waits for the core to wake (on 2 virtual cores, the two exchanges of a score
    loss step took about 3x as long blocked as polled). ``wait`` then raises what the
    collective raised, with the group's timeout. On CUDA, ``wait`` only orders the streams:
    called at once."""
    if not tensor.is_cuda:
        end = time.perf_counter() + POLL_S
        while not work.is_completed() and time.perf_counter() < end:
            os.sched_yield()
    work.wait()


def _side_by_side(blocks):
    """The (rows, columns) blocks joined column-wise; one block as it is, not copied."""
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks, 1)


def _read(chunk, at, dtype, shape):
    """The tensor of ``dtype`` and ``shape`` whose bytes start at byte ``at`` of a chunk."""
    return chunk[at : at + math.prod(shape) * dtype.itemsize].view(dtype).view(shape)


def _check_headers(table, names):
    """Raise the same ValueError on every process when one refused its input or the
    processes disagree on a value that ``names`` names (``table``: a header per process)."""
    bad = [r for r, header in enumerate(table) if header[0] < 0]
    if bad:
        raise ValueError(
            f"the loss was refused on process(es) {bad} (see the error there); "
            "no process computes it."
        )
    for k, name in enumerate(names, start=1):
        if any(header[k] != table[0][k] for header in table):
            values = ", ".join(
                f"rank {r}: {_shown(name, header[k])}" for r, header in enumerate(table)
            )
            raise ValueError(
                f"the processes disagree on the {name} ({values}); every "
                f"process must pass the same {name}."
            )


def _require_group():
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "the distributed losses need an initialised torch.distributed "
            "process group (torch.distributed.init_process_group)."
        )


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
    `_RowsOfAll`'s backward)."""
    totals = torch.stack([local_sum.detach().to(torch.float64), local_count.to(torch.float64)]).to(
        _wire_device(group)
    )
    _all_reduce(totals, group)
    count = totals[1].clamp(min=1).to(local_sum.device, local_sum.dtype)
    local = local_sum / count
    return local + (totals[0].to(local.device, local.dtype) / count - local).detach()

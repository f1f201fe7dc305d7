"""qs.torch.distributed with the gloo backend in 2 and 4 CPU processes (loopback): loss and
gradients equal those of one process on the concatenated batch."""

import datetime
import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch built without torch.distributed", allow_module_level=True)
from qs.torch import rank_hinge_loss
from qs.torch.distributed import (
    distributed_rank_hinge_loss,
    distributed_retrieval_loss,
)
from qs.torch.retrieval import retrieval_loss

TIMEOUT = datetime.timedelta(seconds=60)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def global_batch(sizes, d=6, seed=0):
    """Embeddings and labels of the concatenated batch; the samples of the third process
    (when there is one) are of classes no one else has: its queries have no positive."""
    rng = np.random.default_rng(seed)
    b = sum(sizes)
    emb = rng.normal(size=(b, d))
    labels = rng.integers(0, 3, b)
    if len(sizes) > 2:
        start = sum(sizes[:2])
        labels[start : start + sizes[2]] = 100 + np.arange(sizes[2])
    return torch.from_numpy(emb), torch.from_numpy(labels)


def _worker(rank, world, port, out, case, sizes, loss):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=TIMEOUT
    )
    try:
        start, stop = sum(sizes[:rank]), sum(sizes[: rank + 1])
        if case == "embeddings":  # twice: the second call's chunks fit the first's capacity
            emb, labels = global_batch(sizes)
            for _ in range(2):
                x = emb[start:stop].clone().requires_grad_(True)
                value = distributed_retrieval_loss(x, labels[start:stop], loss=loss)
        elif case == "scores":
            _score_calls(rank, out, sizes, loss)
            return
        else:  # this process's embeddings have another size, or are not finite
            emb, labels = global_batch(sizes, d=6 + (rank == 1 and case == "mismatch"))
            if case == "nan" and rank == 1:
                emb[start] = float("nan")
            try:
                distributed_retrieval_loss(emb[start:stop], labels[start:stop])
            except ValueError as error:
                np.savez(f"{out}/{rank}.npz", message=str(error))
            return
        value.backward()
        np.savez(f"{out}/{rank}.npz", value=value.item(), grad=x.grad.numpy())
    finally:
        dist.destroy_process_group()


def score_batch(sizes, q, dtype=torch.float64, seed=1):
    """Scores and labels of q queries over the samples of every process; query 0 has no
    positive, nor has the last process any."""
    rng = np.random.default_rng(seed)
    labels = rng.random((q, sum(sizes))) < 0.3
    labels[0] = False
    labels[:, sum(sizes[:-1]) :] = False
    scores = torch.from_numpy(rng.normal(size=(q, sum(sizes)))).to(dtype)
    return scores, torch.from_numpy(labels)


def score_calls(sizes):
    """(sizes, queries, dtype) of each call in turn: as given; larger (the exchange outgrows
    the capacity of the last one); as given again (it fits); then the processes disagree on
    the number of queries (None: rank + the usual); then as given (the group still works);
    then in float16 (two bytes a score on the wire). 5 queries over 2 processes, 3 over 4
    (one process has none)."""
    q, f64 = (5 if len(sizes) == 2 else 3), torch.float64
    return [
        (sizes, q, f64),
        (tuple(2 * s + 1 for s in sizes), q + 2, f64),
        (sizes, q, f64),
        (sizes, None, f64),
        (sizes, q, f64),
        (sizes, q, torch.float16),
    ]


def _score_calls(rank, out, sizes, loss):
    results = {}
    for k, (shape, q, dtype) in enumerate(score_calls(sizes)):
        start, stop = sum(shape[:rank]), sum(shape[: rank + 1])
        scores, labels = score_batch(shape, q or score_calls(sizes)[0][1] + rank, dtype)
        x = scores[:, start:stop].clone().requires_grad_(True)
        try:
            value = distributed_rank_hinge_loss(x, labels[:, start:stop], loss, dim=-1)
        except ValueError as error:
            results["message"] = str(error)
            continue
        value.backward()
        results[f"value{k}"], results[f"grad{k}"] = value.item(), x.grad.double().numpy()
        if k == 0:  # the default layout: this process's samples along dim 0, (n_r, Q)
            cols = x.detach().T.clone().requires_grad_(True)
            value = distributed_rank_hinge_loss(cols, labels[:, start:stop].T, loss)
            value.backward()
            results["value_cols"], results["grad_cols"] = value.item(), cols.grad.numpy()
    np.savez(f"{out}/{rank}.npz", **results)


def spawn(tmp_path, case, sizes, loss="ap"):
    torch.multiprocessing.spawn(
        _worker,
        args=(len(sizes), free_port(), str(tmp_path), case, sizes, loss),
        nprocs=len(sizes),
        join=True,
    )
    return [np.load(tmp_path / f"{r}.npz") for r in range(len(sizes))]


@pytest.mark.parametrize("sizes,loss", [((7, 4), "ap"), ((5, 9, 2, 0), "ndcg")])
def test_retrieval_over_processes_is_the_loss_of_the_concatenated_batch(tmp_path, sizes, loss):
    emb, labels = global_batch(sizes)
    x = emb.clone().requires_grad_(True)
    expected = retrieval_loss(x, labels, loss=loss)
    expected.backward()
    parts = spawn(tmp_path, "embeddings", sizes, loss)
    grads = np.concatenate([p["grad"] for p in parts])
    for p in parts:
        assert float(p["value"]) == pytest.approx(expected.item(), rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(grads, x.grad.numpy(), rtol=0, atol=1e-12)
    assert np.abs(grads).sum() > 0
    if len(sizes) > 2:  # the process whose queries have no positive still gets gradients
        start = sum(sizes[:2])
        assert np.abs(grads[start : start + sizes[2]]).sum() > 0


@pytest.mark.parametrize("sizes", [(30, 11), (9, 0, 14, 6)])
def test_scores_over_processes_are_the_loss_of_the_concatenated_scores(tmp_path, sizes):
    parts = spawn(tmp_path, "scores", sizes)
    for k, (shape, q, dtype) in enumerate(score_calls(sizes)):
        if q is None:
            expected = ", ".join(
                f"rank {r}: {score_calls(sizes)[0][1] + r}" for r in range(len(sizes))
            )
            for p in parts:
                assert f"disagree on the number of queries ({expected})" in str(p["message"])
            continue
        scores, labels = score_batch(shape, q, dtype)  # float16: the same float16 loss
        x = scores.clone().requires_grad_(True)
        expected = rank_hinge_loss(x, labels, "ap", dim=-1)
        expected.backward()
        if k == 0:  # (n_r, Q) parts with the default dim: the same loss and gradient
            for p in parts:
                assert float(p["value_cols"]) == float(p["value0"])
                np.testing.assert_array_equal(p["grad_cols"].T, p["grad0"])
        for p in parts:
            assert float(p[f"value{k}"]) == pytest.approx(expected.item(), rel=1e-12), k
        grads = np.concatenate([p[f"grad{k}"] for p in parts], axis=1)
        np.testing.assert_allclose(grads, x.grad.double().numpy(), rtol=0, atol=1e-12)
        last = sum(shape[:-1])  # the process without positives still gets gradients
        assert np.abs(grads[:, last:]).sum() > 0


def test_processes_that_disagree_on_the_embedding_size_all_raise(tmp_path):
    parts = spawn(tmp_path, "mismatch", (3, 4))
    for p in parts:
        assert "disagree on the embedding size (rank 0: 6, rank 1: 7)" in str(p["message"])


def test_a_process_whose_input_is_refused_makes_every_process_raise(tmp_path):
    parts = spawn(tmp_path, "nan", (3, 4, 2))
    assert "embeddings must be finite" in str(parts[1]["message"])
    for r in (0, 2):
        assert "refused on process(es) [1]" in str(parts[r]["message"])


def test_without_a_process_group_the_error_says_so():
    with pytest.raises(ValueError, match="initialised torch.distributed process group"):
        distributed_retrieval_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))


class _Work:
    """A collective's work handle that completes after ``polls`` polls (never when None)."""

    def __init__(self, polls):
        self.polls, self.asked, self.waited = polls, 0, False

    def is_completed(self):
        self.asked += 1
        return self.polls is not None and self.asked > self.polls

    def wait(self):
        self.waited = True


def test_a_cpu_collective_is_polled_until_done_then_waited(monkeypatch):
    from qs.torch import distributed

    work = _Work(polls=3)
    distributed._finish(work, torch.zeros(1))
    assert (work.asked, work.waited) == (4, True)
    # a collective that does not finish within POLL_S is left to wait() and its timeout
    monkeypatch.setattr(distributed, "POLL_S", 0.001)
    work = _Work(polls=None)
    distributed._finish(work, torch.zeros(1))
    assert work.waited and work.asked >= 1


def test_a_cuda_collective_is_waited_without_polling():
    from types import SimpleNamespace

    from qs.torch import distributed

    work = _Work(polls=None)
    distributed._finish(work, SimpleNamespace(is_cuda=True))
    assert (work.asked, work.waited) == (0, True)

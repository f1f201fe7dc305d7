"""qs.torch.memory: the batch ranked against itself and a FIFO of past embeddings."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from qs.torch import rank_hinge_loss
from qs.torch.memory import CrossBatchMemory
from qs.torch.retrieval import retrieval_loss, similarities

torch.set_num_threads(1)


def batches(sizes, d=4, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (torch.from_numpy(rng.normal(size=(b, d))), torch.from_numpy(rng.integers(0, classes, b)))
        for b in sizes
    ]


def against(emb, labels, past, past_labels, loss, similarity):
    """Each query against the rest of its batch and the past samples, one row at a time."""
    refs = torch.cat([emb, past])
    ref_labels = torch.cat([labels, past_labels])
    sims = similarities(emb, refs, similarity)
    total, counted = emb.sum() * 0.0, 0
    for q in range(len(emb)):
        others = torch.arange(len(refs)) != q
        pos = ref_labels[others] == labels[q]
        if pos.any() and not pos.all():
            total = total + rank_hinge_loss(sims[q, others], pos, loss, dim=-1)
            counted += 1
    return total / max(counted, 1)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_each_batch_is_ranked_against_itself_and_the_last_samples(loss, similarity):
    sizes = (6, 5, 7, 4, 9)
    data = batches(sizes)
    memory = CrossBatchMemory(12, loss, similarity)
    seen_emb, seen_labels = [], []
    for emb, labels in data:
        past = torch.cat(seen_emb)[-12:] if seen_emb else emb[:0]
        past_labels = torch.cat(seen_labels)[-12:] if seen_labels else labels[:0]
        x = emb.clone().requires_grad_(True)
        value = memory(x, labels)
        value.backward()
        y = emb.clone().requires_grad_(True)
        expected = against(y, labels, past, past_labels, loss, similarity)
        expected.backward()
        assert value.item() == pytest.approx(expected.item(), rel=1e-12, abs=1e-15)
        torch.testing.assert_close(x.grad, y.grad, rtol=1e-12, atol=1e-14)
        seen_emb.append(emb)
        seen_labels.append(labels)
        kept, kept_labels = memory.stored()
        last = torch.cat(seen_emb)[-12:]
        if similarity == "cosine":
            last = torch.nn.functional.normalize(last, dim=1)
        torch.testing.assert_close(kept, last, rtol=0, atol=0)
        assert torch.equal(kept_labels, torch.cat(seen_labels)[-12:])
        assert not kept.requires_grad


def test_first_batch_is_the_retrieval_loss_and_a_large_batch_keeps_its_last_samples():
    ((emb, labels),) = batches((20,))
    memory = CrossBatchMemory(8)
    assert memory(emb, labels).item() == pytest.approx(
        retrieval_loss(emb, labels).item(), rel=1e-14
    )
    kept, kept_labels = memory.stored()
    torch.testing.assert_close(kept, torch.nn.functional.normalize(emb[-8:], dim=1))
    assert torch.equal(kept_labels, labels[-8:])
    memory.reset()
    assert len(memory.stored()[0]) == 0


def test_a_batch_of_another_embedding_size_is_refused_and_the_memory_kept():
    memory = CrossBatchMemory(10)
    ((emb, labels),) = batches((5,))
    memory(emb, labels)
    before = memory.stored()[0].clone()
    with pytest.raises(
        ValueError, match="memory holds embeddings of size 4; got a batch of size 3"
    ):
        memory(torch.zeros(5, 3, dtype=torch.float64), labels)
    torch.testing.assert_close(memory.stored()[0], before, rtol=0, atol=0)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"size": 0}, "positive integer"),
        ({"size": 2.5}, "positive integer"),
        ({"size": 4, "loss": "01"}, "'ap' or 'ndcg'"),
        ({"size": 4, "similarity": "l1"}, "similarity must be one of"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CrossBatchMemory(**kwargs)


def test_two_calls_before_one_backward_keep_each_call_s_memory():
    """Gradient accumulation: the second call's store must not change the memory that the
    first call's graph holds."""
    data = batches((6, 5, 7))
    memory = CrossBatchMemory(8)
    memory(*data[0])
    xs = [emb.clone().requires_grad_(True) for emb, _ in data[1:]]
    first = memory(xs[0], data[1][1])
    buffer = memory.memory
    total = first + memory(xs[1], data[2][1])
    assert memory.memory is buffer  # written in place: the backward reads no memory
    total.backward()
    past = [torch.cat([data[0][0]])[-8:], torch.cat([data[0][0], data[1][0]])[-8:]]
    past_labels = [data[0][1][-8:], torch.cat([data[0][1], data[1][1]])[-8:]]
    for k in range(2):
        y = data[k + 1][0].clone().requires_grad_(True)
        against(y, data[k + 1][1], past[k], past_labels[k], "ap", "cosine").backward()
        torch.testing.assert_close(xs[k].grad, y.grad, rtol=1e-12, atol=1e-14)


def test_the_state_dict_restores_the_memory():
    data = batches((6, 5, 7, 4))
    memory = CrossBatchMemory(9, "ndcg")
    for emb, labels in data[:3]:
        memory(emb, labels)
    state = memory.state_dict()
    fresh = CrossBatchMemory(9, "ndcg")
    fresh.load_state_dict(state)
    for a, b in zip(memory.stored(), fresh.stored()):
        assert torch.equal(a, b)
    assert fresh(*data[3]).item() == memory(*data[3]).item()


def test_a_copy_keeps_the_memory_but_not_the_work_arrays():
    data = batches((6, 5))
    memory = CrossBatchMemory(8)
    for emb, labels in data:
        memory(emb, labels)
    assert memory._work
    twin = copy.deepcopy(memory)
    assert twin._work == {} and memory._work
    for a, b in zip(memory.stored(), twin.stored()):
        assert torch.equal(a, b)
    ((emb, labels),) = batches((7,), seed=3)
    assert twin(emb, labels).item() == memory(emb, labels).item()


def test_a_large_memory_runs_and_follows_the_state_dict():
    rng = np.random.default_rng(1)
    memory = CrossBatchMemory(100_000)
    for _ in range(3):
        emb = torch.from_numpy(rng.normal(size=(40_000, 16))).float()
        memory(emb[:64].requires_grad_(True), torch.from_numpy(rng.integers(0, 100, 64)))
        memory._store(emb, torch.from_numpy(rng.integers(0, 100, 40_000)))
    x = torch.from_numpy(rng.normal(size=(64, 16))).float().requires_grad_(True)
    value = memory(x, torch.from_numpy(rng.integers(0, 100, 64)))
    value.backward()
    assert memory.filled == 100_000 and torch.isfinite(x.grad).all()
    state = memory.state_dict()
    assert state["memory"].shape == (100_000, 16)

"""qs.torch masks and qs.torch.retrieval: against the same losses on compacted rows."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from qs.torch import rank_hinge_loss
from qs.torch.losses import hinge_solve
from qs.torch.retrieval import (
    RetrievalLoss,
    ranked_against,
    retrieval_loss,
    similarities,
)

torch.set_num_threads(1)


def masked_queries(seed, q=8, n=40, ties=False):
    """Scores, labels and a mask keeping a different number of entries per row; row 0 keeps
    no positive, row 1 no negative, row 2 nothing."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 3, (q, n)).astype(float) if ties else rng.normal(size=(q, n))
    labels = rng.random((q, n)) < 0.3
    mask = rng.random((q, n)) < rng.uniform(0.1, 0.6, (q, 1))
    mask[0] |= labels[0]
    mask[1] |= ~labels[1]
    mask[2] = True
    labels[3, :2], mask[3, :2] = [True, False], False
    return torch.from_numpy(scores), torch.from_numpy(labels), torch.from_numpy(mask)


def compacted(scores, labels, mask, loss, method):
    """Per row, the loss of the kept entries alone and its gradient, scattered back."""
    values, grads = [], torch.zeros_like(scores)
    for q in range(len(scores)):
        keep = ~mask[q]
        x = scores[q, keep].clone().requires_grad_(True)
        value = (
            rank_hinge_loss(x, labels[q, keep], loss, method, "none")
            if keep.any()
            else x.sum() * 0.0
        )
        value.backward()
        values.append(value.item())
        grads[q, keep] = x.grad
    return np.array(values), grads


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
def test_mask_is_the_loss_of_the_kept_entries(loss, method, ties):
    scores, labels, mask = masked_queries(1, ties=ties)
    expected, expected_grad = compacted(scores, labels, mask, loss, method)
    x = scores.clone().requires_grad_(True)
    values = rank_hinge_loss(x, labels, loss, method, "none", mask=mask, dim=-1)
    values.sum().backward()
    np.testing.assert_array_equal(values.detach().numpy(), expected)
    torch.testing.assert_close(x.grad, expected_grad, rtol=0, atol=0)
    assert not x.grad[mask].any() and not x.grad[:3].any() and expected[3:].all()
    mean = rank_hinge_loss(scores, labels, loss, method, mask=mask, dim=-1)
    assert mean.item() == pytest.approx(expected.sum() / (len(scores) - 3), rel=1e-12)


def test_mask_on_one_query_and_all_false_mask():
    scores, labels, mask = masked_queries(2)
    one = rank_hinge_loss(scores[4], labels[4], mask=mask[4], reduction="none", dim=-1)
    assert one.shape == () and one.item() == pytest.approx(
        rank_hinge_loss(scores[4][~mask[4]], labels[4][~mask[4]], dim=-1).item(), rel=1e-15
    )
    none = torch.zeros_like(mask)
    assert (
        rank_hinge_loss(scores, labels, mask=none, dim=-1).item()
        == rank_hinge_loss(scores, labels, dim=-1).item()
    )


def test_a_mask_that_hides_every_positive_gives_zero_and_counts_nothing():
    scores, labels, _ = masked_queries(3, q=4)
    x = scores.clone().requires_grad_(True)
    value = rank_hinge_loss(x, labels, mask=labels.clone(), dim=-1)
    value.backward()
    assert value.item() == 0.0 and not x.grad.any()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"mask": torch.zeros(2, 3, dtype=torch.bool)}, "scores and mask must have the same shape"),
        ({"mask": torch.zeros(1, 3)}, "mask must be bool"),
    ],
)
def test_bad_masks_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rank_hinge_loss(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[1, 0, 1]]), **kwargs)


def batch(seed, b=24, d=5, classes=4, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    emb = torch.from_numpy(rng.normal(size=(b, d))).to(dtype)
    labels = torch.from_numpy(rng.integers(0, classes, b))
    return emb, labels


def loop_over_queries(emb, labels, loss, similarity):
    """Each sample ranked against the others by rank_hinge_loss on one row; the mean over
    the queries that have a positive and a negative."""
    sims = similarities(emb, emb, similarity)
    total, counted = emb.sum() * 0.0, 0
    for q in range(len(emb)):
        others = torch.arange(len(emb)) != q
        pos = labels[others] == labels[q]
        if pos.any() and not pos.all():
            total = total + rank_hinge_loss(sims[q, others], pos, loss, dim=-1)
            counted += 1
    return total / max(counted, 1)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_retrieval_loss_is_every_query_against_the_others(loss, similarity):
    emb, labels = batch(4)
    labels[0] = 99  # a class of one: no positive, left out
    x = emb.clone().requires_grad_(True)
    value = retrieval_loss(x, labels, loss=loss, similarity=similarity)
    value.backward()
    y = emb.clone().requires_grad_(True)
    expected = loop_over_queries(y, labels, loss, similarity)
    expected.backward()
    assert value.item() == pytest.approx(expected.item(), rel=1e-13)
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-12, atol=1e-15)
    assert x.grad.abs().sum() > 0


def test_retrieval_gradient_matches_finite_differences():
    emb, labels = batch(5, b=10, d=3, classes=3)
    x = emb.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e: retrieval_loss(e, labels), (x,), eps=1e-7, atol=1e-7)


def test_reference_set_ranks_queries_against_it_without_a_mask():
    emb, labels = batch(6, b=6)
    ref, ref_labels = batch(7, b=30)
    q, r = emb.clone().requires_grad_(True), ref.clone().requires_grad_(True)
    value = RetrievalLoss("ndcg", similarity="dot")(q, labels, r, ref_labels)
    value.backward()
    q2, r2 = emb.clone().requires_grad_(True), ref.clone().requires_grad_(True)
    expected = rank_hinge_loss(q2 @ r2.T, labels[:, None] == ref_labels[None, :], "ndcg", dim=-1)
    expected.backward()
    assert value.item() == expected.item()
    # the gradients as products with the coefficient matrix, scaled per query after the
    # product: the same sums, rounded in another order
    torch.testing.assert_close(q.grad, q2.grad, rtol=1e-13, atol=1e-16)
    torch.testing.assert_close(r.grad, r2.grad, rtol=1e-13, atol=1e-16)


def test_work_arrays_kept_between_calls_of_other_shapes_and_dtypes_change_nothing():
    """The similarities and positives written into a caller's work arrays, grown, reused
    smaller, remade for another dtype: each call as one with fresh arrays, and no call's
    gradient changed by the next call."""
    work, calls, held_sizes = {}, [], []
    for k, (b, n, dtype) in enumerate(
        [
            (5, 30, torch.float64),
            (7, 50, torch.float64),
            (3, 20, torch.float64),
            (6, 40, torch.float32),
        ]
    ):
        emb, labels = batch(20 + k, b=b, dtype=dtype)
        ref, ref_labels = batch(30 + k, b=n, dtype=dtype)
        got = []
        for held in (work, None):
            x = emb.clone().requires_grad_(True)
            value = ranked_against(
                x, labels, ref, ref_labels, hinge_solve("ap", "auto"), "mean", work=held
            )
            got.append((value, x))
        calls.append(got)
        held_sizes.append((work["product"].numel(), work["product"].dtype))
    assert held_sizes == [
        (150, torch.float64),
        (350, torch.float64),
        (350, torch.float64),
        (240, torch.float32),
    ]
    for (value, x), (expected, y) in calls:
        value.backward()
        expected.backward()
        assert value.item() == expected.item()
        assert torch.equal(x.grad, y.grad) and x.grad.abs().sum() > 0


def test_float32_embeddings_give_float32_loss_and_gradient():
    emb, labels = batch(8, dtype=torch.float32)
    x = emb.clone().requires_grad_(True)
    value = retrieval_loss(x, labels)
    value.backward()
    assert value.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert value.item() == pytest.approx(retrieval_loss(emb.double(), labels).item(), rel=1e-5)


@pytest.mark.parametrize(
    "args,kwargs,message",
    [
        ((torch.zeros(4, 3), torch.zeros(5, dtype=torch.long)), {}, "one class per row"),
        ((torch.zeros(4, 3), torch.zeros(4)), {}, "integer"),
        ((torch.zeros(4), torch.zeros(4, dtype=torch.long)), {}, "2-D floating-point"),
        (
            (
                torch.zeros(4, 3),
                torch.zeros(4, dtype=torch.long),
                torch.zeros(2, 4),
                torch.zeros(2, dtype=torch.long),
            ),
            {},
            "ref_emb must have the embeddings' size 3",
        ),
        (
            (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long), torch.zeros(2, 3)),
            {},
            "give both or neither",
        ),
        ((torch.zeros(4, 3), torch.zeros(4, dtype=torch.long)), {"loss": "01"}, "'ap' or 'ndcg'"),
        (
            (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long)),
            {"similarity": "l2"},
            "similarity must be one of",
        ),
        ((torch.full((4, 3), float("nan")), torch.zeros(4, dtype=torch.long)), {}, "finite"),
    ],
)
def test_bad_embeddings_are_refused(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        retrieval_loss(*args, **kwargs)

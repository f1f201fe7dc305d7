"""Surrogates for AP and NDCG from outside the source papers, to compare against the exact
structured hinge of :mod:`qs.torch`. None of them finds the exact most violated ranking.

- Smooth-AP (Brown et al., ECCV 2020): :func:`smooth_ap_loss`, the rank replaced by a sum of
  sigmoids of score differences at temperature 0.01. pytorch-metric-learning's
  ``SmoothAPLoss`` is the same relaxation for embeddings (cosine similarities of a batch,
  equal class counts), not for a score vector per query, so this short function stands in;
  the tests check both agree on the embeddings' similarities.
- Black-box differentiation of the ranking (Rolinek et al., CVPR 2020): :func:`blackbox_ranks`
  forwards the exact ranks and differentiates a piecewise-linear interpolation of them;
  :func:`blackbox_ap_loss` is 1 - AP of those ranks.
- LibAUC (the ``[compare]`` extra): :class:`LibAUCAPLoss`, its AP loss (SOAP: moving
  averages of the ratio's numerator and denominator per positive sample), and
  :class:`LibAUCNDCGLoss`, its NDCG loss (SONG); :class:`LibAUCRetrievalAPLoss`, SOAP over
  the queries of a batch of embeddings.
- torchsort (no extra: it installs only by compiling a C++ extension):
  :func:`soft_rank_spearman_loss` and :func:`soft_rank_ap_loss` through its soft rank.

Scores are (Q, n), one row per query (a class against the rest), or (n,); labels the same
shape, 1/True positive. The optional packages are imported only when a loss is made or
called; a missing one raises ImportError naming what to install.
"""

import importlib

import torch

from qs.validation import as_query_rows

__all__ = ["LibAUCAPLoss", "LibAUCNDCGLoss", "LibAUCRetrievalAPLoss", "blackbox_ap_loss",
           "blackbox_ranks", "require", "smooth_ap_loss", "soft_rank_ap_loss",
           "soft_rank_spearman_loss"]

#: optional package -> (import name, how to install it)
PACKAGES = {
    "libauc": ("libauc", "pip install 'qsrank[compare]'"),
    "pytorch-metric-learning": ("pytorch_metric_learning", "pip install 'qsrank[compare]'"),
    "torchsort": ("torchsort", ("pip install torchsort (in no extra: it compiles a C++ "
                               "extension against the installed torch)")),
}


def require(package, module=None):
    """Import the optional `package` (a key of PACKAGES), or its `module`; raise a one-line
    ImportError when it is missing."""
    name, how = PACKAGES[package]
    try:
        return importlib.import_module(module or name)
    except ImportError:
        raise ImportError(f"this method needs the package {package}, which is not "
                          f"installed: {how}") from None


def _mean_over_ranked(values, pos):
    """Mean of per-query values over the queries that have a positive and a negative."""
    n_pos = pos.sum(-1)
    counted = (n_pos > 0) & (n_pos < pos.shape[-1])
    return torch.where(counted, values, 0.0).sum() / counted.sum().clamp(min=1)


# ---------------------------------------------------------------------------- Smooth-AP

def smooth_ap_loss(scores, labels, temperature=0.01):
    """1 - Smooth-AP per query, averaged: AP over the positives of ``rank among positives /
    rank among all``, each rank ``1 + sum_j sigmoid((s_j - s_i) / temperature)`` over the
    other samples. Memory grows as Q n^2."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature!r}.")
    scores, pos = as_query_rows(scores, labels)
    n = scores.shape[-1]
    above = torch.sigmoid((scores[:, None, :] - scores[:, :, None]) / temperature)
    above = above * (1.0 - torch.eye(n, dtype=scores.dtype, device=scores.device))
    rank_all = 1.0 + above.sum(-1)
    rank_pos = 1.0 + (above * pos[:, None, :]).sum(-1)
    ap = (rank_pos / rank_all * pos).sum(-1) / pos.sum(-1).clamp(min=1)
    return _mean_over_ranked(1.0 - ap, pos)


# ---------------------------------------------------------------------------- black box

def _exact_ranks(scores):
    """Ranks 1..n by descending score per row (ties: the earlier sample first)."""
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
    return torch.argsort(order, dim=-1).to(scores.dtype) + 1.0


class _BlackboxRanks(torch.autograd.Function):
    """Forward: the exact ranks, ``argmin_r <s, r>`` over permutations r of 1..n. Backward
    (Vlastelica et al., ICLR 2020; for ranks, Rolinek et al., CVPR 2020): rank the perturbed
    scores ``s + strength * dL/dr`` and return ``-(r(s) - r(s')) / strength``, the gradient of
    a piecewise-linear interpolation of the loss at interpolation strength ``strength``."""

    @staticmethod
    def forward(ctx, scores, strength):
        ranks = _exact_ranks(scores)
        ctx.save_for_backward(scores, ranks)
        ctx.strength = strength
        return ranks

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_ranks):
        scores, ranks = ctx.saved_tensors
        shifted = _exact_ranks(scores + ctx.strength * grad_ranks)
        return -(ranks - shifted) / ctx.strength, None


def blackbox_ranks(scores, strength=1.0):
    """Exact descending ranks of each row of `scores` (1 = highest), differentiable by
    black-box interpolation with strength `strength` (> 0)."""
    if not strength > 0:
        raise ValueError(f"strength must be > 0; got {strength!r}.")
    return _BlackboxRanks.apply(scores, float(strength))


def blackbox_ap_loss(scores, labels, strength=1.0):
    """1 - AP per query, averaged, from black-box ranks: AP = mean over the positives of
    ``rank among positives / rank among all``, both ranks black-box differentiated. Scores
    are min-max normalised per query first (no gradient through the normalisation's
    constants), so `strength` is on the scale of scores in [0, 1]; negatives sit at -inf in
    the ranking of the positives."""
    scores, pos = as_query_rows(scores, labels)
    lo = scores.detach().amin(-1, keepdim=True)
    span = (scores.detach().amax(-1, keepdim=True) - lo).clamp(min=1e-12)
    scaled = (scores - lo) / span
    rank_all = blackbox_ranks(scaled, strength)
    rank_pos = blackbox_ranks(torch.where(pos, scaled, -torch.inf), strength)
    ap = (rank_pos / rank_all * pos).sum(-1) / pos.sum(-1).clamp(min=1)
    return _mean_over_ranked(1.0 - ap, pos)


# ---------------------------------------------------------------------------- LibAUC

class LibAUCAPLoss(torch.nn.Module):
    """LibAUC's AP loss (SOAP; Qi et al., NeurIPS 2021), one per query, on sigmoid scores as
    LibAUC's examples use it. It keeps moving averages per training sample, so each call
    takes the samples' indices in the training set (``index``, shape (n,)). A query with no
    positive in the batch is left out (LibAUC refuses it)."""

    def __init__(self, n_train, num_labels=1, margin=1.0, gamma=0.9, device="cpu"):
        super().__init__()
        losses = require("libauc", "libauc.losses")
        self.device = torch.device(device)
        self.losses = [losses.APLoss(data_len=n_train, margin=margin, gamma=gamma,
                                     device=self.device) for _ in range(num_labels)]

    def forward(self, scores, labels, index):
        scores, pos = as_query_rows(scores, labels)
        total, counted = scores.new_zeros(()), 0
        for q, loss in enumerate(self.losses):
            if pos[q].any():
                total = total + loss(torch.sigmoid(scores[q])[:, None],
                                     pos[q].long()[:, None], index.to(self.device))
                counted += 1
        return total / max(counted, 1)


class LibAUCNDCGLoss(torch.nn.Module):
    """LibAUC's NDCG loss (SONG; Qiu et al., ICML 2022) with the queries as its "users" and
    the training samples as its "items". Per call and query with a positive in the batch,
    ``num_pos`` of the batch's positives are drawn (with replacement, seeded) and ranked
    against every sample of the batch. ``train_positives``: the number of positives of each
    query in the whole training set (for its ideal DCG)."""

    def __init__(self, n_train, train_positives, num_pos=8, gamma0=0.9, margin=1.0, seed=0,
                 device="cpu"):
        super().__init__()
        losses = require("libauc", "libauc.losses")
        self.n_train, self.num_pos, self.device = n_train, num_pos, torch.device(device)
        self.positives = torch.as_tensor(train_positives, dtype=torch.float64)
        discount = 1.0 / torch.log2(torch.arange(2, n_train + 2, dtype=torch.float64))
        self.ideal = torch.cumsum(discount, 0)[(self.positives.long() - 1).clamp(min=0)]
        self.loss = losses.NDCGLoss(N=len(self.positives) * n_train,
                                    num_user=len(self.positives), num_item=n_train,
                                    num_pos=num_pos, gamma0=gamma0, margin=margin,
                                    device=self.device)
        self.generator = torch.Generator().manual_seed(seed)

    def forward(self, scores, labels, index):
        scores, pos = as_query_rows(scores, labels)
        queries = [q for q in range(scores.shape[0]) if pos[q].any()]
        if not queries:
            return scores.sum() * 0.0
        picks = [torch.flatten(pos[q].nonzero())[torch.randint(
            int(pos[q].sum()), (self.num_pos,), generator=self.generator)] for q in queries]
        predictions = torch.stack([torch.cat([scores[q, p], scores[q]])
                                   for q, p in zip(queries, picks)])
        q_index = torch.tensor(queries)
        pos, index = pos.cpu(), index.cpu()
        batch = {
            "rating": torch.cat([torch.ones(len(queries), self.num_pos), pos[queries].float()],
                                dim=1),
            "user_id": q_index,
            "num_pos_items": self.positives[q_index],
            "ideal_dcg": self.ideal[q_index],
            "user_item_id": torch.stack([q * self.n_train + index[p.cpu()]
                                         for q, p in zip(queries, picks)]),
        }
        return self.loss(predictions, {k: v.to(self.device) for k, v in batch.items()})


# ---------------------------------------------------------------------------- torchsort

def soft_rank_spearman_loss(scores, targets, strength=1.0):
    """1 - Spearman correlation per query between torchsort's soft ranks of `scores` (l2
    regularisation of strength `strength`) and the exact ranks of `targets`, averaged."""
    torchsort = require("torchsort")
    scores = scores if scores.ndim == 2 else scores[None]
    targets = torch.as_tensor(targets, dtype=scores.dtype, device=scores.device)
    targets = targets if targets.ndim == 2 else targets[None]
    soft = torchsort.soft_rank(scores, regularization_strength=strength)
    exact = torchsort.soft_rank(targets, regularization_strength=1e-6)
    soft, exact = soft - soft.mean(-1, keepdim=True), exact - exact.mean(-1, keepdim=True)
    rho = (soft * exact).sum(-1) / (soft.norm(dim=-1) * exact.norm(dim=-1)).clamp(min=1e-12)
    return (1.0 - rho).mean()


def soft_rank_ap_loss(scores, labels, strength=1.0):
    """1 - AP per query from torchsort's soft ranks (descending, l2 regularisation of
    strength `strength`) among all samples and among the positives, averaged."""
    torchsort = require("torchsort")
    scores, pos = as_query_rows(scores, labels)
    values = []
    for row, mask in zip(scores, pos):
        rank_all = torchsort.soft_rank(-row[None], regularization_strength=strength)[0]
        rank_pos = torchsort.soft_rank(-row[mask][None], regularization_strength=strength)[0]
        values.append(1.0 - (rank_pos / rank_all[mask]).mean() if 0 < mask.sum() < len(mask)
                      else row.sum() * 0.0)
    return _mean_over_ranked(torch.stack(values), pos)



class LibAUCRetrievalAPLoss(torch.nn.Module):
    """LibAUC's AP loss (SOAP) for embeddings: each sample of the batch a query ranking the
    others by cosine similarity, the samples of its class its positives. SOAP's moving
    averages are kept per positive sample, in one table per class of the query (the queries
    of a class rank the same positives). ``labels``: class ids 0..num_classes-1; ``index``:
    the samples' indices in the training set. A query alone of its class in the batch is
    left out."""

    def __init__(self, n_train, num_classes, margin=1.0, gamma=0.9, device="cpu"):
        super().__init__()
        losses = require("libauc", "libauc.losses")
        self.device = torch.device(device)
        self.losses = [losses.APLoss(data_len=n_train, margin=margin, gamma=gamma,
                                     device=self.device) for _ in range(num_classes)]

    def forward(self, embeddings, labels, index):
        unit = torch.nn.functional.normalize(embeddings, dim=1)
        sims = unit @ unit.T
        classes = torch.as_tensor(labels).tolist()  # a query's table, by its class
        labels = torch.as_tensor(labels).to(self.device)
        index = torch.as_tensor(index).to(self.device)
        total, counted = sims.new_zeros(()), 0
        for q, cls in enumerate(classes):
            others = torch.arange(len(classes), device=self.device) != q
            pos = labels[others] == cls
            if pos.any():
                total = total + self.losses[cls](sims[q, others][:, None], pos.long()[:, None],
                                                 index[others])
                counted += 1
        return total / max(counted, 1)

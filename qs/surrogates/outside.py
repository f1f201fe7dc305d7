"""Surrogates for AP and NDCG from outside the source papers, to compare against the exact
structured hinge of `qs.torch`. None of them finds the exact most violated ranking.

- Smooth-AP (Brown et al., ECCV 2020): `smooth_ap_loss`, the rank replaced by a sum of
  sigmoids of score differences at temperature 0.01. pytorch-metric-learning's
  ``SmoothAPLoss`` is the same relaxation for embeddings (cosine similarities of a batch,
  equal class counts), not for a score vector per query, so this short function stands in;
  the tests check both agree on the embeddings' similarities.
- Black-box differentiation of the ranking (Rolinek et al., CVPR 2020): `blackbox_ranks`
  forwards the exact ranks and differentiates a piecewise-linear interpolation of them;
  `blackbox_ap_loss` is 1 - AP of those ranks.
- LibAUC (the ``[compare]`` extra): `LibAUCAPLoss`, its AP loss (SOAP: moving
  averages of the ratio's numerator and denominator per positive sample), and
  `LibAUCNDCGLoss`, its NDCG loss (SONG); `LibAUCRetrievalAPLoss`, SOAP over
  the queries of a batch of embeddings.
- torchsort (no extra: it installs only by compiling a C++ extension):
  `soft_rank_spearman_loss` and `soft_rank_ap_loss` through its soft rank.

Scores are (Q, n), one row per query (a class against the rest), or (n,); labels the same
shape, 1/True positive. The optional packages are imported only when a loss is made or
called; a missing one raises ImportError naming what to install.
"""

import importlib
from types import ModuleType
from typing import Any

import numpy.typing as npt
import torch

from qs.validation import as_query_rows

__all__ = [
    "LibAUCAPLoss",
    "LibAUCNDCGLoss",
    "LibAUCRetrievalAPLoss",
    "blackbox_ap_loss",
    "blackbox_ranks",
    "require",
    "smooth_ap_loss",
    "soft_rank_ap_loss",
    "soft_rank_spearman_loss",
]

#: optional package -> (import name, how to install it)
PACKAGES = {
    "libauc": ("libauc", "pip install 'qsrank[compare]'"),
    "pytorch-metric-learning": ("pytorch_metric_learning", "pip install 'qsrank[compare]'"),
    "torchsort": (
        "torchsort",
        (
            "pip install torchsort (in no extra: it compiles a C++ "
            "extension against the installed torch)"
        ),
    ),
}


def require(package: str, module: str | None = None) -> ModuleType:
    """Import an optional package, or one of its modules.

    Parameters
    ----------
    package : str
        A key of ``PACKAGES``: "libauc", "pytorch-metric-learning" or "torchsort".
    module : str or None, default None
        The module to import (None: the package itself).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ImportError
        In one line naming how to install the package, when it is missing.

    Examples
    --------
    >>> try:
    ...     found = require("torchsort") is not None
    ... except ImportError as err:  # not installed: the one line says how to install it
    ...     found = str(err).startswith("this method needs the package torchsort")
    >>> found
    True
    """
    name, how = PACKAGES[package]
    try:
        return importlib.import_module(module or name)
    except ImportError:
        raise ImportError(
            f"this method needs the package {package}, which is not installed: {how}"
        ) from None


def _mean_over_ranked(values: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Mean of per-query values over the queries that have a positive and a negative."""
    n_pos = pos.sum(-1)
    counted = (n_pos > 0) & (n_pos < pos.shape[-1])
    return torch.where(counted, values, 0.0).sum() / counted.sum().clamp(min=1)


# ---------------------------------------------------------------------------- Smooth-AP


def smooth_ap_loss(
    scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike, temperature: float = 0.01
) -> torch.Tensor:
    """1 - Smooth-AP per query, averaged over the queries with a positive and a negative.

    AP over the positives of ``rank among positives / rank among all``, each rank
    ``1 + sum_j sigmoid((s_j - s_i) / temperature)`` over the other samples. Memory grows
    as Q n^2.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        One row per query.
    labels : Tensor or array_like of the scores' shape
        1/True positive, 0/-1/False negative.
    temperature : float, default 0.01
        The sigmoids' temperature (> 0).

    Returns
    -------
    Tensor
        A scalar.

    Raises
    ------
    ValueError
        If ``temperature <= 0``, or on bad scores and labels.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.outside import smooth_ap_loss
    >>> round(smooth_ap_loss(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).item(), 4)
    0.0
    """
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


def _exact_ranks(scores: torch.Tensor) -> torch.Tensor:
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


def blackbox_ranks(scores: torch.Tensor, strength: float = 1.0) -> torch.Tensor:
    """Exact descending ranks, differentiable by black-box interpolation.

    Parameters
    ----------
    scores : Tensor
        Ranked along the last axis.
    strength : float, default 1.0
        The interpolation strength (> 0).

    Returns
    -------
    Tensor of the scores' shape
        Ranks 1..n of each row (1 = highest; ties: the earlier sample first).

    Raises
    ------
    ValueError
        If ``strength <= 0``.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.outside import blackbox_ranks
    >>> blackbox_ranks(torch.tensor([0.5, 2.0, 1.0])).tolist()
    [3.0, 1.0, 2.0]
    """
    if not strength > 0:
        raise ValueError(f"strength must be > 0; got {strength!r}.")
    return _BlackboxRanks.apply(scores, float(strength))


def blackbox_ap_loss(
    scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike, strength: float = 1.0
) -> torch.Tensor:
    """1 - AP per query from black-box ranks, averaged over the ranked queries.

    AP = mean over the positives of ``rank among positives / rank among all``, both ranks
    black-box differentiated. Scores are min-max normalised per query first (no gradient
    through the normalisation's constants); negatives sit at -inf in the ranking of the
    positives.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        One row per query.
    labels : Tensor or array_like of the scores' shape
        1/True positive, 0/-1/False negative.
    strength : float, default 1.0
        The interpolation strength (> 0), on the scale of scores in [0, 1].

    Returns
    -------
    Tensor
        A scalar.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.outside import blackbox_ap_loss
    >>> round(blackbox_ap_loss(torch.tensor([0.5, 2.0, 1.0, 0.1]), [0, 1, 0, 1]).item(), 4)
    0.25
    """
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
    """LibAUC's AP loss (SOAP; Qi et al., NeurIPS 2021), one per query.

    On sigmoid scores as LibAUC's examples use it. It keeps moving averages per training
    sample, so each call takes the samples' indices in the training set. A query with no
    positive in the batch is left out (LibAUC refuses it).

    Parameters
    ----------
    n_train : int
        Size of the training set.
    num_labels : int, default 1
        Number of queries (rows of the scores).
    margin : float, default 1.0
        LibAUC's margin.
    gamma : float, default 0.9
        LibAUC's moving-average weight.
    device : str or torch.device, default "cpu"
        Where LibAUC keeps its averages.

    Raises
    ------
    ImportError
        If LibAUC is not installed.
    """

    def __init__(
        self,
        n_train: int,
        num_labels: int = 1,
        margin: float = 1.0,
        gamma: float = 0.9,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        losses = require("libauc", "libauc.losses")
        self.device = torch.device(device)
        self.losses = [
            losses.APLoss(data_len=n_train, margin=margin, gamma=gamma, device=self.device)
            for _ in range(num_labels)
        ]

    def forward(
        self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike, index: torch.Tensor
    ) -> torch.Tensor:
        """The loss, the mean over the queries with a positive in the batch.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query.
        labels : Tensor or array_like of the scores' shape
            1/True positive.
        index : Tensor of shape (n,)
            The samples' indices in the training set.

        Returns
        -------
        Tensor
            A scalar.
        """
        scores, pos = as_query_rows(scores, labels)
        total, counted = scores.new_zeros(()), 0
        for q, loss in enumerate(self.losses):
            if pos[q].any():
                total = total + loss(
                    torch.sigmoid(scores[q])[:, None], pos[q].long()[:, None], index.to(self.device)
                )
                counted += 1
        return total / max(counted, 1)


class LibAUCNDCGLoss(torch.nn.Module):
    """LibAUC's NDCG loss (SONG; Qiu et al., ICML 2022) with the queries as its "users" and
    the training samples as its "items". Per call and query with a positive in the batch,
    ``num_pos`` of the batch's positives are drawn (with replacement, seeded) and ranked
    against every sample of the batch.

    Parameters
    ----------
    n_train : int
        Size of the training set.
    train_positives : array_like of shape (Q,)
        The number of positives of each query in the whole training set (for its ideal
        DCG).
    num_pos : int, default 8
        Positives drawn per query and call.
    gamma0 : float, default 0.9
        LibAUC's moving-average weight.
    margin : float, default 1.0
        LibAUC's margin.
    seed : int, default 0
        Seed of the draws.
    device : str or torch.device, default "cpu"
        Where LibAUC keeps its averages.

    Raises
    ------
    ImportError
        If LibAUC is not installed.
    """

    def __init__(
        self,
        n_train: int,
        train_positives: npt.ArrayLike,
        num_pos: int = 8,
        gamma0: float = 0.9,
        margin: float = 1.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        losses = require("libauc", "libauc.losses")
        self.n_train, self.num_pos, self.device = n_train, num_pos, torch.device(device)
        self.positives = torch.as_tensor(train_positives, dtype=torch.float64)
        discount = 1.0 / torch.log2(torch.arange(2, n_train + 2, dtype=torch.float64))
        self.ideal = torch.cumsum(discount, 0)[(self.positives.long() - 1).clamp(min=0)]
        self.loss = losses.NDCGLoss(
            N=len(self.positives) * n_train,
            num_user=len(self.positives),
            num_item=n_train,
            num_pos=num_pos,
            gamma0=gamma0,
            margin=margin,
            device=self.device,
        )
        self.generator = torch.Generator().manual_seed(seed)

    def forward(
        self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike, index: torch.Tensor
    ) -> torch.Tensor:
        """The loss over the queries with a positive in the batch.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query.
        labels : Tensor or array_like of the scores' shape
            1/True positive.
        index : Tensor of shape (n,)
            The samples' indices in the training set.

        Returns
        -------
        Tensor
            A scalar (0, with a gradient, when no query has a positive).
        """
        scores, pos = as_query_rows(scores, labels)
        queries = [q for q in range(scores.shape[0]) if pos[q].any()]
        if not queries:
            return scores.sum() * 0.0
        picks = [
            torch.flatten(pos[q].nonzero())[
                torch.randint(int(pos[q].sum()), (self.num_pos,), generator=self.generator)
            ]
            for q in queries
        ]
        predictions = torch.stack(
            [torch.cat([scores[q, p], scores[q]]) for q, p in zip(queries, picks)]
        )
        q_index = torch.tensor(queries)
        pos, index = pos.cpu(), index.cpu()
        batch = {
            "rating": torch.cat(
                [torch.ones(len(queries), self.num_pos), pos[queries].float()], dim=1
            ),
            "user_id": q_index,
            "num_pos_items": self.positives[q_index],
            "ideal_dcg": self.ideal[q_index],
            "user_item_id": torch.stack(
                [q * self.n_train + index[p.cpu()] for q, p in zip(queries, picks)]
            ),
        }
        return self.loss(predictions, {k: v.to(self.device) for k, v in batch.items()})


# ---------------------------------------------------------------------------- torchsort


def soft_rank_spearman_loss(
    scores: torch.Tensor, targets: torch.Tensor | npt.ArrayLike, strength: float = 1.0
) -> torch.Tensor:
    """1 - Spearman correlation per query from torchsort's soft ranks, averaged.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        One row per query, soft-ranked.
    targets : Tensor or array_like of the scores' shape
        Ranked exactly.
    strength : float, default 1.0
        Strength of torchsort's l2 regularisation.

    Returns
    -------
    Tensor
        A scalar.

    Raises
    ------
    ImportError
        If torchsort is not installed.
    """
    torchsort = require("torchsort")
    scores = scores if scores.ndim == 2 else scores[None]
    targets = torch.as_tensor(targets, dtype=scores.dtype, device=scores.device)
    targets = targets if targets.ndim == 2 else targets[None]
    soft = torchsort.soft_rank(scores, regularization_strength=strength)
    exact = torchsort.soft_rank(targets, regularization_strength=1e-6)
    soft, exact = soft - soft.mean(-1, keepdim=True), exact - exact.mean(-1, keepdim=True)
    rho = (soft * exact).sum(-1) / (soft.norm(dim=-1) * exact.norm(dim=-1)).clamp(min=1e-12)
    return (1.0 - rho).mean()


def soft_rank_ap_loss(
    scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike, strength: float = 1.0
) -> torch.Tensor:
    """1 - AP per query from torchsort's soft ranks, averaged over the ranked queries.

    The soft ranks are descending, among all samples and among the positives.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        One row per query.
    labels : Tensor or array_like of the scores' shape
        1/True positive, 0/-1/False negative.
    strength : float, default 1.0
        Strength of torchsort's l2 regularisation.

    Returns
    -------
    Tensor
        A scalar.

    Raises
    ------
    ImportError
        If torchsort is not installed.
    """
    torchsort = require("torchsort")
    scores, pos = as_query_rows(scores, labels)
    values = []
    for row, mask in zip(scores, pos):
        rank_all = torchsort.soft_rank(-row[None], regularization_strength=strength)[0]
        rank_pos = torchsort.soft_rank(-row[mask][None], regularization_strength=strength)[0]
        values.append(
            1.0 - (rank_pos / rank_all[mask]).mean()
            if 0 < mask.sum() < len(mask)
            else row.sum() * 0.0
        )
    return _mean_over_ranked(torch.stack(values), pos)


class LibAUCRetrievalAPLoss(torch.nn.Module):
    """LibAUC's AP loss (SOAP) for embeddings: each sample of the batch a query ranking the
    others by cosine similarity, the samples of its class its positives. SOAP's moving
    averages are kept per positive sample, in one table per class of the query (the queries
    of a class rank the same positives). A query alone of its class in the batch is left
    out.

    Parameters
    ----------
    n_train : int
        Size of the training set.
    num_classes : int
        Number of classes.
    margin : float, default 1.0
        LibAUC's margin.
    gamma : float, default 0.9
        LibAUC's moving-average weight.
    device : str or torch.device, default "cpu"
        Where LibAUC keeps its averages.

    Raises
    ------
    ImportError
        If LibAUC is not installed.
    """

    def __init__(
        self,
        n_train: int,
        num_classes: int,
        margin: float = 1.0,
        gamma: float = 0.9,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        losses = require("libauc", "libauc.losses")
        self.device = torch.device(device)
        self.losses = [
            losses.APLoss(data_len=n_train, margin=margin, gamma=gamma, device=self.device)
            for _ in range(num_classes)
        ]

    def forward(self, embeddings: torch.Tensor, labels: Any, index: Any) -> torch.Tensor:
        """The loss, the mean over the queries that have another sample of their class.

        Parameters
        ----------
        embeddings : Tensor of shape (n, d)
            The batch's embeddings.
        labels : Tensor or array_like of shape (n,)
            Class ids 0..num_classes-1.
        index : Tensor or array_like of shape (n,)
            The samples' indices in the training set.

        Returns
        -------
        Tensor
            A scalar.
        """
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
                total = total + self.losses[cls](
                    sims[q, others][:, None], pos.long()[:, None], index[others]
                )
                counted += 1
        return total / max(counted, 1)

"""SoDeep's sorters: networks mapping (B, d) scores to (B, d) normalised ranks, the exact
ranks they learn, and the handcrafted baseline (conventions in `qs.surrogates.sodeep`)."""

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

__all__ = [
    "DEFAULT_LENGTH",
    "KINDS",
    "SIZES",
    "SORTERS",
    "CNNSorter",
    "HandcraftedSorter",
    "LSTMSorter",
    "bounded_ranks",
    "build_sorter",
    "exact_ranks",
    "n_parameters",
    "standardise",
]

#: the length of the shipped checkpoints
DEFAULT_LENGTH = 64
KINDS = ("lstm", "cnn")
#: hyper-parameters of each sorter kind: "default" trains on 2 CPU cores in minutes, "full"
#: is the paper's LSTM (hidden 512)
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "lstm": {"default": {"hidden": 32}, "full": {"hidden": 512}},
    "cnn": {
        "default": {"channels": (8, 16, 16, 32, 32, 32, 32, 32)},
        "full": {"channels": (8, 16, 32, 64, 96, 128, 256, 256)},
    },
}
# the CNN's kernel sizes, block by block: "same" padding, so the receptive field before the
# final whole-vector convolution is 1 + sum(k - 1) = 41 scores
_CNN_KERNELS = (3, 3, 5, 5, 7, 7, 9, 9)


def exact_ranks(scores: torch.Tensor) -> torch.Tensor:
    """The normalised ranks of `qs.surrogates.sodeep` along the last axis.

    Parameters
    ----------
    scores : Tensor of shape (..., d)
        The scores.

    Returns
    -------
    Tensor of the scores' shape
        ``#{j : s_j >= s_i} / d`` (1/d for the highest score, 1 for the lowest; tied
        scores all get the largest rank of their group). Piecewise constant, no gradient.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import exact_ranks
    >>> exact_ranks(torch.tensor([0.5, 2.0, 1.0, 1.0])).tolist()
    [1.0, 0.25, 0.75, 0.75]
    """
    scores = scores.detach()
    d = scores.shape[-1]
    ascending = scores.sort(dim=-1).values.contiguous()
    below = torch.searchsorted(ascending, scores.contiguous(), side="left")
    return (d - below).to(scores.dtype if scores.is_floating_point() else torch.float32) / d


def standardise(scores: torch.Tensor) -> torch.Tensor:
    """Each vector (last axis) minus its mean, divided by its root-mean-square deviation.

    An increasing map, so ranks are kept. The deviation is floored at the dtype's epsilon,
    so a constant vector maps to zeros with a finite gradient.

    Parameters
    ----------
    scores : Tensor of shape (..., d)
        Floating-point scores.

    Returns
    -------
    Tensor of the scores' shape
        The standardised vectors.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import standardise
    >>> [round(v, 4) for v in standardise(torch.tensor([1.0, 2.0, 3.0])).tolist()]
    [-1.2247, 0.0, 1.2247]
    """
    centred = scores - scores.mean(dim=-1, keepdim=True)
    spread = torch.linalg.vector_norm(centred, dim=-1, keepdim=True) / math.sqrt(scores.shape[-1])
    return centred / spread.clamp_min(torch.finfo(scores.dtype).eps)


def bounded_ranks(logits: torch.Tensor) -> torch.Tensor:
    """Logits to ranks in [1/d, 1], the range of the exact normalised ranks.

    Parameters
    ----------
    logits : Tensor of shape (..., d)
        One logit per position.

    Returns
    -------
    Tensor of the logits' shape
        ``1/d + (1 - 1/d) sigmoid(logit)``.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import bounded_ranks
    >>> bounded_ranks(torch.zeros(4)).tolist()
    [0.625, 0.625, 0.625, 0.625]
    """
    d = logits.shape[-1]
    return 1 / d + (1 - 1 / d) * torch.sigmoid(logits)


class LSTMSorter(nn.Module):
    """Bidirectional LSTM sorter: (B, d) scores -> (B, d) normalised ranks.

    Two stacked bidirectional LSTM layers of `hidden` units read the standardised scores as
    a sequence; a kernel-1 convolution maps each position's 2*hidden features to its logit,
    so every output sees every input.

    Parameters
    ----------
    length : int
        The length d of the score vectors it ranks.
    hidden : int, default 32
        Units of each LSTM direction and layer.

    Examples
    --------
    >>> sorter = LSTMSorter(8, hidden=4)
    >>> sorter(torch.randn(2, 8)).shape, n_parameters(sorter)
    (torch.Size([2, 8]), 681)
    """

    kind = "lstm"

    def __init__(self, length: int, hidden: int = SIZES["lstm"]["default"]["hidden"]) -> None:
        super().__init__()
        self.length, self.hidden = int(length), int(hidden)
        self.lstm = nn.LSTM(1, self.hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Conv1d(2 * self.hidden, 1, kernel_size=1)

    def hyper(self) -> dict[str, Any]:
        """The constructor's keyword arguments besides the length.

        Returns
        -------
        dict
            ``{"hidden": ...}``, as a checkpoint records it.

        Examples
        --------
        >>> LSTMSorter(8, hidden=4).hyper()
        {'hidden': 4}
        """
        return {"hidden": self.hidden}

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        """The normalised ranks of scores.

        Parameters
        ----------
        scores : torch.Tensor of shape (B, d)
            The score vectors, d the sorter's length.

        Returns
        -------
        torch.Tensor of shape (B, d)
            Their normalised ranks.

        Examples
        --------
        >>> LSTMSorter(8, hidden=4)(torch.randn(2, 8)).shape
        torch.Size([2, 8])
        """
        features, _ = _run_lstm(self.lstm, standardise(scores).unsqueeze(-1))
        return bounded_ranks(self.head(features.transpose(1, 2)).squeeze(1))


def _run_lstm(lstm: nn.LSTM, x: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """cuDNN computes an LSTM's backward pass only in training mode; a frozen (eval mode)
    sorter on a CUDA tensor that needs a gradient runs without cuDNN."""
    if x.is_cuda and x.requires_grad and not lstm.training:
        with torch.backends.cudnn.flags(enabled=False):
            return lstm(x)
    return lstm(x)


class CNNSorter(nn.Module):
    """1-D convolutional sorter: (B, d) scores -> (B, d) normalised ranks.

    Eight blocks [Conv1d (kernel 3, 3, 5, 5, 7, 7, 9, 9, "same" padding), BatchNorm1d, ReLU]
    with `channels` output channels over the standardised scores, then a Conv1d with kernel
    d and d output channels: an affine layer from all positions' features to the d logits.

    Parameters
    ----------
    length : int
        The length d of the score vectors it ranks.
    channels : sequence of int, default (8, 16, 16, 32, 32, 32, 32, 32)
        Output channels of each of the eight blocks.

    Raises
    ------
    ValueError
        If ``channels`` does not give eight counts.

    Examples
    --------
    >>> sorter = CNNSorter(8, channels=(2,) * 8).eval()
    >>> sorter(torch.randn(2, 8)).shape, n_parameters(sorter)
    (torch.Size([2, 8]), 370)
    """

    kind = "cnn"

    def __init__(
        self, length: int, channels: Sequence[int] = SIZES["cnn"]["default"]["channels"]
    ) -> None:
        super().__init__()
        self.length, self.channels = int(length), tuple(int(c) for c in channels)
        if len(self.channels) != len(_CNN_KERNELS):
            raise ValueError(
                f"the CNN sorter has {len(_CNN_KERNELS)} blocks; got "
                f"{len(self.channels)} channel counts {self.channels}."
            )
        layers, width = [], 1
        for out, kernel in zip(self.channels, _CNN_KERNELS):
            layers += [
                nn.Conv1d(width, out, kernel, padding=kernel // 2),
                nn.BatchNorm1d(out),
                nn.ReLU(),
            ]
            width = out
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Conv1d(width, self.length, kernel_size=self.length)

    def hyper(self) -> dict[str, Any]:
        """The constructor's keyword arguments besides the length.

        Returns
        -------
        dict
            ``{"channels": [...]}``, as a checkpoint records it.

        Examples
        --------
        >>> CNNSorter(8, channels=(2,) * 8).hyper()
        {'channels': [2, 2, 2, 2, 2, 2, 2, 2]}
        """
        return {"channels": list(self.channels)}

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        """The normalised ranks of scores.

        Parameters
        ----------
        scores : torch.Tensor of shape (B, d)
            The score vectors, d the sorter's length.

        Returns
        -------
        torch.Tensor of shape (B, d)
            Their normalised ranks.

        Examples
        --------
        >>> CNNSorter(8, channels=(2,) * 8).eval()(torch.randn(2, 8)).shape
        torch.Size([2, 8])
        """
        logits = self.head(self.blocks(standardise(scores).unsqueeze(1))).squeeze(-1)
        return bounded_ranks(logits)


class HandcraftedSorter(nn.Module):
    """The paper's untrained baseline: ``r_i = (1 + sum_{j != i} sigmoid(lam (s_j - s_i))) / d``.

    Each sigmoid is a soft "s_j is above s_i". `lam` trades accuracy for useful gradients; it
    is set per vector as ``scale / std(pairwise differences)`` so that the ranker does not
    depend on the scores' units. Works at any length.

    Parameters
    ----------
    scale : float, default 6.8
        The sigmoids' slope in units of the spread of the pairwise differences.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import HandcraftedSorter
    >>> ranks = HandcraftedSorter()(torch.tensor([[0.5, 2.0, 1.0]]))
    >>> [round(r, 2) for r in ranks[0].tolist()]
    [0.99, 0.33, 0.68]
    """

    kind = "handcrafted"
    length = None

    def __init__(self, scale: float = 6.8) -> None:
        super().__init__()
        self.scale = float(scale)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        """The soft normalised ranks of scores.

        Parameters
        ----------
        scores : torch.Tensor of shape (..., d)
            Score vectors of any length.

        Returns
        -------
        torch.Tensor of shape (..., d)
            Their soft normalised ranks, 1/d for the highest score to about 1 for the lowest.

        Examples
        --------
        >>> HandcraftedSorter()(torch.tensor([0.5, 2.0, 1.0])).argsort().tolist()
        [1, 2, 0]
        """
        diff = scores.unsqueeze(-2) - scores.unsqueeze(-1)  # [.., i, j] = s_j - s_i
        spread = diff.detach().flatten(-2).std(dim=-1).clamp_min(torch.finfo(diff.dtype).tiny)
        soft = torch.sigmoid(diff * (self.scale / spread)[..., None, None])
        d = scores.shape[-1]
        # the diagonal contributes sigmoid(0) = 1/2 per row; replace it by the "1 +"
        return (soft.sum(dim=-1) + 0.5) / d


SORTERS = {"lstm": LSTMSorter, "cnn": CNNSorter}


def build_sorter(
    kind: str, length: int, size: str = "default", **hyper: Any
) -> LSTMSorter | CNNSorter:
    """An untrained sorter.

    Parameters
    ----------
    kind : str
        "lstm" or "cnn".
    length : int
        Length of the score vectors (>= 2).
    size : str, default "default"
        Hyper-parameters of ``SIZES[kind]``: "default" or "full".
    **hyper
        Hyper-parameters that update those of ``size`` (``hidden``, ``channels``).

    Returns
    -------
    LSTMSorter or CNNSorter
        The sorter, its weights as torch's global RNG draws them.

    Raises
    ------
    ValueError
        On an unknown kind, size or hyper-parameter, or a length below 2.

    Examples
    --------
    >>> from qs.surrogates.sodeep import build_sorter, n_parameters
    >>> sorter = build_sorter("lstm", 8)
    >>> sorter.hyper(), n_parameters(sorter)
    ({'hidden': 32}, 34113)
    """
    if kind not in SORTERS:
        raise ValueError(f"unknown sorter kind {kind!r}; expected one of {list(KINDS)}.")
    if size not in SIZES[kind]:
        raise ValueError(f"unknown size {size!r}; expected one of {list(SIZES[kind])}.")
    if not isinstance(length, int) or isinstance(length, bool) or length < 2:
        raise ValueError(f"length must be an integer >= 2; got {length!r}.")
    unknown = sorted(set(hyper) - set(SIZES[kind][size]))
    if unknown:
        raise ValueError(
            f"the {kind} sorter has no hyper-parameter {', '.join(unknown)}; it "
            f"takes {', '.join(SIZES[kind][size])}."
        )
    return SORTERS[kind](length, **{**SIZES[kind][size], **hyper})


def n_parameters(module: nn.Module) -> int:
    """The number of parameters of a sorter, frozen ones included.

    Parameters
    ----------
    module : torch.nn.Module
        The sorter.

    Returns
    -------
    int
        Its parameters.

    Examples
    --------
    >>> n_parameters(nn.Linear(3, 2).requires_grad_(False))
    8
    """
    return sum(p.numel() for p in module.parameters())

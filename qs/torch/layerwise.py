"""Layer-wise SVM training of a piecewise-linear network (Mohapatra et al., CVPR 2018,
Section 4.3, after Berrada et al., ICLR 2017): one layer at a time, a proximal structured SVM solved by
block-coordinate Frank-Wolfe (Lacoste-Julien et al., ICML 2013) over the mini-batches.

With the activation pattern (ReLU masks, max-pool choices) fixed at the current weights
``theta0`` and batch norm in eval mode, the scores of a mini-batch are affine in one layer's
weights, so its structured hinge ``H_b`` is convex in them (a maximum of affine functions, the
most violated ranking found by exact LAI). `layerwise_svm` minimises over the step ``u``

    proximal/2 |u|^2 + C mean_b H_b(theta0 + u)

and sets the layer's weights to ``theta0 + u``. Each step visits one mini-batch: the gradient
of its hinge (the joint feature map of its most violated ranking) gives the Frank-Wolfe corner
of that block, and the line search between the block's current point and the corner is exact,
clipped to [0, 1]. The network must offer ``patterns(x)`` and ``forward_fixed(x, patterns)``
(`qs.nets.PLCNN` does).
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

__all__ = ["LayerwiseResult", "layerwise_svm"]


@dataclass(frozen=True)
class LayerwiseResult:
    """What one layer's solve did.

    Attributes
    ----------
    mean_hinge : float
        Mean over the steps of the visited mini-batch's hinge, each at the iterate of its
        step.
    steps : int
        Mini-batches visited (``passes`` times their number).
    dual : float
        The dual objective at the end, a lower bound on the layer's objective
        ``proximal/2 |u|^2 + C mean_b H_b(theta0 + u)`` at any ``u``.

    Examples
    --------
    >>> from qs.nets import PLCNN
    >>> from qs.torch import rank_hinge_loss
    >>> net = PLCNN(widths=(2, 2, 2), n_classes=3).eval()
    >>> x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    >>> y = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 0, 1, 2]), 3)
    >>> result = layerwise_svm(net, net.classifier, rank_hinge_loss,
    ...                        lambda b: (x[3 * b : 3 * b + 3], y[3 * b : 3 * b + 3]), 2,
    ...                        C=1.0, proximal=1.0, random_state=0)
    >>> isinstance(result, LayerwiseResult), result.steps
    (True, 2)
    """

    mean_hinge: float
    steps: int
    dual: float


def layerwise_svm(
    model, layer, loss, batch, n_batches, *, C, proximal, passes=1, random_state=None, callback=None
):
    """Train ``layer`` (a module with ``weight`` and ``bias`` inside ``model``) by the
    proximal structured SVM of its weights, the activation pattern fixed at its current ones.

    Parameters
    ----------
    model : torch.nn.Module
        A network with ``patterns(x)`` and ``forward_fixed(x, patterns)``, batch norm in
        eval mode (its statistics are part of the fixed affine map).
    layer : torch.nn.Module
        The layer of ``model`` to train; its weights are set to the solution.
    loss : callable
        ``loss(scores, labels) -> scalar tensor``, the structured hinge of a mini-batch
        (e.g. `qs.torch.rank_hinge_loss` over its one-vs-rest rankings).
    batch : callable
        ``batch(b) -> (inputs, labels)`` of mini-batch ``b`` in ``range(n_batches)``.
    n_batches : int
        The number of mini-batches (the blocks of the Frank-Wolfe).
    C : float
        Weight (> 0) of the mean structured hinge.
    proximal : float
        Weight (> 0) of ``|u|^2 / 2``, which keeps the step near the current weights, where
        the fixed pattern is the network's own.
    passes : int, default 1
        Sweeps over the mini-batches, each in a fresh random order.
    random_state : int or numpy.random.Generator, optional
        Seed or generator of the visiting order.
    callback : callable, optional
        ``callback(hinge)`` after each step, with the visited mini-batch's hinge (for a
        progress bar).

    Returns
    -------
    LayerwiseResult
        The mean hinge over the steps, the steps made and the final dual objective.

    Examples
    --------
    Two mini-batches of three images, the classifier trained with the rest fixed:

    >>> from qs.nets import PLCNN
    >>> from qs.torch import rank_hinge_loss
    >>> net = PLCNN(widths=(2, 2, 2), n_classes=3).eval()
    >>> x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    >>> y = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 0, 1, 2]), 3)
    >>> result = layerwise_svm(net, net.classifier, rank_hinge_loss,
    ...                        lambda b: (x[3 * b : 3 * b + 3], y[3 * b : 3 * b + 3]), 2,
    ...                        C=1.0, proximal=1.0, random_state=0)
    >>> result.steps, result.mean_hinge >= 0
    (2, True)
    """
    if not (C > 0 and proximal > 0):
        raise ValueError(f"C and proximal must be > 0; got C={C!r}, proximal={proximal!r}.")
    if not (isinstance(n_batches, int) and n_batches >= 1):
        raise ValueError(f"n_batches must be a positive integer; got {n_batches!r}.")
    if not (isinstance(passes, int) and passes >= 1):
        raise ValueError(f"passes must be a positive integer; got {passes!r}.")
    params = [layer.weight, layer.bias]
    theta0 = parameters_to_vector(params).detach().clone()
    lam = proximal / C
    u = torch.zeros_like(theta0)
    u_b = torch.zeros(n_batches, theta0.numel(), dtype=theta0.dtype, device=theta0.device)
    l_b = np.zeros(n_batches)
    rng = np.random.default_rng(random_state)
    total = 0.0
    steps = 0
    for _ in range(passes):
        for b in rng.permutation(n_batches):
            x, labels = batch(b)
            with torch.no_grad():
                vector_to_parameters(theta0, params)
                pattern = model.patterns(x)
                vector_to_parameters(theta0 + u, params)
            value = loss(model.forward_fixed(x, pattern), labels)
            psi = torch.cat([g.flatten() for g in torch.autograd.grad(value, params)])
            u_s = -psi / (lam * n_batches)  # the Frank-Wolfe corner of block b
            l_s = (value.item() - float(psi @ u)) / n_batches
            diff = u_b[b] - u_s
            denom = lam * float(diff @ diff)
            gamma = (
                0.0
                if denom <= 0
                else min(max((lam * float(diff @ u) - l_b[b] + l_s) / denom, 0.0), 1.0)
            )
            step = gamma * (u_s - u_b[b])
            u_b[b] += step
            u += step
            l_b[b] += gamma * (l_s - l_b[b])
            total += value.item()
            steps += 1
            if callback is not None:
                callback(value.item())
    with torch.no_grad():
        vector_to_parameters(theta0 + u, params)
    dual = C * (float(l_b.sum()) - lam / 2 * float(u @ u))
    return LayerwiseResult(mean_hinge=total / steps, steps=steps, dual=dual)

"""Loss-augmented inference of the 0-1 loss: the binary hinge SVM as a structured SVM.

With labellings ``y_hat`` in {-1, 1}^n, ``Psi(X, y_hat) = sum_k y_hat_k x_k / (2n)`` and
``Delta = (1/n) #{k : y_hat_k != y_k}``, the most violated labelling flips exactly the samples
inside the margin (``1 - y_k s_k > 0``), and ``objective - ground_truth_F`` is the mean hinge
loss. Returned in the same shape as the ranking methods so one solver trains all losses.
O(n), one pass.
"""

import numpy as np

from qs._numba import jit
from qs.inference._hinge import add
from qs.inference._input import NOT_FINITE, OK


@jit
def zero_one_lai(scores, is_pos, coef):
    """Fill ``coef``; return (error, error_index, loss, ``F(y_hat) - F(y)``, ground-truth F).
    ``F(y_hat) - F(y) = -(1/n) sum y_k s_k`` over the flipped samples, one compensated sum
    (`qs.inference._hinge`) in which a sample outside the margin takes no part, however
    large its score. The scores are checked before anything is written, so that bad input
    leaves ``coef`` (the caller's ``out``) as it was."""
    n = scores.size
    for k in range(n):
        if not np.isfinite(scores[k]):
            return NOT_FINITE, k, 0.0, 0.0, 0.0
    h = 0.5 / n
    flipped = 0
    total, comp = 0.0, 0.0
    truth = 0.0
    for k in range(n):
        y = 1.0 if is_pos[k] else -1.0
        s = scores[k]
        if 1.0 - y * s > 0.0:
            c = -y * h
            flipped += 1
            total, comp = add(total, comp, -y * s)
        else:
            c = y * h
        coef[k] = c
        truth += y * h * s
    return OK, -1, flipped / n, (total + comp) / n, truth

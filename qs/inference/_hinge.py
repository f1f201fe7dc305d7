"""The structured hinge's score term ``F(R_bar) - F(R*)`` as one compensated sum.

``F(R_bar) - F(R*) = 2 sum_k (w_k / (P N)) (s_k - ref)`` with integer weights: ``w = P + 1 -
rank`` at a negative (the positives below it) and ``w = -above`` at a positive (minus the
negatives above it), the pairs a ranking puts out of order (each term scaled by ``1/(P N)``
before it is summed, so that no term overflows where the result does not). A sample in its
ground-truth place weighs exactly 0, however large its score, so the hinge is not the
difference of two large sums ``F(R_bar)`` and ``F(R*)``, which loses every digit once the
scores spread far beyond the hinge (one positive at 10^17 and one negative at -10^17 on an
otherwise ordinary ranking). The terms are added with Neumaier's compensated summation
(`add`): a running total and the rounding errors it dropped, kept apart.
"""

from qs._numba import jit_inline


@jit_inline
def add(total, comp, x):
    """Neumaier's step: ``(total + x, comp + the rounding error of that sum)``; the sum so
    far is ``total + comp``."""
    t = total + x
    if abs(total) >= abs(x):
        comp += (total - t) + x
    else:
        comp += (x - t) + total
    return t, comp


@jit_inline
def score_term(total, comp):
    """``F(R_bar) - F(R*)`` from the compensated sum ``total + comp`` of
    ``(w_k / (P N)) (s_k - ref)``."""
    return 2.0 * (total + comp)

"""Exhaustive enumeration: the oracle the other methods are tested against.

Tries every assignment of interleaving ranks to the negatives, each negative on its own
(not assuming that the optimum keeps negatives in score order), with positives in score
order, and computes the objective from its definition: the loss of the interleaving plus
``F = (1/PN) sum_{x positive, y negative} R_xy (s_x - s_y)``.
"""

import itertools

import numpy as np

MAX_ASSIGNMENTS = 10**6


def brute_neg_ranks(ctx):
    """Ranks (input order of negatives) of the best of all (P+1)^N assignments."""
    n_pos, n_neg = ctx.n_pos, ctx.n_neg
    if (n_pos + 1) ** n_neg > MAX_ASSIGNMENTS:
        raise ValueError(
            f"method 'brute' enumerates (P+1)^N = {n_pos + 1}^{n_neg} rank assignments and "
            f"refuses more than {MAX_ASSIGNMENTS:.0e}; use it on small inputs only, or another method."
        )
    neg = ctx.negatives()
    ranks = np.array(list(itertools.product(range(1, n_pos + 2), repeat=n_neg)), dtype=np.int64)
    places = np.arange(1, n_pos + 1)
    above = places[None, None, :] < ranks[:, :, None]  # positive k above negative y
    n_above = (~above).sum(axis=1)  # negatives above each positive
    diff = ctx.pos_sorted[None, None, :] - neg[None, :, None]
    f = np.where(above, diff, -diff).sum(axis=(1, 2)) / (n_pos * n_neg)
    objective = ctx.loss.value(n_above) + f
    return ranks[int(np.argmax(objective))]

"""Slow reference implementations, written from the definitions.

Never imports qsrank: every test compares the library against these.
"""

import itertools
import math

import numpy as np


def average_precision_of_order(is_pos_in_order):
    """AP of a ranked list of booleans: mean over positives of precision at their position."""
    hits = 0
    total = 0.0
    for pos, rel in enumerate(is_pos_in_order, start=1):
        if rel:
            hits += 1
            total += hits / pos
    return total / hits


def ndcg_of_order(is_pos_in_order):
    """NDCG with binary gains and D(k) = 1/log2(1+k)."""
    dcg = sum(1.0 / math.log2(1 + k) for k, rel in enumerate(is_pos_in_order, 1) if rel)
    n_pos = sum(is_pos_in_order)
    ideal = sum(1.0 / math.log2(1 + k) for k in range(1, n_pos + 1))
    return dcg / ideal


def score_term(order, scores, labels):
    """F(R) = 1/(PN) sum over positive x, negative y of R_xy (s_x - s_y), R from the order."""
    place = {k: t for t, k in enumerate(order)}
    pos = [k for k in range(len(scores)) if labels[k]]
    neg = [k for k in range(len(scores)) if not labels[k]]
    total = 0.0
    for x in pos:
        for y in neg:
            sign = 1.0 if place[x] < place[y] else -1.0
            total += sign * (scores[x] - scores[y])
    return total / (len(pos) * len(neg))


def best_objective(scores, labels, loss):
    """max over all orderings of the samples of Delta + F (exhaustive; n <= 7); ``loss``:
    "ap", "ndcg", or a function of the labels in ranked order that returns Delta."""
    if callable(loss):
        delta_of = loss
    else:
        metric = {"ap": average_precision_of_order, "ndcg": ndcg_of_order}[loss]
        delta_of = lambda in_order: 1.0 - metric(in_order)  # noqa: E731
    labels = [bool(v) for v in labels]
    best = -np.inf
    for order in itertools.permutations(range(len(scores))):
        delta = delta_of([labels[k] for k in order])
        best = max(best, delta + score_term(order, scores, labels))
    return best


def retrieval_lists(embeddings, labels):
    """For each query with another sample of its class: (the other samples' relevance in
    order of descending cosine similarity, equal ones in input order; R). Loops only."""
    out = []
    for q in range(len(labels)):
        norm_q = math.sqrt(sum(v * v for v in embeddings[q]))
        sims = []
        for j in range(len(labels)):
            if j != q:
                norm_j = math.sqrt(sum(v * v for v in embeddings[j]))
                dot = sum(a * b for a, b in zip(embeddings[q], embeddings[j]))
                sims.append((-dot / (norm_q * norm_j), j))
        ranked = [labels[j] == labels[q] for _, j in sorted(sims)]
        if sum(ranked):
            out.append((ranked, sum(ranked)))
    return out


def map_at_r(embeddings, labels):
    """mAP@R: per query, (1/R) sum over the first R places of precision@i where place i is
    of the query's class; the mean over the queries."""
    values = []
    for ranked, r in retrieval_lists(embeddings, labels):
        hits, total = 0, 0.0
        for i, rel in enumerate(ranked[:r], start=1):
            if rel:
                hits += 1
                total += hits / i
        values.append(total / r)
    return sum(values) / len(values)


def recall_at_k(embeddings, labels, k):
    """Recall@k: the share of the queries with a sample of their class in the first k."""
    lists = retrieval_lists(embeddings, labels)
    return sum(any(ranked[:k]) for ranked, _ in lists) / len(lists)

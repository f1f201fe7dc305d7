"""Seeded synthetic data shaped like the VOC2011 action poselet features; not the real data.

Sizes follow the papers: 3347 trainval and 3363 test person boxes, 10 actions, 2400
action-poselet activations + 4 object scores (+ the bias). The positive counts per action are
invented (only phoning's 227 trainval positives is the papers' number); the rest of the boxes
are VOC's "other" action (label -1, a negative for every action) and a few "difficult" boxes
(label 0, ignored). The features are sparse and non-negative: background poselets fire at
random; a positive fires the poselets of its action and, more weakly, those its action shares
with related actions (riding bike/horse, running/walking/jumping, ...), scaled by a per-box
visibility, so that actions are confusable, positives range from easy to hard and a linear
model reaches a modest AP.
"""

import numpy as np
import scipy.sparse as sp

from qs.data.poselet import ACTIONS, IGNORE, N_FEATURES, PoseletData

__all__ = ["POSITIVES", "SPLIT_SIZES", "make_voc2011_actions"]

SPLIT_SIZES = {"trainval": 3347, "test": 3363}
# Invented except phoning/trainval = 227 (the papers' count), in ACTIONS order.
POSITIVES = {
    "trainval": (160, 227, 238, 225, 191, 166, 174, 183, 154, 179),
    "test": (161, 230, 237, 224, 193, 167, 172, 185, 156, 180),
}
N_DIFFICULT = {"trainval": 35, "test": 40}
N_POSELETS = 2400
# Related actions share poselets: groups of action ids (1-based, as in the labels).
GROUPS = ((1, 7, 10), (2, 8), (3, 4, 9), (5, 6))
# Per action: how often its own poselets fire (lower = harder), in ACTIONS order.
STRENGTH = (0.16, 0.10, 0.18, 0.09, 0.30, 0.30, 0.14, 0.10, 0.20, 0.12)
OBJECT_OF = {5: 0, 6: 1, 9: 2, 2: 3}  # action id -> object score column it raises


def make_voc2011_actions(seed=0, *, bias=True):
    """Seeded synthetic trainval and test splits shaped like the VOC2011 action poselet features.

    Parameters
    ----------
    seed : int, default 0
        The generator's seed.
    bias : bool, default True
        Append a constant-1 column to the features.

    Returns
    -------
    dict
        ``{"trainval": PoseletData, "test": PoseletData}`` (`qs.data.poselet.PoseletData`).

    Examples
    --------
    >>> splits = make_voc2011_actions(seed=0)
    >>> {name: split.X.shape for name, split in splits.items()}
    {'trainval': (3347, 2405), 'test': (3363, 2405)}
    >>> splits["trainval"].positives_per_class()["phoning"]
    227
    """
    rng = np.random.default_rng(seed)
    own = rng.permutation(N_POSELETS)[: 30 * len(ACTIONS)].reshape(len(ACTIONS), 30)
    shared = rng.permutation(N_POSELETS)[: 40 * len(GROUPS)].reshape(len(GROUPS), 40)
    source = f"synthetic (seed {seed}), not the VOC2011 data"
    return {split: _split(rng, split, own, shared, bias, source) for split in SPLIT_SIZES}


def _split(rng, split, own, shared, bias, source):
    n = SPLIT_SIZES[split]
    counts = POSITIVES[split]
    labels = np.full(n, -1, dtype=np.int64)
    labels[: sum(counts)] = np.repeat(np.arange(1, len(ACTIONS) + 1), counts)
    labels[sum(counts) : sum(counts) + N_DIFFICULT[split]] = IGNORE
    labels = rng.permutation(labels)
    # A difficult box is a hard instance of some action; "other" boxes show no action.
    action = np.where(labels == IGNORE, rng.integers(1, len(ACTIONS) + 1, n), labels)
    visibility = rng.beta(2.0, 2.0, n) * np.where(labels == IGNORE, 0.4, 1.0)

    rows, cols, vals = [], [], []

    def fire(box, poselets, prob):
        hit = rng.random((box.size, poselets.size)) < prob[:, None]
        r, c = np.nonzero(hit)
        rows.append(box[r])
        cols.append(poselets[c])
        vals.append(rng.exponential(1.0, r.size))

    # background: every box, about 3% of the poselets, small activations
    n_bg = rng.binomial(N_POSELETS, 0.03, n)
    rows.append(np.repeat(np.arange(n), n_bg))
    cols.append(rng.integers(0, N_POSELETS, n_bg.sum()))
    vals.append(rng.exponential(0.5, n_bg.sum()))
    for k in range(1, len(ACTIONS) + 1):
        box = np.flatnonzero(action == k)
        fire(box, own[k - 1], STRENGTH[k - 1] * visibility[box])
    for g, members in enumerate(GROUPS):
        box = np.flatnonzero(np.isin(action, members))
        fire(box, shared[g], 0.35 * visibility[box])
    other = np.flatnonzero(action == -1)  # confusers: an "other" box resembles some group
    group = rng.integers(len(GROUPS), size=other.size)
    for g in range(len(GROUPS)):
        fire(other[group == g], shared[g], np.full(np.count_nonzero(group == g), 0.1))

    poselets = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, N_POSELETS)
    ).tocsr()  # duplicates add up
    objects = rng.beta(1.0, 6.0, (n, N_FEATURES - N_POSELETS))
    for k, column in OBJECT_OF.items():
        objects[action == k, column] += 0.3 * visibility[action == k]
    parts = [poselets, sp.csr_matrix(objects)] + ([sp.csr_matrix(np.ones((n, 1)))] if bias else [])
    X = sp.hstack(parts, format="csr", dtype=np.float64)

    n_images = int(n / 1.4)  # about 1.4 person boxes per image
    image = np.sort(np.concatenate([np.arange(n_images), rng.integers(0, n_images, n - n_images)]))
    first = np.searchsorted(image, image)
    corner = rng.uniform(0, 300, (n, 2))
    size = rng.uniform(40, 200, (n, 2))
    return PoseletData(
        X=X,
        labels=labels,
        image_names=np.char.add(f"synthetic_{split}_", np.char.zfill(image.astype(str), 6)),
        box_ids=np.arange(n) - first + 1,
        boxes=np.hstack([corner, size]),
        source=source,
        bias=bias,
    )

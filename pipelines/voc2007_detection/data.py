"""The VOC2007 detection data: both splits as bag sets from the config's source, their
digests, each class checked trainable, and the held-out part of trainval that chooses C."""

import hashlib
from pathlib import Path

import numpy as np

from qs.data import load_rcnn_cache
from qs.data.bags import BagSet
from qs.data.store import open_store
from qs.data.voc2007 import CLASSES, SyntheticVOC2007, make_voc2007_detection
from qsrank.pipelines import _experiment_common as common
from qsrank.pipelines._runs import digest_arrays
from qsrank.pipelines.voc2007_detection.config import GENERATOR_KEYS, SPLITS


def load_data(cfg):
    """``{"trainval": BagSet, "test": BagSet, "digests": {split: SHA-256}}`` from the config's
    data source: the one place that knows where the boxes come from. A digest is the split's
    identity in the resume key."""
    if cfg["store"] is not None:
        return _load_stores(cfg)
    if cfg["data"] == "synthetic" and cfg["synthetic"]["generated"]:
        return _generated(cfg)
    if cfg["data"] == "synthetic":
        made = make_voc2007_detection(
            cfg["seed"], **{k: cfg["synthetic"][k] for k in GENERATOR_KEYS}
        )
        return {
            **{split: BagSet.in_memory(made[split]) for split in SPLITS},
            "digests": {split: _digest(made[split]) for split in SPLITS},
        }
    splits, digests = {}, {}
    for split, path in cfg["data"].items():
        if not Path(path).is_dir():
            raise ValueError(f"data.{split}: {path} is not a directory of R-CNN .mat caches")
        data = load_rcnn_cache(path)
        splits[split], digests[split] = BagSet.in_memory(data), _digest(data)
    d_train, d_test = (splits[s].d for s in SPLITS)
    if d_train != d_test:
        raise ValueError(
            f"trainval boxes have {d_train} features but test boxes {d_test}; "
            "both splits must come from the same feature extraction"
        )
    return {**{split: splits[split] for split in SPLITS}, "digests": digests}


def _generated(cfg):
    """Both synthetic splits with features generated block by block on every pass; a split's
    identity is its generator's settings (the features follow from them)."""
    syn = cfg["synthetic"]
    gen = SyntheticVOC2007(cfg["seed"], **{k: syn[k] for k in GENERATOR_KEYS})
    splits = {
        split: BagSet.generated(
            gen,
            split,
            dtype=syn["dtype"],
            chunk_images=syn["chunk_images"],
            scheduler=cfg["scheduler"],
        )
        for split in SPLITS
    }
    identity = repr((gen, syn["dtype"]))
    digests = {
        split: hashlib.sha256(f"{identity} {split}".encode()).hexdigest() for split in SPLITS
    }
    return {**splits, "digests": digests}


def _load_stores(cfg):
    stores = {split: open_store(cfg["store"][split]) for split in SPLITS}
    train, test = stores["trainval"], stores["test"]
    if train.classes != test.classes:
        raise ValueError(
            f"the stores' classes disagree: {train.path} has "
            f"{', '.join(train.classes)}, {test.path} {', '.join(test.classes)}"
        )
    if train.classes != CLASSES:
        raise ValueError(
            f"{train.path} holds the classes {', '.join(train.classes)}; this "
            f"experiment trains VOC2007's {len(CLASSES)}"
        )
    if train.d != test.d:
        raise ValueError(
            f"{train.path} has {train.d} features per box but {test.path} "
            f"{test.d}; both splits must come from the same feature extraction"
        )
    if test.gt_offsets is None:
        raise ValueError(
            f"{test.path} has no ground-truth objects: the test split needs them for detection AP"
        )
    # of the bytes on disk: a damaged store stops here, named by its checksums
    digests = {split: stores[split].data_checksum() for split in SPLITS}
    max_bytes = cfg["in_memory_max_gb"] * 1e9
    return {
        **{
            split: BagSet.from_store(stores[split], max_bytes, cfg["scheduler"]) for split in SPLITS
        },
        "digests": digests,
    }


def data_note(splits):
    """One line on where the data came from, how they were read, and if they are synthetic."""
    text = "; ".join(f"{split}: {d.source}" for split, d in splits.items())
    shape = "; ".join(
        f"{split} {d.n_images} images, {d.n_boxes} boxes of {d.d} features, {d.where}"
        for split, d in splits.items()
    )
    return common.data_note(splits, f"{text} ({shape})", "VOC2007's bags of boxes")


def _digest(data):
    """SHA-256 of a split's features, bags, boxes and ground truth."""
    gt = [
        np.concatenate([b.reshape(-1), c.astype(float), d.astype(float)])
        for b, c, d in data.objects
    ]
    return digest_arrays(
        data.X,
        data.offsets,
        data.boxes,
        data.image_ids.astype(str),
        np.array([g.size for g in gt]),
        np.concatenate(gt),
    )


def check_class(splits, cls):
    """Labels of class `cls` in trainval; a ValueError when it cannot be trained (a label
    unknown, no positive or no negative image) or evaluated (no non-difficult object in
    test)."""
    k = CLASSES.index(cls)
    train, test = splits["trainval"], splits["test"]
    labels = train.image_labels(k)
    unknown = int((labels < 0).sum())
    if unknown:
        raise ValueError(
            f"class {cls!r}: {unknown} trainval images have no label for it "
            f"({train.source}); it cannot be trained (drop it from classes)"
        )
    n_pos = int(labels.sum())
    if n_pos == 0 or n_pos == labels.size:
        kind = "positive" if n_pos == 0 else "negative"
        raise ValueError(
            f"class {cls!r} has no {kind} image in trainval ({train.source}); it "
            "cannot be trained (drop it from classes)"
        )
    if not test.has_object(k):
        raise ValueError(
            f"class {cls!r} has no object (other than difficult ones) in test "
            f"({test.source}); its AP is undefined (drop it from classes)"
        )
    return labels


def holdout(labels, fraction, seed, k):
    """(fit, validation) image indices, sorted: a seeded `fraction` of the positive and of the
    negative images of class `k` (at least one of each, one of each left to fit) held out."""
    parts = ([], [])
    rng = np.random.default_rng([seed, k])
    for kind, group in (
        ("positive", np.flatnonzero(labels == 1)),
        ("negative", np.flatnonzero(labels != 1)),
    ):
        if group.size < 2:
            raise ValueError(
                f"class {CLASSES[k]!r} has {group.size} {kind} trainval image(s): "
                "too few to hold some out for choosing C (give C as one number)"
            )
        n_val = min(group.size - 1, max(1, round(fraction * group.size)))
        shuffled = rng.permutation(group)
        parts[0].append(shuffled[n_val:])
        parts[1].append(shuffled[:n_val])
    return tuple(np.sort(np.concatenate(p)) for p in parts)

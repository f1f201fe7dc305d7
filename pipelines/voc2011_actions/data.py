"""The VOC2011 action data as a config names them: synthetic or poselet files, subsampled,
their provenance line, and each class's labels with its difficult boxes."""

import hashlib
from pathlib import Path

import numpy as np

from qs.data import PoseletData, load_npz_cache, load_poselet, make_voc2011_actions
from qsrank.pipelines import _experiment_common as common
from qsrank.pipelines._runs import digest_arrays


def load_data(cfg):
    """``{"trainval": PoseletData, "test": PoseletData}`` as the config names them."""
    if cfg["data"] == "synthetic":
        splits = make_voc2011_actions(cfg["seed"])
    else:
        splits = {
            split: _read_split(path, cfg["features_dir"]) for split, path in cfg["data"].items()
        }
        d_train, d_test = (splits[s].X.shape[1] for s in ("trainval", "test"))
        if d_train != d_test:
            raise ValueError(
                f"trainval has {d_train} feature columns but test has {d_test}; "
                "both splits must come from the same feature extraction"
            )
    if cfg["max_boxes"] is not None:
        splits = {
            split: _subsample(d, cfg["max_boxes"], cfg["seed"], split)
            for split, d in splits.items()
        }
    return splits


def _read_split(path, features_dir):
    path = Path(path)
    if path.suffix == ".npz":
        if not path.is_file():
            raise ValueError(
                f"data cache {path} does not exist (write it with `qsrank load "
                "poselet LIST --out CACHE.npz`)"
            )
        return load_npz_cache(path)
    return load_poselet(path, feature_dir=features_dir)


def _subsample(data, max_boxes, seed, split):
    """At most `max_boxes` boxes of `data`, a seeded uniform draw kept in the original order."""
    n = data.X.shape[0]
    if n <= max_boxes:
        return data
    salt = int.from_bytes(hashlib.sha256(split.encode()).digest()[:4], "little")
    keep = np.sort(np.random.default_rng([seed, salt]).choice(n, max_boxes, replace=False))
    return PoseletData(
        X=data.X[keep],
        labels=data.labels[keep],
        image_names=data.image_names[keep],
        box_ids=data.box_ids[keep],
        boxes=data.boxes[keep],
        bias=data.bias,
        source=f"{data.source}; subsampled to at most {max_boxes} boxes per split (seed {seed})",
    )


def data_note(splits):
    """One line on where the data came from, and if they are synthetic."""
    sources = dict.fromkeys(d.source for d in splits.values())
    text = "; ".join(f"{split}: {d.source}" for split, d in splits.items())
    if len(sources) == 1:
        text = next(iter(sources))
    return common.data_note(splits, text, "the VOC2011 action poselet features")


def class_data(split, action, *, require=True):
    """Features, binary labels (1/0) and ignore mask of one class in one split."""
    labels, ignore = split.targets(action)
    if require:
        n_pos = int(labels[~ignore].sum())
        if n_pos == 0 or n_pos == int((~ignore).sum()):
            kind = "positive" if n_pos == 0 else "negative"
            raise ValueError(
                f"class {action!r} has no {kind} box in {split.source}; it cannot "
                "be trained or evaluated (drop it from classes)"
            )
    return split.X, labels, ignore


def digest(split):
    """SHA-256 of a split's features and labels."""
    return digest_arrays(split.X, split.labels)


def load_checked(cfg):
    """The data, every selected class checked to have positive and negative boxes in both
    splits before any training."""
    splits = load_data(cfg)
    for action in cfg["classes"]:
        class_data(splits["trainval"], action)
        class_data(splits["test"], action)
    return splits

"""Image data shared by the experiments that train the PL-CNN (cifar10, compare): the seeded
split of CIFAR-10 or digits-as-CIFAR, and the per-channel normalisation."""

import numpy as np

from qs.data.cifar10 import DIGITS_NOTE, digits_as_cifar, load_cifar10
from qsrank.pipelines._runs import digest_arrays

#: the default split of digits-as-CIFAR: images; val and train drawn from one pool
SPLIT = {"train": 1197, "val": 200, "test": 400}


def cifar_split(folder, split, seed):
    """{'train', 'val', 'test'}: (uint8 images, labels), the seeded split of the `split`
    sizes of CIFAR-10 in `folder` (None: digits-as-CIFAR), and 'note': where they came from."""
    if folder is None:
        data = digits_as_cifar(split["test"], seed)
    else:
        data = load_cifar10(folder)
        if split["test"] > len(data.y_test):
            raise ValueError(
                f"split.test is {split['test']}; the test batch holds {len(data.y_test)} images"
            )
    pool = len(data.y_train)
    if split["train"] + split["val"] > pool:
        raise ValueError(
            f"split.train + split.val is {split['train'] + split['val']}; the "
            f"training images number {pool}"
        )
    order = np.random.default_rng(seed).permutation(pool)
    train, val = order[: split["train"]], order[split["train"] : split["train"] + split["val"]]
    X, y = data.X_train, data.y_train
    digest = digest_arrays(X, y)[:16]
    note = (
        f"{data.source}; sha256(train images, labels) {digest}; split seed {seed}: "
        f"{len(train)} train / {len(val)} val / {split['test']} test"
    )
    return {
        "train": (X[train], y[train]),
        "val": (X[val], y[val]),
        "test": (data.X_test[: split["test"]], data.y_test[: split["test"]]),
        "note": note,
    }


def is_digits(note):
    """Whether a data note is digits-as-CIFAR (not CIFAR-10)."""
    return note.startswith(DIGITS_NOTE)


class Normaliser:
    """uint8 images -> float32 tensors, (x - mean) / std per channel of the training images."""

    def __init__(self, images, device="cpu"):
        pixels = images.reshape(len(images), 3, -1).astype(np.float64) / 255
        self.mean = pixels.mean(axis=(0, 2))
        self.std = np.maximum(pixels.std(axis=(0, 2)), 1e-8)
        self.device = device

    def __call__(self, images):
        import torch

        x = torch.from_numpy(np.ascontiguousarray(images)).to(self.device).float().div_(255)
        mean = torch.tensor(self.mean, dtype=torch.float32, device=self.device)
        std = torch.tensor(self.std, dtype=torch.float32, device=self.device)
        return (x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)

"""The retrieval data sets of `qsrank compare`: L2-normalised embeddings learnt from class
labels in class-balanced batches, tested on held-out classes (mAP@R, Recall@1 and Recall@4)."""

from dataclasses import dataclass

import numpy as np

from qs.metrics import mean_average_precision_at_r, recall_at_k

DATASETS = ("digits_retrieval", "synthetic_retrieval")
#: the test metrics, as results.csv names them -> (table column, decimals)
METRICS = {"map_at_r": ("mAP@R", 4), "recall_at_1": ("Recall@1", 4), "recall_at_4": ("Recall@4", 4)}


@dataclass
class Data:
    """Train and held-out test inputs (float32), their class labels (the training ones
    numbered 0..train_classes-1), and a note on where they came from."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    note: str

    @property
    def train_classes(self):
        return int(self.y_train.max()) + 1

    def arrays(self):
        return self.X_train, self.y_train, self.X_test, self.y_test


def load_data(name, section):
    """The fixed split of data set `name` into training and held-out classes, checked
    against the batch shape of its config `section`."""
    from sklearn.preprocessing import StandardScaler

    if name == "digits_retrieval":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        train = np.isin(y, section["train_classes"])
        held = sorted(set(range(10)) - set(section["train_classes"]))
        note = (
            f"scikit-learn load_digits (real): digits {_listed(section['train_classes'])} "
            f"train ({train.sum()} images), digits {_listed(held)} held out for the test "
            f"({(~train).sum()}); standardised on the training digits"
        )
    else:
        from qs.data.retrieval import make_retrieval_classes

        X, y, source = make_retrieval_classes(
            0, classes=section["classes"], per_class=section["per_class"]
        )
        train = y < section["classes"] // 2
        note = (
            f"{source}; classes 0-{section['classes'] // 2 - 1} train, the other "
            f"{section['classes'] - section['classes'] // 2} held out for the test"
        )
    scaler = StandardScaler().fit(X[train])
    data = Data(
        scaler.transform(X[train]).astype(np.float32),
        np.unique(y[train], return_inverse=True)[1].astype(np.int64),
        scaler.transform(X[~train]).astype(np.float32),
        y[~train].astype(np.int64),
        note,
    )
    _check_batches(name, section, data)
    return data


def _listed(values):
    return ", ".join(map(str, values))


def _check_batches(name, section, data):
    """A batch must fit the training classes: one-line errors naming the key."""
    counts = np.bincount(data.y_train)
    if section["classes_per_batch"] > len(counts):
        raise ValueError(
            f"{name}.classes_per_batch is {section['classes_per_batch']}; the "
            f"training classes number {len(counts)}"
        )
    if section["samples_per_class"] > counts.min():
        raise ValueError(
            f"{name}.samples_per_class is {section['samples_per_class']}; the "
            f"smallest training class has {counts.min()} samples"
        )
    if len(data.y_test) < 2 or np.bincount(data.y_test).max() < 2:
        raise ValueError(f"{name}: the held-out classes need two samples of a class to rank")


class Task:
    """What the training loop needs of a retrieval data set: the embedding model, the
    class-balanced batches, a step's normalised embeddings and labels, and the test metrics."""

    family = "retrieval"

    def __init__(self, data, cfg, dataset):
        self.data, self.section, self.device = data, cfg[dataset], cfg["device"]
        self.members = [np.flatnonzero(data.y_train == c) for c in range(data.train_classes)]
        self.X = self.y = None

    def model(self, seed):
        import torch

        torch.manual_seed(seed)
        d, hidden, dim = self.data.X_train.shape[1], self.section["hidden"], self.section["dim"]
        if hidden == 0:
            return torch.nn.Linear(d, dim)
        return torch.nn.Sequential(
            torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, dim)
        )

    def batches(self, seed, epoch):
        """Epoch `epoch`'s batches, seeded by (seed, epoch): as many as fit the training set,
        each of classes_per_batch classes drawn without replacement and samples_per_class
        samples of each, class after class."""
        rng = np.random.default_rng([seed, epoch + 1000])
        per, m = self.section["classes_per_batch"], self.section["samples_per_class"]
        count = max(1, len(self.data.y_train) // (per * m))
        return [
            np.concatenate(
                [
                    rng.choice(self.members[c], m, replace=False)
                    for c in rng.choice(len(self.members), per, replace=False)
                ]
            )
            for _ in range(count)
        ]

    def warm_up_batch(self):
        return self.batches(0, -1)[0]

    def step(self, model, idx):
        import torch

        if self.X is None:
            self.X = torch.from_numpy(self.data.X_train).to(self.device)
            self.y = torch.from_numpy(self.data.y_train).to(self.device)
        index = torch.from_numpy(idx).to(self.device)
        return torch.nn.functional.normalize(model(self.X[index]), dim=1), self.y[index], index

    def evaluate(self, model):
        import torch

        model.eval()
        with torch.no_grad():
            test = torch.from_numpy(self.data.X_test).to(self.device)
            embeddings = model(test).double().cpu().numpy()
        model.train()
        y = self.data.y_test
        return {
            "map_at_r": mean_average_precision_at_r(embeddings, y),
            "recall_at_1": recall_at_k(embeddings, y, 1),
            "recall_at_4": recall_at_k(embeddings, y, 4),
        }

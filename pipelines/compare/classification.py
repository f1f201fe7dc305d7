"""The classification data sets of `qsrank compare` (one ranking per class, one-vs-rest):
``voc2011_actions`` and ``digits`` (linear models), ``cifar10`` (digits-as-CIFAR, the PL-CNN)."""

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import auc, precision_recall_curve

from qs.metrics import average_precision, ndcg
from qsrank.pipelines._experiment_common import mini_batches
from qsrank.pipelines.compare.methods import TARGET_PRECISION

DATASETS = ("voc2011_actions", "digits", "cifar10")
#: the test metrics, as results.csv names them -> (table column, decimals)
METRICS = {
    "test_ap": ("test AP", 4),
    "test_ndcg": ("NDCG", 4),
    "recall_at_p90": ("recall at P>=0.9", 4),
    "aucpr": ("AUCPR", 4),
}


@dataclass
class Data:
    """Train and test inputs (numpy), their one-vs-rest labels (n, Q) bool, a note on where
    they came from, and the model that reads them (linear or plcnn)."""

    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    note: str
    model: str

    def arrays(self):
        return self.X_train, self.Y_train, self.X_test, self.Y_test


def load_data(name):
    """The fixed split of data set `name` (the same for every seed)."""
    if name == "voc2011_actions":
        from qs.data import ACTIONS, make_voc2011_actions

        splits = make_voc2011_actions(0)
        parts = []
        for split in ("trainval", "test"):
            d = splits[split]
            keep = d.labels != 0  # "difficult" boxes: left out, as in the VOC evaluation
            X = d.X[keep].toarray().astype(np.float32)
            Y = d.labels[keep, None] == np.arange(1, len(ACTIONS) + 1)[None]
            parts += [X, Y]
        return Data(
            *parts,
            f"{splits['test'].source}: synthetic VOC2011 action poselet "
            "features (not the paper's data), difficult boxes left out",
            "linear",
        )
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler

        X, y = load_digits(return_X_y=True)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
        scaler = StandardScaler().fit(X_tr)
        return Data(
            scaler.transform(X_tr).astype(np.float32),
            y_tr[:, None] == np.arange(10),
            scaler.transform(X_te).astype(np.float32),
            y_te[:, None] == np.arange(10),
            "scikit-learn load_digits (real): stratified 50/50 split seed 0, "
            "standardised on the train half",
            "linear",
        )
    from qsrank.pipelines._images import SPLIT, cifar_split

    data = cifar_split(None, SPLIT, 0)
    (X_tr, y_tr), (X_te, y_te) = data["train"], data["test"]
    return Data(
        X_tr,
        y_tr[:, None] == np.arange(10),
        X_te,
        y_te[:, None] == np.arange(10),
        data["note"],
        "plcnn",
    )


def evaluate(scores, Y):
    """Mean over the classes with a positive and a negative of test AP, NDCG, recall at
    precision 0.9 and AUCPR (trapezoidal area under scikit-learn's precision-recall curve)."""
    rows = []
    for c in range(Y.shape[1]):
        y, s = Y[:, c], scores[:, c]
        if not 0 < y.sum() < len(y):
            continue
        precision, recall, _ = precision_recall_curve(y, s)
        rows.append(
            (
                average_precision(y, s),
                ndcg(y, s),
                float(recall[precision >= TARGET_PRECISION].max(initial=0.0)),
                float(auc(recall, precision)),
            )
        )
    ap, nd, rap, pr = np.mean(rows, axis=0)
    return {"test_ap": ap, "test_ndcg": nd, "recall_at_p90": rap, "aucpr": pr}


class Task:
    """What the training loop needs of a classification data set: the model (one score per
    class), the batches, a step's scores (Q, b) and positives (Q, b), and the test metrics.
    Images are normalised per channel by the train images."""

    family = "classification"

    def __init__(self, data, cfg, dataset):
        self.data, self.cfg, self.section = data, cfg, cfg[dataset]
        self.device = cfg["device"]
        self.images = data.model == "plcnn"
        if self.images:
            from qsrank.pipelines._images import Normaliser

            self.normalise = Normaliser(data.X_train, self.device)
        self.Y = None

    def inputs(self, X):
        import torch

        if self.images:
            return self.normalise(X)
        return torch.from_numpy(np.ascontiguousarray(X)).to(self.device)

    def model(self, seed):
        import torch

        torch.manual_seed(seed)
        if self.data.model == "linear":
            return torch.nn.Linear(self.data.X_train.shape[1], self.data.Y_train.shape[1])
        from qs.nets import PLCNN

        return PLCNN(tuple(self.cfg["cifar10"]["widths"]))

    def batches(self, seed, epoch):
        # the methods' epochs seed from 1000 up, the warm start's from 999 down
        return mini_batches(
            len(self.data.Y_train), self.section["batch_size"], [seed, 1000 + epoch]
        )

    def warm_up_batch(self):
        return np.arange(min(self.section["batch_size"], len(self.data.Y_train)))

    def step(self, model, idx):
        import torch

        if self.Y is None:
            self.Y = torch.from_numpy(self.data.Y_train).to(self.device)
        index = torch.from_numpy(idx).to(self.device)
        return model(self.inputs(self.data.X_train[idx])).T, self.Y[index].T, index

    def scores(self, model, X, batch=500):
        import torch

        model.eval()
        with torch.no_grad():
            out = np.concatenate(
                [
                    model(self.inputs(X[i : i + batch])).double().cpu().numpy()
                    for i in range(0, len(X), batch)
                ]
            )
        model.train()
        return out

    def evaluate(self, model):
        return evaluate(self.scores(model, self.data.X_test), self.data.Y_test)

    def warm_start(self, seed):
        """The PL-CNN after the shared cross-entropy epochs (softmax over the classes), as
        a state dict; every method of this seed starts from it."""
        import torch

        model = self.model(seed).to(self.device)
        section = self.cfg["cifar10"]
        opt = torch.optim.Adam(model.parameters(), lr=section["lr"])
        target = torch.from_numpy(self.data.Y_train.argmax(1)).to(self.device)
        for epoch in range(section["warm_start_epochs"]):
            for idx in mini_batches(len(target), section["batch_size"], [seed, 999 - epoch]):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(
                    model(self.inputs(self.data.X_train[idx])), target[idx]
                ).backward()
                opt.step()
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

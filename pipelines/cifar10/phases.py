"""The training of one phase (a warm-start phase or a method) from its start, epoch by epoch
(layer-wise: layer by layer), checkpointed per unit; the network's test metrics."""

import hashlib

import numpy as np
from tqdm import tqdm

from qs.metrics import average_precision, ndcg
from qsrank.pipelines._device import clock
from qsrank.pipelines._experiment_common import mini_batches
from qsrank.pipelines._io import atomic_path
from qsrank.pipelines._runs import same, settings_key
from qsrank.pipelines.cifar10.config import EVAL_BATCH, METHODS, WARM_PHASES

#: the config keys every phase depends on, and those of the warm start's and a method's only
SHARED_KEYS = ("seed", "split", "widths", "batch_size", "momentum", "weight_decay")
WARM_KEYS = ("warm_start",)
METHOD_KEYS = ("epochs", "training", "layerwise", "lr", "freeze_bn")


def checkpoint_settings(cfg, note, phase):
    """What a phase's checkpoint must share with the run to be resumed: the code's version,
    the data and the keys the phase uses (its start is checked by its digest)."""
    keys = SHARED_KEYS + (WARM_KEYS if phase in WARM_PHASES else METHOD_KEYS)
    return settings_key(data=note, **{k: cfg[k] for k in keys})


def copy_state(state):
    """A state dict's tensors copied (``state_dict()`` shares them with the live model)."""
    return {k: v.detach().clone() for k, v in state.items()}


def state_digest(state):
    """sha256 of a model state dict's tensors: a phase resumes only from the same start."""
    h = hashlib.sha256()
    for key, value in state.items():
        h.update(key.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _phase_loss(phase):
    """(loss of (scores, labels) -> (loss tensor, LAI seconds), is a rank loss) of a phase."""
    import torch

    from qs.torch import rank_hinge_loss

    if phase == "warm_cross_entropy":
        return (lambda s, y: (torch.nn.functional.cross_entropy(s, y), 0.0)), False
    if phase == "warm_hinge":
        return (lambda s, y: (torch.nn.functional.multi_margin_loss(s, y), 0.0)), False
    loss, inference = METHODS[phase]

    def rank_loss(scores, y):
        onehot = torch.nn.functional.one_hot(y, scores.shape[1])
        start = clock(scores.device.type)
        # (batch, classes): one ranking of the batch per class
        value = rank_hinge_loss(scores, onehot, loss=loss, method=inference, reduction="mean")
        return value, clock(scores.device.type) - start

    return rank_loss, True


def evaluate(model, normalise, images, labels):
    """(mean AP, mean NDCG, per-class AP, per-class NDCG) of the model's class scores."""
    import torch

    model.eval()
    with torch.no_grad():
        scores = np.concatenate(
            [
                model(normalise(images[i : i + EVAL_BATCH])).double().cpu().numpy()
                for i in range(0, len(images), EVAL_BATCH)
            ]
        )
    classes = [c for c in range(scores.shape[1]) if 0 < (labels == c).sum() < len(labels)]
    ap = {c: average_precision(labels == c, scores[:, c]) for c in classes}
    nd = {c: ndcg(labels == c, scores[:, c]) for c in classes}
    return float(np.mean(list(ap.values()))), float(np.mean(list(nd.values()))), ap, nd


def load_checkpoint(path, settings):
    """The checkpoint at `path` if it exists and was trained under `settings`, else None."""
    import torch

    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state if same(state.get("settings"), settings) else None


def _sgd_epoch(cfg, model, optimizer, step_loss, data, normalise, epoch, bar):
    """One epoch of the optimizer in seeded mini-batches: (the measured time of each step
    (s), LAI s, mean loss)."""
    import torch

    X, y = data["train"]
    labels = torch.from_numpy(y).to(normalise.device)
    batches = mini_batches(len(y), cfg["batch_size"], [cfg["seed"], epoch])
    step_s, lai_s, total = [], 0.0, 0.0
    for i, idx in enumerate(batches):
        began = clock(normalise.device)
        scores = model(normalise(X[idx]))
        value, spent = step_loss(scores, labels[idx])
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        step_s.append(clock(normalise.device) - began)
        lai_s += spent
        total += value.detach().item()
        bar.update()
        bar.set_postfix(loss=f"{total / (i + 1):.4f}")
    return step_s, lai_s, total / len(batches)


def _svm_layer(cfg, model, layer, step_loss, data, normalise, sweep, bar):
    """One layer's proximal structured SVM (:func:`qs.torch.layerwise.layerwise_svm`) over
    the sweep's seeded mini-batches: (the measured time of each step (s), LAI s, mean
    hinge)."""
    import torch

    from qs.torch.layerwise import layerwise_svm

    X, y = data["train"]
    labels = torch.from_numpy(y).to(normalise.device)
    batches = mini_batches(len(y), cfg["batch_size"], [cfg["seed"], sweep])
    lai_s, hinges, stamps = [], [], [clock(normalise.device)]

    def hinge(scores, targets):
        value, spent = step_loss(scores, targets)
        lai_s.append(spent)
        return value

    def progress(value):
        stamps.append(clock(normalise.device))  # a step ends at each call
        hinges.append(value)
        bar.update()
        bar.set_postfix(loss=f"{np.mean(hinges):.4f}")

    result = layerwise_svm(
        model,
        layer,
        hinge,
        lambda b: (normalise(X[batches[b]]), labels[batches[b]]),
        len(batches),
        C=cfg["layerwise"]["C"],
        proximal=cfg["layerwise"]["proximal"],
        passes=cfg["layerwise"]["passes"],
        random_state=[cfg["seed"], sweep, 1],
        callback=progress,
    )
    return np.diff(stamps).tolist(), sum(lai_s), result.mean_hinge


def _units(cfg, phase, n_layers):
    """The checkpointed units of a phase: epochs, or (layer-wise) layer solves, last layer
    first, `epochs` sweeps over the layers."""
    if phase == "warm_cross_entropy":
        return cfg["warm_start"]["cross_entropy_epochs"]
    if phase == "warm_hinge":
        return cfg["warm_start"]["hinge_epochs"]
    return cfg["epochs"] * (n_layers if cfg["training"] == "layerwise" else 1)


def train_phase(cfg, phase, model, data, normalise, ckpt, start_state, progress):
    """Train `phase` from `start_state` (a model state dict), resuming from `ckpt`; return
    the finished checkpoint (model state, history rows)."""
    import torch

    warm = phase in WARM_PHASES
    layerwise = not warm and cfg["training"] == "layerwise"
    layers = model.linear_layers()[::-1]
    units = _units(cfg, phase, len(layers))
    if warm and cfg["warm_start"]["optimizer"] == "adadelta":
        optimizer = torch.optim.Adadelta(
            model.parameters(), lr=cfg["warm_start"]["lr"], weight_decay=cfg["weight_decay"]
        )
    else:
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=cfg["warm_start"]["lr"] if warm else cfg["lr"],
            momentum=cfg["momentum"],
            weight_decay=cfg["weight_decay"],
        )
    if ckpt.get("model") is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    else:
        model.load_state_dict(start_state)
        ckpt.update(history=[], step_s=[], units_done=0, model=None)
    step_loss, is_rank = _phase_loss(phase)
    n_batches = -(-len(data["train"][1]) // cfg["batch_size"])
    cumulative = (
        ckpt["history"][-1] if ckpt["history"] else {"train_s": 0.0, "lai_s": 0.0, "steps": 0}
    )
    for unit in range(ckpt["units_done"], units):
        model.train()
        if layerwise or (is_rank and cfg["freeze_bn"]):
            for module in model.modules():
                if isinstance(module, torch.nn.BatchNorm2d):
                    module.eval()
        what = (
            f"layer {len(layers) - unit % len(layers)}/{len(layers)} sweep "
            f"{unit // len(layers) + 1}"
            if layerwise
            else "epoch"
        )
        with tqdm(
            total=n_batches * (cfg["layerwise"]["passes"] if layerwise else 1),
            desc=f"{phase} {unit + 1}/{units} ({what})",
            unit="batch",
            leave=False,
            disable=not progress,
        ) as bar:
            if layerwise:
                step_s, lai_s, loss = _svm_layer(
                    cfg, model, layers[unit % len(layers)], step_loss, data, normalise, unit, bar
                )
            else:
                step_s, lai_s, loss = _sgd_epoch(
                    cfg, model, optimizer, step_loss, data, normalise, unit, bar
                )
        val = evaluate(model, normalise, *data["val"]) if len(data["val"][1]) else (np.nan,) * 2
        test = evaluate(model, normalise, *data["test"])
        cumulative = {
            "phase": phase,
            "unit": unit + 1,
            "loss": loss,
            "train_s": cumulative["train_s"] + sum(step_s),
            "lai_s": cumulative["lai_s"] + lai_s if is_rank else np.nan,
            "steps": cumulative["steps"] + len(step_s),
            "val_map": val[0],
            "val_ndcg": val[1],
            "test_map": test[0],
            "test_ndcg": test[1],
        }
        ckpt.update(
            model=copy_state(model.state_dict()),
            optimizer=optimizer.state_dict(),
            units_done=unit + 1,
            history=[*ckpt["history"], cumulative],
            step_s=[*ckpt.get("step_s", []), *step_s],
        )
        with atomic_path(ckpt["path"]) as tmp:
            torch.save({k: v for k, v in ckpt.items() if k != "path"}, tmp)
    if ckpt.get("model") is None:  # a phase of 0 epochs passes its start state on
        ckpt.update(model=start_state, optimizer=optimizer.state_dict(), units_done=0)
    return ckpt


def warm_up_lai(methods):
    """One call per method on small scores, so numba compiles (or loads) its kernels here."""
    import torch

    from qs.torch import rank_hinge_loss

    scores = torch.randn(10, 40, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(40).remainder(4).eq(0).long().repeat(10, 1)
    for name in methods:
        loss, inference = METHODS[name]
        rank_hinge_loss(scores, labels, loss=loss, method=inference, reduction="mean", dim=-1)

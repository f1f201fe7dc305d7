"""The training loop every method and data set of `qsrank compare` shares, under the data
set's budget and evaluated after each epoch; a family's `Task` gives the model, batches, a
step's output and targets, and the evaluation. Training time counts the steps only."""

import numpy as np

from qsrank.pipelines._device import clock
from qsrank.pipelines.compare.methods import make_loss


def train_one(name, task, cfg, dataset, seed, start=None):
    """Train method `name` on `dataset` with `seed` under the data set's budget, starting
    from the state dict `start` (None: the seeded initialisation): the record (history per
    epoch, final metrics and times)."""
    import torch

    section, device = cfg[dataset], cfg["device"]
    model = task.model(seed).to(device)
    if start is not None:
        model.load_state_dict(start)
    _warm_up_loss(name, task, cfg, model)
    loss_fn, loss_params = make_loss(name, task.family, cfg, task.data)
    opt = torch.optim.Adam(model.parameters(), lr=section["lr"])
    opt_loss = torch.optim.SGD(loss_params, lr=cfg["loss_lr"]) if loss_params else None
    train_s = loss_s = 0.0
    steps = 0
    history = []
    epoch = 0
    while True:
        for idx in task.batches(seed, epoch):
            began = clock(device)
            output, target, index = task.step(model, idx)
            leaf = output.detach().requires_grad_()
            t0 = clock(device)
            value = loss_fn(leaf, target, index)
            value.backward()
            loss_s += clock(device) - t0
            opt.zero_grad()
            output.backward(leaf.grad if leaf.grad is not None else torch.zeros_like(leaf))
            opt.step()
            if opt_loss is not None:
                opt_loss.step()
                opt_loss.zero_grad()
            train_s += clock(device) - began
            steps += 1
            if not np.isfinite(value.item()):
                raise RuntimeError(
                    f"{name} on {dataset} (seed {seed}): the loss became "
                    f"{value.item()} at step {steps}"
                )
        epoch += 1
        history.append(
            {
                "epoch": epoch,
                "train_s": train_s,
                "loss_s": loss_s,
                "steps": steps,
                **task.evaluate(model),
            }
        )
        if (section["epochs"] is not None and epoch >= section["epochs"]) or (
            section["seconds"] is not None and train_s >= section["seconds"]
        ):
            break
    return {
        "dataset": dataset,
        "method": name,
        "seed": seed,
        "history": history,
        **history[-1],
        "loss_ms_per_step": 1e3 * loss_s / steps,
        "torch_threads": torch.get_num_threads(),
    }


def _warm_up_loss(name, task, cfg, model):
    """One untimed forward and backward of a throwaway instance of the loss on the task's
    warm-up batch, so first-call costs (imports, numba and torch warm-up) are not timed."""
    import torch

    loss_fn, _ = make_loss(name, task.family, cfg, task.data)
    model.eval()  # no batch-norm statistics updated
    with torch.no_grad():
        output, target, index = task.step(model, task.warm_up_batch())
    model.train()
    leaf = output.detach().requires_grad_()
    loss_fn(leaf, target, index).backward()

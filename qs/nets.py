"""The PL-CNN of the CIFAR-10 experiment (Mohapatra et al., CVPR 2018, Section 4.3; Berrada et al.,
ICLR 2017).

Three blocks of [conv3x3 + BN + ReLU, conv3x3 + BN + ReLU, max-pool 2x2] and a linear layer
from the last block's 4x4 maps to the class scores. At the paper's widths (64, 128, 256)
it has 1,188,170 parameters. With the activation pattern (ReLU masks, max-pool choices)
held fixed and batch norm in eval mode, the class scores are affine in each layer's weights:
the layer-wise SVM training of the paper solves one convex problem per layer that way
(`PLCNN.patterns`, `PLCNN.forward_fixed`). Needs torch (the ``[torch]`` extra);
``import qs`` does not import this module.
"""

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

PAPER_WIDTHS = (64, 128, 256)


class PLCNN(nn.Module):
    """The PL-CNN on (n, 3, 32, 32) images.

    Parameters
    ----------
    widths : sequence of int, default (64, 128, 256)
        The channels of each block (the paper's three by default); each block halves the
        maps' side.
    n_classes : int, default 10
        Number of class scores.

    Examples
    --------
    >>> import torch
    >>> from qs.nets import PLCNN, n_parameters
    >>> net = PLCNN(widths=(4, 8, 8), n_classes=10).eval()
    >>> tuple(net(torch.zeros(2, 3, 32, 32)).shape)
    (2, 10)
    >>> n_parameters(PLCNN())
    1188170
    """

    def __init__(self, widths: Sequence[int] = PAPER_WIDTHS, n_classes: int = 10) -> None:
        super().__init__()
        layers, channels = [], 3
        for width in widths:
            for _ in range(2):
                layers += [
                    nn.Conv2d(channels, width, 3, padding=1),
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                ]
                channels = width
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        side = 32 // 2 ** len(widths)
        self.classifier = nn.Linear(channels * side * side, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores.

        Parameters
        ----------
        x : Tensor of shape (n, 3, 32, 32)
            Images.

        Returns
        -------
        Tensor of shape (n, n_classes)
            Class scores.

        Examples
        --------
        >>> net = PLCNN(widths=(2, 2, 2), n_classes=3).eval()
        >>> x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        >>> net(x).shape
        torch.Size([4, 3])
        """
        return self.classifier(torch.flatten(self.features(x), 1))

    def linear_layers(self) -> list[nn.Module]:
        """The convolutions and the classifier, input to output: the layers trained one at a time.

        Returns
        -------
        list of torch.nn.Module
            The layers, in the order the layer-wise training visits them.

        Examples
        --------
        >>> [type(layer).__name__ for layer in PLCNN(widths=(2, 2, 2)).linear_layers()]
        ['Conv2d', 'Conv2d', 'Conv2d', 'Conv2d', 'Conv2d', 'Conv2d', 'Linear']
        """
        return [m for m in self.features if isinstance(m, nn.Conv2d)] + [self.classifier]

    def patterns(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The activation pattern of ``x`` at the current weights (no gradient).

        Parameters
        ----------
        x : Tensor of shape (n, 3, 32, 32)
            Images.

        Returns
        -------
        list of Tensor
            Each ReLU's mask and each max-pool's argmax indices, in order.

        Examples
        --------
        >>> net = PLCNN(widths=(2, 2, 2), n_classes=3).eval()
        >>> found = net.patterns(torch.zeros(1, 3, 32, 32))
        >>> len(found), found[0].dtype  # 6 ReLUs and 3 max-pools
        (9, torch.bool)
        """
        found = []
        with torch.no_grad():
            for layer in self.features:
                if isinstance(layer, nn.ReLU):
                    found.append(x > 0)
                    x = x.clamp_min(0)
                elif isinstance(layer, nn.MaxPool2d):
                    x, index = F.max_pool2d(x, 2, return_indices=True)
                    found.append(index)
                else:
                    x = layer(x)
        return found

    def forward_fixed(self, x: torch.Tensor, patterns: Sequence[torch.Tensor]) -> torch.Tensor:
        """Class scores with an activation pattern held fixed.

        Parameters
        ----------
        x : Tensor of shape (n, 3, 32, 32)
            Images.
        patterns : sequence of Tensor
            An activation pattern of `patterns`.

        Returns
        -------
        Tensor of shape (n, n_classes)
            Class scores, affine in each layer's weights; equal to ``forward`` at the
            weights the pattern was taken at.

        Examples
        --------
        >>> net = PLCNN(widths=(2, 2, 2), n_classes=3).eval()
        >>> x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        >>> torch.allclose(net.forward_fixed(x, net.patterns(x)), net(x))
        True
        """
        given = iter(patterns)
        for layer in self.features:
            if isinstance(layer, nn.ReLU):
                x = x * next(given)
            elif isinstance(layer, nn.MaxPool2d):
                index = next(given)
                x = x.flatten(2).gather(2, index.flatten(2)).view(index.shape)
            else:
                x = layer(x)
        return self.classifier(torch.flatten(x, 1))


def n_parameters(module: nn.Module) -> int:
    """The number of trainable parameters of a module.

    Parameters
    ----------
    module : torch.nn.Module
        The module.

    Returns
    -------
    int
        Its parameters that require a gradient.

    Examples
    --------
    >>> n_parameters(nn.Linear(3, 2))  # 3 x 2 weights and 2 biases
    8
    """
    return sum(p.numel() for p in module.parameters() if p.requires_grad)

"""Several named feature maps from one pass of a trunk: the network both runtimes run.

Its own module so that the ONNX export (which traces it) and the backbone (which runs it on
torch) both import it without importing each other."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

FINAL = "final"  # name of the trunk's last feature map among a backbone's outputs


class OutputTaps(nn.Module):
    """A trunk returning several named feature maps from one pass (forward hooks on its modules).

    ``modules`` maps output names to module paths inside ``trunk``; ``"final"`` is the trunk's
    own output. Used for the torch runtime and as the network the ONNX export traces.
    """

    def __init__(self, trunk: nn.Module, modules: dict[str, str], outputs: Sequence[str]) -> None:
        super().__init__()
        self.trunk = trunk
        self.modules_by_name = dict(modules)
        self.outputs = tuple(outputs)

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        captured: dict[str, torch.Tensor] = {}
        handles = [
            self.trunk.get_submodule(path).register_forward_hook(
                lambda _module, _args, output, name=name: captured.__setitem__(name, output)
            )
            for name, path in self.modules_by_name.items()
        ]
        try:
            final = self.trunk(inputs)
        finally:
            for handle in handles:
                handle.remove()
        return tuple(final if name == FINAL else captured[name] for name in self.outputs)

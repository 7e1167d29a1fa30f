"""The numeric work behind prediction: a backend runs the model's serving graph and its type
classifier on arrays. PyTorch here; the inference engine adds ONNX Runtime
(:class:`~mslm_core.inference.OnnxBackend`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ..model import MSLMModel


class Backend(Protocol):
    def features(
        self, input_ids: npt.NDArray[np.int64], attention_mask: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """[B, T] int64 → detection probabilities [B, T, 3] and type features [B, T, H]."""

    def classify(self, pooled: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Mean-pooled type features [N, H] → type probabilities [N, C]."""


class TorchBackend:
    """Runs an :class:`~mslm_core.model.MSLMModel` in eval mode, no gradients."""

    def __init__(self, model: MSLMModel, device: str = "cpu"):
        self.model = model
        self.device = device

    def features(
        self, input_ids: npt.NDArray[np.int64], attention_mask: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        import torch

        self.model.eval()
        with torch.inference_mode():
            ids = torch.from_numpy(input_ids).to(self.device)
            mask = torch.from_numpy(attention_mask).to(self.device)
            probs, feats = self.model.forward_features(ids, mask)
            return probs.float().cpu().numpy(), feats.float().cpu().numpy()

    def classify(self, pooled: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        import torch

        self.model.eval()
        with torch.inference_mode():
            x = torch.from_numpy(pooled).to(self.device)
            return self.model.classify(x).softmax(-1).float().cpu().numpy()

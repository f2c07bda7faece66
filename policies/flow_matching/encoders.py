"""Prefix encoders: per-camera vision, language tokenisation + embedding, proprio."""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor, nn


class ByteTokenizer:
    """UTF-8 bytes as tokens (ids 2..257; 0 = pad, 1 = begin). Needs no download and nothing saved."""

    vocab_size = 258

    def __call__(self, texts: list[str], max_len: int) -> tuple[Tensor, Tensor]:
        ids = torch.zeros(len(texts), max_len, dtype=torch.long)
        for i, text in enumerate(texts):
            row = [1] + [b + 2 for b in text.encode("utf-8")][: max_len - 1]
            ids[i, : len(row)] = torch.tensor(row)
        return ids, ids != 0  # [B, L], valid mask [B, L]


class HFTokenizer:
    """A pretrained tokenizer from a local folder (``tokenizer="hf:<folder>"``)."""

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token or self.tok.unk_token
        self.vocab_size = len(self.tok)

    def __call__(self, texts: list[str], max_len: int) -> tuple[Tensor, Tensor]:
        enc = self.tok(texts, padding="max_length", truncation=True, max_length=max_len, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"].bool()


def make_tokenizer(spec: str) -> ByteTokenizer | HFTokenizer:
    return ByteTokenizer() if spec == "byte" else HFTokenizer(spec.removeprefix("hf:"))


def _groups(c: int) -> int:
    return math.gcd(c, 8)


class SpatialSoftmax(nn.Module):
    """Keypoints from a feature map (Levine et al. 2016; robomimic): for each of K learned channels,

        p_k = sum_{i,j} softmax_{ij}(f_k / T)_{ij} * (x_j, y_i),    x, y in [-1, 1],

    the expected image coordinates of that channel's activation. Each keypoint becomes one token
    (a linear map of (x, y) plus a per-keypoint embedding), which gives the transformer explicit,
    sub-patch-precise positions -- what a from-scratch CNN on 6x6 patch tokens learns slowly.
    """

    def __init__(self, in_channels: int, keypoints: int, d_model: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, keypoints, 1)
        self.log_temp = nn.Parameter(torch.zeros(()))
        self.to_token = nn.Linear(2, d_model)
        self.embed = nn.Parameter(torch.randn(1, keypoints, d_model) * 0.02)

    def forward(self, feat: Tensor) -> Tensor:  # [B, C, h, w] -> [B, K, d]
        f = self.proj(feat)
        _, _, h, w = f.shape
        attn = torch.softmax(f.flatten(2) / self.log_temp.exp(), dim=-1)  # [B, K, h*w]
        ys = torch.linspace(-1.0, 1.0, h, device=f.device, dtype=f.dtype)
        xs = torch.linspace(-1.0, 1.0, w, device=f.device, dtype=f.dtype)
        grid = torch.stack(torch.meshgrid(ys, xs, indexing="ij"), dim=-1).reshape(h * w, 2)  # (y, x)
        return self.to_token(attn @ grid) + self.embed


class CNNEncoder(nn.Module):
    """A small CNN trained from scratch: a 4x4 patchify stem, then stride-2 convs, then a 1x1 projection.

    [B, 3, H, W] in [0, 1] -> tokens [B, (H / 2^(1 + len(channels))) * (W / ...), d]; 96x96 with three
    channel stages gives a 6x6 grid (36 tokens). Cheap enough for CPU training (~7 M MACs per 96x96 image).
    With ``keypoints = K > 0``, K spatial-softmax keypoint tokens from the second stage's finer map
    (12x12 at 96 px) are appended.
    """

    def __init__(self, channels: list[int], d_model: int, image_size: list[int], keypoints: int = 0) -> None:
        super().__init__()
        stages: list[nn.Module] = [
            nn.Sequential(
                nn.Conv2d(3, channels[0], 4, stride=4),
                nn.GroupNorm(_groups(channels[0]), channels[0]),
                nn.GELU(),
            )
        ]
        for prev, c in itertools.pairwise(channels):
            stages.append(
                nn.Sequential(
                    nn.Conv2d(prev, c, 3, stride=2, padding=1), nn.GroupNorm(_groups(c), c), nn.GELU()
                )
            )
        self.stages = nn.ModuleList(stages)
        self.head = nn.Conv2d(channels[-1], d_model, 1)
        kp_stage = min(1, len(channels) - 1)
        self.kp_stage = kp_stage
        self.keypoints = SpatialSoftmax(channels[kp_stage], keypoints, d_model) if keypoints else None
        self.image_size = (int(image_size[0]), int(image_size[1]))  # the position table is built for it
        with torch.no_grad():
            n = self._grid(torch.zeros(1, 3, *image_size))[0].flatten(2).shape[-1]
        self.pos = nn.Parameter(torch.randn(1, n, d_model) * 0.02)

    def _grid(self, img: Tensor) -> tuple[Tensor, Tensor | None]:
        x, kp_feat = (img - 0.5) / 0.25, None
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i == self.kp_stage:
                kp_feat = x
        return self.head(x), kp_feat

    def forward(self, img: Tensor) -> Tensor:  # [B, 3, H, W] -> [B, N (+ K), d]
        grid, kp_feat = self._grid(img)
        tokens = grid.flatten(2).transpose(1, 2) + self.pos
        if self.keypoints is None:
            return tokens
        return torch.cat([tokens, self.keypoints(kp_feat)], dim=1)


class HFVisionEncoder(nn.Module):
    """A pretrained transformers vision model from a local folder (``vision="hf:<folder>"``)."""

    def __init__(self, path: str, d_model: int) -> None:
        super().__init__()
        from transformers import AutoModel

        self.backbone = AutoModel.from_pretrained(path, local_files_only=True)
        cfg = self.backbone.config
        hidden = getattr(cfg, "hidden_size", None) or cfg.vision_config.hidden_size
        self.size = getattr(cfg, "image_size", None) or cfg.vision_config.image_size
        self.proj = nn.Linear(hidden, d_model)

    def forward(self, img: Tensor) -> Tensor:  # [B, 3, H, W] -> [B, N, d]
        x = nn.functional.interpolate(img, size=(self.size, self.size), mode="bilinear", align_corners=False)
        out = self.backbone(pixel_values=(x - 0.5) / 0.5)
        return self.proj(out.last_hidden_state)


def make_vision_encoder(
    spec: str, channels: list[int], d_model: int, image_size: list[int], keypoints: int = 0
) -> nn.Module:
    if spec == "cnn":
        return CNNEncoder(channels, d_model, image_size, keypoints)
    if keypoints:
        raise ValueError(f"keypoints={keypoints} needs vision='cnn' (got {spec!r})")
    return HFVisionEncoder(spec.removeprefix("hf:"), d_model)


def sinusoidal(t: Tensor, dim: int, max_period: float = 100.0) -> Tensor:
    """Sinusoidal embedding of flow time in [0, 1]: [B] -> [B, dim]."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=t.dtype) / half)
    args = t[:, None] * freqs[None] * 2 * math.pi
    return torch.cat([args.sin(), args.cos()], dim=-1)

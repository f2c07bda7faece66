"""The compact VLA network: prefix transformer over vision/language/proprio tokens, and an action expert
that denoises a chunk of H actions, cross-attending to the prefix through a key/value cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from policies.flow_matching.config import FlowMatchingConfig
from policies.flow_matching.encoders import make_vision_encoder, sinusoidal

KV = tuple[Tensor, Tensor]


class Attention(nn.Module):
    """Multi-head attention with separate q / kv projections, so keys and values can be cached."""

    def __init__(self, d_q: int, d_kv: int, heads: int) -> None:
        super().__init__()
        self.h = heads
        self.q = nn.Linear(d_q, d_q)
        self.kv = nn.Linear(d_kv, 2 * d_q)
        self.o = nn.Linear(d_q, d_q)

    def keys_values(self, x: Tensor) -> KV:  # [B, T, d_kv] -> 2 x [B, h, T, d_q / h]
        b, t, _ = x.shape
        k, v = self.kv(x).view(b, t, 2, self.h, -1).permute(2, 0, 3, 1, 4)
        return k, v

    def forward(self, x: Tensor, kv: KV, mask: Tensor | None = None) -> Tensor:
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.h, -1).transpose(1, 2)
        attn_mask = None if mask is None else mask[:, None, None, :]  # valid keys: [B, 1, 1, T]
        out = F.scaled_dot_product_attention(q, kv[0], kv[1], attn_mask=attn_mask)
        return self.o(out.transpose(1, 2).reshape(b, t, d))


def _mlp(d: int, ratio: float, dropout: float) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(d, int(d * ratio)), nn.GELU(), nn.Dropout(dropout), nn.Linear(int(d * ratio), d)
    )


class PrefixBlock(nn.Module):
    def __init__(self, d: int, heads: int, ratio: float, dropout: float) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, d, heads)
        self.mlp = _mlp(d, ratio, dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.n1(x)
        x = x + self.attn(h, self.attn.keys_values(h), mask)
        return x + self.mlp(self.n2(x))


class ExpertBlock(nn.Module):
    """Self-attention over the action tokens, cross-attention to the (cached) prefix, MLP."""

    def __init__(self, d: int, d_prefix: int, heads: int, ratio: float, dropout: float) -> None:
        super().__init__()
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn = Attention(d, d, heads)
        self.cross = Attention(d, d_prefix, heads)
        self.mlp = _mlp(d, ratio, dropout)

    def forward(self, x: Tensor, prefix_kv: KV, prefix_mask: Tensor) -> Tensor:
        h = self.n1(x)
        x = x + self.self_attn(h, self.self_attn.keys_values(h))
        x = x + self.cross(self.n2(x), prefix_kv, prefix_mask)
        return x + self.mlp(self.n3(x))


class FlowMatchingModel(nn.Module):
    def __init__(self, cfg: FlowMatchingConfig, vocab_size: int) -> None:
        super().__init__()
        d, de = cfg.d_model, cfg.d_expert
        self.cfg = cfg
        self.vision = nn.ModuleDict(
            {
                c: make_vision_encoder(cfg.vision, cfg.cnn_channels, d, cfg.image_size, cfg.keypoints)
                for c in cfg.cameras
            }
        )
        self.camera_emb = nn.Parameter(torch.randn(len(cfg.cameras), d) * 0.02)
        self.text_emb = nn.Embedding(vocab_size, d)
        self.text_pos = nn.Parameter(torch.randn(1, cfg.max_text_len, d) * 0.02)
        self.state_proj = nn.Linear(cfg.state_dim, d)
        self.prefix_blocks = nn.ModuleList(
            PrefixBlock(d, cfg.n_heads, cfg.mlp_ratio, cfg.dropout) for _ in range(cfg.n_prefix_layers)
        )
        self.prefix_norm = nn.LayerNorm(d)
        # action expert
        self.action_in = nn.Linear(cfg.action_dim, de)
        self.time_mlp = nn.Sequential(nn.Linear(de, de), nn.SiLU(), nn.Linear(de, de))
        self.action_pos = nn.Parameter(torch.randn(1, cfg.chunk_size, de) * 0.02)
        self.cond_emb = nn.Embedding(2, de)  # RECAP advantage indicator, zero-initialised
        nn.init.zeros_(self.cond_emb.weight)
        self.expert_blocks = nn.ModuleList(
            ExpertBlock(de, d, cfg.n_expert_heads, cfg.mlp_ratio, cfg.dropout)
            for _ in range(cfg.n_expert_layers)
        )
        self.expert_norm = nn.LayerNorm(de)
        self.action_out = nn.Linear(de, cfg.action_dim)

    # ---- prefix ------------------------------------------------------------------------------------
    def encode_prefix(
        self, images: list[Tensor], text: Tensor, text_mask: Tensor, state: Tensor
    ) -> tuple[Tensor, Tensor]:
        """images: per camera [B, 3, H, W]; text [B, L]; state [B, S] (normalised).

        Returns:
            prefix features [B, T, d] and the valid-token mask [B, T].
        """
        for (camera, enc), img in zip(self.vision.items(), images, strict=True):
            size = getattr(enc, "image_size", None)  # encoders with a fixed token grid
            if size is not None and tuple(img.shape[-2:]) != size:
                raise ValueError(
                    f"camera {camera!r}: images are {img.shape[-2]}x{img.shape[-1]} but the policy was built "
                    f"for policy.image_size={list(size)}: set policy.image_size to the data's [H, W]"
                )
        toks = [
            enc(img) + self.camera_emb[i]
            for i, (enc, img) in enumerate(zip(self.vision.values(), images, strict=True))
        ]
        toks.append(self.text_emb(text) + self.text_pos[:, : text.shape[1]])
        toks.append(self.state_proj(state)[:, None])
        x = torch.cat(toks, dim=1)
        b = x.shape[0]
        ones = lambda n: torch.ones(b, n, dtype=torch.bool, device=x.device)  # noqa: E731
        mask = torch.cat([ones(sum(t.shape[1] for t in toks[: len(images)])), text_mask, ones(1)], dim=1)
        for blk in self.prefix_blocks:
            x = blk(x, mask)
        return self.prefix_norm(x), mask

    def kv_cache(self, prefix: Tensor) -> list[KV]:
        """Per expert layer, the cross-attention keys/values of the prefix: computed once per chunk."""
        return [blk.cross.keys_values(prefix) for blk in self.expert_blocks]

    # ---- action expert -----------------------------------------------------------------------------
    def velocity(
        self, x: Tensor, tau: Tensor, cache: list[KV], prefix_mask: Tensor, cond: Tensor | None
    ) -> Tensor:
        """v_theta(x_tau, tau, o): x [B, H, A], tau [B], cond long [B] in {-1 (none), 0, 1} -> [B, H, A]."""
        h = self.action_in(x) + self.time_mlp(sinusoidal(tau, self.action_in.out_features))[:, None]
        h = h + self.action_pos[:, : x.shape[1]]
        if cond is not None:
            h = h + self.cond_emb(cond.clamp(min=0))[:, None] * (cond >= 0)[:, None, None].to(h.dtype)
        for blk, kv in zip(self.expert_blocks, cache, strict=True):
            h = blk(h, kv, prefix_mask)
        return self.action_out(self.expert_norm(h))

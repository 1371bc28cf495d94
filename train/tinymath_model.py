"""A llama-architecture decoder in plain PyTorch, laid out as llama.cpp's "llama" GGUF expects it.

RMSNorm before attention and MLP, rotary embeddings on adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM, so the
weights need no permutation on export), grouped-query attention, a SwiGLU MLP, no biases, an untied output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Shape:
    vocab_size: int
    width: int = 96
    layers: int = 3
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 256
    context: int = 128
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def rope_tables(shape: Shape) -> tuple[torch.Tensor, torch.Tensor]:
    half = shape.head_dim // 2
    inverse = shape.rope_base ** (-torch.arange(half, dtype=torch.float32) * 2 / shape.head_dim)
    angles = torch.outer(torch.arange(shape.context, dtype=torch.float32), inverse)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[2i], x[2i+1]) by position × frequency i; x is (batch, heads, time, head_dim)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    length = x.shape[-2]
    cos, sin = cos[:length], sin[:length]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.shape = shape
        kv_width = shape.kv_heads * shape.head_dim
        self.attn_norm = RMSNorm(shape.width, shape.norm_eps)
        self.attn_q = nn.Linear(shape.width, shape.width, bias=False)
        self.attn_k = nn.Linear(shape.width, kv_width, bias=False)
        self.attn_v = nn.Linear(shape.width, kv_width, bias=False)
        self.attn_output = nn.Linear(shape.width, shape.width, bias=False)
        self.ffn_norm = RMSNorm(shape.width, shape.norm_eps)
        self.ffn_gate = nn.Linear(shape.width, shape.ffn, bias=False)
        self.ffn_up = nn.Linear(shape.width, shape.ffn, bias=False)
        self.ffn_down = nn.Linear(shape.ffn, shape.width, bias=False)

    def _heads(self, x: torch.Tensor, count: int) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, count, self.shape.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        shape, h = self.shape, self.attn_norm(x)
        q = apply_rope(self._heads(self.attn_q(h), shape.heads), cos, sin)
        k = apply_rope(self._heads(self.attn_k(h), shape.kv_heads), cos, sin)
        v = self._heads(self.attn_v(h), shape.kv_heads)
        repeat = shape.heads // shape.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_output(attended.transpose(1, 2).reshape(x.shape))
        h = self.ffn_norm(x)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class Llama(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.shape = shape
        self.token_embd = nn.Embedding(shape.vocab_size, shape.width)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.output_norm = RMSNorm(shape.width, shape.norm_eps)
        self.output = nn.Linear(shape.width, shape.vocab_size, bias=False)
        cos, sin = rope_tables(shape)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token_embd(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        return self.output(self.output_norm(x))

    def gguf_tensors(self) -> dict[str, torch.Tensor]:
        """Every weight under its llama.cpp tensor name."""
        named = {"token_embd.weight": self.token_embd.weight, "output_norm.weight": self.output_norm.weight,
                 "output.weight": self.output.weight}
        for index, block in enumerate(self.blocks):
            for part in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                         "ffn_up", "ffn_down"):
                named[f"blk.{index}.{part}.weight"] = getattr(block, part).weight
        return named

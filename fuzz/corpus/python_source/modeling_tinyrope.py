# Synthetic test fixture for liger-agent's autopatch analysis (not HuggingFace source).
# A model whose parts do not match the library kernels: a rotary embedding computed with a
# bucketed einsum (not rotate-half), an ungated GELU MLP (fc1 -> act -> fc2), and an RMS norm
# that adds a bias after the weight.
import math

import torch
from torch import nn

from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyRopeRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype) + self.bias


def apply_bucketed_rope(x, freqs, buckets):
    """Rotation by bucketed angles; pairs (even, odd) are mixed with an einsum."""
    angles = torch.einsum("bt,d->btd", buckets.float(), freqs)
    rot = torch.stack([angles.cos(), -angles.sin(), angles.sin(), angles.cos()], dim=-1)
    rot = rot.view(*angles.shape, 2, 2)
    pairs = x.float().unflatten(-1, (-1, 2))
    return torch.einsum("bhtdij,btdj->bhtdi", pairs.unsqueeze(-2), rot).flatten(-2).type_as(x)


class TinyRopeMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.act(hidden_states)
        return self.fc2(hidden_states)


class TinyRopeAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.freqs = nn.Parameter(torch.randn(config.hidden_size // config.num_attention_heads // 2))

    def forward(self, hidden_states, buckets, **kwargs):
        q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)
        q = apply_bucketed_rope(q, self.freqs, buckets)
        k = apply_bucketed_rope(k, self.freqs, buckets)
        return self.out(torch.nn.functional.scaled_dot_product_attention(q, k, v)), None


class TinyRopeDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.ln_1 = TinyRopeRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.attn = TinyRopeAttention(config, layer_idx)
        self.ln_2 = TinyRopeRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = TinyRopeMLP(config)

    def forward(self, hidden_states, buckets=None):
        attn_out, _ = self.attn(self.ln_1(hidden_states), buckets)
        hidden_states = hidden_states + attn_out
        hidden_states = hidden_states + self.mlp(self.ln_2(hidden_states))
        return hidden_states


class TinyRopeModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([TinyRopeDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.ln_f = TinyRopeRMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class TinyRopeForCausalLM(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.transformer = TinyRopeModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids=None, labels=None, **kwargs):
        outputs = self.transformer(input_ids, **kwargs)
        hidden_states = outputs[0]
        logits = self.lm_head(hidden_states)
        return CausalLMOutputWithPast(logits=logits)

import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyCohereDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.self_attn = TinyCohereAttention(config=config, layer_idx=layer_idx)
        self.mlp = TinyCohereMLP(config)
        self.input_layernorm = TinyCohereLayerNorm(hidden_size=(config.hidden_size), eps=config.layer_norm_eps)

    def forward(self, hidden_states, position_embeddings=None, **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states_attention, _ = self.self_attn(hidden_states, position_embeddings, **kwargs)
        hidden_states_mlp = self.mlp(hidden_states)
        hidden_states = residual + hidden_states_attention + hidden_states_mlp
        return hidden_states

import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyPhiModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(
            [TinyPhiDecoderLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers)]
        )
        self.norm = TinyPhiRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

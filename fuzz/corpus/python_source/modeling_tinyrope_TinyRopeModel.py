import math
import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyRopeModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([TinyRopeDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.ln_f = TinyRopeRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

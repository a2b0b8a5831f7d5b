import math
import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


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

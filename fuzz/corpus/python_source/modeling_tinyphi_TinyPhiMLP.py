import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


# Synthetic test fixture for liger-agent's autopatch analysis (not HuggingFace source).
# Phi-3 style: one fused gate_up projection chunked in two, dropout on the residual branches,
# a rotary function able to rotate only part of the head dim.
class TinyPhiMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.activation_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.FloatTensor) -> torch.FloatTensor:
        up_states = self.gate_up_proj(hidden_states)
        gate, up_states = up_states.chunk(2, dim=-1)
        up_states = up_states * self.activation_fn(gate)
        return self.down_proj(up_states)

import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


# Synthetic test fixture for liger-agent's autopatch analysis (not HuggingFace source).
# Cohere style: a LayerNorm without bias computed in float32, attention and MLP in parallel
# from one norm, interleaved rotary pairs, and logits scaled before the loss.
class TinyCohereLayerNorm(nn.Module):
    def __init__(self, hidden_size=None, eps=1e-5, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        mean = hidden_states.mean(-1, keepdim=True)
        variance = (hidden_states - mean).pow(2).mean(-1, keepdim=True)
        hidden_states = (hidden_states - mean) * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight.to(torch.float32) * hidden_states
        return hidden_states.to(input_dtype)

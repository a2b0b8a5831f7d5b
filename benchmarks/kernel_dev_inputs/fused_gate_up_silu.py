# A fused gate/up projection's activation as Phi-3 and GLM MLPs write it: one argument cut in two.
import torch.nn.functional as F


def fused_gate_up_silu(gate_up):
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up

"""liger_rotary_pos_emb with partial rotary (cos/sin narrower than the head): the first rotary_dim
features rotate, the rest pass through, as transformers' partial-capable apply_rotary_pos_emb."""
import pytest
import torch

from liger_kernels.modules import liger_rotary_pos_emb


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _reference(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rd = cos.shape[-1]
    q_rot, q_pass = q[..., :rd], q[..., rd:]
    k_rot, k_pass = k[..., :rd], k[..., rd:]
    q_rot = q_rot * cos + _rotate_half(q_rot) * sin
    k_rot = k_rot * cos + _rotate_half(k_rot) * sin
    return torch.cat([q_rot, q_pass], dim=-1), torch.cat([k_rot, k_pass], dim=-1)


@pytest.mark.parametrize("head_dim,factor", [(128, 0.5), (96, 0.25), (64, 1.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_partial_rotary_matches_the_reference(head_dim, factor, dtype):
    torch.manual_seed(0)
    batch, heads, kv_heads, seq = 2, 4, 2, 16
    rd = int(head_dim * factor)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=dtype, requires_grad=True)
    freqs = torch.randn(batch, seq, rd // 2, device="cuda", dtype=torch.float32)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    q_out, k_out = liger_rotary_pos_emb(q, k, cos, sin)
    q_ref, k_ref = _reference(q.detach().float(), k.detach().float(), cos.float(), sin.float())
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(q_out.float(), q_ref, **tol)
    torch.testing.assert_close(k_out.float(), k_ref, **tol)
    # Gradients flow to the pass-through features unchanged.
    (q_out.float().sum() + k_out.float().sum()).backward()
    assert torch.all(q.grad[..., rd:] == 1) and torch.all(k.grad[..., rd:] == 1)

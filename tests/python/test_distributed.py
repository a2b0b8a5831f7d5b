"""The patched Llama under DDP and FSDP2 on 2 GPUs (NCCL) matches the unpatched one: losses and grad norms
over the steps of benchmarks/train_distributed.py. Skips, saying so, on a machine with fewer than 2 GPUs."""
import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (DDP/FSDP2 over NCCL); this machine has fewer")
def test_patched_model_matches_unpatched_under_ddp_and_fsdp2(tmp_path):
    out = tmp_path / "dist.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(REPO, "benchmarks", "train_distributed.py"), "--steps", "8", "--warmup", "2", "--seq", "256",
           "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"train_distributed failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(out.read_text())
    for mode in ("ddp", "fsdp2"):
        m = result["modes"][mode]
        assert m["agree"], f"{mode}: loss rel diff {m['max_loss_rel_diff']:.3e}, grad-norm rel diff {m['max_grad_norm_rel_diff']:.3e}"

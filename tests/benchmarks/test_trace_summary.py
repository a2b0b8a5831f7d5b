#!/usr/bin/env python3
"""benchmarks/trace_summary.py on a hand-written Chrome trace: kernel classes, per-step figures and
the communication no compute overlapped. Pure Python (no torch), so CPU CI runs it."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks"))
import trace_summary as ts  # noqa: E402


def kernel(name, ts_us, dur_us, stream=7, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts_us, "dur": dur_us, "args": {"stream": stream}}


class KernelClasses(unittest.TestCase):
    def test_names_land_in_their_class(self):
        cases = {
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "communication",
            "void liger::kernels::norm::rms_norm_forward<__nv_bfloat16, 8>(...)": "this library",
            "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x64x128": "attention",
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>": "attention",
            "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopB_TNT": "GEMM",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "GEMM",
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>": "optimizer",
            "_rms_norm_forward_kernel": "Liger-Kernel (Triton)",
            "liger_cross_entropy_kernel": "Liger-Kernel (Triton)",
            "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0": "Inductor (Triton)",
            "Memcpy DtoD (Device -> Device)": "copy / fill",
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>": "other PyTorch",
        }
        for name, expected in cases.items():
            self.assertEqual(ts.classify(name), expected, name)


class Intervals(unittest.TestCase):
    def test_uncovered_counts_only_the_gaps(self):
        comm = [(0, 10, "", 0), (20, 30, "", 0)]
        compute = [(5, 12, "", 0), (22, 24, "", 0), (26, 40, "", 0)]
        self.assertAlmostEqual(ts.uncovered(comm, compute), 5 + 2 + 2)
        self.assertAlmostEqual(ts.uncovered(comm, []), 20)
        self.assertAlmostEqual(ts.uncovered(comm, [(-5, 50, "", 0)]), 0)

    def test_merge_joins_overlaps(self):
        self.assertEqual(ts.merge([(3, 5, "", 0), (0, 4, "", 0), (7, 8, "", 0)]), [[0, 5], [7, 8]])
        self.assertEqual(ts.length(ts.merge([(0, 4, "", 0), (2, 6, "", 0)])), 6)


class Summary(unittest.TestCase):
    def test_two_steps_of_a_trace(self):
        events = [
            kernel("nvjet_sm90_tst_128x256", 0, 400),
            kernel("ncclDevKernel_AllGather_RING_LL", 300, 300, stream=20),  # 100 us under the GEMM, 200 exposed
            kernel("void liger::kernels::swiglu_forward<bf16>", 600, 100),
            kernel("Memset (Device)", 700, 50, cat="gpu_memset"),
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5000},  # host events are ignored
            kernel("nvjet_sm90_tst_128x256", 1000, 400),
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"traceEvents": events}, f)
        try:
            intervals = ts.load_intervals(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(len(intervals), 5)
        s = ts.summarize(intervals, steps=2)
        self.assertEqual(s["classes_ms"]["GEMM"], 0.4)          # 800 us over 2 steps
        self.assertEqual(s["classes_ms"]["communication"], 0.15)
        self.assertEqual(s["comm_exposed_ms"], 0.1)             # 200 us over 2 steps
        self.assertEqual(s["busy_ms"], round((750 + 400) * 1e-3 / 2, 3))
        self.assertEqual(s["span_ms"], 0.7)
        top = ts.top_kernels(intervals, steps=2, n=1)
        self.assertEqual(top[0][1], "GEMM")

    def test_empty_trace(self):
        self.assertEqual(ts.summarize([], steps=3)["busy_ms"], 0.0)


if __name__ == "__main__":
    unittest.main()

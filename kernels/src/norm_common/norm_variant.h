// Code variants of the norm backward kernels: compile-time strategies beside the launch tunables.
// Each op's tuning.h picks one with a line `using BwdVariant = norm::BwdVariant<...>;`, which
// kernel-perf's code-variant strategies rewrite (skills/kernel_perf/search_spaces.yaml: code_knobs).
// BwdVariant<0, 0, 0> is the shipped kernel: every knob at 0 compiles the code as it was before
// the knobs existed.
#pragma once

namespace liger::kernels::norm {

// DwFirst:   1 = each element's dW (dB) term is accumulated before its dx is formed and stored;
//            0 = dx first (shipped). Changes which values are live at the dx store.
// CacheFp32: 1 = the first pass keeps x̂ (x for the RMS norms), the weighted gradient (w·dy) and
//            dy of every slot in fp32 registers across the row reduction, and the second pass
//            reads them back ("naive": all row vectors live, three floats per element);
//            0 = the second pass recomputes them from the packed inputs (shipped: streaming,
//            one 16-bit value per element and tensor).
// MinBlocks: __launch_bounds__ minimum resident 512-thread blocks per SM, i.e. a register cap of
//            65536 / (512 x MinBlocks) per thread; 0 = the shipped rule of each kernel.
template <int DwFirst, int CacheFp32, int MinBlocks>
struct BwdVariant {
  static_assert(DwFirst == 0 || DwFirst == 1, "DwFirst is 0 or 1");
  static_assert(CacheFp32 == 0 || CacheFp32 == 1, "CacheFp32 is 0 or 1");
  static_assert(MinBlocks >= 0 && MinBlocks <= 4, "MinBlocks is 0 (the shipped rule) or 1..4");
  static constexpr bool dw_first = DwFirst != 0;
  static constexpr bool cache_fp32 = CacheFp32 != 0;
  static constexpr int min_blocks = MinBlocks;
};

using ShippedBwdVariant = BwdVariant<0, 0, 0>;

// The second __launch_bounds__ argument: the variant's, else the kernel's own rule (0 leaves it
// unspecified, as `__launch_bounds__(N)` does).
template <class P>
constexpr int bwd_min_blocks(int shipped) {
  return P::min_blocks > 0 ? P::min_blocks : shipped;
}

// The per-slot fp32 values a CacheFp32 variant keeps across the row reduction (one float each,
// never touched, when the variant does not cache).
template <class P, int VEC, int NV>
struct BwdRowCache {
  static constexpr int kSlots = P::cache_fp32 ? NV : 1;
  static constexpr int kElems = P::cache_fp32 ? VEC : 1;
  float a[kSlots][kElems];   // x̂ (LayerNorm) or x (RMS norms)
  float g[kSlots][kElems];   // w·dy (LayerNorm) or dy·(w + offset) (RMS norms)
  float dy[kSlots][kElems];
};

}  // namespace liger::kernels::norm

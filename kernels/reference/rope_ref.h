// fp64 CPU reference of RoPE, HF rotate-half as Liger-Kernel implements it.
// x: dense [batch, heads, seq, head_dim]; cos/sin: dense [cos_batch (1 or batch), seq, head_dim], of
// which only the first head_dim/2 entries of each row are read (HF duplicates the halves; Liger
// reads the first half for both):
//   y[:h]  = x[:h] * cos[:h] - x[h:] * sin[:h]
//   y[h:]  = x[h:] * cos[:h] + x[:h] * sin[:h]        (h = head_dim / 2)
// backward(dy) is the same rotation with -sin.
#pragma once

#include <cstdint>
#include <vector>

namespace liger::ref {

std::vector<double> rope_apply(const std::vector<double>& x, int64_t batch, int64_t heads, int64_t seq,
                               int64_t head_dim, const std::vector<double>& cos, const std::vector<double>& sin,
                               int64_t cos_batch, bool backward);

inline std::vector<double> rope_forward(const std::vector<double>& x, int64_t batch, int64_t heads, int64_t seq,
                                        int64_t head_dim, const std::vector<double>& cos,
                                        const std::vector<double>& sin, int64_t cos_batch) {
  return rope_apply(x, batch, heads, seq, head_dim, cos, sin, cos_batch, false);
}
inline std::vector<double> rope_backward(const std::vector<double>& dy, int64_t batch, int64_t heads, int64_t seq,
                                         int64_t head_dim, const std::vector<double>& cos,
                                         const std::vector<double>& sin, int64_t cos_batch) {
  return rope_apply(dy, batch, heads, seq, head_dim, cos, sin, cos_batch, true);
}

}  // namespace liger::ref

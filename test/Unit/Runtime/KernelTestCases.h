//===- KernelTestCases.h - inputs shared by the CPU and CUDA kernel tests -===//
//
// The CPU kernel tests (test/Unit/Runtime/*KernelsTest.cpp) check each family
// against references written in the test; the CUDA tests (test/Unit/Cuda/)
// check the GPU against the CPU over the same inputs. The cases and input
// generators both run are defined here once; a CUDA test adds its own
// larger cases (sizes spanning many blocks) after these.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TEST_UNIT_RUNTIME_KERNELTESTCASES_H
#define PARALLAX_TEST_UNIT_RUNTIME_KERNELTESTCASES_H

#include "KernelTestUtil.h"

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace parallax::rt::test::cases {

using Shape = std::vector<int64_t>;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

/// Every element type the data-movement kernels take.
inline const std::vector<DType> kAllTypes = {DType::F32, DType::F64, DType::I64, DType::I32,
                                             DType::I16, DType::I8,  DType::U8,  DType::Bool};

/// Distinct values that every type holds exactly (i8: small, wrapping ok).
inline std::vector<double> distinct(DType t, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
    case DType::Bool: v[i] = (i * 7 + i / 3) % 2; break;
    case DType::I8: v[i] = (i % 251) - 125; break;
    case DType::U8: v[i] = i % 251; break;
    case DType::I16: v[i] = (i % 30011) - 15000; break;
    case DType::I32:
    case DType::I64: v[i] = (double)i * 3 - 1000; break;
    default: v[i] = (double)i * 0.5 - 7.25; break;
    }
  }
  return v;
}

/// Random integer indices in [lo, hi].
inline std::vector<double> randomIndices(int64_t n, uint64_t seed, int64_t lo, int64_t hi) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = (double)dist(gen);
  return v;
}

/// Values every element type holds exactly.
inline std::vector<double> smallValues(int64_t n, uint64_t seed, DType dt) {
  if (dt == DType::Bool)
    return randomIndices(n, seed, 0, 1);
  return randomIndices(n, seed, -100, 100);
}

//===----------------------------------------------------------------------===//
// Shape: transpose, concat, expand, slice, pad
//===----------------------------------------------------------------------===//

struct TransposeCase {
  Shape in, perm;
};

/// Run for every element type.
inline const std::vector<TransposeCase> kTransposeCases = {
    {{}, {}},
    {{5}, {0}},
    {{3, 4}, {1, 0}},
    {{37, 70}, {1, 0}},                // tiled 2-d, partial tiles
    {{2, 3, 45, 33}, {0, 1, 3, 2}},    // swap the last two (tiled)
    {{2, 3, 4, 5}, {0, 2, 1, 3}},      // last dim stays: row copies
    {{4, 9, 10}, {2, 0, 1}},
    {{4, 9, 10}, {1, 2, 0}},
    {{2, 1, 3, 1, 4}, {4, 3, 0, 2, 1}}, // size-1 dims
    {{2, 3, 2, 3, 2, 2}, {5, 1, 3, 0, 4, 2}},
    {{3, 0, 4}, {2, 1, 0}}, // empty
};

/// Large ones (many threads, many blocks and tiles), each with its type.
inline const std::vector<std::pair<DType, TransposeCase>> kLargeTransposeCases = {
    {DType::F32, {{300, 513}, {1, 0}}},
    {DType::F64, {{4, 8, 64, 100}, {0, 1, 3, 2}}},
    {DType::I64, {{8, 128, 8, 64}, {0, 2, 1, 3}}},
    {DType::F32, {{20, 30, 40}, {2, 0, 1}}},
};

inline Shape transposedShape(const TransposeCase &c) {
  Shape out(c.in.size());
  for (size_t i = 0; i < c.in.size(); ++i)
    out[i] = c.in[c.perm[i]];
  return out;
}

struct ConcatCase {
  std::vector<Shape> ins;
  int64_t axis;
};

/// Run for every element type.
inline const std::vector<ConcatCase> kConcatCases = {
    {{{2, 3}, {4, 3}}, 0},
    {{{2, 3}, {2, 1}, {2, 5}}, 1},
    {{{2, 3}, {2, 1}, {2, 5}}, -1},
    {{{2, 3, 4}, {2, 2, 4}, {2, 0, 4}, {2, 1, 4}}, -2}, // an empty part
    {{{5}}, 0},
};

/// The inputs of a concat case: distinct values, each part's offset by 17
/// from the previous one's.
inline std::vector<TestTensor> concatInputs(DType t, const std::vector<Shape> &ins) {
  std::vector<TestTensor> xs;
  int64_t seed = 0;
  for (const Shape &s : ins) {
    std::vector<double> v = distinct(t, numel(s) + seed);
    xs.emplace_back(t, s, std::vector<double>(v.begin() + seed, v.end()));
    seed += 17;
  }
  return xs;
}

inline Shape concatShape(const std::vector<Shape> &ins, int64_t axis) {
  int64_t a = axis < 0 ? axis + (int64_t)ins[0].size() : axis;
  Shape out = ins[0];
  out[a] = 0;
  for (const Shape &s : ins)
    out[a] += s[a];
  return out;
}

/// expand's (input, output) shapes, run for every element type.
inline const std::vector<std::pair<Shape, Shape>> kExpandCases = {
    {{}, {2, 3}},     {{3}, {4, 3}},       {{4, 1}, {4, 5}}, {{1, 3, 1}, {2, 3, 4}},
    {{2, 3}, {2, 3}}, {{3, 1}, {2, 2, 3, 5}}, {{1}, {0, 3}},
};

struct SliceCase {
  Shape in, out, starts, steps;
};

inline const std::vector<SliceCase> kSliceCases = {
    {{10}, {3}, {2}, {1}},
    {{10}, {4}, {9}, {-2}},
    {{10}, {10}, {9}, {-1}},                // reverse
    {{6, 8}, {2, 8}, {3, 0}, {1, 1}},       // rows: contiguous
    {{6, 8}, {6, 3}, {0, 1}, {1, 3}},
    {{6, 8}, {3, 4}, {5, 7}, {-2, -2}},
    {{4, 5, 6}, {2, 5, 3}, {1, 0, 5}, {2, 1, -2}},
    {{4, 5, 6}, {4, 0, 6}, {0, 0, 0}, {1, 1, 1}}, // empty
    {{2, 1, 7}, {2, 1, 2}, {0, 0, 6}, {1, 1, -5}},
    {{}, {}, {}, {}},
};

struct PadCase {
  Shape in;
  std::vector<int64_t> pads;
};

inline const std::vector<PadCase> kPadCases = {
    {{5}, {2, 3}},
    {{3, 4}, {1, 2, 2, 1}},
    {{2, 3, 4}, {0, 1, 2, 0, 2, 3}},
    {{2, 3, 5, 6}, {0, 0, 1, 1, 0, 0, 1, 1}}, // what AvgPool's padding looks like
    {{3, 6}, {-1, 2, 0, -3}},                 // negative pads crop
    {{4, 4}, {0, 0, 0, 0}},
};

inline Shape paddedShape(const PadCase &c) {
  const size_t rank = c.in.size();
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d)
    out[d] = c.in[d] + c.pads[d] + c.pads[rank + d];
  return out;
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

/// gather's output shape: data's with dimension `axis` replaced by idx's.
inline Shape gatherShape(const Shape &data, const Shape &idx, int64_t axis) {
  Shape s(data.begin(), data.begin() + axis);
  s.insert(s.end(), idx.begin(), idx.end());
  s.insert(s.end(), data.begin() + axis + 1, data.end());
  return s;
}

struct GatherRowsCase {
  DType dt;
  Shape data, idx;
};

/// Whole rows (axis 0, as an embedding lookup), run with i64 and i32
/// indices.
inline const std::vector<GatherRowsCase> kGatherRowsCases = {
    {DType::F32, {7, 5}, {4}},
    {DType::F32, {7, 5}, {2, 3}},
    {DType::F64, {7, 3, 2}, {6}},
    {DType::F32, {7, 5}, {}}, // scalar index
    {DType::F32, {7}, {3, 2}}, // one-element rows
};

struct ScatterAddCase {
  Shape out, idx;
  int64_t axis;
};

/// Run for f32 and f64 with i64 and i32 indices.
inline const std::vector<ScatterAddCase> kScatterAddCases = {
    {{6, 4}, {5}, 0},  {{6, 4}, {2, 3}, 0}, {{2, 5, 3}, {2, 2}, 1},
    {{2, 3, 4}, {5}, -1}, {{7}, {}, 0}, // scalar index
};

struct ScatterElementsCase {
  Shape out, idx;
  int64_t axis;
};

/// Short lines, run for f32 and f64 with i64 and i32 indices.
inline const std::vector<ScatterElementsCase> kScatterElementsCases = {
    {{3, 4}, {5, 4}, 0}, {{3, 4}, {2, 7}, 1}, {{3, 4}, {3, 3}, -1},
    {{2, 5, 3}, {2, 6, 2}, 1}, {{6}, {9}, 0},
};

//===----------------------------------------------------------------------===//
// Reduction, Linalg
//===----------------------------------------------------------------------===//

struct ReduceCase {
  Shape in;
  std::vector<int64_t> axes;
};

inline const std::vector<ReduceCase> kReduceCases = {
    {{5, 7}, {1}},          {{5, 7}, {0}},           {{5, 7}, {0, 1}},
    {{5, 7}, {-1}},         {{5, 7}, {}},            {{3, 4, 5}, {1}},
    {{3, 4, 5}, {0, 2}},    {{3, 4, 5}, {2, 0}},     {{3, 4, 5}, {-3, -2}},
    {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 2}},  {{2, 3, 4, 5}, {1, 2}},
    {{1, 5, 1, 3}, {0, 2}}, {{1, 5, 1, 3}, {1}},     {{2, 1, 3}, {1, 2}},
    {{9}, {0}},             {{}, {}},                {{4, 300}, {0}},
    {{3, 2, 600}, {1}},     {{600, 2, 3}, {0, 2}},
};

/// Which of `rank` dimensions `axes` (negative ones counted from the end)
/// reduce.
inline std::vector<bool> reducedDims(int64_t rank, const std::vector<int64_t> &axes) {
  std::vector<bool> red(rank, false);
  for (int64_t a : axes)
    red[a < 0 ? a + rank : a] = true;
  return red;
}

/// A reduction's output shape. keepdims: 1 = true, 0 = false, -1 = the
/// attribute absent (default true).
inline Shape reducedShape(const Shape &in, const std::vector<int64_t> &axes, int keepdims) {
  std::vector<bool> red = reducedDims((int64_t)in.size(), axes);
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!red[d])
      out.push_back(in[d]);
    else if (keepdims != 0)
      out.push_back(1);
  return out;
}

/// matmul's (A, B) shapes: vectors, broadcast batches, empty dimensions.
inline const std::vector<std::pair<Shape, Shape>> kMatmulShapes = {
    {{3, 4}, {4, 5}},          {{4}, {4, 5}},
    {{3, 4}, {4}},             {{4}, {4}},
    {{1, 4}, {4, 6}},          {{5, 4}, {4, 1}},
    {{2, 3, 4}, {4, 5}},       {{2, 3, 4}, {2, 4, 5}},
    {{2, 1, 3, 4}, {3, 4, 2}}, {{3, 4}, {2, 4, 5}},
    {{2, 3, 4}, {4}},          {{4}, {2, 4, 5}},
    {{2, 3, 1, 4}, {1, 4, 3}}, {{3, 0}, {0, 2}},
    {{0, 4}, {4, 3}},          {{2, 3, 4}, {1, 4, 5}},
    {{1, 3, 4}, {2, 4, 5}},    {{2, 2, 1, 4}, {2, 1, 4, 3}},
};

/// A gemm problem: Y[m, n] = alpha * op(A) op(B) + beta * C, with A, B and
/// C random (fixed seeds), the attributes and a description for traces.
struct GemmProblem {
  TestTensor A, B, C;
  nlohmann::json attrs;
  std::string what;
};

/// `cShape` is C's shape (broadcast to [m, n]) if `hasC`; alpha and beta are
/// left to their defaults unless `setAlphaBeta`.
inline GemmProblem makeGemm(DType dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                            const Shape &cShape, bool hasC, double alpha, double beta,
                            bool setAlphaBeta) {
  GemmProblem g;
  g.what = (::testing::Message() << nameOf(dt) << " m=" << m << " n=" << n << " k=" << k
                                 << " ta=" << ta << " tb=" << tb << " C=" << hasC << " "
                                 << ::testing::PrintToString(cShape) << " alpha=" << alpha
                                 << " beta=" << beta)
               .GetString();
  g.A = TestTensor(dt, ta ? Shape{k, m} : Shape{m, k}, randomValues(m * k, 3));
  g.B = TestTensor(dt, tb ? Shape{n, k} : Shape{k, n}, randomValues(k * n, 4));
  g.C = hasC ? TestTensor(dt, cShape, randomValues(numel(cShape), 5)) : TestTensor::none();
  g.attrs = nlohmann::json::object();
  if (setAlphaBeta) {
    g.attrs["alpha"] = alpha;
    g.attrs["beta"] = beta;
  }
  if (ta)
    g.attrs["trans_a"] = true;
  if (tb)
    g.attrs["trans_b"] = true;
  return g;
}

//===----------------------------------------------------------------------===//
// Norm, Loss
//===----------------------------------------------------------------------===//

struct LnCase {
  Shape x;
  int64_t axis;
  Shape scale;
  bool bias;
  Shape biasShape;
};

inline const std::vector<LnCase> kLnCases = {
    {{3, 4}, -1, {4}, true, {4}},
    {{3, 4}, 1, {4}, false, {}},
    {{2, 3, 4}, 1, {3, 4}, true, {3, 4}},
    {{2, 3, 4}, 1, {4}, true, {3, 1}},      // broadcast scale and bias
    {{2, 3, 4}, -2, {3, 1}, true, {1}},
    {{2, 3, 4}, 0, {1, 1, 4}, true, {3, 4}}, // one row
    {{2, 3, 4}, 2, {1}, false, {}},
    {{5}, 0, {5}, true, {5}},
};

/// Scores of `shape` [N, C, d...], with class weights or not, and an
/// ignore_index or none.
struct LossCase {
  Shape shape;
  bool weights;
  std::optional<int64_t> ignore;
};

/// The labels' shape for scores of shape [N, C, d...]: [N, d...].
inline Shape labelShapeOf(const Shape &scores) {
  Shape s{scores[0]};
  s.insert(s.end(), scores.begin() + 2, scores.end());
  return s;
}

/// Labels in [0, C), with `ignore` placed at every third position if set.
inline std::vector<double> makeLabels(int64_t n, int64_t c, uint64_t seed,
                                      std::optional<int64_t> ignore) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, c - 1);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = (double)((ignore && i % 3 == 1) ? *ignore : dist(gen));
  return v;
}

//===----------------------------------------------------------------------===//
// Conv: convolution and pooling geometry
//===----------------------------------------------------------------------===//

/// Output size of one dimension, written out from the ONNX / PyTorch rule.
inline int64_t convOutSize(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                           bool ceil) {
  double span = double(in + pb + pe - (d * (k - 1) + 1)) / double(s);
  int64_t out = (int64_t)(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + pb)
    --out; // the last window would start in the end padding
  return out;
}

struct ConvCase {
  Shape x, w; // [N, C, in...], [M, C/group, k...]
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  bool bias = false;

  size_t nd() const { return x.size() - 2; }
  Shape y() const {
    Shape s{x[0], w[0]};
    for (size_t i = 0; i < nd(); ++i)
      s.push_back(convOutSize(x[2 + i], w[2 + i], strides[i], pads[i], pads[nd() + i],
                              dilations[i], false));
    return s;
  }
  nlohmann::json attrs() const {
    nlohmann::json a{{"strides", strides}, {"pads", pads}, {"dilations", dilations}};
    if (group != 1)
      a["group"] = group;
    return a;
  }
};

inline std::string describe(const ConvCase &c, DType dt) {
  return std::string(nameOf(dt)) + " x" + nlohmann::json(c.x).dump() + " w" +
         nlohmann::json(c.w).dump() + " " + c.attrs().dump();
}

struct PoolCase {
  Shape x, kernel;
  std::vector<int64_t> strides, pads, dilations;
  bool ceil = false, includePad = false;

  size_t nd() const { return x.size() - 2; }
  std::vector<int64_t> dil() const {
    return dilations.empty() ? std::vector<int64_t>(nd(), 1) : dilations;
  }
  Shape y() const {
    Shape s{x[0], x[1]};
    for (size_t i = 0; i < nd(); ++i)
      s.push_back(convOutSize(x[2 + i], kernel[i], strides[i], pads[i], pads[nd() + i],
                              dil()[i], ceil));
    return s;
  }
  nlohmann::json attrs(bool isMax) const {
    nlohmann::json a{{"kernel_shape", kernel}, {"strides", strides}, {"pads", pads}};
    if (isMax)
      a["dilations"] = dil();
    if (ceil)
      a["ceil_mode"] = true;
    if (includePad && !isMax)
      a["count_include_pad"] = true;
    return a;
  }
};

inline std::string describe(const PoolCase &c, DType dt, bool isMax) {
  return std::string(nameOf(dt)) + " x" + nlohmann::json(c.x).dump() + " " +
         c.attrs(isMax).dump();
}

/// Max and average pooling.
inline std::vector<PoolCase> poolCases() {
  std::vector<PoolCase> cs;
  cs.push_back({{2, 3, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, false, false});
  cs.push_back({{2, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, false});
  cs.push_back({{2, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, true});
  // ceil_mode: the last window hangs over the end (padding) ...
  cs.push_back({{1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, false});
  cs.push_back({{1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, true});
  // ... or a window that would start in the end padding is dropped.
  cs.push_back({{1, 1, 7, 5}, {2, 2}, {3, 2}, {1, 0, 1, 1}, {}, true, true});
  cs.push_back({{1, 1, 7, 5}, {2, 2}, {3, 2}, {1, 0, 1, 1}, {}, true, false});
  // Asymmetric pads, rectangular kernels and strides.
  cs.push_back({{2, 2, 8, 9}, {3, 2}, {1, 3}, {2, 0, 1, 1}, {}, false, true});
  cs.push_back({{2, 2, 8, 9}, {3, 2}, {1, 3}, {2, 0, 1, 1}, {}, true, false});
  // 1-D and 3-D.
  cs.push_back({{2, 3, 9}, {3}, {2}, {1, 2}, {}, true, true});
  cs.push_back({{2, 3, 9}, {2}, {3}, {0, 1}, {}, false, false});
  cs.push_back({{1, 2, 5, 4, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, {}, true, true});
  cs.push_back({{1, 2, 5, 4, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, {}, false, false});
  // Big enough to be split over threads (and over several GPU blocks).
  cs.push_back({{2, 8, 40, 40}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, true});
  return cs;
}

/// Max pooling only: dilations.
inline std::vector<PoolCase> dilatedPoolCases() {
  return {{{1, 2, 9, 8}, {3, 2}, {2, 1}, {2, 1, 1, 0}, {2, 3}, true, false},
          {{2, 1, 10}, {3}, {2}, {1, 1}, {3}, false, false},
          {{1, 1, 6, 5, 7}, {2, 2, 3}, {1, 2, 2}, {1, 0, 0, 1, 1, 2}, {2, 1, 2}, true, false}};
}

} // namespace parallax::rt::test::cases

#endif // PARALLAX_TEST_UNIT_RUNTIME_KERNELTESTCASES_H

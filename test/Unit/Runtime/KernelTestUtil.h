//===- KernelTestUtil.h - run one runtime kernel in a unit test -*- C++ -*-===//
//
// Kernel tests build tensors as std::vector<double> (whatever the element
// type), run one kernel through the registry exactly as a session binds it,
// and compare against a naive reference written in the test.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
#define PARALLAX_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H

#include "parallax/Runtime/Kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace parallax::rt::test {

/// A tensor owned by a test. Values are stored in the element type; `values`
/// converts for convenience.
struct TestTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
  bool absent = false; ///< an absent optional operand

  TestTensor() = default;
  TestTensor(DType dtype, std::vector<int64_t> shape,
             const std::vector<double> &values = {})
      : dtype(dtype), shape(std::move(shape)) {
    int64_t n = numElements();
    bytes.assign(n * sizeOf(dtype) + 64, 0); // slack: never a null pointer
    for (int64_t i = 0; i < (int64_t)values.size() && i < n; ++i)
      set(i, values[i]);
  }
  static TestTensor none() {
    TestTensor t;
    t.absent = true;
    return t;
  }
  int64_t numElements() const {
    if (absent)
      return 0;
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  void *data() { return bytes.data(); }
  double get(int64_t i) const {
    const char *p = bytes.data();
    switch (dtype) {
    case DType::F32: return reinterpret_cast<const float *>(p)[i];
    case DType::F64: return reinterpret_cast<const double *>(p)[i];
    case DType::I64: return (double)reinterpret_cast<const int64_t *>(p)[i];
    case DType::I32: return reinterpret_cast<const int32_t *>(p)[i];
    case DType::I16: return reinterpret_cast<const int16_t *>(p)[i];
    case DType::I8: return reinterpret_cast<const int8_t *>(p)[i];
    case DType::U8:
    case DType::Bool: return reinterpret_cast<const uint8_t *>(p)[i];
    default: ADD_FAILURE() << "unsupported test dtype"; return 0;
    }
  }
  void set(int64_t i, double v) {
    char *p = bytes.data();
    switch (dtype) {
    case DType::F32: reinterpret_cast<float *>(p)[i] = (float)v; break;
    case DType::F64: reinterpret_cast<double *>(p)[i] = v; break;
    case DType::I64: reinterpret_cast<int64_t *>(p)[i] = (int64_t)v; break;
    case DType::I32: reinterpret_cast<int32_t *>(p)[i] = (int32_t)v; break;
    case DType::I16: reinterpret_cast<int16_t *>(p)[i] = (int16_t)v; break;
    case DType::I8: reinterpret_cast<int8_t *>(p)[i] = (int8_t)v; break;
    case DType::U8:
    case DType::Bool: reinterpret_cast<uint8_t *>(p)[i] = (uint8_t)v; break;
    default: ADD_FAILURE() << "unsupported test dtype";
    }
  }
  std::vector<double> values() const {
    std::vector<double> v(numElements());
    for (int64_t i = 0; i < numElements(); ++i)
      v[i] = get(i);
    return v;
  }
  TensorView view() {
    if (absent)
      return TensorView{};
    return TensorView{data(), dtype, shape};
  }
};

/// Elements of a tensor of shape `s`.
inline int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// The product of dimensions [b, e) of `s` (e < 0 or past the end: to the
/// end): the outer or inner size around an axis.
inline int64_t numel(const std::vector<int64_t> &s, int64_t b, int64_t e = -1) {
  int64_t size = (int64_t)s.size();
  if (e < 0 || e > size)
    e = size;
  int64_t n = 1;
  for (int64_t i = b; i < e; ++i)
    n *= s.at(i);
  return n;
}

/// Random values in [lo, hi) from a fixed seed.
inline std::vector<double> randomValues(int64_t n, uint64_t seed,
                                        double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(gen);
  return v;
}

/// Binds `op` with `attrs` over `inputs` and `outputs` and runs it once.
/// Inputs are passed by reference: optimizer kernels update them in place.
inline void runKernel(const std::string &op, std::vector<TestTensor *> inputs,
                      std::vector<TestTensor *> outputs,
                      nlohmann::json attrs = nlohmann::json::object(),
                      ExecEnv env = {}) {
  const KernelFactory *factory = KernelRegistry::global().find(op);
  ASSERT_NE(factory, nullptr) << "no kernel '" << op << "'";
  PlanKernel kernel;
  kernel.op = op;
  kernel.attrs = std::move(attrs);
  std::vector<TensorView> ins, outs;
  for (TestTensor *t : inputs)
    ins.push_back(t->view());
  for (TestTensor *t : outputs)
    outs.push_back(t->view());
  if (env.step == 0)
    env.step = 1;
  KernelArgs args(kernel, ins, outs, env);
  KernelFn fn = (*factory)(args);
  // Scratch holds whatever the session's other kernels left there: NaN
  // bytes, so that a kernel that reads its scratch before writing it fails
  // its reference.
  if (env.workspace && env.workspace->bytes() > 0)
    std::memset(env.workspace->base(), 0xFF, (size_t)env.workspace->bytes());
  fn();
}

/// As runKernel, but returns the KernelError message (bind or run time), or
/// "" if the kernel succeeded.
inline std::string kernelError(const std::string &op,
                               std::vector<TestTensor *> inputs,
                               std::vector<TestTensor *> outputs,
                               nlohmann::json attrs = nlohmann::json::object()) {
  try {
    runKernel(op, std::move(inputs), std::move(outputs), std::move(attrs));
  } catch (const KernelError &e) {
    return e.what();
  }
  return "";
}

/// Pointers to each of `ts`, as runKernel takes its tensors.
inline std::vector<TestTensor *> pointersTo(std::vector<TestTensor> &ts) {
  std::vector<TestTensor *> p;
  for (TestTensor &t : ts)
    p.push_back(&t);
  return p;
}

/// As kernelError, over `inputs` and `outputs` held by value (the caller's
/// tensors are left as they were).
inline std::string kernelErrorOn(const std::string &op, std::vector<TestTensor> inputs,
                                 std::vector<TestTensor> outputs,
                                 nlohmann::json attrs = nlohmann::json::object()) {
  return kernelError(op, pointersTo(inputs), pointersTo(outputs), std::move(attrs));
}

/// Central differences of `loss()` with respect to each element of `t`,
/// which is moved by +-h in place and restored.
template <typename Loss>
std::vector<double> centralDifferences(TestTensor &t, Loss loss, double h = 1e-6) {
  std::vector<double> g(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = t.get(i);
    t.set(i, v + h);
    double lp = loss();
    t.set(i, v - h);
    double lm = loss();
    t.set(i, v);
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

/// numpy broadcast of two shapes.
inline std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a,
                                           const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Elementwise comparison with |a - b| <= atol + rtol * |b|.
inline void expectNear(const std::vector<double> &actual,
                       const std::vector<double> &expected, double rtol = 1e-5,
                       double atol = 1e-6, const std::string &what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_LE(std::abs(actual[i] - expected[i]), atol + rtol * std::abs(expected[i]))
        << what << " element " << i << ": " << actual[i] << " vs "
        << expected[i];
}

} // namespace parallax::rt::test

#endif // PARALLAX_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H

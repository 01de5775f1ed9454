//===- OptimizerTest.cpp - the Optimizer CUDA kernels against the CPU's ---===//
//
// Every optimizer with and without weight decay (momentum with and without
// nesterov), dense and sparse gradients (repeated and -1 indices, all slots
// unused, an index out of range), several steps (Adam's bias correction
// reads the step on the GPU), sharded updates in a world of one, assign of
// every type, and the bind-time errors. The variable and its state are
// inputs updated in place, which expectCudaMatchesCpu compares too.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include "parallax/Runtime/Comm.h"

#include <cmath>

namespace parallax::rt::test {
namespace {

using Shape = std::vector<int64_t>;
using nlohmann::json;

struct Opt {
  std::string op;
  json attrs;
  int states;
};

std::vector<Opt> optimizers() {
  std::vector<Opt> v;
  for (double wd : {0.0, 0.01}) {
    auto with = [&](json a) {
      if (wd != 0)
        a["weight_decay"] = wd;
      return a;
    };
    v.push_back({"sgd", with({{"lr", 0.1}}), 0});
    v.push_back({"momentum", with({{"lr", 0.05}, {"momentum", 0.9}}), 1});
    v.push_back({"momentum", with({{"lr", 0.05}, {"momentum", 0.8}, {"nesterov", true}}), 1});
    v.push_back({"adam", with({{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}}), 2});
    v.push_back({"adagrad", with({{"lr", 0.1}, {"epsilon", 1e-10}}), 1});
  }
  return v;
}

/// Variable, state and dense gradient values: the state non-negative where
/// it is a sum of squares (adam's v, adagrad's sum).
std::vector<TestTensor> variableAndState(const Opt &o, DType t, const Shape &var,
                                         const Shape &state, uint64_t seed) {
  std::vector<TestTensor> ts;
  ts.emplace_back(t, var, randomValues(numel(var), seed));
  for (int s = 0; s < o.states; ++s) {
    bool squares = (o.op == "adam" && s == 1) || o.op == "adagrad";
    ts.emplace_back(t, state,
                    randomValues(numel(state), seed + 1 + s, squares ? 0.0 : -0.5,
                                 squares ? 0.5 : 0.5));
  }
  return ts;
}

ExecEnv atStep(int64_t step) {
  ExecEnv env;
  env.step = step;
  return env;
}

TEST_F(CudaKernelTest, DenseEveryOptimizer) {
  for (const Opt &o : optimizers())
    for (DType t : {DType::F32, DType::F64})
      for (const Shape &shape : {Shape{7, 13}, Shape{1000, 257}, Shape{1}})
        for (int64_t step : {1, 2, 10}) {
          SCOPED_TRACE(o.op + " " + o.attrs.dump() + " " + nameOf(t) + " " +
                       json(shape).dump() + " step " + std::to_string(step));
          std::vector<TestTensor> ins = variableAndState(o, t, shape, shape, 3);
          ins.emplace_back(t, shape, randomValues(numel(shape), 99));
          expectCudaMatchesCpu(o.op, ins, {}, o.attrs, 1e-5, 1e-6, atStep(step));
        }
}

/// n indices into `rows` rows: repeats, -1 (unused) slots, out of order.
std::vector<double> sparseIndices(int64_t n, int64_t rows, uint64_t seed) {
  std::vector<double> r = randomValues(n, seed, 0, 1), idx(n);
  for (int64_t i = 0; i < n; ++i) {
    // A third of the entries reuse a few hot rows; one in seven is unused.
    idx[i] = i % 7 == 3 ? -1.0
                        : (double)(int64_t)(r[i] * (i % 3 == 0 ? 4 : rows));
  }
  return idx;
}

TEST_F(CudaKernelTest, SparseEveryOptimizer) {
  struct Case {
    Shape var;
    int64_t n;
  };
  const Case cases[] = {{{40, 6}, 25}, {{9, 2, 3}, 30}, {{5000, 65}, 3000}, {{12}, 17}};
  for (const Opt &o : optimizers())
    for (DType t : {DType::F32, DType::F64})
      for (const Case &c : cases)
        for (int64_t step : {1, 3}) {
          SCOPED_TRACE(o.op + " " + o.attrs.dump() + " " + nameOf(t) + " " +
                       json(c.var).dump() + " n " + std::to_string(c.n) + " step " +
                       std::to_string(step));
          std::vector<TestTensor> ins = variableAndState(o, t, c.var, c.var, 5);
          Shape rowsShape = c.var;
          rowsShape[0] = c.n;
          ins.emplace_back(DType::I64, Shape{c.n}, sparseIndices(c.n, c.var[0], 21));
          ins.emplace_back(t, rowsShape, randomValues(numel(rowsShape), 77));
          expectCudaMatchesCpu(o.op, ins, {}, o.attrs, 1e-5, 1e-6, atStep(step));
        }
}

TEST_F(CudaKernelTest, SparseAllSlotsUnusedAndEmpty) {
  for (const Opt &o : optimizers())
    for (int64_t n : {0, 5}) {
      std::vector<TestTensor> ins = variableAndState(o, DType::F32, {6, 3}, {6, 3}, 8);
      ins.emplace_back(DType::I64, Shape{n}, std::vector<double>(n, -1.0));
      ins.emplace_back(DType::F32, Shape{n, 3}, randomValues(n * 3, 4));
      expectCudaMatchesCpu(o.op, ins, {}, o.attrs);
    }
}

TEST_F(CudaKernelTest, SparseIndexOutOfRangeFails) {
  for (const Opt &o : optimizers())
    for (double bad : {6.0, -2.0}) {
      std::vector<TestTensor> ins = variableAndState(o, DType::F32, {6, 3}, {6, 3}, 8);
      ins.emplace_back(DType::I64, Shape{4}, std::vector<double>{1, bad, 2, -1});
      ins.emplace_back(DType::F32, Shape{4, 3}, randomValues(12, 4));
      expectCudaMatchesCpu(o.op, ins, {}, o.attrs);
    }
  // Nothing may be updated when an index is bad (the CPU throws first).
  CudaDevice &dev = testCudaDevice();
  Buffer w(4 * 12, &dev), idx(8 * 2, &dev), rows(4 * 6, &dev);
  std::vector<float> w0(12, 1.5f), rv(6, 0.25f), back(12);
  std::vector<int64_t> iv{0, 9};
  dev.upload(w.data(), w0.data(), 48);
  dev.upload(idx.data(), iv.data(), 16);
  dev.upload(rows.data(), rv.data(), 24);
  PlanKernel k;
  k.op = "sgd";
  k.attrs = {{"lr", 0.5}};
  ExecEnv env;
  env.device = &dev;
  env.step = 1;
  KernelArgs args(k,
                  {TensorView{w.data(), DType::F32, {4, 3}, MemorySpace::Cuda},
                   TensorView{idx.data(), DType::I64, {2}, MemorySpace::Cuda},
                   TensorView{rows.data(), DType::F32, {2, 3}, MemorySpace::Cuda}},
                  {}, env);
  args.index = 5;
  KernelFn fn = (*dev.kernels().find("sgd"))(args);
  fn();
  EXPECT_THROW(dev.synchronize(), std::exception);
  dev.download(back.data(), w.data(), 48);
  EXPECT_EQ(back, w0);
}

TEST_F(CudaKernelTest, ShardedUpdatesInAWorldOfOne) {
  auto comm = makeLocalComm();
  ExecEnv env;
  env.comm = comm.get();
  env.step = 2;
  for (const Opt &o : optimizers())
    for (bool shardState : {false, true}) {
      SCOPED_TRACE(o.op + " " + o.attrs.dump() + (shardState ? " shard_state" : ""));
      json attrs = o.attrs;
      attrs["shard_offset"] = 64;
      attrs["shard_bytes"] = 128;
      if (shardState)
        attrs["shard_state"] = true;
      Shape state = shardState ? Shape{32} : Shape{4, 2};
      std::vector<TestTensor> ins = variableAndState(o, DType::F32, {4, 2}, state, 12);
      ins.emplace_back(DType::F32, Shape{4, 2}, randomValues(8, 13));
      expectCudaMatchesCpu(o.op, ins, {}, attrs, 1e-5, 1e-6, env);
    }
}

TEST_F(CudaKernelTest, AssignEveryType) {
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8,
                  DType::U8, DType::Bool})
    for (const Shape &shape : {Shape{3, 5}, Shape{100001}, Shape{0}}) {
      std::vector<double> v = randomValues(numel(shape), 2, 0, 100);
      for (double &x : v)
        x = std::round(x);
      if (t == DType::Bool)
        for (double &x : v)
          x = (double)((int64_t)x % 2);
      TestTensor var(t, shape), value(t, shape, v);
      expectCudaMatchesCpu("assign", {var, value}, {}, {}, 0, 0);
    }
}

TEST_F(CudaKernelTest, OptimizerBindErrors) {
  TestTensor w(DType::F32, {4, 3}), g(DType::F32, {4, 3}), g2(DType::F32, {3, 4});
  TestTensor m(DType::F32, {4, 3}), v(DType::F32, {4, 3}), m2(DType::F32, {12});
  json adam = {{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}};
  expectCudaMatchesCpu("sgd", {w, g2}, {}, {{"lr", 0.1}});
  expectCudaMatchesCpu("sgd", {w, g}, {}, {{"lr", -0.1}});
  expectCudaMatchesCpu("sgd", {w}, {}, {{"lr", 0.1}});
  expectCudaMatchesCpu("momentum", {w, m, g}, {}, {{"lr", 0.1}, {"momentum", 1.0}});
  expectCudaMatchesCpu("adam", {w, m2, v, g}, {}, adam);
  json noEps = adam;
  noEps.erase("epsilon");
  expectCudaMatchesCpu("adam", {w, m, v, g}, {}, noEps);
  TestTensor wi(DType::I32, {4, 3}), gi(DType::I32, {4, 3});
  expectCudaMatchesCpu("sgd", {wi, gi}, {}, {{"lr", 0.1}});
  TestTensor idx(DType::I32, {2}), rows(DType::F32, {2, 3});
  expectCudaMatchesCpu("sgd", {w, idx, rows}, {}, {{"lr", 0.1}});
  TestTensor idx64(DType::I64, {2}), rowsBad(DType::F32, {2, 4});
  expectCudaMatchesCpu("sgd", {w, idx64, rowsBad}, {}, {{"lr", 0.1}});
  json sharded = adam;
  sharded["shard_state"] = true;
  expectCudaMatchesCpu("adam", {w, m, v, g}, {}, sharded);
  expectCudaMatchesCpu("assign", {w, g2}, {});
}

} // namespace
} // namespace parallax::rt::test

//===- Calibrate.cpp - parallax-run --calibrate: what cost models divide by ===//

#include "Calibrate.h"

#include "parallax/Runtime/CollectiveVolume.h"
#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/KernelRates.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <random>

namespace parallax::run {

using namespace rt;

namespace {

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

/// Latency and bandwidth of all-to-all exchanges within `g`.
std::pair<double, double> measureLinks(Comm &comm, Group &g) {
  int n = g.size();
  if (n < 2)
    return {0, 0};
  auto exchange = [&](int64_t perPeer, int iterations) {
    std::vector<char> send(perPeer * n, 1), recv(perPeer * n);
    std::vector<int64_t> sizes(n, perPeer);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      comm.run([&] { comm.barrier(g); });
      auto t0 = std::chrono::steady_clock::now();
      comm.run([&] {
        for (int i = 0; i < iterations; ++i)
          comm.alltoallv(g, send.data(), sizes, recv.data(), sizes);
      });
      best = std::min(best, seconds(t0) / iterations);
    }
    // Every rank must agree on the figure: take the slowest.
    comm.run([&] { comm.allreduce(g, &best, 1, DType::F64, ReduceOp::Max); });
    return best;
  };
  double latency = exchange(8, 200);
  int64_t big = 4 << 20;
  double t = exchange(big, 5);
  double bandwidth = (double)big * (n - 1) / std::max(t - latency, 1e-9);
  return {latency, bandwidth};
}

/// One kernel of the registry on host tensors, ready to run.
KernelFn kernelOn(const char *op, const nlohmann::json &attrs, std::vector<TensorView> ins,
                  std::vector<TensorView> outs, ExecEnv &env, PlanKernel &k) {
  k.op = op;
  k.attrs = attrs;
  KernelArgs args(k, std::move(ins), std::move(outs), env);
  return (*KernelRegistry::global().find(op))(args);
}

/// Seconds per byte of gradient a server spends in a sparse Adam update.
double measureUpdate(int threads) {
  const int64_t rows = 100000, width = 64, touched = 20000;
  std::vector<float> w(rows * width, 0.1f), m(rows * width), v(rows * width),
      vals(touched * width, 0.01f);
  std::vector<int64_t> idx(touched);
  std::mt19937_64 gen(1);
  for (int64_t &i : idx)
    i = (int64_t)(gen() % rows);
  ExecEnv env;
  env.threads = threads;
  env.step = 1;
  PlanKernel k;
  std::vector<int64_t> table{rows, width};
  KernelFn fn = kernelOn("adam",
                         {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}},
                         {{w.data(), DType::F32, table}, {m.data(), DType::F32, table},
                          {v.data(), DType::F32, table}, {idx.data(), DType::I64, {touched}},
                          {vals.data(), DType::F32, {touched, width}}},
                         {}, env, k);
  fn();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    ++env.step;
    fn();
    best = std::min(best, seconds(t0));
  }
  return best / (double)(touched * width * sizeof(float));
}

/// Seconds one call of `fn` takes, the median of 5 runs made while every
/// rank of the job runs it too (ranks sharing cores slow each other down,
/// as they do in training), and the slowest rank's figure. Each run calls
/// it for at least 0.25 s: a container's CPU quota (CFS bandwidth, in
/// 100 ms periods) lets a shorter burst run on more cores than it has.
/// A kernel is called on each rank as often as fits its own 0.25 s; a
/// collective (`collective`) as often on every rank, as many times as the
/// slowest rank's first timed call says fill 0.25 s (a kernel's first call
/// is too noisy a measure to size the loops by).
double concurrentSeconds(Comm &comm, const std::function<void()> &fn, bool collective = false) {
  Group &world = comm.group({comm.size()}, {0});
  auto slowest = [&](double v) {
    comm.run([&] { comm.allreduce(world, &v, 1, DType::F64, ReduceOp::Max); });
    return v;
  };
  fn(); // warm: first-touch page faults, BLAS and MPI buffers
  int64_t agreed = 0;
  if (collective) {
    comm.run([&] { comm.barrier(world); });
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double once = slowest(seconds(t0));
    agreed = std::max<int64_t>(1, (int64_t)std::ceil(0.25 / std::max(once, 1e-9)));
  }
  std::vector<double> times;
  for (int rep = 0; rep < 5; ++rep) {
    comm.run([&] { comm.barrier(world); });
    auto t0 = std::chrono::steady_clock::now();
    int64_t calls = 0;
    do {
      fn();
      ++calls;
    } while (collective ? calls < agreed : seconds(t0) < 0.25);
    times.push_back(seconds(t0) / (double)calls);
  }
  std::sort(times.begin(), times.end());
  return slowest(times[times.size() / 2]);
}

/// Floating-point operations per second of the gemm kernel on this rank's
/// threads for [m, k] x [k, n], on every rank at once.
double gemmFlopsPerSecond(Comm &comm, int threads, int64_t m, int64_t k, int64_t n) {
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), y(m * n);
  ExecEnv env;
  env.threads = threads;
  PlanKernel plan;
  KernelFn fn = kernelOn("gemm", nlohmann::json::object(),
                         {{a.data(), DType::F32, {m, k}}, {b.data(), DType::F32, {k, n}}},
                         {{y.data(), DType::F32, {m, n}}}, env, plan);
  return 2.0 * (double)(m * k * n) / std::max(concurrentSeconds(comm, fn), 1e-12);
}

/// Floating-point operations per second of a 512 x 512 x 512 product:
/// what StepPrediction divides a layer's products by.
double measureFlops(Comm &comm, int threads) {
  return gemmFlopsPerSecond(comm, threads, 512, 512, 512);
}

/// "product_flops": the flops per second of [d, K] x [K, K] products, K =
/// kProductWeightDim (a weight larger than a core's cache), for each
/// smallest dimension d of kProductSmallestDims, as [d, rate] points.
nlohmann::json measureProductFlops(Comm &comm, int threads) {
  const int64_t k = kProductWeightDim;
  nlohmann::json points = nlohmann::json::array();
  for (int64_t d : kProductSmallestDims)
    points.push_back({(double)d, gemmFlopsPerSecond(comm, threads, d, k, k)});
  return points;
}

/// Bytes per second a memory-bound kernel streams (a dense Adam update of
/// 4M parameters: the value, both moments and the gradient read, three
/// written): what StepPrediction divides every other op's bytes by.
double measureStream(Comm &comm, int threads) {
  const int64_t n = 4 << 20;
  std::vector<float> w(n, 0.1f), m(n), v(n), g(n, 0.01f);
  ExecEnv env;
  env.threads = threads;
  env.step = 1;
  PlanKernel k;
  std::vector<int64_t> shape{n};
  KernelFn fn = kernelOn("adam",
                         {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}},
                         {{w.data(), DType::F32, shape}, {m.data(), DType::F32, shape},
                          {v.data(), DType::F32, shape}, {g.data(), DType::F32, shape}},
                         {}, env, k);
  return 7.0 * (double)n * sizeof(float) / std::max(concurrentSeconds(comm, fn), 1e-12);
}

/// Seconds a kernel costs beyond its work: a relu of one element, through
/// the registry's kernel function as a session calls it.
double measureKernelSeconds(Comm &comm, int threads) {
  float x = 0.5f, y = 0;
  ExecEnv env;
  env.threads = threads;
  PlanKernel k;
  KernelFn fn = kernelOn("relu", nlohmann::json::object(), {{&x, DType::F32, {1}}},
                         {{&y, DType::F32, {1}}}, env, k);
  return concurrentSeconds(comm, [&] {
           for (int i = 0; i < 1000; ++i)
             fn();
         }) /
         1000;
}

/// One representative call of a kernel of kRatedKernels: its f32 operands
/// and results (filled with a spread of values, so that no branch or
/// denormal is special), and the work it does in its kernel's unit.
struct Probe {
  const char *op;
  nlohmann::json attrs;
  std::vector<std::vector<int64_t>> ins, outs;
  double work = 0; // flops and taps; bytes are counted from the shapes
  const char *rated = nullptr; // its entry of kRatedKernels, when not `op`
};

int64_t elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Large: a small CNN's layer (16 images of 32 channels, 32 x 32) and a
/// recurrent layer of the example models' size (16 steps of 16 sequences,
/// 32 inputs, 64 hidden). Small: a layer split over a few model ranks at a
/// small batch (2 images of 16 channels, 8 x 8; 8 steps of 2 sequences, 16
/// inputs, 16 hidden), where a call's fixed costs weigh: 190 to 510
/// times less work.
std::vector<Probe> ratedProbes(bool small) {
  const int64_t n = small ? 2 : 16, c = small ? 16 : 32, hw = small ? 8 : 32;
  std::vector<int64_t> image{n, c, hw, hw}, ch{c};
  nlohmann::json bn = {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training", true}};
  // A 3 x 3 window with stride 1: the taps are contiguous (the kernels'
  // fast path) and the window as large as the example models' pools.
  nlohmann::json pool = {{"kernel_shape", {3, 3}}, {"strides", {1, 1}},
                         {"pads", {1, 1, 1, 1}}, {"dilations", {1, 1}}};
  double taps = windowTaps((double)elements(image), 9);
  const int64_t t = small ? 8 : 16, b = small ? 2 : 16, in = small ? 16 : 32,
                h = small ? 16 : 64;
  auto recurrent = [&](const char *op, const char *gradOp, int64_t gates, int64_t gateCols,
                       bool cells) {
    std::vector<int64_t> x{t, b, in}, w{1, gates * h, in}, r{1, gates * h, h},
        bias{1, 2 * gates * h}, state{1, b, h}, y{t, 1, b, h}, g{1, t, b, gateCols * h},
        cs{1, t, b, h};
    double weights = (double)(elements(w) + elements(r));
    nlohmann::json attrs = {{"direction", "forward"}};
    if (!cells)
      attrs["linear_before_reset"] = true;
    Probe fwd{op, attrs, {x, w, r, bias, state}, {y, state, g},
              recurrentFlops(t, b, weights, false)};
    Probe grad{gradOp, attrs, {x, w, r, state}, {x, w, r, bias, state},
               recurrentFlops(t, b, weights, true)};
    if (cells) {
      fwd.ins.push_back(state);
      fwd.outs = {y, state, state, g, cs};
      grad.ins = {x, w, r, state, state, y, g, cs, y, state, state};
      grad.outs.push_back(state);
    } else {
      grad.ins = {x, w, r, state, y, g, y, state};
    }
    return std::pair{fwd, grad};
  };
  // A 3 x 3 convolution, c channels to c, and its two gradients; the large
  // one's rate is also conv_flops_per_second.
  std::vector<int64_t> filter{c, c, 3, 3};
  nlohmann::json conv = {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"dilations", {1, 1}},
                         {"group", 1}};
  double flops = convFlops((double)elements(image), (double)(c * 9));
  const int64_t vector = small ? 1 << 14 : 1 << 22, rows = small ? 256 : 1 << 11;
  auto [gru, gruGrad] = recurrent("gru", "gru_grad", 3, 4, false);
  auto [lstm, lstmGrad] = recurrent("lstm", "lstm_grad", 4, 4, true);
  return {{"conv", conv, {image, filter}, {image}, flops},
          {"conv_grad_input", conv, {image, filter}, {image}, flops},
          {"conv_grad_filter", conv, {image, image}, {filter}, flops},
          {"batch_norm", bn, {image, ch, ch, ch, ch}, {image, ch, ch}},
          {"batch_norm_grad", {{"epsilon", 1e-5}}, {image, image, ch}, {image, ch, ch}},
          {"max_pool", pool, {image}, {image}, taps},
          {"max_pool_grad", pool, {image, image}, {image}, taps},
          gru, gruGrad, lstm, lstmGrad,
          // Tensors of 64 KiB (in cache) and 16 MiB (from memory).
          {"add", {}, {{vector}, {vector}}, {{vector}}, 0, "elementwise"},
          {kCostlyPerElementProbe, {}, {{vector}}, {{vector}}, 0, "costly_per_element"},
          // 16 rows by a weight of 1 MiB (in cache) and of 64 MiB (from
          // memory): a layer's product at a small batch per rank; and one
          // row, a product that streams its weight and computes little (one
          // sample per rank: at the 16-row rate a one-row product of
          // AlexNet's 144 MiB weight took 166 ms against 25 to 35 measured).
          {"gemm", {}, {{kProductBytesRows, rows}, {rows, 4 * rows}}, {{kProductBytesRows, 4 * rows}}, 0, "product_bytes"},
          {"gemm", {}, {{1, rows}, {rows, 4 * rows}}, {{1, 4 * rows}}, 0, "product_stream"}};
}

/// Work per second of each kernel of kRatedKernels (KernelRates.h), in its
/// kernel's unit, on every rank at once: a [work, rate] pair for the small
/// and the large probe.
nlohmann::json measureRatedKernels(Comm &comm, int threads) {
  nlohmann::json rates = nlohmann::json::object();
  for (bool small : {true, false})
    for (Probe &p : ratedProbes(small)) {
      std::vector<std::vector<float>> data;
      std::vector<TensorView> ins, outs;
      double bytes = 0;
      auto view = [&](const std::vector<int64_t> &shape) {
        auto &d = data.emplace_back(elements(shape));
        for (size_t i = 0; i < d.size(); ++i)
          d[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        bytes += (double)d.size() * sizeof(float);
        return TensorView{d.data(), DType::F32, shape};
      };
      data.reserve(p.ins.size() + p.outs.size());
      for (auto &s : p.ins)
        ins.push_back(view(s));
      for (auto &s : p.outs)
        outs.push_back(view(s));
      ExecEnv env;
      env.threads = threads;
      env.step = 1;
      PlanKernel k;
      KernelFn fn = kernelOn(p.op, p.attrs, ins, outs, env, k);
      const char *rated = p.rated ? p.rated : p.op;
      double work = *ratedWorkOf(rated) == KernelWork::Bytes ? bytes : p.work;
      rates[rated].push_back({work, work / std::max(concurrentSeconds(comm, fn), 1e-12)});
    }
  return rates;
}

/// The sizes of the groups of consecutive ranks a collective's rate is
/// timed on: every size from 2 that divides a machine's ranks.
std::vector<int64_t> groupSizesOnAMachine(Comm &comm) {
  const int64_t perMachine = std::max(1, comm.ranksPerMachine());
  std::vector<int64_t> sizes;
  for (int64_t g = 2; g <= perMachine; ++g)
    if (perMachine % g == 0)
      sizes.push_back(g);
  return sizes;
}

/// Bytes per second each member sends in the collectives of
/// kRatedCollectives (KernelRates.h), on groups of consecutive ranks of
/// each size that divides a machine's ranks, every group at once: a [sent
/// bytes, rate] pair for a 64 KiB, a 1 MiB, a 32 MiB and a 128 MiB buffer.
/// What the links' figures leave out shows here: the algorithm the MPI
/// library picks for the size, the reduction, and ranks that share cores
/// waiting for each other at every step of the algorithm.
void measureCollectives(Comm &comm, nlohmann::json &rates) {
  const int64_t world = comm.size();
  for (int64_t g : groupSizesOnAMachine(comm)) {
    Group &group = comm.group({world / g, g}, {1});
    // Up to a 128 MiB bucket (Horovod's fusion buffer is 64): past a core's
    // share of the cache, the rate keeps falling with the size.
    for (int64_t bytes :
         {int64_t(64) << 10, int64_t(1) << 20, int64_t(32) << 20, int64_t(128) << 20}) {
      const int64_t count = bytes / (int64_t)sizeof(float);
      std::vector<float> buffer(count, 0.0f); // sums of zeros: no denormals
      auto time = [&](std::string_view kind, int64_t sent, const std::function<void()> &call) {
        double t = concurrentSeconds(comm, [&] { comm.run(call); }, /*collective=*/true);
        rates[collectiveRateName(kind, g)].push_back(
            {(double)sent, (double)sent / std::max(t, 1e-12)});
      };
      time("all_reduce", ringBytes(bytes, g), [&] {
        comm.allreduce(group, buffer.data(), count, DType::F32, ReduceOp::Sum);
      });
      time("reduce_scatter", reduceScatterBytes(bytes, g), [&] {
        comm.reduceScatterBlock(group, buffer.data(), count / g, DType::F32, ReduceOp::Sum);
      });
      time("all_gather", allGatherBytes(bytes / g, g),
           [&] { comm.allgatherBlock(group, buffer.data(), bytes / g); });
    }
  }
}

/// Bytes per second each member sends in a parameter-server pull and push
/// ("ps_pull/G", "ps_push/G"), the kernels themselves on groups of
/// consecutive ranks of each size that divides a machine's ranks, every
/// group at once: each rank looks up kPsProbeLookups distinct random rows
/// of a table partitioned over its group, and pushes their gradient. A
/// pull is three exchanges (counts, requests, rows) and a push two, each a
/// synchronization of the group, with the packing and the serving between
/// them: more than the links' alpha and beta say, on ranks that share
/// cores above all.
void measurePsExchanges(Comm &comm, int threads, nlohmann::json &rates) {
  const int64_t world = comm.size(), perMachine = std::max(1, comm.ranksPerMachine());
  const int64_t rows = kPsProbeRows, width = kPsProbeWidth, rowBytes = width * 4;
  std::vector<float> table(rows * width, 0.25f);
  for (int64_t g : groupSizesOnAMachine(comm)) {
    std::vector<int64_t> place(g);
    std::iota(place.begin(), place.end(), 0);
    nlohmann::json attrs = {{"grid_shape", {world / g, g}}, {"grid_axes", {1}},
                            {"partitions", g}, {"placement", place}};
    for (int64_t lookups : kPsProbeLookups) {
      // Distinct rows, spread over every server.
      std::vector<int64_t> ids(lookups);
      std::mt19937_64 gen(7 + comm.rank());
      for (int64_t k = 0; k < lookups; ++k)
        ids[k] = (k * (rows / lookups) + (int64_t)(gen() % (rows / lookups))) % rows;
      std::vector<float> pulled(lookups * width), grad(lookups * width, 0.01f),
          served(g * lookups * width);
      std::vector<int64_t> servedIds(g * lookups);
      ExecEnv env;
      env.threads = threads;
      env.comm = &comm;
      env.worldSize = comm.size();
      env.rank = comm.rank();
      env.ranksPerMachine = (int)perMachine;
      PlanKernel pull, push;
      KernelFn pullFn = kernelOn("ps_pull", attrs,
                                 {{table.data(), DType::F32, {rows, width}},
                                  {ids.data(), DType::I64, {lookups}}},
                                 {{pulled.data(), DType::F32, {lookups, width}}}, env, pull);
      nlohmann::json pushAttrs = attrs;
      pushAttrs["table_rows"] = rows;
      KernelFn pushFn =
          kernelOn("ps_push", pushAttrs,
                   {{ids.data(), DType::I64, {lookups}},
                    {grad.data(), DType::F32, {lookups, width}}},
                   {{servedIds.data(), DType::I64, {g * lookups}},
                    {served.data(), DType::F32, {g * lookups, width}}},
                   env, push);
      // What a member sends, as px-sync counts it: its rows' ids and rows,
      // (G - 1) / G of them to other servers, each way.
      double sent = (double)lookups * (double)(rowBytes + 8) * (double)(g - 1) / (double)g;
      for (auto [kind, fn] : {std::pair<const char *, KernelFn *>{"ps_pull", &pullFn},
                              {"ps_push", &pushFn}}) {
        double t = concurrentSeconds(comm, *fn, /*collective=*/true);
        rates[collectiveRateName(kind, g)].push_back({sent, sent / std::max(t, 1e-12)});
      }
    }
  }
}

} // namespace

int calibrate(Comm &comm, const std::string &outPath, int threads) {
  int perMachine = std::max(1, comm.ranksPerMachine());
  // Every rank must time the same groups, in the same order: the same
  // number of ranks on every machine.
  int64_t extremes[2] = {perMachine, -(int64_t)perMachine};
  Group &world = comm.group({comm.size()}, {0});
  comm.run([&] { comm.allreduce(world, extremes, 2, DType::I64, ReduceOp::Max); });
  if (extremes[0] != -extremes[1] || comm.size() % perMachine != 0) {
    if (comm.rank() == 0)
      std::cerr << "parallax-run: error: --calibrate needs as many ranks on every machine "
                << "(from " << -extremes[1] << " to " << extremes[0] << " here)\n";
    return 1;
  }
  int machines = comm.size() / perMachine;
  std::vector<int64_t> grid{machines, perMachine};
  nlohmann::json profile;
  profile["format"] = "parallax-profile";
  profile["version"] = 1;
  profile["world_size"] = comm.size();
  profile["ranks_per_machine"] = perMachine;
  if (perMachine > 1) {
    auto [lat, bw] = measureLinks(comm, comm.group(grid, {1}));
    profile["intra_machine"] = {{"latency_s", lat}, {"bandwidth_bytes_per_s", bw}};
  }
  if (machines > 1) {
    auto [lat, bw] = measureLinks(comm, comm.group(grid, {0}));
    profile["inter_machine"] = {{"latency_s", lat}, {"bandwidth_bytes_per_s", bw}};
  }
  profile["update_seconds_per_byte"] = measureUpdate(threads);
  profile["flops_per_second"] = measureFlops(comm, threads);
  profile["stream_bytes_per_second"] = measureStream(comm, threads);
  profile["kernel_seconds"] = measureKernelSeconds(comm, threads);
  profile["op_rates"] = measureRatedKernels(comm, threads);
  profile["op_rates"]["product_flops"] = measureProductFlops(comm, threads);
  measureCollectives(comm, profile["op_rates"]);
  measurePsExchanges(comm, threads, profile["op_rates"]);
  // The convolutions' generic rate (the grid model's): the large probe's.
  profile["conv_flops_per_second"] = profile["op_rates"]["conv"].back()[1];
  if (comm.rank() == 0) {
    std::ofstream out(outPath, std::ios::trunc);
    if (!out) {
      std::cerr << "parallax-run: error: " << outPath << ": cannot open for writing\n";
      return 1;
    }
    out << profile.dump(2) << "\n";
    std::cerr << "calibration of " << comm.size() << " rank(s) written to "
              << outPath << ":\n" << profile.dump(2) << "\n";
  }
  return 0;
}

} // namespace parallax::run

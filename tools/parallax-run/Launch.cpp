//===- Launch.cpp - mpirun launcher and link calibration ------------------===//

#include "Launch.h"

#include "parallax/Runtime/Kernel.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>

namespace parallax::run {

using namespace rt;

namespace {

/// The signal that stopped the launcher, forwarded to mpirun.
volatile sig_atomic_t forwarded = 0;
volatile pid_t mpirunPid = 0;
/// When the last one was forwarded (CLOCK_MONOTONIC seconds).
volatile time_t forwardedAt = 0;

/// SIGINT, SIGTERM, SIGHUP: passed on to mpirun, which ends the ranks
/// (SIGTERM, then SIGKILL) and exits. A repeat within a second is dropped:
/// `timeout` signals the launcher and then its whole process group, and a
/// second signal makes mpirun exit at once without ending the ranks (they
/// follow it through their own death signal; see dieWithParent).
void forward(int sig) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (forwarded && now.tv_sec - forwardedAt < 1)
    return;
  forwarded = sig;
  forwardedAt = now.tv_sec;
  if (mpirunPid > 0)
    kill(mpirunPid, sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

} // namespace

int launchRanks(int np, const std::string &hostfile,
                const std::vector<std::string> &argv) {
  std::vector<std::string> cmd{"mpirun", "-np", std::to_string(np), "--bind-to",
                               "none"};
  if (geteuid() == 0)
    cmd.push_back("--allow-run-as-root");
  if (hostfile.empty()) {
    // One machine: ranks may outnumber cores (threads are split between
    // them), which Open MPI refuses by default.
    cmd.push_back("--oversubscribe");
  } else {
    cmd.insert(cmd.end(), {"--hostfile", hostfile});
  }
  // mpirun runs in a process group of its own (below), where reading the
  // terminal would stop it; parallax-run reads no input.
  cmd.insert(cmd.end(), {"--stdin", "none"});
  // Idle OpenMP threads of one rank must not spin on the cores the others
  // (and BLAS) need.
  if (!std::getenv("OMP_WAIT_POLICY"))
    cmd.insert(cmd.end(), {"-x", "OMP_WAIT_POLICY=PASSIVE"});
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cmd.push_back(n > 0 ? std::string(self, n) : argv[0]);
  cmd.insert(cmd.end(), argv.begin() + 1, argv.end());

  std::vector<char *> cargs;
  for (std::string &a : cmd)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);

  // Signals that arrive before mpirun's pid is known wait until it is.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kForwarded)
    sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old);
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded)
    sigaction(sig, &sa, nullptr);

  // fork and exec, not posix_spawn: the child sets its death signal first.
  int report[2]; // exec's failure, back to the launcher
  if (pipe2(report, O_CLOEXEC) != 0) {
    std::cerr << "parallax-run: error: cannot start mpirun: " << std::strerror(errno) << "\n";
    return 1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    // Its own process group: a terminal's Ctrl-C, or `timeout` signalling
    // the launcher's group, reaches mpirun once, through the launcher.
    setpgid(0, 0);
    // A launcher that dies (even by SIGKILL) takes the job with it: mpirun
    // ends the ranks on SIGTERM.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
      _exit(1);
    for (int sig : kForwarded)
      signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp("mpirun", cargs.data());
    int err = errno;
    ssize_t ignored = write(report[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    std::cerr << "parallax-run: error: cannot start mpirun: " << std::strerror(errno) << "\n";
    return 1;
  }
  mpirunPid = pid;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int err = 0;
  ssize_t got;
  while ((got = read(report[0], &err, sizeof err)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  mpirunPid = 0;
  if (got == (ssize_t)sizeof err) {
    std::cerr << "parallax-run: error: cannot start mpirun: " << std::strerror(err)
              << " (install openmpi-bin: scripts/setup.sh)\n";
    return 1;
  }
  if (int sig = forwarded) {
    // Stopped from outside: say so, and end as the signal would have.
    std::cerr << "parallax-run: SIG" << sigabbrev_np(sig) << ": ended the " << np
              << "-rank job\n";
    signal(sig, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &block, nullptr);
    raise(sig);
    return 128 + sig;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  if (WIFSIGNALED(status)) {
    std::cerr << "parallax-run: error: mpirun was killed by SIG" << sigabbrev_np(WTERMSIG(status))
              << "; its ranks end with it\n";
    return 128 + WTERMSIG(status);
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::cerr << "parallax-run: error: the " << np << "-rank job failed (mpirun "
            << "exit status " << code << "); the lines above name the failing "
            << "rank\n";
  return code ? code : 1;
}

void dieWithParent() {
  // Whoever started this rank (mpirun, an Open MPI daemon, a scheduler's
  // step daemon) is what a user stops to stop the job: a rank must not
  // train on after it, even when it was killed with SIGKILL.
  // (Not a check for parent 1: in a container mpirun may be init.)
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) // it died before the request took effect
    raise(SIGKILL);
}

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
double concurrentSeconds(Comm &comm, const std::function<void()> &fn) {
  Group &world = comm.group({comm.size()}, {0});
  fn(); // warm: first-touch page faults, BLAS buffers
  std::vector<double> times;
  for (int rep = 0; rep < 5; ++rep) {
    comm.run([&] { comm.barrier(world); });
    auto t0 = std::chrono::steady_clock::now();
    int64_t calls = 0;
    do {
      fn();
      ++calls;
    } while (seconds(t0) < 0.25);
    times.push_back(seconds(t0) / (double)calls);
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  comm.run([&] { comm.allreduce(world, &median, 1, DType::F64, ReduceOp::Max); });
  return median;
}

/// Floating-point operations per second of a 512 x 512 x 512 product (the
/// gemm kernel on this rank's threads): what StepPrediction divides a
/// layer's products by.
double measureFlops(Comm &comm, int threads) {
  const int64_t n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), y(n * n);
  ExecEnv env;
  env.threads = threads;
  PlanKernel k;
  std::vector<int64_t> square{n, n};
  KernelFn fn = kernelOn("gemm", nlohmann::json::object(),
                         {{a.data(), DType::F32, square}, {b.data(), DType::F32, square}},
                         {{y.data(), DType::F32, square}}, env, k);
  return 2.0 * (double)(n * n * n) / std::max(concurrentSeconds(comm, fn), 1e-12);
}

/// Floating-point operations per second of a 3 x 3 convolution (16
/// images of 32 x 32 pixels, 32 channels to 32): convolutions run on their
/// own kernels, at their own rate.
double measureConvFlops(Comm &comm, int threads) {
  const int64_t n = 16, c = 32, hw = 32, k = 3;
  std::vector<float> x(n * c * hw * hw, 0.5f), w(c * c * k * k, 0.01f), y(n * c * hw * hw);
  ExecEnv env;
  env.threads = threads;
  PlanKernel kernel;
  KernelFn fn = kernelOn("conv",
                         {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"dilations", {1, 1}},
                          {"group", 1}},
                         {{x.data(), DType::F32, {n, c, hw, hw}},
                          {w.data(), DType::F32, {c, c, k, k}}},
                         {{y.data(), DType::F32, {n, c, hw, hw}}}, env, kernel);
  double flops = 2.0 * (double)(n * c * hw * hw) * (double)(c * k * k);
  return flops / std::max(concurrentSeconds(comm, fn), 1e-12);
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

} // namespace

int calibrate(Comm &comm, const std::string &outPath, int threads) {
  int perMachine = std::max(1, comm.ranksPerMachine());
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
  profile["conv_flops_per_second"] = measureConvFlops(comm, threads);
  profile["stream_bytes_per_second"] = measureStream(comm, threads);
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

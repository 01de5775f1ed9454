//===- parallax-run.cpp - execute a Parallax plan -------------------------===//
//
//   parallax-run model.pxplan --synthetic --steps 100
//   parallax-run model.pxplan --data DIR --steps 1000 --metrics m.jsonl --save trained.onnx
//   parallax-run model.pxplan --infer --data DIR --out OUTDIR
//   parallax-run model.pxplan --np 4 --synthetic     (re-runs itself under mpirun)
//   mpirun -np 4 parallax-run model.pxplan ...       (or under your own mpirun)
//   parallax-run --calibrate profile.json --np 4     (links and update rate)
//
// Links no MLIR: the plan is everything it needs (with the source ONNX model
// for initial values).
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/AtomicFile.h"
#include "parallax/Runtime/Data.h"
#include "parallax/Runtime/Finite.h"
#include "parallax/Runtime/MachineMemory.h"
#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/Session.h"
#include "parallax/Runtime/Trace.h"

#include "Calibrate.h"
#include "Checkpointing.h"
#include "Launch.h"

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <omp.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <optional>
#include <thread>

using namespace parallax::rt;

namespace {

/// Keeps freed memory in the process instead of handing it back to the
/// kernel. glibc's defaults return any free block above 128 KiB (mmap
/// threshold) or any free heap top above 128 KiB (trim threshold) at once,
/// and the next step's allocation of the same size faults every page in
/// again, zeroed. Open MPI's ring all-reduce allocates and frees a
/// temporary the size of its message on every call, so a training step
/// paid hundreds of page faults per bucket: with 4 ranks sharing 2 cores
/// that was several milliseconds of a 40 ms step. A user who sets glibc's
/// own malloc environment variables keeps them.
bool keepFreedMemory() {
#ifdef __GLIBC__
  for (const char *v : {"GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                        "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"})
    if (std::getenv(v))
      return false;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // 32 MiB is the largest threshold glibc accepts, and above it every block
  // is mapped fresh. Open MPI's collectives copy a large bucket into such a
  // temporary on every call: dlrm's 64 MB table under --sync=allreduce cost
  // 23k page faults per rank and step (2 ranks, sharded update: 100 ms a
  // step, 62 ms without the faults; plain all-reduce: 63 and 52 ms). With
  // no mmap at all every block comes from the heap and is reused.
  mallopt(M_MMAP_MAX, 0);
  return true;
#else
  return false;
#endif
}

/// Hands back what loading freed (the parsed ONNX model, whole values of
/// split variables): keepFreedMemory would otherwise keep it resident for
/// the whole run.
void releaseLoadingMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

int fail(const std::string &message) {
  std::cerr << "parallax-run: error: " + message + "\n"; // one write: ranks share stderr
  return 1;
}

std::string clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "--:--";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

/// The progress display: a bar redrawn in place on a terminal, plain lines
/// every --log-every steps otherwise (logs, CI, pipes).
class Progress {
public:
  /// `first`: the step a resumed run continues after (0 otherwise).
  Progress(int64_t steps, int64_t logEvery, bool quiet, int64_t first = 0)
      : steps(steps), first(first), logEvery(std::max<int64_t>(logEvery, 1)),
        quiet(quiet), tty(isatty(STDERR_FILENO)) {}

  void update(int64_t step, double loss, double samplesPerSec, double elapsed) {
    if (quiet)
      return;
    double eta = step > first ? elapsed / (step - first) * (steps - step) : 0;
    if (tty) {
      constexpr int width = 30;
      int filled = (int)(width * step / std::max<int64_t>(steps, 1));
      std::string bar(filled, '=');
      if (filled < width)
        bar += '>' + std::string(width - filled - 1, ' ');
      std::fprintf(stderr, "\r[%s] %lld/%lld  loss %.4f  %.1f samples/s  ETA %s ",
                   bar.c_str(), (long long)step, (long long)steps, loss,
                   samplesPerSec, clock(eta).c_str());
      if (step == steps)
        std::fputc('\n', stderr);
      std::fflush(stderr);
    } else if (step % logEvery == 0 || step == steps || step == first + 1) {
      std::fprintf(stderr, "step %lld/%lld  loss %.6f  %.1f samples/s  elapsed %s  ETA %s\n",
                   (long long)step, (long long)steps, loss, samplesPerSec,
                   clock(elapsed).c_str(), clock(eta).c_str());
    }
  }

private:
  int64_t steps, first, logEvery;
  bool quiet, tty;
};

/// Time per op kind, busiest first, and the ten busiest kernels.
void printProfile(const Session &session, std::ostream &os) {
  const auto &times = session.kernelTimes();
  const Plan &plan = session.plan();
  std::map<std::string, std::pair<double, int64_t>> byOp;
  double total = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    byOp[plan.kernels[i].op].first += times[i].seconds;
    byOp[plan.kernels[i].op].second += times[i].calls;
    total += times[i].seconds;
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(),
            [](auto &a, auto &b) { return a.second.first > b.second.first; });
  int64_t steps = std::max<int64_t>(session.stepsRun(), 1);
  char line[256];
  std::snprintf(line, sizeof line, "%-34s %8s %12s %7s\n", "op", "calls/step",
                "ms/step", "share");
  os << "\nkernel time by op (" << steps << " steps):\n" << line;
  for (auto &[op, t] : rows) {
    std::snprintf(line, sizeof line, "%-34s %8lld %12.3f %6.1f%%\n", op.c_str(),
                  (long long)(t.second / steps), 1e3 * t.first / steps,
                  total > 0 ? 100 * t.first / total : 0.0);
    os << line;
  }
  std::vector<size_t> order(times.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return times[a].seconds > times[b].seconds; });
  os << "busiest kernels:\n";
  for (size_t k = 0; k < std::min<size_t>(10, order.size()); ++k) {
    const PlanKernel &kernel = plan.kernels[order[k]];
    std::snprintf(line, sizeof line, "  #%-5zu %-28s %10.3f ms/step  %s\n", order[k],
                  kernel.op.c_str(), 1e3 * times[order[k]].seconds / steps,
                  kernel.loc.c_str());
    os << line;
  }
}

} // namespace

/// Starts recording: the ranks' clocks are lined up by a barrier (on one
/// machine or several), then time 0 is now.
void startTrace(Comm &comm, Trace &trace) {
  if (comm.size() > 1) {
    Group &world = comm.group({comm.size()}, {0});
    comm.run([&] { comm.barrier(world); });
  }
  trace.setOrigin(Trace::now());
  comm.setTrace(&trace);
}

/// "m.jsonl" -> "m.rank2.jsonl" when several ranks write metrics.
std::string perRank(const std::string &path, int rank, int world) {
  if (world == 1)
    return path;
  std::filesystem::path p(path);
  std::string stem = p.stem().string(), ext = p.extension().string();
  return (p.parent_path() / (stem + ".rank" + std::to_string(rank) + ext)).string();
}

/// The command line minus the launcher's own flags (--np N, --hostfile F).
std::vector<std::string> withoutLauncherFlags(int argc, char **argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--np" || a == "--hostfile") {
      ++i;
      continue;
    }
    if (a.rfind("--np=", 0) == 0 || a.rfind("--hostfile=", 0) == 0)
      continue;
    out.push_back(a);
  }
  return out;
}

int main(int argc, char **argv) {
  const bool heapKept = keepFreedMemory();
  cxxopts::Options cli("parallax-run",
                       "Execute a Parallax plan (made by parallax-opt --emit=plan)");
  cli.positional_help("PLAN");
  cli.add_options()
      ("plan", "The plan file", cxxopts::value<std::string>())
      ("steps", "Steps to run", cxxopts::value<int64_t>()->default_value("100"))
      ("data", "Directory with one NAME.npy per graph input", cxxopts::value<std::string>())
      ("synthetic", "Generate data (normal floats, Zipf ids, uniform labels)")
      ("seed", "Seed for synthetic data and dropout", cxxopts::value<uint64_t>()->default_value("0"))
      ("threads", "CPU threads per rank (default: the machine's cores / its ranks)",
       cxxopts::value<int>())
      ("comm-thread", "Collectives on a thread of their own (on), on the thread that "
                      "runs the kernels (off), or on when a rank has 2 cores or more (auto)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("np", "Run on N ranks of this machine (or of --hostfile) through mpirun",
       cxxopts::value<int>())
      ("hostfile", "Open MPI host file for a cluster", cxxopts::value<std::string>())
      ("log-every", "Print a line every K steps when not on a terminal",
       cxxopts::value<int64_t>()->default_value("10"))
      ("metrics", "Write one JSON line per step to FILE (FILE.rankR... with several ranks)",
       cxxopts::value<std::string>())
      ("save", "Write the trained model (the source ONNX with trained initializers)",
       cxxopts::value<std::string>())
      ("checkpoint", "Write every rank's training state into DIR (every "
                     "--checkpoint-every steps and at the end)", cxxopts::value<std::string>())
      ("checkpoint-every", "Steps between checkpoints (0: only at the end)",
       cxxopts::value<int64_t>()->default_value("0"))
      ("resume", "Continue the run whose checkpoints are in DIR, up to --steps in all",
       cxxopts::value<std::string>())
      ("weights", "Read initial values from this ONNX file instead of the plan's source "
       "('random': draw them from --seed, for benchmarks and checks without the model)",
       cxxopts::value<std::string>())
      ("infer", "Inference: run the forward graph and write its outputs as .npy to --out")
      ("out", "Output directory for --infer", cxxopts::value<std::string>())
      ("print-plan", "Print the plan's program as JSON and exit")
      ("profile", "Time every kernel and print the busiest ops at the end")
      ("trace", "Write a timeline of every kernel and collective of every rank to FILE "
                "(Chrome/Perfetto trace JSON)", cxxopts::value<std::string>())
      ("timeout", "Seconds a collective waits for the other ranks before the job ends, "
                  "naming those that did not come (0: forever)",
       cxxopts::value<double>()->default_value("300"))
      ("memory-limit", "Refuse to start a plan that needs more than BYTES per rank "
                       "(2GiB, 512MiB, 3e9 ...) instead of what this machine has",
       cxxopts::value<std::string>())
      ("calibrate", "Measure the links and update rate of this job's ranks into FILE "
                    "(for parallax-opt --profile)", cxxopts::value<std::string>())
      ("allow-non-finite", "Accept NaN and infinity in float --data inputs (a model "
                           "that tests for them with IsNaN or IsInf); by default they "
                           "are refused as the files are loaded")
      ("device", "Where to run: cpu, cuda or cuda:N (default: the plan's --target; "
       "cuda picks the GPU of this rank's local rank)", cxxopts::value<std::string>())
      ("tf32", "Let cuBLAS and cuDNN use TF32 tensor cores for f32 products (faster; "
       "results then differ from the CPU's by about 1e-3)")
      ("deterministic", "on: cuDNN convolutions take an algorithm that gives the same "
       "bits on every run where one exists; off: the fastest cuDNN measures at start-up "
       "(PyTorch's cudnn.benchmark), which may sum with atomics",
       cxxopts::value<std::string>()->default_value("on"))
      ("cuda-graph", "Replay the steady-state step as a CUDA graph: auto (when no kernel "
       "runs on the host) or off", cxxopts::value<std::string>()->default_value("auto"))
      ("collectives", "How GPU ranks exchange tensors: auto (NCCL when every rank has a "
       "GPU of its own, else MPI with host staging), nccl or mpi",
       cxxopts::value<std::string>()->default_value("auto"))
      ("q,quiet", "No progress output")
      ("h,help", "Show this help");
  cli.parse_positional({"plan"});

  cxxopts::ParseResult args;
  try {
    args = cli.parse(argc, argv);
  } catch (const std::exception &e) {
    return fail(std::string(e.what()) + " (see --help)");
  }
  if (args.count("help")) {
    std::cout << cli.help() << "\n";
    return 0;
  }

  std::string commThreadArg = args["comm-thread"].as<std::string>();
  if (commThreadArg != "on" && commThreadArg != "off" && commThreadArg != "auto")
    return fail("--comm-thread must be auto, on or off (not '" + commThreadArg + "')");

  double timeout = args["timeout"].as<double>();
  if (!(timeout >= 0))
    return fail("--timeout must be >= 0 seconds");

  // The launcher: re-run this command on N ranks under mpirun.
  bool underMpi = launchedUnderMpi();
  if (args.count("np") && !underMpi) {
    int np = args["np"].as<int>();
    if (np < 1)
      return fail("--np must be >= 1");
    std::string hostfile = args.count("hostfile") ? args["hostfile"].as<std::string>() : "";
    if (np > 1 || !hostfile.empty())
      return parallax::run::launchRanks(np, hostfile, withoutLauncherFlags(argc, argv));
  }

  CommThread commThread = commThreadArg == "on"    ? CommThread::On
                          : commThreadArg == "off" ? CommThread::Off
                                                   : CommThread::Auto;
  if (underMpi)
    parallax::run::dieWithParent();
  std::unique_ptr<Comm> comm;
  try {
    comm = underMpi ? makeMpiComm(commThread, timeout) : makeLocalComm();
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  int rank = comm->rank(), world = comm->size();
  // From the watch thread, while this rank is blocked in a collective.
  comm->onTimeout([&](const std::string &message) {
    fail(message);
    comm->abort(1);
  });
  auto failRank = [&](const std::string &message) {
    std::string who = world > 1 ? "rank " + std::to_string(rank) + ": " : "";
    fail(who + message);
    if (world > 1)
      comm->abort(1); // the other ranks would wait in a collective forever
    return 1;
  };

  int localRanks = std::max(1, comm->ranksPerMachine());
  int threads = args.count("threads")
                    ? args["threads"].as<int>()
                    : std::max(1, (int)std::thread::hardware_concurrency() / localRanks);
  if (threads < 1)
    return failRank("--threads must be >= 1");
  // The kernels split BLAS products over these threads themselves (OpenBLAS
  // stays single-threaded: see lib/Runtime/Kernels/Blas.h).
  omp_set_num_threads(threads);

  if (args.count("calibrate")) {
    try {
      return parallax::run::calibrate(*comm, args["calibrate"].as<std::string>(), threads);
    } catch (const std::exception &e) {
      return failRank(e.what());
    }
  }
  if (!args.count("plan"))
    return failRank("no plan given (usage: parallax-run PLAN [options]; see --help)");

  try {
    Plan plan = readPlan(args["plan"].as<std::string>());
    if (args.count("print-plan")) {
      if (rank == 0)
        std::cout << planToJson(plan).dump(2) << "\n";
      return 0;
    }
    bool infer = args.count("infer") > 0;
    if (infer && !args.count("out"))
      return failRank("--infer needs --out DIR");
    if (!infer && plan.mode == Plan::Mode::Inference)
      return failRank(args["plan"].as<std::string>() +
                      ": an inference plan (compiled with --inference) can only "
                      "run with --infer");
    if (args.count("data") && args.count("synthetic"))
      return failRank("--data and --synthetic exclude each other");
    if (!args.count("data") && !args.count("synthetic"))
      return failRank("give the training data with --data DIR, or use --synthetic");
    int64_t steps = args["steps"].as<int64_t>();
    if (steps < 0)
      return failRank("--steps must be >= 0");
    if (infer && !args["steps"].count())
      steps = 1;
    if (infer && (args.count("checkpoint") || args.count("resume")))
      return failRank("--checkpoint and --resume are for training, not --infer");
    // Destinations are checked before any work: a run must not train for
    // hours and then find it cannot write its result.
    if (args.count("save") && rank == 0)
      checkWritableFile(args["save"].as<std::string>(), "--save");
    parallax::run::Checkpointing checkpoints(
        {args.count("checkpoint") ? args["checkpoint"].as<std::string>() : "",
         args["checkpoint-every"].as<int64_t>(),
         args.count("resume") ? args["resume"].as<std::string>() : ""},
        rank);
    if (plan.worldSize != world)
      return failRank(args["plan"].as<std::string>() + ": the plan was compiled for " +
                      std::to_string(plan.worldSize) + " rank(s), but " +
                      std::to_string(world) + " are running it; " +
                      (plan.worldSize > 1 && world == 1
                           ? "run it with --np " + std::to_string(plan.worldSize)
                           : "recompile with --np " + std::to_string(world)));

    DeviceOptions deviceOptions;
    try {
      parseDeviceSpec(args.count("device") ? args["device"].as<std::string>() : plan.target,
                      deviceOptions);
    } catch (const std::invalid_argument &e) {
      return failRank(std::string("--device: ") + e.what());
    }
    std::string graphArg = args["cuda-graph"].as<std::string>();
    if (graphArg != "auto" && graphArg != "off")
      return failRank("--cuda-graph must be auto or off (not '" + graphArg + "')");
    deviceOptions.cudaGraph = graphArg == "auto";
    deviceOptions.tf32 = args.count("tf32") > 0;
    std::string detArg = args["deterministic"].as<std::string>();
    if (detArg != "on" && detArg != "off")
      return failRank("--deterministic must be on or off (not '" + detArg + "')");
    deviceOptions.deterministic = detArg == "on";
    try {
      deviceOptions.collectives = parseTransport(args["collectives"].as<std::string>());
    } catch (const std::invalid_argument &e) {
      return failRank(std::string("--collectives: ") + e.what());
    }
    const char *localRankEnv = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    deviceOptions.localRank = localRankEnv ? std::atoi(localRankEnv) : rank % localRanks;
    std::unique_ptr<Device> device;
    try {
      device = makeDevice(deviceOptions);
    } catch (const std::runtime_error &e) {
      return failRank(e.what());
    }

    SessionOptions options;
    options.device = device.get();
    options.threads = threads;
    options.seed = args["seed"].as<uint64_t>();
    options.rank = rank;
    options.worldSize = world;
    options.comm = comm.get();
    if (args.count("weights"))
      options.weightsPath = args["weights"].as<std::string>();
    options.profile = args.count("profile") > 0;
    if (args.count("memory-limit")) {
      auto limit = parseBytes(args["memory-limit"].as<std::string>());
      if (!limit || *limit <= 0)
        return failRank("--memory-limit " + args["memory-limit"].as<std::string>() +
                        ": expected a positive size such as 2GiB, 512MiB or 3e9");
      options.memoryLimit = *limit;
    }
    std::unique_ptr<Trace> trace;
    if (args.count("trace")) {
      trace = std::make_unique<Trace>();
      options.trace = trace.get();
    }
    // What the session adds to the process (its storage, the kernels'
    // workspace and buffers, what the steps allocate): the memory the plan's
    // prediction is compared with (--metrics' memory_bytes). Not the code
    // pages the run touches nor its shared memory (mapped files and MPI's
    // shared segments, which the machine's ranks share), nor the data
    // source's own memory (below).
    // Memory the process freed before (reading the plan) is handed back
    // first: the session would reuse it where resident growth cannot see it.
    releaseLoadingMemory();
    int64_t residentBefore = residentBytes(), sharedBefore = sharedResidentBytes();
    Session session(plan, options);
    if (device->kind() != DeviceKind::Cpu && !args.count("quiet")) {
      std::string note = device->executionNote();
      std::cerr << "rank " << rank << ": " << device->description()
                << (note.empty() ? "" : "; " + note) << "\n";
      if (!session.hostFallbackKernels().empty()) {
        std::map<std::string, int> ops;
        for (size_t k : session.hostFallbackKernels())
          ++ops[session.plan().kernels[k].op];
        std::cerr << "rank " << rank << ": " << session.hostFallbackKernels().size()
                  << " kernel(s) have no " << nameOf(device->kind())
                  << " kernel and run on the host over staged copies:";
        for (auto &[op, n] : ops)
          std::cerr << " " << op << " (" << n << ")";
        std::cerr << "\n";
      }
    }
    // Every rank writes its part (a collective), rank 0 the file.
    auto finishTrace = [&] {
      if (!trace)
        return;
      comm->setTrace(nullptr);
      writeTrace(*comm, *trace, session.plan(), args["trace"].as<std::string>());
    };
    int64_t firstStep = checkpoints.resume(
        session, *comm,
        args["seed"].count() ? std::optional<uint64_t>(options.seed) : std::nullopt);
    options.seed = session.env().seed; // the checkpoint's, when resumed
    if (firstStep > 0 && rank == 0 && !args.count("quiet"))
      std::cerr << "resuming after step " << firstStep << " from "
                << args["resume"].as<std::string>() << "\n";
    // After the resume's own collective: the trace holds the steps only.
    if (trace)
      startTrace(*comm, *trace);

    // On a Pr x Pc grid the Pr consecutive ranks of a model group share
    // their samples: the batch is split over world / Pr.
    int modelRanks = session.plan().modelRanks;
    Sharding sharding{rank / modelRanks, world / modelRanks};
    int64_t beforeData = residentBytes(), heapBeforeData = heapInUseBytes();
    std::unique_ptr<DataSource> data =
        args.count("data")
            ? openNpyData(session.plan(), args["data"].as<std::string>(), sharding,
                          args.count("allow-non-finite") > 0)
            : makeSyntheticData(session.plan(), options.seed, sharding);
    // A --data set read into memory, --synthetic's id distributions (on
    // the heap, perhaps in memory loading freed, which resident memory
    // does not show).
    int64_t dataBytes = std::max<int64_t>(
        {int64_t(0), residentBytes() - beforeData, heapInUseBytes() - heapBeforeData});
    // The steps' peak, not loading's (the whole ONNX model is read once).
    releaseLoadingMemory();
    resetPeakResident();

    std::ofstream metrics;
    if (args.count("metrics")) {
      std::string path = perRank(args["metrics"].as<std::string>(), rank, world);
      if (firstStep > 0)
        parallax::run::keepMetricsUpTo(path, firstStep);
      metrics.open(path, firstStep > 0 ? std::ios::app : std::ios::trunc);
      if (!metrics)
        return failRank(path + ": cannot open for writing");
    }

    if (infer) {
      std::filesystem::path out = args["out"].as<std::string>();
      std::filesystem::create_directories(out);
      for (int64_t s = 0; s < steps; ++s) {
        data->fill(session, s);
        session.runStep();
        std::filesystem::path dir = steps == 1 ? out : out / ("step" + std::to_string(s));
        std::filesystem::create_directories(dir);
        for (size_t i = 0; i < session.plan().outputs.size(); ++i)
          writeNpy((dir / (session.plan().outputs[i].name + ".npy")).string(),
                   session.output(i));
      }
      finishTrace();
      return 0;
    }

    Progress progress(steps, args["log-every"].as<int64_t>(),
                      args.count("quiet") > 0 || rank != 0, firstStep);
    auto start = std::chrono::steady_clock::now();
    int64_t heapMark = -1;
    auto lastHeapCheck = start;
    if (firstStep < steps)
      data->fill(session, firstStep);
    for (int64_t s = firstStep; s < steps; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      comm->traffic = Traffic{};
      session.runStep();
      // The next batch while a GPU runs this step (into the other staging
      // buffer); on the CPU the same work in the same order.
      auto filling = std::chrono::steady_clock::now();
      if (s + 1 < steps)
        data->fill(session, s + 1);
      double dataTime =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - filling).count();
      double loss = session.loss();
      auto t1 = std::chrono::steady_clock::now();
      double stepTime = std::chrono::duration<double>(t1 - t0).count();
      // The heap's holes back to the system when a step left it larger
      // (trimHeapAbove); checked after every step of 10 ms or more (reading
      // /proc costs tens of microseconds), else at steps 1, 2, 4, 8 ... and
      // once a second.
      if (heapKept && (stepTime >= 0.01 || ((s + 1) & s) == 0 ||
                       t1 - lastHeapCheck > std::chrono::seconds(1))) {
        trimHeapAbove(heapMark, 1 << 20);
        lastHeapCheck = t1;
      }
      double elapsed = std::chrono::duration<double>(t1 - start).count();
      double samplesPerSec = data->globalBatch() / std::max(stepTime, 1e-9);
      // A checkpoint after a finite loss only, and reported after this
      // step's metrics line is out.
      double checkpointTime = 0;
      std::exception_ptr checkpointError;
      if (std::isfinite(loss)) {
        try {
          checkpointTime = checkpoints.afterStep(session, steps);
        } catch (...) {
          checkpointError = std::current_exception();
        }
      }
      if (metrics) {
        nlohmann::json line{{"step", s + 1},
                            {"loss", loss},
                            {"step_time_s", stepTime},
                            {"data_s", dataTime},
                            {"samples_per_s", samplesPerSec}};
        if (checkpointTime > 0)
          line["checkpoint_s"] = checkpointTime;
        if (int64_t peak = peakResidentBytes(); peak > 0 && residentBefore > 0)
          line["memory_bytes"] = peak - residentBefore - dataBytes -
                                 std::max<int64_t>(0, sharedResidentBytes() - sharedBefore);
        if (int64_t peak = device->peakAllocatedBytes(); peak > 0)
          line["device_memory_bytes"] = peak;
        if (world > 1) {
          int64_t sent = 0, received = 0;
          nlohmann::json byVariable = nlohmann::json::object();
          for (const auto &[name, c] : comm->traffic.byVariable) {
            byVariable[name] = {{"sent", c.sent}, {"received", c.received}};
            sent += c.sent;
            received += c.received;
          }
          line["rank"] = rank;
          line["bytes_sent"] = sent;
          line["bytes_received"] = received;
          line["bytes"] = byVariable;
        }
        metrics << line.dump() << "\n";
        metrics.flush(); // a failing rank must not take its last lines with it
      }
      progress.update(s + 1, loss, samplesPerSec, elapsed);
      if (!std::isfinite(loss))
        // Data and initial values were checked as they were loaded, so a
        // first loss that is not finite comes from the model itself.
        return failRank("the loss is " + std::to_string(loss) + " at step " +
                        std::to_string(s + 1) +
                        (s == 0 ? ", before any update: the model computes it "
                                  "from finite data and initial values (a log "
                                  "of 0 or a division by 0?)"
                                : " (diverged: try a smaller learning rate)"));
      if (checkpointError)
        std::rethrow_exception(checkpointError);
    }
    if (options.profile && rank == 0) {
      printProfile(session, std::cerr);
      std::cerr << "f32 matrix products: " << sgemmLibrary() << "\n";
      if (device->kind() != DeviceKind::Cpu)
        std::cerr << device->description() << ": " << device->executionNote() << "\n";
      if (world > 1)
        std::cerr << "collectives: "
                  << (comm->threaded() ? "on a communication thread"
                                       : "inline, on the kernels' thread")
                  << " (--comm-thread " << commThreadArg << ")\n";
    }
    finishTrace();
    if (args.count("save")) {
      session.gatherShardedVariables();
      // Split variables (--grid) whole, gathered on every rank.
      std::map<size_t, std::vector<char>> wholes;
      for (size_t i = 0; i < session.plan().variables.size(); ++i)
        if (session.plan().variables[i].split())
          wholes[i] = session.wholeVariable(i);
      if (rank == 0) {
        std::vector<std::string> names;
        std::vector<TensorView> values;
        // Empty, or a block's place in its initializer (InitialValue::blockOf).
        std::vector<std::vector<int64_t>> origins;
        // Padded variables' initializer parts (kept alive until written).
        std::list<std::vector<char>> unpadded;
        for (size_t i = 0; i < session.plan().variables.size(); ++i) {
          const PlanVariable &v = session.plan().variables[i];
          if (v.role == PlanVariable::Role::OptimizerState ||
              v.init.kind != InitialValue::Kind::Onnx)
            continue;
          TensorView value = session.variable(i);
          if (auto w = wholes.find(i); w != wholes.end())
            value = TensorView{w->second.data(), v.dtype, v.wholeShape};
          names.push_back(v.init.onnxName);
          values.push_back(value);
          origins.push_back(v.init.blockOrigin);
          if (!v.init.paddedFrom.empty()) {
            auto [bytes, shape] = session.savedValue(i, values.back());
            unpadded.push_back(std::move(bytes));
            values.back() = TensorView{unpadded.back().data(), v.dtype, shape};
          }
          std::string bad = describeNonFinite(values.back().data, v.dtype, values.back().shape);
          if (!bad.empty())
            return failRank(args["save"].as<std::string>() + ": not written: the trained '" +
                            (v.init.blockOf.empty() ? v.init.onnxName : v.name) + "' holds " + bad);
        }
        std::string source = options.weightsPath.empty() || options.weightsPath == kRandomWeights
                                 ? session.plan().sourcePath
                                 : options.weightsPath;
        saveOnnxWithInitializers(source, args["save"].as<std::string>(), names, values, origins);
      }
    }
  } catch (const std::exception &e) {
    return failRank(e.what());
  }
  return 0;
}

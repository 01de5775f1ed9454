//===- parallax-run.cpp - execute a Parallax plan -------------------------===//
//
//   parallax-run model.pxplan --synthetic --steps 100
//   parallax-run model.pxplan --data DIR --steps 1000 --metrics m.jsonl --save trained.onnx
//   parallax-run model.pxplan --infer --data DIR --out OUTDIR
//
// Links no MLIR: the plan is everything it needs (with the source ONNX model
// for initial values).
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Data.h"
#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/Session.h"

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

extern "C" void openblas_set_num_threads(int);

using namespace parallax::rt;

namespace {

int fail(const std::string &message) {
  std::cerr << "parallax-run: error: " << message << "\n";
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
  Progress(int64_t steps, int64_t logEvery, bool quiet)
      : steps(steps), logEvery(std::max<int64_t>(logEvery, 1)), quiet(quiet),
        tty(isatty(STDERR_FILENO)) {}

  void update(int64_t step, double loss, double samplesPerSec, double elapsed) {
    if (quiet)
      return;
    double eta = step ? elapsed / step * (steps - step) : 0;
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
    } else if (step % logEvery == 0 || step == steps || step == 1) {
      std::fprintf(stderr, "step %lld/%lld  loss %.6f  %.1f samples/s  elapsed %s  ETA %s\n",
                   (long long)step, (long long)steps, loss, samplesPerSec,
                   clock(elapsed).c_str(), clock(eta).c_str());
    }
  }

private:
  int64_t steps, logEvery;
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

int main(int argc, char **argv) {
  cxxopts::Options cli("parallax-run",
                       "Execute a Parallax plan (made by parallax-opt --emit=plan)");
  cli.positional_help("PLAN");
  cli.add_options()
      ("plan", "The plan file", cxxopts::value<std::string>())
      ("steps", "Steps to run", cxxopts::value<int64_t>()->default_value("100"))
      ("data", "Directory with one NAME.npy per graph input", cxxopts::value<std::string>())
      ("synthetic", "Generate data (normal floats, Zipf ids, uniform labels)")
      ("seed", "Seed for synthetic data and dropout", cxxopts::value<uint64_t>()->default_value("0"))
      ("threads", "CPU threads (default: all cores)", cxxopts::value<int>())
      ("log-every", "Print a line every K steps when not on a terminal",
       cxxopts::value<int64_t>()->default_value("10"))
      ("metrics", "Write one JSON line per step to FILE", cxxopts::value<std::string>())
      ("save", "Write the trained model (the source ONNX with trained initializers)",
       cxxopts::value<std::string>())
      ("weights", "Read initial values from this ONNX file instead of the plan's source",
       cxxopts::value<std::string>())
      ("infer", "Inference: run the forward graph and write its outputs as .npy to --out")
      ("out", "Output directory for --infer", cxxopts::value<std::string>())
      ("print-plan", "Print the plan's program as JSON and exit")
      ("profile", "Time every kernel and print the busiest ops at the end")
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
  if (!args.count("plan"))
    return fail("no plan given (usage: parallax-run PLAN [options]; see --help)");

  try {
    Plan plan = readPlan(args["plan"].as<std::string>());
    if (args.count("print-plan")) {
      std::cout << planToJson(plan).dump(2) << "\n";
      return 0;
    }
    bool infer = args.count("infer") > 0;
    if (infer && !args.count("out"))
      return fail("--infer needs --out DIR");
    if (!infer && plan.mode == Plan::Mode::Inference)
      return fail(args["plan"].as<std::string>() +
                  ": an inference plan (compiled with --inference) can only "
                  "run with --infer");
    if (args.count("data") && args.count("synthetic"))
      return fail("--data and --synthetic exclude each other");
    if (!args.count("data") && !args.count("synthetic"))
      return fail("give the training data with --data DIR, or use --synthetic");
    int64_t steps = args["steps"].as<int64_t>();
    if (steps < 0)
      return fail("--steps must be >= 0");
    if (infer && !args["steps"].count())
      steps = 1;

    int threads = args.count("threads") ? args["threads"].as<int>()
                                        : (int)std::thread::hardware_concurrency();
    if (threads < 1)
      return fail("--threads must be >= 1");
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);

    SessionOptions options;
    options.threads = threads;
    options.seed = args["seed"].as<uint64_t>();
    if (args.count("weights"))
      options.weightsPath = args["weights"].as<std::string>();
    options.profile = args.count("profile") > 0;
    Session session(plan, options);

    Sharding sharding{0, 1};
    std::unique_ptr<DataSource> data =
        args.count("data")
            ? openNpyData(session.plan(), args["data"].as<std::string>(), sharding)
            : makeSyntheticData(session.plan(), options.seed, sharding);

    std::ofstream metrics;
    if (args.count("metrics")) {
      metrics.open(args["metrics"].as<std::string>(), std::ios::trunc);
      if (!metrics)
        return fail(args["metrics"].as<std::string>() + ": cannot open for writing");
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
      return 0;
    }

    Progress progress(steps, args["log-every"].as<int64_t>(), args.count("quiet") > 0);
    auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      data->fill(session, s);
      session.runStep();
      auto t1 = std::chrono::steady_clock::now();
      double stepTime = std::chrono::duration<double>(t1 - t0).count();
      double elapsed = std::chrono::duration<double>(t1 - start).count();
      double loss = session.loss();
      double samplesPerSec = data->globalBatch() / std::max(stepTime, 1e-9);
      if (metrics)
        metrics << nlohmann::json{{"step", s + 1},
                                  {"loss", loss},
                                  {"step_time_s", stepTime},
                                  {"samples_per_s", samplesPerSec}}
                       .dump()
                << "\n";
      progress.update(s + 1, loss, samplesPerSec, elapsed);
      if (!std::isfinite(loss))
        return fail("the loss is " + std::to_string(loss) + " at step " +
                    std::to_string(s + 1) +
                    " (diverged: try a smaller learning rate)");
    }
    if (options.profile)
      printProfile(session, std::cerr);
    if (args.count("save")) {
      std::vector<std::string> names;
      std::vector<TensorView> values;
      for (size_t i = 0; i < session.plan().variables.size(); ++i) {
        const PlanVariable &v = session.plan().variables[i];
        if (v.role == PlanVariable::Role::OptimizerState ||
            v.init.kind != InitialValue::Kind::Onnx)
          continue;
        names.push_back(v.init.onnxName);
        values.push_back(session.variable(i));
      }
      std::string source = options.weightsPath.empty() ? session.plan().sourcePath
                                                       : options.weightsPath;
      saveOnnxWithInitializers(source, args["save"].as<std::string>(), names, values);
    }
  } catch (const PlanError &e) {
    return fail(e.what());
  } catch (const RuntimeError &e) {
    return fail(e.what());
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return 0;
}

//===- FuzzTargets.cpp - what the fuzzers run ------------------------------===//

#include "FuzzTargets.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Importer/OnnxImporter.h"
#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/Session.h"
#include "parallax/Target/PlanEmitter.h"
#include "parallax/Transforms/Pipeline.h"
#include "parallax/Transforms/SplitBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

namespace parallax::fuzz {
namespace {

/// A consistency check failed: report it and abort, which the fuzzer
/// records as a crash with the input that caused it.
[[noreturn]] void violated(const std::string &what) {
  std::fprintf(stderr, "fuzz target: %s\n", what.c_str());
  std::abort();
}

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

/// Rank 0 of a world of `size` ranks that only forms groups: binding asks
/// for them, and nothing here runs a step of a multi-rank plan.
class BindOnlyComm : public rt::Comm {
public:
  explicit BindOnlyComm(int size) {
    size_ = size;
    ranksPerMachine_ = size;
  }
  const char *transport() const override { return "bind-only"; }
  rt::Group &group(const std::vector<int64_t> &shape,
                   const std::vector<int64_t> &axes) override {
    rt::GroupPlace place = rt::placeInGroup(size_, rank_, shape, axes);
    auto g = std::make_unique<PlacedGroup>(std::move(place));
    groups.push_back(std::move(g));
    return *groups.back();
  }
  void allreduce(rt::Group &, void *, int64_t, rt::DType, rt::ReduceOp) override { never(); }
  void allgatherv(rt::Group &, const void *, int64_t, void *,
                  const std::vector<int64_t> &) override { never(); }
  void alltoallv(rt::Group &, const void *, const std::vector<int64_t> &, void *,
                 const std::vector<int64_t> &) override { never(); }
  void reduceScatterBlock(rt::Group &, void *, int64_t, rt::DType, rt::ReduceOp) override {
    never();
  }
  void allgatherBlock(rt::Group &, void *, int64_t) override { never(); }
  void sendrecv(rt::Group &, const std::vector<rt::PeerTransfer> &) override { never(); }
  void barrier(rt::Group &) override { never(); }
  void abort(int) override { never(); }

private:
  struct PlacedGroup : rt::Group {
    explicit PlacedGroup(rt::GroupPlace place) {
      members_ = std::move(place.members);
      rank_ = place.rank;
    }
  };
  [[noreturn]] static void never() { violated("a collective ran while binding"); }
  std::vector<std::unique_ptr<rt::Group>> groups;
};

/// The plan file the fuzzer's bytes stand for (see bindPlan).
std::string planFile(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (bytes.rfind("PXPLAN\r\n", 0) == 0)
    return bytes;
  size_t nul = bytes.find('\0');
  if (nul == std::string::npos)
    return rt::packPlan(bytes, "");
  return rt::packPlan(bytes.substr(0, nul), bytes.substr(nul + 1));
}

/// Reads, binds and (when small) runs a step of `file`; "" or the message.
std::string bindPlanFile(const std::string &file, const std::string &name) {
  try {
    rt::Plan plan = rt::parsePlan(file, name);
    for (rt::PlanVariable &v : plan.variables)
      if (v.init.kind == rt::InitialValue::Kind::Onnx)
        v.init = rt::InitialValue{};
    for (rt::PlanConstant &c : plan.constants)
      if (c.value.kind == rt::InitialValue::Kind::Onnx)
        c.value = rt::InitialValue{};
    rt::SessionOptions options;
    options.worldSize = plan.worldSize;
    options.memoryLimit = kSessionMemoryLimit;
    std::unique_ptr<rt::Comm> comm;
    if (plan.worldSize > 1) {
      comm = std::make_unique<BindOnlyComm>(plan.worldSize);
      options.comm = comm.get();
    }
    bool step = plan.worldSize == 1 && rt::storageOf(plan).total <= kStepMemoryLimit;
    rt::Session session(std::move(plan), options);
    if (step)
      session.runStep();
    return "";
  } catch (const rt::PlanError &e) {
    return e.what();
  } catch (const rt::RuntimeError &e) {
    return e.what();
  }
}

//===----------------------------------------------------------------------===//
// ONNX models
//===----------------------------------------------------------------------===//

std::string compileFor(int ranks, llvm::StringRef bytes) {
  mlir::DialectRegistry registry;
  registry.insert<px::PxDialect, mlir::func::FuncDialect,
                  mlir::shard::ShardDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  std::string diagnostic;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && diagnostic.empty())
      diagnostic = d.str();
    return mlir::success();
  });

  ImportOptions options;
  options.ranks = ranks;
  auto module = importOnnxBuffer(context, bytes, "fuzz.onnx", options);
  if (!module)
    return llvm::toString(module.takeError());
  // What parallax-opt does next: find the batch of a static export.
  SplitBatchOptions split;
  split.ranks = ranks;
  if (auto decided = splitBatch(**module, split); !decided)
    return llvm::toString(decided.takeError());

  TrainingPipelineOptions pipeline;
  pipeline.distributed = ranks > 1;
  pipeline.cluster.np = ranks;
  mlir::PassManager pm(&context);
  addTrainingPipeline(pm, pipeline);
  if (mlir::failed(pm.run(**module)))
    return diagnostic.empty() ? "the training pipeline failed" : diagnostic;

  auto plan = emitPlan(**module, PlanEmitOptions{});
  if (!plan)
    return llvm::toString(plan.takeError());
  std::string file = rt::serializePlan(*plan);
  std::string bound = bindPlanFile(file, "the emitted plan");
  // The compiler's plans must be accepted by the runtime. Two refusals are
  // fine: a plan that needs more memory than a fuzzed session may have, and
  // element types the CPU kernels do not have (f16, bf16: documented in
  // docs/conformance.md; the importer accepts them).
  bool fine = bound.empty() ||
              bound.find("more than the session's limit") != std::string::npos ||
              bound.find("is not supported by the CPU runtime") != std::string::npos;
  if (!fine)
    violated("parallax-opt emitted a plan the runtime refuses: " + bound);
  return "";
}

} // namespace

std::string compileOnnx(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  std::string single = compileFor(1, bytes);
  std::string parallel = compileFor(2, bytes);
  return !single.empty() ? single : parallel;
}

std::string bindPlan(const uint8_t *data, size_t size) {
  return bindPlanFile(planFile(data, size), "fuzz.pxplan");
}

} // namespace parallax::fuzz

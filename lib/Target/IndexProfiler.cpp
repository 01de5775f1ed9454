//===- IndexProfiler.cpp - which rows real data touches -------------------===//
//
// The step's gather indices can be any computation on the inputs (the LM's
// candidates are concat(targets.reshape(-1), sampled)), so rather than
// re-implementing px semantics here the profiler cuts that computation out
// of the module, compiles it to an inference plan and runs it on the
// runtime, rank slice by rank slice.
//
//===----------------------------------------------------------------------===//

#include "parallax/Target/IndexProfiler.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Runtime/Data.h"
#include "parallax/Runtime/Session.h"
#include "parallax/Target/PlanEmitter.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>

using namespace mlir;

namespace parallax {

namespace {

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--profile-data: " + msg);
}

} // namespace

llvm::Expected<RowProfile> profileRows(ModuleOp module,
                                       const std::vector<std::string> &names,
                                       const std::string &dataDir,
                                       int64_t steps, int64_t ranks) {
  OwningOpRef<ModuleOp> clone = module.clone();
  func::FuncOp func = getEntryFunction(*clone);
  if (!func)
    return error("the module has no step function");
  // The index operand of every gather of every listed variable, in order.
  SmallVector<Value> indices;
  std::vector<std::string> owners;
  std::map<std::string, int64_t> tableRows;
  for (auto var : func.getOps<px::VariableOp>()) {
    std::string name = var.getName().str();
    if (std::find(names.begin(), names.end(), name) == names.end())
      continue;
    tableRows[name] = var.getOutput().getType().getDimSize(0);
    for (Operation *user : var.getOutput().getUsers()) {
      // Reads by row: gathers, or the pulls px-sync made of them.
      Value ids;
      if (auto g = dyn_cast<px::GatherOp>(user))
        ids = g.getIndices();
      else if (auto p = dyn_cast<px::PsPullOp>(user))
        ids = p.getIds();
      if (ids) {
        indices.push_back(ids);
        owners.push_back(name);
      }
    }
  }
  RowProfile profile;
  profile.steps = steps;
  profile.ranks = ranks;
  if (indices.empty())
    return profile;

  // Keep only what the indices depend on, and return them.
  llvm::SetVector<Operation *> keep;
  for (Value v : indices) {
    BackwardSliceOptions options;
    options.inclusive = true;
    if (Operation *def = v.getDefiningOp())
      (void)getBackwardSlice(def, &keep, options);
  }
  Block &block = func.getBody().front();
  Operation *ret = block.getTerminator();
  OpBuilder b(ret);
  func::ReturnOp::create(b, ret->getLoc(), indices);
  ret->erase();
  SmallVector<Operation *> drop;
  for (Operation &op : block.without_terminator())
    if (!keep.contains(&op))
      drop.push_back(&op);
  for (Operation *op : llvm::reverse(drop)) {
    op->dropAllUses();
    op->erase();
  }
  px::removeAttr<px::PxDialect::LossAttrHelper>(func);
  func.setFunctionType(b.getFunctionType({}, ValueRange(indices).getTypes()));
  px::removeAttr<px::PxDialect::OutputsAttrHelper>(*clone);
  px::removeAttr<px::PxDialect::WorldSizeAttrHelper>(*clone);
  px::removeAttr<px::PxDialect::RanksPerMachineAttrHelper>(*clone);
  for (auto grid : llvm::make_early_inc_range(clone->getOps<shard::GridOp>()))
    grid.erase();

  auto plan = emitPlan(*clone, PlanEmitOptions{});
  if (!plan)
    return plan.takeError();
  try {
    rt::Session session(std::move(*plan), rt::SessionOptions{});
    std::vector<std::unique_ptr<rt::DataSource>> data;
    for (int64_t r = 0; r < ranks; ++r)
      data.push_back(rt::openNpyData(session.plan(), dataDir,
                                     rt::Sharding{(int)r, (int)ranks}));
    for (const std::string &n : names)
      profile.rows[n].assign(steps * ranks, {});
    std::vector<size_t> readIndex(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      auto &reads = profile.reads[owners[i]];
      readIndex[i] = reads.size();
      reads.emplace_back(steps * ranks);
    }
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t r = 0; r < ranks; ++r) {
        data[r]->fill(session, s);
        session.runStep();
        for (size_t i = 0; i < indices.size(); ++i) {
          rt::TensorView t = session.output(i);
          int64_t rows = tableRows[owners[i]];
          auto &set = profile.rows[owners[i]][s * ranks + r];
          auto &read = profile.reads[owners[i]][readIndex[i]][s * ranks + r];
          for (int64_t k = 0; k < t.numElements(); ++k) {
            int64_t id = t.dtype == rt::DType::I32 ? t.as<int32_t>()[k]
                                                   : t.as<int64_t>()[k];
            if (id < 0)
              id += rows;
            if (id >= 0 && id < rows) {
              set.push_back(id);
              read.push_back(id);
            }
          }
        }
      }
    auto dedup = [](std::vector<int64_t> &set) {
      std::sort(set.begin(), set.end());
      set.erase(std::unique(set.begin(), set.end()), set.end());
    };
    for (auto &[name, perStep] : profile.rows)
      for (auto &set : perStep)
        dedup(set);
    for (auto &[name, reads] : profile.reads)
      for (auto &perStep : reads)
        for (auto &set : perStep)
          dedup(set);
  } catch (const std::exception &e) {
    return error(e.what());
  }
  return profile;
}

} // namespace parallax

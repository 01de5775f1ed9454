//===- Sparsity.cpp - dense or sparse, and how sparse ---------------------===//
//
// The classification is the Parallax rule (VariableAccess): a variable read
// only through px.gather on axis 0 has a row-sparse gradient. Alpha, the
// fraction of its rows one rank's step touches, decides how it is
// synchronized: without data it is bounded by the number of indices a rank
// gathers per step; with --profile-data it is measured on real batches.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "parallax/Analysis/VariableAccess.h"
#include "parallax/Target/IndexProfiler.h"
#include "parallax/Transforms/Cluster.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace parallax {
#define GEN_PASS_DEF_PXSPARSITY
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

struct SparsityPass : parallax::impl::PxSparsityBase<SparsityPass> {
  using PxSparsityBase::PxSparsityBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return;
    OpBuilder b(module.getContext());
    std::map<std::string, VariableInfo> infos;
    for (VariableInfo &v : analyzeVariables(module))
      infos[v.name] = v;
    std::vector<std::string> sparse;
    for (auto var : func.getOps<px::VariableOp>()) {
      if (!var.getTrainable())
        continue;
      const VariableInfo &info = infos[var.getName().str()];
      bool isSparse = info.access == VariableAccess::RowGather;
      px::setAttr<px::PxDialect::AccessAttrHelper>(
          var, b.getStringAttr(isSparse ? "sparse" : "dense"));
      if (!isSparse)
        continue;
      int64_t rows = info.shape.empty() ? 1 : info.shape[0];
      int64_t touched = std::min(info.rowsReadPerStep, rows);
      px::setAttr<px::PxDialect::RowsPerStepAttrHelper>(var, b.getI64IntegerAttr(touched));
      px::setAttr<px::PxDialect::AlphaAttrHelper>(
          var, b.getF64FloatAttr((double)touched / std::max<int64_t>(rows, 1)));
      px::setAttr<px::PxDialect::AlphaSourceAttrHelper>(var, b.getStringAttr("bound"));
      sparse.push_back(info.name);
    }
    if (profileData.empty() || sparse.empty())
      return;
    if (profileSteps < 1) {
      module.emitError("px-sparsity: profile-steps must be >= 1");
      return signalPassFailure();
    }
    ClusterModel cluster = ClusterModel::fromModule(module);
    auto profile = profileRows(module, sparse, profileData, profileSteps,
                               cluster.worldSize);
    if (!profile) {
      module.emitError("px-sparsity: ") << llvm::toString(profile.takeError());
      return signalPassFailure();
    }
    // px-sync re-runs the profile to predict parameter-server traffic
    // exactly for this data.
    px::setAttr<px::PxDialect::ProfileDataAttrHelper>(module, b.getStringAttr(profileData));
    px::setAttr<px::PxDialect::ProfileStepsAttrHelper>(module, b.getI64IntegerAttr(profileSteps));
    for (auto var : func.getOps<px::VariableOp>()) {
      auto it = profile->rows.find(var.getName().str());
      if (it == profile->rows.end() || it->second.empty())
        continue;
      double total = 0;
      for (const auto &set : it->second)
        total += (double)set.size();
      double mean = total / (double)it->second.size();
      int64_t rows = var.getOutput().getType().getDimSize(0);
      px::setAttr<px::PxDialect::RowsPerStepAttrHelper>(
          var, b.getI64IntegerAttr((int64_t)std::ceil(mean)));
      px::setAttr<px::PxDialect::AlphaAttrHelper>(
          var, b.getF64FloatAttr(mean / std::max<int64_t>(rows, 1)));
      px::setAttr<px::PxDialect::AlphaSourceAttrHelper>(var, b.getStringAttr("profile"));
    }
  }
};

} // namespace

//===- PartitionCount.cpp - how many servers a sparse variable gets --------===//
//
// Parallax (EuroSys'19, section 4.3) fits t(P) = theta1 / P + theta2 (P - 1)
// + theta0 to step times measured at a few P and takes the integer argmin.
// The same model, with the thetas from the link model instead of re-launched
// trials (docs/sync.md derives them):
//
//   theta1 = what one server would carry for the variable per step: every
//            rank's pulled and pushed rows, N * u * 2 (row + 8 bytes of
//            index), over the bandwidth, plus applying N * u rows of
//            gradient;
//   theta2 = one more partition costs every rank one more message in each
//            of the pull request, the reply and the push: 3 latencies;
//   theta0 = everything that does not depend on P (left out of the argmin).
//
// P is at most the number of ranks that serve the table (the batch group's:
// every rank, or on a Pr x Pc grid each model rank's Pc): two partitions on
// one rank do not serve in parallel.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Transforms/Cluster.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace parallax {
#define GEN_PASS_DEF_PXPARTITION
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

struct PartitionPass : parallax::impl::PxPartitionBase<PartitionPass> {
  using PxPartitionBase::PxPartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return;
    ClusterModel c = ClusterModel::fromModule(module);
    OpBuilder b(module.getContext());

    struct Part {
      px::VariableOp var;
      int64_t index;
      double bytes;
    };
    std::vector<Part> parts;
    for (auto var : func.getOps<px::VariableOp>()) {
      auto access = px::getAttr<px::PxDialect::AccessAttrHelper>(var);
      if (!access || access.getValue() != "sparse")
        continue;
      auto type = var.getOutput().getType();
      int64_t rows = type.getDimSize(0);
      double rowBytes = (double)type.getNumElements() / std::max<int64_t>(rows, 1) *
                        (type.getElementTypeBitWidth() / 8);
      int64_t u = rows;
      if (auto r = px::getAttr<px::PxDialect::RowsPerStepAttrHelper>(var))
        u = r.getInt();
      // The servers are the batch group's (every rank without a model
      // axis; on a Pr x Pc grid each model rank's Pc ranks, which serve
      // its replica of the table).
      const int64_t group = c.dataRanks();
      double n = (double)group;
      double theta1 = n * u * 2 * (rowBytes + 8) / c.bandwidth() +
                      n * u * rowBytes * c.updateSecondsPerByte;
      double theta2 = 3 * c.latency();
      int64_t best = 1;
      double bestTime = INFINITY;
      int64_t maxP = std::min<int64_t>(group, std::max<int64_t>(rows, 1));
      for (int64_t p = 1; p <= maxP; ++p) {
        double t = theta1 / p + theta2 * (p - 1);
        if (t < bestTime - 1e-15) {
          best = p;
          bestTime = t;
        }
      }
      if (forced > 0)
        best = std::min<int64_t>(forced, std::max<int64_t>(rows, 1));
      px::setAttr<px::PxDialect::PartitionsAttrHelper>(var, b.getI64IntegerAttr(best));
      px::setAttr<px::PxDialect::PartitionCostAttrHelper>(
          var, b.getDenseF64ArrayAttr({theta1, theta2}));
      for (int64_t p = 0; p < best; ++p)
        parts.push_back({var, p, (double)type.getNumElements() *
                                     (type.getElementTypeBitWidth() / 8) / best});
    }
    // Greedy placement, biggest partitions first: the machine with the
    // fewest bytes so far, then its rank with the fewest bytes. Ranks are
    // the batch group's, q; on a grid, q's world rank is q Pr (the model
    // axis is the inner one), for the machine it runs on.
    std::stable_sort(parts.begin(), parts.end(),
                     [](const Part &a, const Part &b) { return a.bytes > b.bytes; });
    const int64_t group = c.dataRanks();
    auto machineOf = [&](int64_t q) { return q * c.modelRanks / c.ranksPerMachine; };
    std::vector<double> machineLoad(c.machines(), 0), rankLoad(group, 0);
    llvm::DenseMap<Operation *, SmallVector<int64_t>> placement;
    // A variable's partitions go to different ranks when they can: two on
    // one rank would not serve in parallel.
    llvm::DenseMap<Operation *, llvm::DenseSet<int64_t>> holds;
    for (const Part &p : parts) {
      auto &mine = holds[p.var];
      // The least loaded rank on machine `m` (any machine: -1), free of
      // this variable's partitions unless `taken` allows them.
      auto leastLoaded = [&](int64_t m, bool taken) {
        int64_t best = -1;
        for (int64_t q = 0; q < group; ++q)
          if ((m < 0 || machineOf(q) == m) && (taken || !mine.contains(q)) &&
              (best < 0 || rankLoad[q] < rankLoad[best]))
            best = q;
        return best;
      };
      // The least loaded machine among those holding a rank of the group.
      int64_t m = -1;
      for (int64_t q = 0; q < group; ++q)
        if (m < 0 || machineLoad[machineOf(q)] < machineLoad[m])
          m = machineOf(q);
      int64_t r = leastLoaded(m, false);
      if (r < 0) // every rank of that machine has one: any free rank
        r = leastLoaded(-1, false);
      if (r < 0)
        r = leastLoaded(m, true);
      m = machineOf(r);
      mine.insert(r);
      machineLoad[m] += p.bytes;
      rankLoad[r] += p.bytes;
      auto &list = placement[p.var];
      list.resize(px::getAttr<px::PxDialect::PartitionsAttrHelper>(p.var).getInt());
      list[p.index] = r;
    }
    for (auto &[op, ranks] : placement)
      px::setAttr<px::PxDialect::PlacementAttrHelper>(op, b.getDenseI64ArrayAttr(ranks));
  }
};

} // namespace

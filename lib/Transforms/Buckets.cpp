//===- Buckets.cpp - all-reduce buckets as the plan fuses them ------------===//

#include "Buckets.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

using namespace mlir;

namespace parallax {

std::vector<SmallVector<px::AllReduceOp>> bucketsOf(Block &block) {
  std::vector<SmallVector<px::AllReduceOp>> buckets;
  std::map<int64_t, size_t> byId;
  for (auto ar : block.getOps<px::AllReduceOp>()) {
    if (!ar.getBucket()) {
      buckets.push_back({ar});
      continue;
    }
    auto [it, fresh] = byId.try_emplace((int64_t)*ar.getBucket(), buckets.size());
    if (fresh)
      buckets.emplace_back();
    buckets[it->second].push_back(ar);
  }
  return buckets;
}

void renumberBucketsInIssueOrder(Block &block) {
  llvm::DenseMap<int64_t, int64_t> renumbered;
  for (auto ar : block.getOps<px::AllReduceOp>())
    if (auto id = ar.getBucket()) {
      auto [it, added] = renumbered.try_emplace((int64_t)*id, (int64_t)renumbered.size());
      ar.setBucket(it->second);
    }
}

int64_t bytesOf(RankedTensorType type) {
  return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
}

rt::KernelGrid gridOf(Operation *op, FlatSymbolRefAttr grid, ArrayRef<int16_t> axes) {
  rt::KernelGrid g;
  if (auto def = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, grid))
    g.shape = def.getShape().vec();
  g.axes = rt::groupAxes(g.shape, std::vector<int64_t>(axes.begin(), axes.end()));
  return g;
}

} // namespace parallax

//===- BucketInPlace.cpp - all-reduce buckets reduced where they lie ------===//
//
// A bucket's inputs become views of one buffer (the plan emitter makes each
// input, and each result, an alias at its member's offset), so an input must
// be a buffer of its own that nothing else reads: computed by a kernel of
// the step (not a collective, whose wait reads it too), read only by its
// all-reduce, directly or through reshapes (views too). The members that
// are not leave their bucket for a staged bucket of their own.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Runtime/PlanAlignment.h"

#include "Buckets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"

namespace parallax {
#define GEN_PASS_DEF_PXBUCKETINPLACE
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// Whether `v` can be one member's slice of an in-place bucket.
bool ownsItsBuffer(Value v) {
  for (;;) {
    if (!v.hasOneUse())
      return false;
    Operation *def = v.getDefiningOp();
    // A collective's result is read by the wait that joins it as well.
    if (!def || runsOnCommThread(def) ||
        isa<px::VariableOp, px::InputOp, px::ConstantOp, px::SparseGradIndicesOp,
            px::SparseGradValuesOp>(def))
      return false;
    auto reshape = dyn_cast<px::ReshapeOp>(def);
    if (!reshape)
      return true;
    v = reshape.getInput();
  }
}

struct BucketInPlacePass : parallax::impl::PxBucketInPlaceBase<BucketInPlacePass> {
  void runOnOperation() override {
    func::FuncOp func = getEntryFunction(getOperation());
    if (!func || func.getBody().empty())
      return;
    OpBuilder b(&getContext());
    Block &body = func.getBody().front();
    int64_t nextId = 0;
    for (auto ar : body.getOps<px::AllReduceOp>())
      if (ar.getBucket())
        nextId = std::max<int64_t>(nextId, (int64_t)*ar.getBucket() + 1);
    bool split = false;
    for (auto &members : bucketsOf(body)) {
      // The members that cannot be slices of the bucket (a gradient summed
      // over the model axis first, by a collective) form a staged bucket of
      // their own, so that they do not keep the rest from lying in place.
      SmallVector<px::AllReduceOp> bucket, apart;
      for (px::AllReduceOp ar : members)
        (ownsItsBuffer(ar.getInput()) || members.size() == 1 ? bucket : apart).push_back(ar);
      if (!apart.empty() && !bucket.empty()) {
        split = true;
        for (px::AllReduceOp ar : apart)
          ar.setBucketAttr(b.getI64IntegerAttr(nextId));
        ++nextId;
      }
      if (bucket.empty())
        continue;
      Type elem = getElementTypeOrSelf(bucket.front().getInput().getType());
      llvm::DenseSet<Value> seen;
      bool ok = llvm::all_of(bucket, [&](px::AllReduceOp ar) {
        Value in = ar.getInput();
        return getElementTypeOrSelf(in.getType()) == elem && seen.insert(in).second &&
               ownsItsBuffer(in);
      });
      if (!ok)
        continue;
      int64_t offset = 0;
      for (px::AllReduceOp ar : bucket) {
        ar.setInPlace(true);
        ar.setOffsetAttr(b.getI64IntegerAttr(offset));
        offset += rt::alignToPlan(std::max<int64_t>(bytesOf(ar.getInput()), 1));
      }
    }
    if (split)
      renumberBucketsInIssueOrder(body);
  }
};

} // namespace

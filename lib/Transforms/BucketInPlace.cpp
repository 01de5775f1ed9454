//===- BucketInPlace.cpp - all-reduce buckets reduced where they lie ------===//
//
// A bucket's inputs become views of one buffer (the plan emitter makes each
// input, and each result, an alias at its member's offset), so an input must
// be a buffer of its own that nothing else reads: computed by a kernel of
// the step (not a collective, whose wait reads it too), read only by its
// all-reduce, directly or through reshapes (views too). A member that is
// not leaves its bucket and is reduced alone, as its own staged all-reduce.
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
    for (auto &members : bucketsOf(func.getBody().front())) {
      // A member that cannot be a slice of the bucket (a gradient summed
      // over the model axis first, by a collective) is reduced on its own,
      // so that it does not keep the rest of its bucket from lying in place.
      SmallVector<px::AllReduceOp> bucket;
      for (px::AllReduceOp ar : members) {
        if (ownsItsBuffer(ar.getInput()) || members.size() == 1)
          bucket.push_back(ar);
        else
          ar.removeBucketAttr();
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
  }
};

} // namespace

//===- SplitBatch.cpp - which inputs hold the samples, and each rank's share -===//
//
// torch.onnx.export(model, args, f) with no dynamic_axes gives every input
// and every reshape the traced batch as a number. The batch analysis
// (lib/Analysis/BatchDimension.cpp) tells which inputs hold samples and
// where the samples lie in every value; this pass then marks those inputs
// and rewrites each samples dimension from the exported batch to the
// per-rank one, so that a static export is split over ranks and reads
// [N, ...] data exactly like a dynamic one.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/SplitBatch.h"

#include "parallax/Analysis/BatchDimension.h"
#include "parallax/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace parallax {
#define GEN_PASS_DEF_PXSPLITBATCH
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;

namespace parallax {
namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string nameList(llvm::ArrayRef<std::string> names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

std::string namesOf(llvm::ArrayRef<px::InputOp> inputs) {
  std::vector<std::string> names;
  for (px::InputOp in : inputs)
    names.push_back(in.getName().str());
  return nameList(names);
}

int64_t leadingDim(px::InputOp in) {
  auto shape = cast<ShapedType>(in.getType()).getShape();
  return shape.empty() ? -1 : shape[0];
}

/// `value`'s type with its samples dimension holding `local` samples.
Type rebatched(Value value, const BatchLayout &layout, int64_t local) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  auto it = layout.batched.find(value);
  if (it == layout.batched.end()) {
    it = layout.uniform.find(value);
    if (it == layout.uniform.end())
      return type;
  }
  shape[it->second.axis] = shape[it->second.axis] / layout.batch * local;
  return type.clone(shape);
}

/// A constant the same for every sample, for `local` samples: sample 0's
/// elements, repeated. In units of one sample's slot (stride elements), new
/// slot q is sample q % local of run q / local, and that run's sample 0 was
/// old slot q / local * batch.
ElementsAttr shrinkConstant(ElementsAttr value, BatchPlacement at, int64_t batch,
                            RankedTensorType type) {
  if (value.isSplat())
    return DenseElementsAttr::get(type, value.getSplatValue<Attribute>());
  auto shape = type.getShape();
  int64_t stride = at.inner;
  for (size_t d = at.axis + 1; d < shape.size(); ++d)
    stride *= shape[d];
  int64_t local = shape[at.axis] / (value.getShapedType().getDimSize(at.axis) / batch);
  auto values = value.getValues<Attribute>();
  SmallVector<Attribute> out;
  out.reserve(type.getNumElements());
  for (int64_t e = 0; e < type.getNumElements(); ++e) {
    int64_t q = e / stride;
    out.push_back(values[q / local * batch * stride + e % stride]);
  }
  return DenseElementsAttr::get(type, out);
}

void setSampleStrides(func::FuncOp func, const BatchLayout &layout) {
  Builder b(func.getContext());
  func.walk([&](px::DropoutOp op) {
    op.setSampleStrideAttr(b.getI64IntegerAttr(layout.sampleStride(op.getInput())));
  });
}

/// Rewrites every samples dimension to `local` samples and marks `inputs`.
llvm::Error rebatch(ModuleOp module, func::FuncOp func, const BatchLayout &layout,
                    ArrayRef<px::InputOp> inputs, int64_t local) {
  // Sample strides do not depend on the batch: take them before.
  setSampleStrides(func, layout);
  Builder b(func.getContext());
  for (px::InputOp in : inputs)
    in.setBatchedAttr(b.getUnitAttr());
  if (local != layout.batch) {
    for (auto [op, index, inverse] : layout.batchSizeOperands) {
      OpBuilder ob(op);
      auto type = cast<RankedTensorType>(op->getOperand(index).getType());
      double value = inverse ? 1.0 / (double)local : (double)local;
      Attribute element = isa<FloatType>(type.getElementType())
                              ? (Attribute)ob.getFloatAttr(type.getElementType(), value)
                              : (Attribute)ob.getIntegerAttr(type.getElementType(), local);
      op->setOperand(index, px::ConstantOp::create(
                                ob, op->getOperand(index).getLoc(),
                                cast<ElementsAttr>(DenseElementsAttr::get(type, element))));
    }
    for (Operation &op : func.getBody().front()) {
      for (Value r : op.getResults())
        r.setType(rebatched(r, layout, local));
      if (auto c = dyn_cast<px::ConstantOp>(op); c && layout.uniform.count(c))
        c.setValueAttr(shrinkConstant(cast<ElementsAttr>(c.getValue()),
                                      layout.uniform.lookup(c), layout.batch,
                                      cast<RankedTensorType>(c.getType())));
    }
  }
  // Every op re-checks its result types against its shape rule: a wrong
  // rewrite is an error here, never a plan that computes garbage.
  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (diagnostics.empty())
        diagnostics = locationName(d.getLocation()) + ": " + d.str();
      return success();
    });
    if (succeeded(verify(module)))
      return llvm::Error::success();
  }
  return error("setting the batch to " + llvm::Twine(local) +
               " samples per rank breaks the graph at " + diagnostics);
}

} // namespace

llvm::Expected<BatchDecision> splitBatch(ModuleOp module,
                                         const SplitBatchOptions &options) {
  func::FuncOp func = getEntryFunction(module);
  if (!func || !func.getBody().hasOneBlock())
    return BatchDecision{};
  SmallVector<px::InputOp> inputs(func.getOps<px::InputOp>());
  std::map<std::string, px::InputOp> byName;
  for (px::InputOp in : inputs)
    byName[in.getName().str()] = in;
  for (const auto *list : {&options.batchInputs, &options.sharedInputs})
    for (const std::string &name : *list)
      if (!byName.count(name))
        return error("--" +
                     llvm::Twine(list == &options.batchInputs ? "batch" : "shared") +
                     "-inputs names '" + name + "', which is not a graph input");
  llvm::StringSet<> shared;
  for (const std::string &name : options.sharedInputs)
    shared.insert(name);

  BatchDecision decision;
  auto finish = [&](ArrayRef<px::InputOp> batched) {
    for (px::InputOp in : inputs)
      (llvm::is_contained(batched, in) ? decision.batched : decision.shared)
          .push_back(in.getName().str());
    return decision;
  };

  // A dynamic export names its batched inputs; the importer bound them.
  SmallVector<px::InputOp> declared;
  for (px::InputOp in : inputs)
    if (in.getBatched())
      declared.push_back(in);
  if (!declared.empty()) {
    if (!options.batchInputs.empty() || !options.sharedInputs.empty())
      return error("--batch-inputs and --shared-inputs are for models whose "
                   "inputs have static shapes; " + namesOf(declared) +
                   " already have a dynamic batch dimension");
    decision.localBatch = leadingDim(declared.front());
    decision.why = "dimension 0 is the model's dynamic batch dimension";
    SmallVector<Operation *> ops(declared.begin(), declared.end());
    if (auto layout = analyzeBatch(func, ops, decision.localBatch))
      setSampleStrides(func, *layout);
    else
      decision.why += "; note: " + llvm::toString(layout.takeError()) +
                      ", so the ranks' results can differ from one process's";
    return finish(declared);
  }

  // A static export: the candidates share the most common leading
  // dimension (the first input's on a tie), or are the ones given.
  SmallVector<px::InputOp> candidates;
  std::string chosenBy;
  if (!options.batchInputs.empty()) {
    for (const std::string &name : options.batchInputs)
      candidates.push_back(byName[name]);
    for (px::InputOp in : candidates)
      if (leadingDim(in) < 1 || leadingDim(in) != leadingDim(candidates.front()))
        return error("--batch-inputs: " + namesOf(candidates) +
                     " do not share a leading dimension");
    chosenBy = "as --batch-inputs says";
  } else {
    std::map<int64_t, int> count;
    for (px::InputOp in : inputs)
      if (leadingDim(in) >= 1 && !shared.contains(in.getName()))
        ++count[leadingDim(in)];
    int64_t best = -1;
    for (px::InputOp in : inputs)
      if (count.count(leadingDim(in)) &&
          (best < 0 || count[leadingDim(in)] > count[best]))
        best = leadingDim(in);
    for (px::InputOp in : inputs)
      if (leadingDim(in) == best && !shared.contains(in.getName()))
        candidates.push_back(in);
    chosenBy = candidates.size() > 1 ? "the leading dimension they share"
                                     : "the most common leading dimension";
  }

  auto attempt = [&](ArrayRef<px::InputOp> batched) -> llvm::Expected<BatchLayout> {
    if (batched.empty())
      return error("no input has a leading dimension");
    if (leadingDim(batched.front()) < 2)
      return error("the model was exported with a batch of " +
                   llvm::Twine(leadingDim(batched.front())) +
                   " sample, which cannot show which dimensions are the batch");
    SmallVector<Operation *> ops(batched.begin(), batched.end());
    return analyzeBatch(func, ops, leadingDim(batched.front()));
  };
  std::optional<BatchLayout> layout;
  std::string firstFailure, leftOut;
  if (auto l = attempt(candidates))
    layout = std::move(*l);
  else
    firstFailure = llvm::toString(l.takeError());
  // All together failed: one of them may only have the batch's length by
  // chance. Taken if exactly one candidate left out gives a batch.
  if (!layout && options.batchInputs.empty() && candidates.size() > 1) {
    SmallVector<std::pair<size_t, BatchLayout>> found;
    for (size_t i = 0; i < candidates.size(); ++i) {
      SmallVector<px::InputOp> fewer(candidates);
      fewer.erase(fewer.begin() + i);
      if (auto l = attempt(fewer))
        found.emplace_back(i, std::move(*l));
      else
        llvm::consumeError(l.takeError());
    }
    if (found.size() == 1) {
      auto &[i, l] = found.front();
      leftOut = "'" + candidates[i].getName().str() +
                "' is shared: taken as batched, " + firstFailure;
      candidates.erase(candidates.begin() + i);
      layout = std::move(l);
    } else if (found.size() > 1) {
      firstFailure += "; and leaving out any one of " + namesOf(candidates) +
                      " gives a different batch";
    }
  }

  bool mustSplit = options.ranks > 1 || options.globalBatch > 0;
  bool ofOne = !candidates.empty() && leadingDim(candidates.front()) == 1;
  if (!layout && !mustSplit) {
    // One process runs the model whole; with one sample per step the inputs
    // still read [N, ...] data.
    if (!ofOne) {
      decision.why = "none: every input is read whole each step (" +
                     firstFailure + ")";
      return finish({});
    }
    decision.localBatch = 1;
    decision.why = "exported with a batch of 1 sample";
    Builder b(module.getContext());
    for (px::InputOp in : candidates)
      in.setBatchedAttr(b.getUnitAttr());
    return finish(candidates);
  }
  if (!layout && ofOne)
    return error("the model was exported with a batch of 1 sample, which "
                 "cannot be split or show which dimensions are the batch: "
                 "export it with the batch you train with (2 samples or "
                 "more), or with dynamic_axes={NAME: {0: 'batch'}, ...}");
  if (!layout)
    return error("cannot tell which inputs hold the batch of this static "
                 "model: " + firstFailure +
                 ". Pass --batch-inputs NAMES (the inputs whose dimension 0 "
                 "holds the samples) or --shared-inputs NAMES (inputs that "
                 "are the same for every sample), or export the model with "
                 "dynamic_axes={NAME: {0: 'batch'}, ...}");

  int64_t global = options.globalBatch > 0 ? options.globalBatch : layout->batch;
  if (global % options.ranks != 0)
    return error("the global batch of " + llvm::Twine(global) +
                 " samples does not split evenly over " +
                 llvm::Twine(options.ranks) +
                 " ranks (choose --batch-size a multiple of the rank count)");
  decision.localBatch = global / options.ranks;
  if (auto err = rebatch(module, func, *layout, candidates, decision.localBatch))
    return std::move(err);
  decision.why = "exported with a static batch of " + llvm::Twine(layout->batch).str() +
                 " samples: " + chosenBy +
                 ", and every op keeps the samples apart (only the loss's "
                 "mean and batch normalisation combine them)";
  if (!leftOut.empty())
    decision.why += "; " + leftOut;
  return finish(candidates);
}

std::string describeBatch(const BatchDecision &d) {
  if (d.batched.empty())
    return "batch: " + d.why + "\n";
  std::string s = "batch: " + nameList(d.batched) + " hold " +
                  std::to_string(d.localBatch) + " samples per rank and step (" +
                  d.why + ")";
  if (!d.shared.empty())
    s += "; " + nameList(d.shared) + " the same for every sample";
  return s + "\n";
}

namespace {

struct PxSplitBatchPass : impl::PxSplitBatchBase<PxSplitBatchPass> {
  using PxSplitBatchBase::PxSplitBatchBase;
  void runOnOperation() override {
    SplitBatchOptions options;
    options.batchInputs.assign(inputs.begin(), inputs.end());
    options.sharedInputs.assign(shared.begin(), shared.end());
    options.globalBatch = batchSize;
    options.ranks = std::max<int64_t>(1, ranks);
    auto decision = splitBatch(getOperation(), options);
    if (!decision) {
      getOperation().emitError("px-split-batch: ")
          << llvm::toString(decision.takeError());
      return signalPassFailure();
    }
    getOperation().emitRemark(StringRef(describeBatch(*decision)).rtrim());
  }
};

} // namespace
} // namespace parallax

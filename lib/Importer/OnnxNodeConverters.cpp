//===- OnnxNodeConverters.cpp - one ONNX node -> px ops -------------------===//
//
// Every supported ONNX operator, with the attributes it may carry. An
// attribute this file does not list is an error, never silently ignored: a
// model that relies on it would otherwise train differently than it should.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "parallax/Dialect/Px/PxShapes.h"
#include "parallax/Runtime/DType.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace parallax;
using namespace parallax::detail;
using onnx::TensorProto;


llvm::Error GraphImporter::convert(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  // A required input: one that is absent (past the end, or named "", which
  // the checker lets through for variadic inputs) is an error, never a null
  // operand.
  auto in = [&](int i) -> llvm::Expected<Value> {
    auto v = value(node, i);
    if (v && !*v)
      return nodeError(node, "input " + llvm::Twine(i) + " is missing");
    return v;
  };
  // An optional input: a null Value when absent.
  auto optionalIn = [&](int i) { return value(node, i); };
  // Defines output 0 from a freshly made op's result 0.
  auto define0 = [&](llvm::Expected<Operation *> made) -> llvm::Error {
    if (!made)
      return made.takeError();
    for (unsigned i = 0; i < (*made)->getNumResults(); ++i)
      define(node, i, (*made)->getResult(i));
    return llvm::Error::success();
  };
  auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  auto i64s = [&](ArrayRef<int64_t> v) { return b.getDenseI64ArrayAttr(v); };

  // Elementwise binary ops.
  auto binary = [&](auto tag) -> llvm::Error {
    using OpTy = decltype(tag);
    if (auto err = checkAttributes(node, {}))
      return err;
    auto lhs = in(0), rhs = in(1);
    if (!lhs || !rhs)
      return lhs ? rhs.takeError() : lhs.takeError();
    return define0(make<OpTy>(node, ValueRange{*lhs, *rhs}, {}));
  };
  if (op == "Add") return binary(px::AddOp());
  if (op == "Sub") return binary(px::SubOp());
  if (op == "Mul") return binary(px::MulOp());
  if (op == "Div") return binary(px::DivOp());
  if (op == "Pow") return binary(px::PowOp());
  if (op == "Equal") return binary(px::EqualOp());
  if (op == "Less") return binary(px::LessOp());
  if (op == "Greater") return binary(px::GreaterOp());
  if (op == "MatMul") return binary(px::MatMulOp());

  // Variadic Max/Min: a chain of binary ops.
  if (op == "Max" || op == "Min") {
    if (auto err = checkAttributes(node, {}))
      return err;
    auto acc = in(0);
    if (!acc)
      return acc.takeError();
    Value result = *acc;
    for (int i = 1; i < node.input_size(); ++i) {
      auto next = in(i);
      if (!next)
        return next.takeError();
      auto made = op == "Max"
                      ? make<px::MaxOp>(node, ValueRange{result, *next}, {})
                      : make<px::MinOp>(node, ValueRange{result, *next}, {});
      if (!made)
        return made.takeError();
      result = (*made)->getResult(0);
    }
    define(node, 0, result);
    return llvm::Error::success();
  }

  // Elementwise unary ops.
  auto unary = [&](auto tag, ArrayRef<NamedAttribute> attrs = {},
                   std::initializer_list<const char *> known = {}) -> llvm::Error {
    using OpTy = decltype(tag);
    if (auto err = checkAttributes(node, known))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    return define0(make<OpTy>(node, ValueRange{*x}, attrs, x->getType()));
  };
  if (op == "Neg") return unary(px::NegOp());
  if (op == "Abs") return unary(px::AbsOp());
  if (op == "Sqrt") return unary(px::SqrtOp());
  if (op == "Reciprocal") return unary(px::ReciprocalOp());
  if (op == "Exp") return unary(px::ExpOp());
  if (op == "Log") return unary(px::LogOp());
  if (op == "Relu") return unary(px::ReluOp());
  if (op == "Tanh") return unary(px::TanhOp());
  if (op == "Sigmoid") return unary(px::SigmoidOp());
  if (op == "Erf") return unary(px::ErfOp());
  if (op == "Not") return unary(px::NotOp());
  if (op == "LeakyRelu")
    return unary(px::LeakyReluOp(),
                 {named("alpha", b.getF32FloatAttr(attrFloat(node, "alpha", 0.01f)))},
                 {"alpha"});

  if (op == "Clip") {
    if (auto err = checkAttributes(node, {}))
      return err;
    SmallVector<NamedAttribute> attrs;
    for (auto [index, name] : {std::pair<int, const char *>{1, "min"}, {2, "max"}}) {
      auto bound = constInput(node, index, name, /*required=*/false);
      if (!bound)
        return bound.takeError();
      if (*bound) {
        if ((*bound)->size() != 1)
          return nodeError(node, llvm::Twine(name) + " must be a scalar");
        attrs.push_back(named(name, b.getF64FloatAttr((*bound)->values[0])));
      }
    }
    auto x = in(0);
    if (!x)
      return x.takeError();
    return define0(make<px::ClipOp>(node, ValueRange{*x}, attrs, x->getType()));
  }

  if (op == "Cast") {
    if (auto err = checkAttributes(node, {"to", "saturate"}))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    int32_t to = (int32_t)attrInt(node, "to", 0);
    auto elem = elementType(to, "Cast target");
    if (!elem) {
      // elementType's error already names the file; say it once.
      llvm::consumeError(elem.takeError());
      return nodeError(node, "unsupported target type " +
                                 TensorProto::DataType_Name(
                                     (TensorProto::DataType)to));
    }
    auto type = RankedTensorType::get(typeOf(*x).getShape(), *elem);
    if (type == x->getType()) {
      define(node, 0, *x);
      return llvm::Error::success();
    }
    return define0(make<px::CastOp>(node, ValueRange{*x}, {}, type));
  }

  if (op == "Where") {
    if (auto err = checkAttributes(node, {}))
      return err;
    auto c = in(0), x = in(1), y = in(2);
    if (!c || !x || !y)
      return !c ? c.takeError() : !x ? x.takeError() : y.takeError();
    return define0(make<px::WhereOp>(node, ValueRange{*c, *x, *y}, {}));
  }

  if (op == "Identity") {
    auto x = in(0);
    if (!x)
      return x.takeError();
    define(node, 0, *x);
    return llvm::Error::success();
  }

  // Indexing.
  if (op == "Gather" || op == "GatherElements") {
    if (auto err = checkAttributes(node, {"axis"}))
      return err;
    auto data = in(0), indices = in(1);
    if (!data || !indices)
      return !data ? data.takeError() : indices.takeError();
    int64_t axis = attrInt(node, "axis", 0);
    SmallVector<NamedAttribute> attrs{named("axis", b.getI64IntegerAttr(axis))};
    // Constant indices out of range are the model's error: said here, naming
    // the node, rather than by the kernel at the first step.
    auto known = consts.find(node.input(1));
    auto dataShape = cast<RankedTensorType>(data->getType()).getShape();
    if (op == "Gather" && known != consts.end() && axis >= -(int64_t)dataShape.size() &&
        axis < (int64_t)dataShape.size()) {
      int64_t a = axis < 0 ? axis + (int64_t)dataShape.size() : axis, n = dataShape[a];
      for (int64_t i : known->second.asInts())
        if (i < -n || i >= n)
          return nodeError(node, "index " + llvm::Twine(i) + " is out of range [" +
                                     llvm::Twine(-n) + ", " + llvm::Twine(n) +
                                     ") of axis " + llvm::Twine(a));
    }
    if (op == "Gather")
      return define0(make<px::GatherOp>(node, ValueRange{*data, *indices}, attrs));
    return define0(
        make<px::GatherElementsOp>(node, ValueRange{*data, *indices}, attrs));
  }

  if (op == "Slice") {
    if (auto err = checkAttributes(node, {}))
      return err;
    auto dynamic = tryDynamicSlice(node);
    if (!dynamic || *dynamic)
      return dynamic ? llvm::Error::success() : dynamic.takeError();
    auto x = in(0);
    if (!x)
      return x.takeError();
    std::optional<ConstTensor> parts[5];
    const char *roles[] = {"data", "starts", "ends", "axes", "steps"};
    for (int i = 1; i < 5; ++i) {
      auto c = constInput(node, i, roles[i], /*required=*/i < 3);
      if (!c)
        return c.takeError();
      parts[i] = *c;
    }
    auto shape = typeOf(*x).getShape();
    auto slice = normalizeSlice(
        std::vector<int64_t>(shape.begin(), shape.end()), parts[1]->asInts(),
        parts[2]->asInts(), parts[3] ? parts[3]->asInts() : std::vector<int64_t>{},
        parts[4] ? parts[4]->asInts() : std::vector<int64_t>{});
    if (!slice)
      return nodeError(node, llvm::toString(slice.takeError()));
    auto type = RankedTensorType::get(slice->count, typeOf(*x).getElementType());
    return define0(make<px::SliceOp>(
        node, ValueRange{*x},
        {named("starts", i64s(slice->begin)), named("steps", i64s(slice->step))},
        type));
  }

  if (op == "Split") {
    if (auto err = checkAttributes(node, {"axis"}))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    auto shape = typeOf(*x).getShape();
    auto axis = px::normalizeAxis(attrInt(node, "axis", 0), shape.size());
    if (!axis)
      return nodeError(node, "axis is out of range");
    auto split = constInput(node, 1, "split", /*required=*/false);
    if (!split)
      return split.takeError();
    std::vector<int64_t> sizes;
    int64_t n = node.output_size();
    if (*split) {
      sizes = (*split)->asInts();
    } else {
      if (shape[*axis] % n != 0)
        return nodeError(node, "dimension " + llvm::Twine(shape[*axis]) +
                                   " does not split evenly into " +
                                   llvm::Twine(n) + " outputs");
      sizes.assign(n, shape[*axis] / n);
    }
    int64_t total = 0;
    for (int64_t s : sizes)
      total += s;
    if ((int64_t)sizes.size() != n || total != shape[*axis])
      return nodeError(node, "split sizes do not add up to dimension " +
                                 llvm::Twine(shape[*axis]));
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1),
          out(shape);
      starts[*axis] = offset;
      out[*axis] = sizes[i];
      offset += sizes[i];
      auto made = make<px::SliceOp>(
          node, ValueRange{*x},
          {named("starts", i64s(starts)), named("steps", i64s(steps))},
          RankedTensorType::get(out, typeOf(*x).getElementType()));
      if (!made)
        return made.takeError();
      define(node, i, (*made)->getResult(0));
    }
    return llvm::Error::success();
  }

  // Shape manipulation: all of these are px.reshape.
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze") {
    if (auto err = checkAttributes(
            node, op == "Reshape" ? std::initializer_list<const char *>{"allowzero"}
                  : op == "Flatten" ? std::initializer_list<const char *>{"axis"}
                                    : std::initializer_list<const char *>{}))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    auto inShape = typeOf(*x).getShape();
    int64_t rank = inShape.size();
    SmallVector<int64_t> shape;
    if (op == "Flatten") {
      // Flatten's axis lies in [-r, r]; a negative one counts from the back
      // of the input's r dimensions (-1 is r - 1), not of r + 1.
      int64_t axisValue = attrInt(node, "axis", 1);
      std::optional<int64_t> axis;
      if (axisValue >= -rank && axisValue <= rank)
        axis = axisValue < 0 ? axisValue + rank : axisValue;
      if (!axis)
        return nodeError(node, "axis is out of range");
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < rank; ++d)
        (d < *axis ? outer : inner) *= inShape[d];
      shape = {outer, inner};
    } else if (op == "Reshape") {
      auto target = constInput(node, 1, "shape", /*required=*/true);
      if (!target)
        return target.takeError();
      bool allowZero = attrInt(node, "allowzero", 0) != 0;
      int64_t known = 1, inferred = -1;
      for (int64_t d : (*target)->asInts()) {
        if (d == 0 && !allowZero) {
          if ((int64_t)shape.size() >= rank)
            return nodeError(node, "0 in the shape has no input dimension to copy");
          d = inShape[shape.size()];
        }
        if (d == -1) {
          if (inferred >= 0)
            return nodeError(node, "the shape has more than one -1");
          inferred = shape.size();
        } else if (d < 0) {
          return nodeError(node, "invalid dimension " + llvm::Twine(d));
        } else {
          if (d && known > rt::kMaxTensorElements / d)
            return nodeError(node, "the shape's dimensions multiply past 2^50, the "
                                   "most elements a tensor may have");
          known *= d;
        }
        shape.push_back(d);
      }
      if (inferred >= 0) {
        int64_t total = px::numElements(inShape);
        if (known == 0 || total % known != 0)
          return nodeError(node, "cannot infer -1 when reshaping " +
                                     px::shapeToString(inShape));
        shape[inferred] = total / known;
      }
    } else {
      auto axesT = constInput(node, 1, "axes", /*required=*/op == "Unsqueeze");
      if (!axesT)
        return axesT.takeError();
      std::vector<int64_t> axes = *axesT ? (*axesT)->asInts() : std::vector<int64_t>{};
      if (op == "Unsqueeze") {
        int64_t outRank = rank + axes.size();
        SmallVector<bool> inserted(outRank, false);
        for (int64_t a : axes) {
          auto n = px::normalizeAxis(a, outRank);
          if (!n || inserted[*n])
            return nodeError(node, "invalid unsqueeze axis " + llvm::Twine(a));
          inserted[*n] = true;
        }
        for (int64_t d = 0, k = 0; d < outRank; ++d)
          shape.push_back(inserted[d] ? 1 : inShape[k++]);
      } else {
        SmallVector<bool> removed(rank, axes.empty());
        for (int64_t a : axes) {
          auto n = px::normalizeAxis(a, rank);
          if (!n || inShape[*n] != 1)
            return nodeError(node, "cannot squeeze axis " + llvm::Twine(a) +
                                       " of shape " + px::shapeToString(inShape));
          removed[*n] = true;
        }
        for (int64_t d = 0; d < rank; ++d)
          if (!removed[d] || inShape[d] != 1)
            shape.push_back(inShape[d]);
      }
    }
    auto r = reshape(node, *x, shape);
    if (!r)
      return r.takeError();
    define(node, 0, *r);
    return llvm::Error::success();
  }

  if (op == "Expand") {
    if (auto err = checkAttributes(node, {}))
      return err;
    auto x = in(0);
    auto target = constInput(node, 1, "shape", /*required=*/true);
    if (!x || !target)
      return !x ? x.takeError() : target.takeError();
    auto shape = px::broadcastShapes(typeOf(*x).getShape(), (*target)->asInts());
    if (!shape)
      return nodeError(node, "shape " + px::shapeToString(typeOf(*x).getShape()) +
                                 " does not broadcast to " +
                                 px::shapeToString((*target)->asInts()));
    auto type = RankedTensorType::get(*shape, typeOf(*x).getElementType());
    if (type == x->getType()) {
      define(node, 0, *x);
      return llvm::Error::success();
    }
    return define0(make<px::ExpandOp>(node, ValueRange{*x}, {}, type));
  }

  if (op == "Transpose") {
    if (auto err = checkAttributes(node, {"perm"}))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    int64_t rank = typeOf(*x).getRank();
    std::vector<int64_t> perm = attrInts(node, "perm");
    if (perm.empty())
      for (int64_t d = rank - 1; d >= 0; --d)
        perm.push_back(d);
    return define0(
        make<px::TransposeOp>(node, ValueRange{*x}, {named("perm", i64s(perm))}));
  }

  if (op == "Concat") {
    if (auto err = checkAttributes(node, {"axis"}))
      return err;
    SmallVector<Value> inputs;
    for (int i = 0; i < node.input_size(); ++i) {
      auto v = in(i);
      if (!v)
        return v.takeError();
      inputs.push_back(*v);
    }
    return define0(make<px::ConcatOp>(
        node, inputs, {named("axis", b.getI64IntegerAttr(attrInt(node, "axis", 0)))}));
  }

  // Reductions.
  if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax") {
    auto read = reductionAxes(node);
    if (!read)
      return read.takeError();
    std::vector<int64_t> axes = std::move(*read);
    auto x = in(0);
    if (!x)
      return x.takeError();
    int64_t rank = typeOf(*x).getRank();
    if (axes.empty()) {
      if (attrInt(node, "noop_with_empty_axes", 0)) {
        define(node, 0, *x);
        return llvm::Error::success();
      }
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    for (int64_t &a : axes)
      if (auto n = px::normalizeAxis(a, rank))
        a = *n;
    SmallVector<NamedAttribute> attrs{
        named("axes", i64s(axes)),
        named("keepdims", b.getBoolAttr(attrInt(node, "keepdims", 1) != 0))};
    if (op == "ReduceSum")
      return define0(make<px::ReduceSumOp>(node, ValueRange{*x}, attrs));
    if (op == "ReduceMean")
      return define0(make<px::ReduceMeanOp>(node, ValueRange{*x}, attrs));
    return define0(make<px::ReduceMaxOp>(node, ValueRange{*x}, attrs));
  }

  if (op == "GlobalAveragePool") {
    if (auto err = checkAttributes(node, {}))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    SmallVector<int64_t> axes;
    for (int64_t d = 2; d < typeOf(*x).getRank(); ++d)
      axes.push_back(d);
    return define0(make<px::ReduceMeanOp>(
        node, ValueRange{*x},
        {named("axes", i64s(axes)), named("keepdims", b.getBoolAttr(true))}));
  }

  // Linear algebra.
  if (op == "Gemm") {
    if (auto err = checkAttributes(node, {"alpha", "beta", "transA", "transB"}))
      return err;
    SmallVector<Value> operands;
    for (int i = 0; i < std::max(std::min(node.input_size(), 3), 2); ++i) {
      auto v = i < 2 ? in(i) : optionalIn(i);
      if (!v)
        return v.takeError();
      if (*v)
        operands.push_back(*v);
    }
    SmallVector<NamedAttribute> attrs{
        named("alpha", b.getF32FloatAttr(attrFloat(node, "alpha", 1.0f))),
        named("beta", b.getF32FloatAttr(attrFloat(node, "beta", 1.0f)))};
    if (attrInt(node, "transA", 0))
      attrs.push_back(named("trans_a", b.getUnitAttr()));
    if (attrInt(node, "transB", 0))
      attrs.push_back(named("trans_b", b.getUnitAttr()));
    return define0(make<px::GemmOp>(node, operands, attrs));
  }

  // Activations with an axis.
  if (op == "Softmax" || op == "LogSoftmax") {
    if (auto err = checkAttributes(node, {"axis"}))
      return err;
    auto x = in(0);
    if (!x)
      return x.takeError();
    SmallVector<NamedAttribute> attrs{
        named("axis", b.getI64IntegerAttr(attrInt(node, "axis", -1)))};
    if (op == "Softmax")
      return define0(make<px::SoftmaxOp>(node, ValueRange{*x}, attrs, x->getType()));
    return define0(make<px::LogSoftmaxOp>(node, ValueRange{*x}, attrs, x->getType()));
  }

  // Losses.
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    if (auto err = checkAttributes(node, {"reduction", "ignore_index"}))
      return err;
    SmallVector<Value> operands;
    for (int i = 0; i < std::max(std::min(node.input_size(), 3), 2); ++i) {
      auto v = i < 2 ? in(i) : optionalIn(i);
      if (!v)
        return v.takeError();
      if (*v)
        operands.push_back(*v);
    }
    std::string reduction = attrString(node, "reduction", "mean");
    if (reduction != "none" && reduction != "sum" && reduction != "mean")
      return nodeError(node, "unsupported reduction '" + reduction + "'");
    SmallVector<NamedAttribute> attrs{
        named("reduction", b.getStringAttr(reduction))};
    if (attr(node, "ignore_index"))
      attrs.push_back(named("ignore_index",
                            b.getI64IntegerAttr(attrInt(node, "ignore_index", 0))));
    if (op == "SoftmaxCrossEntropyLoss")
      return define0(make<px::SoftmaxCrossEntropyLossOp>(node, operands, attrs));
    return define0(make<px::NegativeLogLikelihoodLossOp>(node, operands, attrs));
  }

  // Normalisation.
  if (op == "LayerNormalization") {
    if (auto err = checkAttributes(node, {"axis", "epsilon", "stash_type"}))
      return err;
    if (attrInt(node, "stash_type", 1) != 1)
      return nodeError(node, "unsupported stash_type " +
                                 llvm::Twine(attrInt(node, "stash_type", 1)) +
                                 " (only 1, float32 statistics)");
    SmallVector<Value> operands;
    for (int i = 0; i < std::max(std::min(node.input_size(), 3), 2); ++i) {
      auto v = i < 2 ? in(i) : optionalIn(i);
      if (!v)
        return v.takeError();
      if (*v)
        operands.push_back(*v);
    }
    return define0(make<px::LayerNormOp>(
        node, operands,
        {named("axis", b.getI64IntegerAttr(attrInt(node, "axis", -1))),
         named("epsilon", b.getF32FloatAttr(attrFloat(node, "epsilon", 1e-5f)))}));
  }

  if (op == "BatchNormalization") {
    if (auto err = checkAttributes(node, {"epsilon", "momentum", "training_mode"}))
      return err;
    SmallVector<Value> operands;
    for (int i = 0; i < 5; ++i) {
      auto v = in(i);
      if (!v)
        return v.takeError();
      operands.push_back(*v);
    }
    bool training = attrInt(node, "training_mode", 0) != 0;
    if (!training && node.output_size() > 1)
      return nodeError(node, "inference-mode BatchNormalization has one output");
    SmallVector<NamedAttribute> attrs{
        named("epsilon", b.getF32FloatAttr(attrFloat(node, "epsilon", 1e-5f))),
        named("momentum", b.getF32FloatAttr(attrFloat(node, "momentum", 0.9f)))};
    if (training)
      attrs.push_back(named("training", b.getUnitAttr()));
    // ONNX updates the running variance with the biased batch variance,
    // PyTorch (whose export this may be) with the unbiased one.
    if (training && options.unbiasedBatchnormVariance.value_or(
                        model.producer_name() == "pytorch"))
      attrs.push_back(named("unbiased_running_var", b.getUnitAttr()));
    return define0(make<px::BatchNormOp>(node, operands, attrs));
  }

  if (op == "Dropout") {
    if (auto err = checkAttributes(node, {"seed"}))
      return err;
    auto x = in(0);
    auto ratio = constInput(node, 1, "ratio", /*required=*/false);
    auto training = constInput(node, 2, "training_mode", /*required=*/false);
    if (!x || !ratio || !training)
      return !x ? x.takeError() : !ratio ? ratio.takeError() : training.takeError();
    double r = *ratio ? (*ratio)->values.at(0) : 0.5;
    bool train = *training && (*training)->values.at(0) != 0;
    if (!train || r == 0.0) {
      // Inference mode (or ratio 0) is the identity; its mask is all true.
      define(node, 0, *x);
      if (node.output_size() > 1 && !node.output(1).empty())
        consts[node.output(1)] = ConstTensor{
            TensorProto::BOOL,
            std::vector<int64_t>(typeOf(*x).getShape().begin(),
                                 typeOf(*x).getShape().end()),
            std::vector<double>(typeOf(*x).getNumElements(), 1.0)};
      return llvm::Error::success();
    }
    if (r < 0.0 || r >= 1.0) {
      // %g: "1.5", where std::to_string writes "1.500000".
      std::string got;
      llvm::raw_string_ostream(got) << llvm::format("%g", r);
      return nodeError(node, "ratio must be in [0, 1), got " + got);
    }
    return define0(make<px::DropoutOp>(
        node, ValueRange{*x},
        {named("ratio", b.getF32FloatAttr(r)),
         named("seed", b.getI64IntegerAttr(attrInt(node, "seed", 0)))}));
  }

  // Convolution and pooling.
  if (op == "Conv") {
    if (auto err = checkAttributes(node, {"auto_pad", "dilations", "group",
                                          "kernel_shape", "pads", "strides"}))
      return err;
    SmallVector<Value> operands;
    for (int i = 0; i < std::max(std::min(node.input_size(), 3), 2); ++i) {
      auto v = i < 2 ? in(i) : optionalIn(i);
      if (!v)
        return v.takeError();
      if (*v)
        operands.push_back(*v);
    }
    auto kernel = typeOf(operands[1]).getShape().drop_front(2);
    auto declared = attrInts(node, "kernel_shape");
    if (!declared.empty() && ArrayRef<int64_t>(declared) != kernel)
      return nodeError(node, "kernel_shape does not match the weight's shape");
    SmallVector<int64_t> strides, pads, dilations;
    if (auto err = convertWindow(node, operands[0], kernel, strides, pads, dilations))
      return err;
    return define0(make<px::ConvOp>(
        node, operands,
        {named("strides", i64s(strides)), named("pads", i64s(pads)),
         named("dilations", i64s(dilations)),
         named("group", b.getI64IntegerAttr(attrInt(node, "group", 1)))}));
  }

  if (op == "MaxPool" || op == "AveragePool") {
    bool isMax = op == "MaxPool";
    if (auto err = checkAttributes(
            node, isMax ? std::initializer_list<const char *>{"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}
                        : std::initializer_list<const char *>{"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}))
      return err;
    if (isMax && attrInt(node, "storage_order", 0) != 0)
      return nodeError(node, "unsupported storage_order 1 (column major)");
    if (isMax && node.output_size() > 1 && !node.output(1).empty())
      return nodeError(node, "the Indices output of MaxPool is not supported");
    auto x = in(0);
    if (!x)
      return x.takeError();
    auto kernel = attrInts(node, "kernel_shape");
    if (kernel.empty())
      return nodeError(node, "kernel_shape is required");
    SmallVector<int64_t> strides, pads, dilations;
    if (auto err = convertWindow(node, *x, kernel, strides, pads, dilations))
      return err;
    SmallVector<NamedAttribute> attrs{named("kernel_shape", i64s(kernel)),
                                      named("strides", i64s(strides)),
                                      named("pads", i64s(pads))};
    if (attrInt(node, "ceil_mode", 0))
      attrs.push_back(named("ceil_mode", b.getUnitAttr()));
    if (isMax) {
      attrs.push_back(named("dilations", i64s(dilations)));
      return define0(make<px::MaxPoolOp>(node, ValueRange{*x}, attrs));
    }
    if (attrInt(node, "count_include_pad", 0))
      attrs.push_back(named("count_include_pad", b.getUnitAttr()));
    return define0(make<px::AveragePoolOp>(node, ValueRange{*x}, attrs));
  }

  // Recurrent layers (RecurrentConverters.cpp).
  if (op == "LSTM" || op == "GRU" || op == "RNN")
    return convertRecurrent(node);

  // Compile-time-only ops reach here when an input depends on runtime data.
  if (op == "Range" || op == "ConstantOfShape")
    return nodeError(node, "its inputs depend on runtime data; only "
                           "compile-time shape computations are supported");

  auto math = convertMath(node);
  if (!math || *math)
    return math ? llvm::Error::success() : math.takeError();
  auto tensor = convertTensor(node);
  if (!tensor || *tensor)
    return tensor ? llvm::Error::success() : tensor.takeError();
  return unsupported(node, "unsupported operator '" + op + "'" + whyUnsupported(op));
}

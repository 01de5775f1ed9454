//===- OnnxTensorConverters.cpp - padding, layout, indexing, layers -------===//
//
// ONNX operators that move data (Pad, Tile, DepthToSpace, ...), index with
// tensors (GatherND, ScatterElements, ScatterND, OneHot, Trilu), contract
// (Einsum) or are network layers expressible through other px ops
// (ConvTranspose as px.conv_grad_input, InstanceNormalization, LRN, ...).
// Shape operands must be compile-time values, as everywhere in px.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "parallax/Dialect/Px/PxShapes.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <map>
#include <numeric>

using namespace mlir;
using namespace parallax;
using namespace parallax::detail;
using onnx::TensorProto;

namespace {

int64_t product(ArrayRef<int64_t> v) {
  int64_t n = 1;
  for (int64_t d : v)
    n *= d;
  return n;
}

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

} // namespace

//===----------------------------------------------------------------------===//
// Why an operator is not supported
//===----------------------------------------------------------------------===//

std::string parallax::detail::whyUnsupported(llvm::StringRef op) {
  static const std::pair<const char *, const char *> kReasons[] = {
      {"NonZero", "its output's length depends on the data, and px shapes are static"},
      {"Unique", "its output's length depends on the data, and px shapes are static"},
      {"NonMaxSuppression", "its output's length depends on the data, and px shapes are static"},
      {"SequenceConstruct", "sequence values: px has tensors only"},
      {"SequenceEmpty", "sequence values: px has tensors only"},
      {"SequenceInsert", "sequence values: px has tensors only"},
      {"SequenceAt", "sequence values: px has tensors only"},
      {"SequenceLength", "sequence values: px has tensors only"},
      {"SequenceErase", "sequence values: px has tensors only"},
      {"SequenceMap", "sequence values: px has tensors only"},
      {"SplitToSequence", "sequence values: px has tensors only"},
      {"ConcatFromSequence", "sequence values: px has tensors only"},
      {"Optional", "optional values: px has tensors only"},
      {"OptionalGetElement", "optional values: px has tensors only"},
      {"OptionalHasElement", "optional values: px has tensors only"},
      {"StringNormalizer", "string tensors: px has numeric tensors only"},
      {"TfIdfVectorizer", "text featurization, not a trainable layer"},
      {"QuantizeLinear", "8-bit quantized inference, not training"},
      {"DequantizeLinear", "8-bit quantized inference, not training"},
      {"DynamicQuantizeLinear", "8-bit quantized inference, not training"},
      {"QLinearConv", "8-bit quantized inference, not training"},
      {"QLinearMatMul", "8-bit quantized inference, not training"},
      {"ConvInteger", "8-bit quantized inference, not training"},
      {"MatMulInteger", "8-bit quantized inference, not training"},
      {"BitShift", "unsigned integer tensors are not supported"},
  };
  for (const auto &[name, reason] : kReasons)
    if (op == name)
      return std::string(": ") + reason;
  return "";
}

//===----------------------------------------------------------------------===//
// Compile-time values from shapes
//===----------------------------------------------------------------------===//

llvm::Expected<bool> GraphImporter::foldFromShapes(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  if (op == "BlackmanWindow" || op == "HammingWindow" || op == "HannWindow")
    return foldWindow(node);
  if (op == "Size") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
  } else if (op == "EyeLike") {
    if (auto err = checkAttributes(node, {"dtype", "k"}))
      return std::move(err);
  } else {
    return false;
  }
  std::vector<int64_t> shape;
  int32_t dtype = TensorProto::FLOAT;
  if (auto known = consts.find(node.input(0)); known != consts.end()) {
    shape = known->second.shape;
    dtype = known->second.dtype;
  } else {
    auto x = value(node, 0);
    if (!x)
      return x.takeError();
    auto type = cast<RankedTensorType>(x->getType());
    shape.assign(type.getShape().begin(), type.getShape().end());
    Type elem = type.getElementType();
    dtype = elem.isF64() ? TensorProto::DOUBLE
            : elem.isF16() ? TensorProto::FLOAT16
            : elem.isBF16() ? TensorProto::BFLOAT16
            : elem.isInteger(64) ? TensorProto::INT64
            : elem.isInteger(32) ? TensorProto::INT32
            : elem.isInteger(16) ? TensorProto::INT16
            : elem.isInteger(8) ? TensorProto::INT8
            : elem.isInteger(1) ? TensorProto::BOOL
                                : TensorProto::FLOAT;
  }
  if (op == "Size") {
    consts[node.output(0)] =
        ConstTensor{TensorProto::INT64, {}, {(double)product(shape)}};
    return true;
  }
  if (shape.size() != 2)
    return nodeError(node, "EyeLike needs a 2-D input");
  if (const auto *a = attr(node, "dtype"))
    dtype = (int32_t)a->i();
  int64_t k = attrInt(node, "k", 0);
  if (shape[0] * shape[1] > kMaxEvaluatedElements)
    return nodeError(node, "the result is too large to build at compile time");
  ConstTensor eye{dtype, shape, std::vector<double>(shape[0] * shape[1], 0.0)};
  for (int64_t i = 0; i < shape[0]; ++i)
    if (i + k >= 0 && i + k < shape[1])
      eye.values[i * shape[1] + i + k] = 1.0;
  consts[node.output(0)] = eye;
  return true;
}

/// The window functions of ONNX 17 (signal processing), from their size:
/// a compile-time constant. Periodic windows have N + 1 points of which the
/// last is dropped.
llvm::Expected<bool> GraphImporter::foldWindow(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  if (auto err = checkAttributes(node, {"output_datatype", "periodic"}))
    return std::move(err);
  auto size = constInput(node, 0, "size", /*required=*/true);
  if (!size)
    return size.takeError();
  if ((*size)->size() != 1)
    return nodeError(node, "size must have one element");
  int64_t n = toInt64((*size)->values[0]);
  if (n < 0 || n > kMaxEvaluatedElements)
    return nodeError(node, "size " + llvm::Twine(n) + " is out of range");
  bool periodic = attrInt(node, "periodic", 1) != 0;
  double denom = periodic ? (double)n : (double)n - 1;
  ConstTensor w{(int32_t)attrInt(node, "output_datatype", TensorProto::FLOAT), {n}, {}};
  for (int64_t i = 0; i < n; ++i) {
    double x = denom > 0 ? 2 * M_PI * i / denom : 0.0;
    double v = op == "HannWindow"      ? 0.5 - 0.5 * std::cos(x)
               : op == "HammingWindow" ? 25.0 / 46 - 21.0 / 46 * std::cos(x)
                                       : 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
    w.values.push_back(castTo(w.dtype, v));
  }
  consts[node.output(0)] = w;
  return true;
}

//===----------------------------------------------------------------------===//
// Converters
//===----------------------------------------------------------------------===//

llvm::Expected<bool> GraphImporter::convertTensor(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  Composer c(*this, node);
  auto typeOf = Composer::typeOf;
  auto i64s = [&](ArrayRef<int64_t> v) { return b.getDenseI64ArrayAttr(v); };

  if (op == "Pad") {
    if (auto err = checkAttributes(node, {"mode"}))
      return std::move(err);
    std::string mode = attrString(node, "mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      return nodeError(node, "unsupported mode '" + mode + "'");
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto pads = constInput(node, 1, "pads", /*required=*/true);
    if (!pads)
      return pads.takeError();
    auto value = constInput(node, 2, "constant_value", /*required=*/false);
    if (!value)
      return value.takeError();
    if (node.input_size() > 3 && !node.input(3).empty())
      return nodeError(node, "the axes input (opset 18) is not supported");
    std::vector<int64_t> p = (*pads)->asInts();
    if ((int64_t)p.size() != 2 * typeOf(x).getRank())
      return nodeError(node, "pads has " + llvm::Twine(p.size()) +
                                 " values for a tensor of rank " +
                                 llvm::Twine(typeOf(x).getRank()));
    if (llvm::all_of(p, [](int64_t v) { return v == 0; }))
      return c.done(x);
    double fill = *value && (*value)->size() ? (*value)->values[0] : 0.0;
    return c.done(c.make<px::PadOp>(
        {x}, {named("pads", i64s(p)), named("mode", b.getStringAttr(mode)),
              named("value", b.getF64FloatAttr(fill))}));
  }

  if (op == "Tile") { // x viewed as [1, s0, 1, s1, ...], expanded, merged
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto repeats = constInput(node, 1, "repeats", /*required=*/true);
    if (!repeats)
      return repeats.takeError();
    auto shape = typeOf(x).getShape();
    std::vector<int64_t> r = (*repeats)->asInts();
    if (r.size() != shape.size())
      return nodeError(node, "repeats must have one value per dimension");
    SmallVector<int64_t> split, expanded, merged;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (r[d] < 0)
        return nodeError(node, "repeats must not be negative");
      split.append({1, shape[d]});
      expanded.append({r[d], shape[d]});
      merged.push_back(r[d] * shape[d]);
    }
    return c.done(c.reshape(c.expand(c.reshape(x, split), expanded), merged));
  }

  if (op == "Trilu") { // where(mask, x, 0) with a constant triangle mask
    if (auto err = checkAttributes(node, {"upper"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto k = constInput(node, 1, "k", /*required=*/false);
    if (!k)
      return k.takeError();
    int64_t diag = *k ? toInt64((*k)->values.at(0)) : 0;
    bool upper = attrInt(node, "upper", 1) != 0;
    auto shape = typeOf(x).getShape();
    if (shape.size() < 2)
      return nodeError(node, "the input must have rank >= 2");
    int64_t n = shape[shape.size() - 2], m = shape.back();
    SmallVector<double> mask(n * m);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        mask[i * m + j] = upper ? j - i >= diag : j - i <= diag;
    Value keep = c.constant({n, m}, b.getI1Type(), mask);
    return c.done(c.where(keep, x, c.scalar(0.0, typeOf(x).getElementType())));
  }

  if (op == "OneHot") {
    if (auto err = checkAttributes(node, {"axis"}))
      return std::move(err);
    Value indices = c.in(0), values = c.in(2);
    if (!indices || !values)
      return c.takeError();
    auto depthT = constInput(node, 1, "depth", /*required=*/true);
    if (!depthT)
      return depthT.takeError();
    if ((*depthT)->size() != 1)
      return nodeError(node, "depth must have one element");
    int64_t depth = toInt64((*depthT)->values[0]);
    if (typeOf(values).getNumElements() != 2)
      return nodeError(node, "values must be [off_value, on_value]");
    auto ishape = typeOf(indices).getShape();
    int64_t rank = ishape.size() + 1;
    auto axis = px::normalizeAxis(attrInt(node, "axis", -1), rank);
    if (!axis || depth < 1)
      return nodeError(node, "axis or depth is out of range");
    Type i64 = b.getI64Type();
    Value idx = c.cast(indices, i64); // float indices truncate, as ONNX casts
    idx = c.where(c.less(idx, c.scalar(0, i64)), c.add(idx, c.scalar(depth, i64)),
                  idx);
    SmallVector<int64_t> withAxis(ishape), iotaShape(rank, 1);
    withAxis.insert(withAxis.begin() + *axis, 1);
    iotaShape[*axis] = depth;
    SmallVector<double> iota(depth);
    std::iota(iota.begin(), iota.end(), 0.0);
    Value hit = c.equal(c.reshape(idx, withAxis), c.constant(iotaShape, i64, iota));
    Type elem = typeOf(values).getElementType();
    Value flat = c.reshape(values, {2});
    Value off = c.reshape(c.slice(flat, {0}, {1}, {1}), {});
    Value on = c.reshape(c.slice(flat, {1}, {1}, {1}), {});
    (void)elem;
    return c.done(c.where(hit, on, off));
  }

  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    if (auto err = checkAttributes(node, op == "DepthToSpace"
                                             ? std::initializer_list<const char *>{"blocksize", "mode"}
                                             : std::initializer_list<const char *>{"blocksize"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto s = typeOf(x).getShape();
    int64_t bs = attrInt(node, "blocksize", 0);
    if (s.size() != 4 || bs < 1)
      return nodeError(node, "needs a [N, C, H, W] input and blocksize >= 1");
    int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
    if (op == "SpaceToDepth") {
      if (h % bs || w % bs)
        return nodeError(node, "H and W must be multiples of blocksize");
      return c.done(c.reshape(
          c.transpose(c.reshape(x, {n, ch, h / bs, bs, w / bs, bs}), {0, 3, 5, 1, 2, 4}),
          {n, ch * bs * bs, h / bs, w / bs}));
    }
    if (ch % (bs * bs))
      return nodeError(node, "C must be a multiple of blocksize^2");
    std::string mode = attrString(node, "mode", "DCR");
    int64_t cb = ch / (bs * bs);
    Value t;
    if (mode == "DCR")
      t = c.transpose(c.reshape(x, {n, bs, bs, cb, h, w}), {0, 3, 4, 1, 5, 2});
    else if (mode == "CRD")
      t = c.transpose(c.reshape(x, {n, cb, bs, bs, h, w}), {0, 1, 4, 2, 5, 3});
    else
      return nodeError(node, "unsupported mode '" + mode + "'");
    return c.done(c.reshape(t, {n, cb, h * bs, w * bs}));
  }

  if (op == "GlobalMaxPool") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    SmallVector<int64_t> axes;
    for (int64_t d = 2; d < typeOf(x).getRank(); ++d)
      axes.push_back(d);
    return c.done(c.reduce<px::ReduceMaxOp>(x, axes, true));
  }

  if (op == "InstanceNormalization") {
    if (auto err = checkAttributes(node, {"epsilon"}))
      return std::move(err);
    Value x = c.in(0), scale = c.in(1), bias = c.in(2);
    if (!x || !scale || !bias)
      return c.takeError();
    auto s = typeOf(x).getShape();
    if (s.size() < 3)
      return nodeError(node, "needs an input [N, C, spatial...]");
    SmallVector<int64_t> axes, channel(s.size(), 1);
    for (int64_t d = 2; d < (int64_t)s.size(); ++d)
      axes.push_back(d);
    channel[1] = s[1];
    Type t = typeOf(x).getElementType();
    Value d = c.sub(x, c.reduce<px::ReduceMeanOp>(x, axes, true));
    Value var = c.reduce<px::ReduceMeanOp>(c.mul(d, d), axes, true);
    Value inv = c.unary<px::ReciprocalOp>(c.unary<px::SqrtOp>(
        c.add(var, c.scalar(attrFloat(node, "epsilon", 1e-5f), t))));
    return c.done(c.add(c.mul(c.mul(d, inv), c.reshape(scale, channel)),
                        c.reshape(bias, channel)));
  }

  if (op == "MeanVarianceNormalization") { // ONNX's function body, exactly
    if (auto err = checkAttributes(node, {"axes"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    std::vector<int64_t> axes = attrInts(node, "axes", {0, 2, 3});
    for (int64_t &a : axes)
      if (auto n = px::normalizeAxis(a, typeOf(x).getRank()))
        a = *n;
    Type t = typeOf(x).getElementType();
    Value mean = c.reduce<px::ReduceMeanOp>(x, axes, true);
    Value meanOfSquares = c.reduce<px::ReduceMeanOp>(c.mul(x, x), axes, true);
    Value std = c.unary<px::SqrtOp>(c.sub(meanOfSquares, c.mul(mean, mean)));
    return c.done(c.div(c.sub(x, mean), c.add(std, c.scalar(1e-9, t))));
  }

  if (op == "LRN") { // x / (bias + alpha / size * sum of squares)^beta
    if (auto err = checkAttributes(node, {"alpha", "beta", "bias", "size"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto s = typeOf(x).getShape();
    int64_t size = attrInt(node, "size", 0);
    if (s.size() < 3 || size < 1)
      return nodeError(node, "needs an input [N, C, spatial...] and size >= 1");
    Type t = typeOf(x).getElementType();
    // The channel window sum as an average pool over [N, 1, C, rest] with
    // the padding counted, times size.
    int64_t rest = product(s.drop_front(2));
    Value sq = c.reshape(c.mul(x, x), {s[0], 1, s[1], rest});
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    Value avg = c.make<px::AveragePoolOp>(
        {sq}, {named("kernel_shape", i64s({size, 1})), named("strides", i64s({1, 1})),
               named("pads", i64s({before, 0, after, 0})),
               named("count_include_pad", b.getUnitAttr())});
    double alpha = attrFloat(node, "alpha", 1e-4f), beta = attrFloat(node, "beta", 0.75f),
           bias = attrFloat(node, "bias", 1.0f);
    Value denom = c.add(c.scalar(bias, t), c.mul(c.reshape(avg, s), c.scalar(alpha, t)));
    return c.done(c.div(x, c.make<px::PowOp>({denom, c.scalar(beta, t)})));
  }

  if (op == "GatherND" || op == "ScatterND") {
    bool gather = op == "GatherND";
    if (auto err = checkAttributes(node, gather ? std::initializer_list<const char *>{"batch_dims"}
                                                : std::initializer_list<const char *>{"reduction"}))
      return std::move(err);
    Value data = c.in(0), indices = c.in(1);
    Value updates = gather ? Value() : c.in(2);
    if (!data || !indices || (!gather && !updates))
      return c.takeError();
    auto ds = typeOf(data).getShape(), is = typeOf(indices).getShape();
    int64_t batch = gather ? attrInt(node, "batch_dims", 0) : 0;
    if (is.empty())
      return nodeError(node, "indices must have rank >= 1");
    int64_t k = is.back();
    if (batch < 0 || batch + k > (int64_t)ds.size() || batch >= (int64_t)is.size())
      return nodeError(node, "indices do not fit the data's rank");
    // A flat row index per index tuple into data viewed as
    // [prod(batch dims) * prod(indexed dims), rest...].
    Type i64 = b.getI64Type();
    ArrayRef<int64_t> indexed = ds.slice(batch, k);
    SmallVector<double> dims, strides;
    for (int64_t d : indexed)
      dims.push_back(d);
    for (int64_t st : stridesOf(indexed))
      strides.push_back(st);
    Value idx = c.cast(indices, i64);
    idx = c.where(c.less(idx, c.scalar(0, i64)), c.add(idx, c.constant({k}, i64, dims)), idx);
    Value rows = c.reduce<px::ReduceSumOp>(c.mul(idx, c.constant({k}, i64, strides)),
                                           {(int64_t)is.size() - 1}, false);
    SmallVector<int64_t> tupleShape(is.drop_back());
    int64_t batchCount = product(ds.take_front(batch)), perBatch = product(indexed);
    if (batch > 0) {
      SmallVector<int64_t> offShape(tupleShape.size(), 1);
      for (int64_t d = 0; d < batch; ++d)
        offShape[d] = ds[d];
      SmallVector<double> offsets(batchCount);
      for (int64_t i = 0; i < batchCount; ++i)
        offsets[i] = (double)(i * perBatch);
      rows = c.add(rows, c.constant(offShape, i64, offsets));
    }
    SmallVector<int64_t> flatShape{batchCount * perBatch};
    llvm::append_range(flatShape, ds.drop_front(batch + k));
    Value flat = c.reshape(data, flatShape);
    if (gather)
      return c.done(c.gather(flat, rows, 0));
    std::string reduction = attrString(node, "reduction", "none");
    if (reduction != "none" && reduction != "add")
      return nodeError(node, "unsupported reduction '" + reduction + "'");
    if (!isa<FloatType>(typeOf(data).getElementType()))
      return nodeError(node, "ScatterND is supported on float data only");
    int64_t tuples = product(tupleShape);
    Value rowsFlat = c.reshape(rows, {tuples});
    SmallVector<int64_t> updShape{tuples};
    llvm::append_range(updShape, ds.drop_front(batch + k));
    Value upd = c.reshape(updates, updShape);
    auto scatter = [&](Value u) {
      return c.make<px::ScatterAddOp>({rowsFlat, u}, {named("axis", b.getI64IntegerAttr(0))},
                                      typeOf(flat));
    };
    Value added = c.reshape(scatter(upd), ds);
    if (reduction == "add")
      return c.done(c.add(data, added));
    // Replacement: where an index hits, the update (indices are unique).
    Type t = typeOf(data).getElementType();
    Value ones = c.expand(c.scalar(1.0, t), updShape);
    Value hit = c.greater(c.reshape(scatter(ones), ds), c.scalar(0.0, t));
    return c.done(c.where(hit, added, data));
  }

  if (op == "ScatterElements") {
    if (auto err = checkAttributes(node, {"axis", "reduction"}))
      return std::move(err);
    Value data = c.in(0), indices = c.in(1), updates = c.in(2);
    if (!data || !indices || !updates)
      return c.takeError();
    std::string reduction = attrString(node, "reduction", "none");
    if (reduction != "none" && reduction != "add")
      return nodeError(node, "unsupported reduction '" + reduction + "'");
    if (!isa<FloatType>(typeOf(data).getElementType()))
      return nodeError(node, "ScatterElements is supported on float data only");
    auto axisAttr = named("axis", b.getI64IntegerAttr(attrInt(node, "axis", 0)));
    auto scatter = [&](Value u) {
      return c.make<px::ScatterElementsAddOp>({indices, u}, {axisAttr}, typeOf(data));
    };
    Value added = scatter(updates);
    if (reduction == "add")
      return c.done(c.add(data, added));
    Type t = typeOf(data).getElementType();
    Value ones = c.expand(c.scalar(1.0, t), typeOf(updates).getShape());
    Value hit = c.greater(scatter(ones), c.scalar(0.0, t));
    return c.done(c.where(hit, added, data));
  }

  if (op == "ConvTranspose") {
    // The transposed convolution is the input gradient of a convolution:
    // px.conv_grad_input with the result shape ONNX's rules give.
    if (auto err = checkAttributes(node, {"auto_pad", "dilations", "group",
                                          "kernel_shape", "output_padding",
                                          "output_shape", "pads", "strides"}))
      return std::move(err);
    Value x = c.in(0), w = c.in(1), bias = c.optionalIn(2);
    if (!x || !w)
      return c.takeError();
    auto xs = typeOf(x).getShape(), ws = typeOf(w).getShape();
    int64_t spatial = xs.size() - 2;
    if (spatial < 1 || ws.size() != xs.size())
      return nodeError(node, "needs X [N, C, spatial...] and W of the same rank");
    auto kernel = ws.drop_front(2);
    auto declared = attrInts(node, "kernel_shape");
    if (!declared.empty() && ArrayRef<int64_t>(declared) != kernel)
      return nodeError(node, "kernel_shape does not match the weight's shape");
    auto get = [&](const char *name, int64_t n, int64_t def) {
      auto v = attrInts(node, name);
      if (v.empty())
        v.assign(n, def);
      return SmallVector<int64_t>(v.begin(), v.end());
    };
    SmallVector<int64_t> strides = get("strides", spatial, 1),
                         dilations = get("dilations", spatial, 1),
                         outPad = get("output_padding", spatial, 0),
                         pads = get("pads", 2 * spatial, 0);
    auto outputShape = attrInts(node, "output_shape");
    if ((int64_t)strides.size() != spatial || (int64_t)dilations.size() != spatial ||
        (int64_t)outPad.size() != spatial || (int64_t)pads.size() != 2 * spatial ||
        (!outputShape.empty() && (int64_t)outputShape.size() != spatial))
      return nodeError(node, "strides, dilations, output_padding, output_shape "
                             "or pads have the wrong length");
    std::string autoPad = attrString(node, "auto_pad", "NOTSET");
    int64_t group = attrInt(node, "group", 1);
    SmallVector<int64_t> out{xs[0], ws[1] * group};
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t full = strides[i] * (xs[2 + i] - 1) + outPad[i] +
                     dilations[i] * (kernel[i] - 1) + 1;
      int64_t target = -1;
      if (!outputShape.empty())
        target = outputShape[i];
      else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
        target = xs[2 + i] * strides[i];
      else if (autoPad == "VALID")
        std::fill(pads.begin(), pads.end(), 0);
      else if (autoPad != "NOTSET")
        return nodeError(node, "unsupported auto_pad value '" + autoPad + "'");
      if (target >= 0) {
        // A negative total (an output_shape beyond what the input reaches)
        // pads the result with zeros.
        int64_t total = full - target;
        int64_t half = total / 2;
        bool upper = autoPad != "SAME_LOWER";
        pads[i] = upper ? half : total - half;
        pads[spatial + i] = upper ? total - half : half;
      }
      int64_t size = full - pads[i] - pads[spatial + i];
      if (size < 1)
        return nodeError(node, "the output would be empty");
      out.push_back(size);
    }
    for (int64_t i = 0; i < spatial; ++i)
      if (outPad[i] >= std::max(strides[i], dilations[i]))
        return nodeError(node, "output_padding must be smaller than the stride or dilation");
    // Negative pads become zeros around the transposed convolution's result.
    SmallVector<int64_t> convPads(pads), zeros(2 * out.size(), 0), convOut(out);
    bool widen = false;
    for (int64_t i = 0; i < 2 * spatial; ++i)
      if (pads[i] < 0) {
        int64_t d = 2 + i % spatial;
        zeros[(i < spatial ? 0 : out.size()) + d] = -pads[i];
        convOut[d] += pads[i];
        convPads[i] = 0;
        widen = true;
      }
    Value y = c.make<px::ConvGradInputOp>(
        {x, w},
        {named("strides", i64s(strides)), named("pads", i64s(convPads)),
         named("dilations", i64s(dilations)),
         named("group", b.getI64IntegerAttr(group))},
        RankedTensorType::get(convOut, typeOf(x).getElementType()));
    if (widen)
      y = c.make<px::PadOp>({y}, {named("pads", i64s(zeros))});
    if (bias) {
      SmallVector<int64_t> channel(out.size(), 1);
      channel[1] = out[1];
      y = c.add(y, c.reshape(bias, channel));
    }
    return c.done(y);
  }

  if (op == "Compress") { // a constant condition: a gather of its indices
    if (auto err = checkAttributes(node, {"axis"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto cond = constInput(node, 1, "condition", /*required=*/true);
    if (!cond)
      return cond.takeError();
    const auto *axisAttr = attr(node, "axis");
    if (!axisAttr)
      x = c.reshape(x, {typeOf(x).getNumElements()});
    auto axis = px::normalizeAxis(axisAttr ? axisAttr->i() : 0, typeOf(x).getRank());
    if (!axis)
      return nodeError(node, "axis is out of range");
    int64_t len = typeOf(x).getDimSize(*axis);
    SmallVector<double> kept;
    for (int64_t i = 0; i < (*cond)->size() && i < len; ++i)
      if ((*cond)->values[i] != 0)
        kept.push_back(i);
    return c.done(c.gather(x, c.constant({(int64_t)kept.size()}, b.getI64Type(), kept),
                           *axis));
  }

  if (op == "ReverseSequence") {
    // Each batch entry's first sequence_lens[b] steps reversed: a
    // gather_elements along the time axis with indices computed from the
    // (runtime) lengths.
    if (auto err = checkAttributes(node, {"batch_axis", "time_axis"}))
      return std::move(err);
    Value x = c.in(0), lens = c.in(1);
    if (!x || !lens)
      return c.takeError();
    auto s = typeOf(x).getShape();
    int64_t batchAxis = attrInt(node, "batch_axis", 1), timeAxis = attrInt(node, "time_axis", 0);
    if (s.size() < 2 || (batchAxis != 0 && batchAxis != 1) || timeAxis != 1 - batchAxis)
      return nodeError(node, "needs rank >= 2 with batch and time axes 0 and 1");
    Type i64 = b.getI64Type();
    SmallVector<int64_t> tShape(s.size(), 1), bShape(s.size(), 1);
    tShape[timeAxis] = s[timeAxis];
    bShape[batchAxis] = s[batchAxis];
    SmallVector<double> iota(s[timeAxis]);
    std::iota(iota.begin(), iota.end(), 0.0);
    Value t = c.constant(tShape, i64, iota);
    Value len = c.reshape(c.cast(lens, i64), bShape);
    Value reversed = c.sub(c.sub(len, c.scalar(1, i64)), t);
    Value idx = c.expand(c.where(c.less(t, len), reversed, t), s);
    return c.done(c.make<px::GatherElementsOp>(
        {x, idx}, {named("axis", b.getI64IntegerAttr(timeAxis))}));
  }

  if (op == "MaxUnpool") {
    // MaxPool's Indices are flat positions in the whole output: scatter the
    // values there, zeros elsewhere.
    if (auto err = checkAttributes(node, {"kernel_shape", "pads", "strides"}))
      return std::move(err);
    Value x = c.in(0), indices = c.in(1);
    if (!x || !indices)
      return c.takeError();
    auto s = typeOf(x).getShape();
    auto kernel = attrInts(node, "kernel_shape");
    int64_t spatial = s.size() - 2;
    if (spatial < 1 || (int64_t)kernel.size() != spatial)
      return nodeError(node, "kernel_shape must have one value per spatial dimension");
    auto strides = attrInts(node, "strides", std::vector<int64_t>(spatial, 1));
    auto pads = attrInts(node, "pads", std::vector<int64_t>(2 * spatial, 0));
    // The indices are positions in the default output shape; a larger
    // output_shape pads that at the end.
    SmallVector<int64_t> out{s[0], s[1]};
    for (int64_t i = 0; i < spatial; ++i)
      out.push_back((s[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[spatial + i]);
    auto outputShape = constInput(node, 2, "output_shape", /*required=*/false);
    if (!outputShape)
      return outputShape.takeError();
    SmallVector<int64_t> extra(2 * s.size(), 0);
    if (*outputShape) {
      std::vector<int64_t> given = (*outputShape)->asInts();
      if (given.size() != s.size() || given[0] != s[0] || given[1] != s[1])
        return nodeError(node, "output_shape must keep N and C");
      for (size_t d = 2; d < s.size(); ++d) {
        if (given[d] < out[d])
          return nodeError(node, "output_shape is smaller than the unpooled shape");
        extra[s.size() + d] = given[d] - out[d];
      }
    }
    if (!isa<FloatType>(typeOf(x).getElementType()))
      return nodeError(node, "MaxUnpool is supported on float tensors only");
    int64_t n = typeOf(x).getNumElements();
    Value flat = c.make<px::ScatterAddOp>(
        {c.reshape(c.cast(indices, b.getI64Type()), {n}), c.reshape(x, {n})},
        {named("axis", b.getI64IntegerAttr(0))},
        RankedTensorType::get({product(out)}, typeOf(x).getElementType()));
    Value y = c.reshape(flat, out);
    if (llvm::any_of(extra, [](int64_t e) { return e != 0; }))
      y = c.make<px::PadOp>({y}, {named("pads", i64s(extra))});
    return c.done(y);
  }

  if (op == "DFT") {
    if (auto err = checkAttributes(node, {"axis", "inverse", "onesided"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto length = constInput(node, 1, "dft_length", /*required=*/false);
    if (!length)
      return length.takeError();
    std::optional<int64_t> n;
    if (*length)
      n = toInt64((*length)->values.at(0));
    auto y = convertDft(node, x, attrInt(node, "axis", 1), attrInt(node, "inverse", 0) != 0,
                        attrInt(node, "onesided", 0) != 0, n);
    if (!y)
      return y.takeError();
    define(node, 0, *y);
    return true;
  }

  if (op == "STFT") { // frames (a constant gather), windowed, then a DFT
    if (auto err = checkAttributes(node, {"onesided"}))
      return std::move(err);
    Value signal = c.in(0), window = c.optionalIn(2);
    if (!signal)
      return c.takeError();
    auto stepT = constInput(node, 1, "frame_step", /*required=*/true);
    if (!stepT)
      return stepT.takeError();
    auto lengthT = constInput(node, 3, "frame_length", /*required=*/false);
    if (!lengthT)
      return lengthT.takeError();
    auto ss = typeOf(signal).getShape();
    if (ss.size() != 3 || (ss[2] != 1 && ss[2] != 2))
      return nodeError(node, "the signal must be [batch, length, 1 or 2]");
    int64_t step = toInt64((*stepT)->values.at(0));
    int64_t frame = *lengthT ? toInt64((*lengthT)->values.at(0))
                    : window  ? typeOf(window).getDimSize(0)
                              : -1;
    if (frame < 1 || step < 1 || frame > ss[1])
      return nodeError(node, "needs a frame_length (or window) of 1 to the signal's "
                             "length and a positive frame_step");
    int64_t frames = (ss[1] - frame) / step + 1;
    SmallVector<double> index;
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t i = 0; i < frame; ++i)
        index.push_back(f * step + i);
    Value framed = c.gather(signal, c.constant({frames, frame}, b.getI64Type(), index), 1);
    if (window)
      framed = c.mul(framed, c.reshape(window, {frame, 1}));
    if (c.failed())
      return c.takeError();
    auto y = convertDft(node, framed, 2, false, attrInt(node, "onesided", 1) != 0,
                        std::nullopt);
    if (!y)
      return y.takeError();
    define(node, 0, *y);
    return true;
  }

  if (op == "GridSample") {
    if (auto err = checkAttributes(node, {"align_corners", "mode", "padding_mode"}))
      return std::move(err);
    Value x = c.in(0), grid = c.in(1);
    if (!x || !grid)
      return c.takeError();
    auto y = convertGridSample(node, x, grid);
    if (!y)
      return y.takeError();
    define(node, 0, *y);
    return true;
  }

  if (op == "Resize") {
    if (auto err = checkAttributes(node, {"coordinate_transformation_mode",
                                          "cubic_coeff_a", "exclude_outside",
                                          "extrapolation_value", "mode",
                                          "nearest_mode"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto y = convertResize(node, x);
    if (!y)
      return y.takeError();
    define(node, 0, *y);
    return true;
  }

  if (op == "Einsum") {
    if (auto err = checkAttributes(node, {"equation"}))
      return std::move(err);
    SmallVector<Value> operands;
    for (int i = 0; i < node.input_size(); ++i)
      operands.push_back(c.in(i));
    if (c.failed())
      return c.takeError();
    auto y = convertEinsum(node, attrString(node, "equation", ""), operands);
    if (!y)
      return y.takeError();
    define(node, 0, *y);
    return true;
  }

  return false;
}

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

namespace {

/// One operand during an einsum: its value and one letter per dimension.
struct Term {
  Value value;
  std::string letters;
};

} // namespace

llvm::Expected<Value>
GraphImporter::convertEinsum(const onnx::NodeProto &node, std::string equation,
                             ArrayRef<Value> operands) {
  Composer c(*this, node);
  auto typeOf = Composer::typeOf;
  equation.erase(llvm::remove_if(equation, [](char ch) { return ch == ' '; }),
                 equation.end());
  std::string lhs = equation, rhs;
  bool explicitOutput = false;
  if (size_t arrow = equation.find("->"); arrow != std::string::npos) {
    lhs = equation.substr(0, arrow);
    rhs = equation.substr(arrow + 2);
    explicitOutput = true;
  }
  SmallVector<StringRef> specs;
  StringRef(lhs).split(specs, ',');
  if (specs.size() != operands.size())
    return nodeError(node, "the equation names " + llvm::Twine(specs.size()) +
                               " operands, the node has " +
                               llvm::Twine(operands.size()));
  // Ellipses become upper-case letters (the equation uses lower case), the
  // broadcast dimensions aligned from the right.
  int64_t ellipsisRank = 0;
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].contains("..."))
      ellipsisRank = std::max<int64_t>(
          ellipsisRank, typeOf(operands[i]).getRank() - ((int64_t)specs[i].size() - 3));
  std::string ellipsis;
  for (int64_t i = 0; i < ellipsisRank; ++i)
    ellipsis.push_back('A' + i);
  auto expandEllipsis = [&](StringRef spec, int64_t rank) -> std::string {
    size_t at = spec.find("...");
    if (at == StringRef::npos)
      return spec.str();
    int64_t n = rank - ((int64_t)spec.size() - 3);
    return spec.substr(0, at).str() + ellipsis.substr(ellipsisRank - n) +
           spec.substr(at + 3).str();
  };
  SmallVector<Term> terms;
  std::map<char, int64_t> sizes, counts;
  for (size_t i = 0; i < specs.size(); ++i) {
    Term t{operands[i], expandEllipsis(specs[i], typeOf(operands[i]).getRank())};
    auto shape = typeOf(t.value).getShape();
    if ((int64_t)t.letters.size() != (int64_t)shape.size())
      return nodeError(node, "operand " + llvm::Twine(i) + " has rank " +
                                 llvm::Twine(shape.size()) + ", the equation gives '" +
                                 specs[i] + "'");
    for (size_t d = 0; d < shape.size(); ++d) {
      char l = t.letters[d];
      if (!llvm::isAlpha(l))
        return nodeError(node, "invalid equation '" + equation + "'");
      auto [it, fresh] = sizes.insert({l, shape[d]});
      if (!fresh && it->second != shape[d]) {
        if (it->second == 1)
          it->second = shape[d];
        else if (shape[d] != 1)
          return nodeError(node, "letter '" + std::string(1, l) +
                                     "' has sizes " + llvm::Twine(it->second) +
                                     " and " + llvm::Twine(shape[d]));
      }
      ++counts[l];
    }
    terms.push_back(t);
  }
  std::string output;
  if (explicitOutput) {
    output = expandEllipsis(rhs, ellipsisRank + (int64_t)rhs.size() - 3);
  } else {
    output = ellipsis;
    for (auto [l, n] : counts)
      if (n == 1 && llvm::isLower(l))
        output.push_back(l);
  }
  for (char l : output)
    if (!sizes.count(l))
      return nodeError(node, "output letter '" + std::string(1, l) +
                                 "' is not in any operand");

  // Repeated letters within one term: take the diagonal.
  for (Term &t : terms) {
    for (;;) {
      int p = -1, q = -1;
      for (int i = 0; i < (int)t.letters.size() && p < 0; ++i)
        for (int j = i + 1; j < (int)t.letters.size(); ++j)
          if (t.letters[i] == t.letters[j]) {
            p = i, q = j;
            break;
          }
      if (p < 0)
        break;
      auto shape = typeOf(t.value).getShape();
      SmallVector<int64_t> perm;
      std::string rest;
      for (int i = 0; i < (int)shape.size(); ++i)
        if (i != p && i != q) {
          perm.push_back(i);
          rest.push_back(t.letters[i]);
        }
      perm.append({p, q});
      int64_t n = shape[p];
      SmallVector<int64_t> kept;
      for (int64_t i : llvm::ArrayRef(perm).drop_back(2))
        kept.push_back(shape[i]);
      SmallVector<int64_t> flatShape(kept), diagShape(kept);
      flatShape.push_back(n * n);
      diagShape.push_back(n);
      SmallVector<int64_t> starts(flatShape.size(), 0), steps(flatShape.size(), 1);
      steps.back() = n + 1;
      t.value = c.slice(c.reshape(c.transpose(t.value, perm), flatShape), starts,
                        steps, diagShape);
      t.letters = rest + t.letters[p];
      --counts[t.letters.back()];
    }
  }
  // Letters only one term has and the output lacks are summed first.
  auto sumAway = [&](Term &t, const std::string &keep) {
    SmallVector<int64_t> axes;
    std::string rest;
    for (size_t d = 0; d < t.letters.size(); ++d) {
      char l = t.letters[d];
      if (keep.find(l) == std::string::npos)
        axes.push_back(d);
      else
        rest.push_back(l);
    }
    if (!axes.empty()) {
      t.value = c.reduce<px::ReduceSumOp>(t.value, axes, false);
      t.letters = rest;
    }
  };
  // Terms are contracted left to right.
  Term acc = terms[0];
  for (size_t k = 1; k <= terms.size(); ++k) {
    // Letters still needed after this step: the output's and later terms'.
    std::string needed = output;
    for (size_t j = k + 1; j < terms.size(); ++j)
      needed += terms[j].letters;
    if (k == terms.size()) {
      sumAway(acc, needed);
      break;
    }
    Term next = terms[k];
    sumAway(acc, needed + next.letters);
    sumAway(next, needed + acc.letters);
    std::string batch, left, right, contracted;
    for (char l : acc.letters) {
      bool inNext = next.letters.find(l) != std::string::npos;
      bool keep = needed.find(l) != std::string::npos;
      if (inNext && keep)
        batch.push_back(l);
      else if (inNext)
        contracted.push_back(l);
      else
        left.push_back(l);
    }
    for (char l : next.letters)
      if (acc.letters.find(l) == std::string::npos)
        right.push_back(l);
    // acc -> [batch, left, contracted], next -> [batch, contracted, right],
    // broadcast over the batch letters, then one batched product.
    auto arrange = [&](Term &t, const std::string &order) {
      SmallVector<int64_t> perm, shape;
      for (char l : order) {
        perm.push_back(t.letters.find(l));
        shape.push_back(sizes[l]);
      }
      Value v = t.value;
      bool identity = llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()));
      if (!identity)
        v = c.transpose(v, perm);
      return c.expand(v, shape);
    };
    auto count = [&](const std::string &ls) {
      int64_t n = 1;
      for (char l : ls)
        n *= sizes[l];
      return n;
    };
    int64_t nb = count(batch), nl = count(left), nk = count(contracted),
            nr = count(right);
    Value a = c.reshape(arrange(acc, batch + left + contracted), {nb, nl, nk});
    Value bm = c.reshape(arrange(next, batch + contracted + right), {nb, nk, nr});
    SmallVector<int64_t> shape;
    for (char l : batch + left + right)
      shape.push_back(sizes[l]);
    acc = Term{c.reshape(c.make<px::MatMulOp>({a, bm}), shape), batch + left + right};
  }
  if (c.failed())
    return c.takeError();
  // Final order (and broadcast sizes) of the output.
  SmallVector<int64_t> perm, shape;
  for (char l : output) {
    size_t at = acc.letters.find(l);
    if (at == std::string::npos)
      return nodeError(node, "output letter '" + std::string(1, l) + "' was summed away");
    perm.push_back(at);
    shape.push_back(sizes[l]);
  }
  Value y = acc.value;
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    y = c.transpose(y, perm);
  y = c.expand(y, shape);
  if (c.failed())
    return c.takeError();
  return y;
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

namespace {

/// One axis of a Resize: for every output position, the input positions it
/// reads (`taps` of them, edge-clamped) and their weights, as ONNX's
/// reference implementation (onnx/backend/test/case/node/resize.py)
/// computes them; `outside` marks positions that get the extrapolation
/// value (tf_crop_and_resize).
struct ResizeAxis {
  int64_t taps = 0;
  std::vector<int64_t> index;  // [out * taps]
  std::vector<double> weight;  // [out * taps]
  std::vector<bool> outside;   // [out]
};

std::vector<double> resizeCoefficients(const std::string &mode,
                                       const std::string &nearestMode,
                                       double cubicA, double ratio, bool integer) {
  if (mode == "nearest") {
    if (integer)
      return {0, 1};
    if (nearestMode == "round_prefer_ceil")
      return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (nearestMode == "floor")
      return {1, 0};
    if (nearestMode == "ceil")
      return {0, 1};
    return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
  }
  if (mode == "linear")
    return {1 - ratio, ratio};
  double a = cubicA, r = ratio, q = 1 - ratio;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
          ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * q - (a + 3)) * q * q + 1,
          ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a};
}

ResizeAxis resizeAxis(int64_t in, int64_t out, double scale, double roiStart,
                      double roiEnd, const std::string &transform,
                      const std::string &mode, const std::string &nearestMode,
                      double cubicA, bool excludeOutside) {
  ResizeAxis axis;
  axis.taps = mode == "cubic" ? 4 : 2;
  const double outWidth = scale * in; // not rounded, as the reference has it
  for (int64_t o = 0; o < out; ++o) {
    double x = 0.0;
    bool outside = false;
    if (transform == "align_corners") {
      x = outWidth == 1 ? 0.0 : o * (in - 1) / (outWidth - 1);
    } else if (transform == "asymmetric") {
      x = o / scale;
    } else if (transform == "tf_crop_and_resize") {
      x = outWidth == 1 ? (roiEnd - roiStart) * (in - 1) / 2
                        : o * (roiEnd - roiStart) * (in - 1) / (outWidth - 1);
      x += roiStart * (in - 1);
      outside = x < 0 || x > in - 1;
    } else if (transform == "pytorch_half_pixel") {
      x = outWidth == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
    } else if (transform == "tf_half_pixel_for_nn") {
      x = (o + 0.5) / scale;
    } else { // half_pixel
      x = (o + 0.5) / scale - 0.5;
    }
    axis.outside.push_back(outside);
    double base = std::floor(x);
    bool integer = x == base;
    double ratio = integer ? 1.0 : x - base;
    std::vector<double> w = resizeCoefficients(mode, nearestMode, cubicA, ratio, integer);
    // The taps nearest x, smaller positions first on ties: floor(x) - 1 ..
    // for 4 taps, floor(x) .. for 2 (x - 1 .. x when x is an integer).
    int64_t first = (int64_t)base - (axis.taps == 4 ? 1 : 0) - (integer ? 1 : 0);
    std::vector<int64_t> idx;
    for (int64_t k = 0; k < axis.taps; ++k)
      idx.push_back(first + k);
    if (excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < axis.taps; ++k) {
        if (idx[k] < 0 || idx[k] >= in)
          w[k] = 0;
        sum += w[k];
      }
      for (double &v : w)
        v = sum != 0 ? v / sum : 0;
    }
    for (int64_t k = 0; k < axis.taps; ++k) {
      axis.index.push_back(std::clamp<int64_t>(idx[k], 0, in - 1)); // edge
      axis.weight.push_back(w[k]);
    }
  }
  return axis;
}

} // namespace

llvm::Expected<Value> GraphImporter::convertResize(const onnx::NodeProto &node,
                                                   Value x) {
  Composer c(*this, node);
  auto typeOf = Composer::typeOf;
  auto shape = typeOf(x).getShape();
  int64_t rank = shape.size();
  std::string mode = attrString(node, "mode", "nearest");
  std::string transform =
      attrString(node, "coordinate_transformation_mode", "half_pixel");
  std::string nearestMode = attrString(node, "nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return nodeError(node, "unsupported mode '" + mode + "'");
  static const char *kTransforms[] = {"half_pixel", "pytorch_half_pixel",
                                      "align_corners", "asymmetric",
                                      "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (!llvm::is_contained(kTransforms, transform))
    return nodeError(node, "unsupported coordinate_transformation_mode '" +
                               transform + "'");
  if (nearestMode != "round_prefer_floor" && nearestMode != "round_prefer_ceil" &&
      nearestMode != "floor" && nearestMode != "ceil")
    return nodeError(node, "unsupported nearest_mode '" + nearestMode + "'");
  auto roiT = constInput(node, 1, "roi", /*required=*/false);
  if (!roiT)
    return roiT.takeError();
  auto scalesT = constInput(node, 2, "scales", /*required=*/false);
  if (!scalesT)
    return scalesT.takeError();
  auto sizesT = constInput(node, 3, "sizes", /*required=*/false);
  if (!sizesT)
    return sizesT.takeError();
  std::vector<double> roi(2 * rank);
  for (int64_t d = 0; d < rank; ++d)
    roi[rank + d] = 1.0;
  if (transform == "tf_crop_and_resize" && *roiT && (*roiT)->size()) {
    if ((*roiT)->size() != 2 * rank)
      return nodeError(node, "roi must have 2 values per dimension");
    roi = (*roiT)->values;
  }
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (*sizesT && (*sizesT)->size()) {
    sizes = (*sizesT)->asInts();
    if ((int64_t)sizes.size() != rank)
      return nodeError(node, "sizes must have one value per dimension");
    for (int64_t d = 0; d < rank; ++d)
      scales.push_back((double)sizes[d] / shape[d]);
  } else if (*scalesT && (*scalesT)->size()) {
    scales = (*scalesT)->values;
    if ((int64_t)scales.size() != rank)
      return nodeError(node, "scales must have one value per dimension");
    for (int64_t d = 0; d < rank; ++d) {
      double span = transform == "tf_crop_and_resize" ? roi[rank + d] - roi[d] : 1.0;
      sizes.push_back((int64_t)std::floor(shape[d] * span * scales[d]));
    }
  } else {
    return nodeError(node, "needs scales or sizes");
  }
  double cubicA = attrFloat(node, "cubic_coeff_a", -0.75f);
  bool excludeOutside = attrInt(node, "exclude_outside", 0) != 0;
  double extrapolation = attrFloat(node, "extrapolation_value", 0.0f);
  Type elem = typeOf(x).getElementType();
  Value y = x;
  for (int64_t d = 0; d < rank; ++d) {
    if (sizes[d] < 1 || scales[d] <= 0)
      return nodeError(node, "dimension " + llvm::Twine(d) + " would be empty");
    bool cropped = transform == "tf_crop_and_resize" && (roi[d] != 0 || roi[rank + d] != 1);
    if (sizes[d] == shape[d] && scales[d] == 1.0 && !cropped)
      continue; // the identity on this axis
    ResizeAxis a = resizeAxis(shape[d], sizes[d], scales[d], roi[d], roi[rank + d],
                              transform, mode, nearestMode, cubicA, excludeOutside);
    SmallVector<int64_t> cur(typeOf(y).getShape());
    int64_t m = sizes[d];
    Value next;
    if (mode == "nearest") {
      // One tap has the weight (1): a plain gather, for any element type.
      SmallVector<double> pick;
      for (int64_t o = 0; o < m; ++o)
        pick.push_back(a.weight[o * a.taps] == 1.0 ? a.index[o * a.taps]
                                                  : a.index[o * a.taps + 1]);
      next = c.gather(y, c.constant({m}, b.getI64Type(), pick), d);
    } else {
      if (!isa<FloatType>(elem))
        return nodeError(node, mode + " resizing needs a float input");
      SmallVector<double> index(a.index.begin(), a.index.end());
      Value rows = c.gather(y, c.constant({m * a.taps}, b.getI64Type(), index), d);
      SmallVector<int64_t> split(cur);
      split[d] = m;
      split.insert(split.begin() + d + 1, a.taps);
      SmallVector<int64_t> wshape{m, a.taps};
      wshape.append(rank - 1 - d, 1);
      Value weighted = c.mul(c.reshape(rows, split), c.constant(wshape, elem, a.weight));
      next = c.reduce<px::ReduceSumOp>(weighted, {d + 1}, false);
    }
    if (llvm::is_contained(a.outside, true)) {
      SmallVector<double> mask(a.outside.begin(), a.outside.end());
      SmallVector<int64_t> mshape{m};
      mshape.append(rank - 1 - d, 1);
      next = c.where(c.constant(mshape, b.getI1Type(), mask),
                     c.scalar(extrapolation, elem), next);
    }
    y = next;
  }
  if (c.failed())
    return c.takeError();
  return y;
}

//===----------------------------------------------------------------------===//
// GridSample
//===----------------------------------------------------------------------===//

/// PyTorch's grid_sampler_2d (which ONNX GridSample-16 specifies) as px ops:
/// source coordinates from the grid, padding applied to them, and every
/// interpolation tap a px.gather_elements of the flattened input at a
/// computed (runtime) position, weighted, zero where the tap is outside.
/// The gradient reaches the input through the gathers and the grid through
/// the weights.
llvm::Expected<Value> GraphImporter::convertGridSample(const onnx::NodeProto &node,
                                                       Value x, Value grid) {
  Composer c(*this, node);
  auto typeOf = Composer::typeOf;
  std::string mode = attrString(node, "mode", "bilinear");
  std::string padding = attrString(node, "padding_mode", "zeros");
  bool align = attrInt(node, "align_corners", 0) != 0;
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return nodeError(node, "unsupported mode '" + mode + "'");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return nodeError(node, "unsupported padding_mode '" + padding + "'");
  auto xs = typeOf(x).getShape(), gs = typeOf(grid).getShape();
  if (xs.size() != 4 || gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2)
    return nodeError(node, "needs X [N, C, H, W] and a grid [N, H_out, W_out, 2]");
  Type t = typeOf(x).getElementType();
  if (!isa<FloatType>(t) || typeOf(grid).getElementType() != t)
    return nodeError(node, "X and the grid must be of one float type");
  int64_t n = xs[0], ch = xs[1], h = xs[2], w = xs[3], points = gs[1] * gs[2];
  auto k = [&](double v) { return c.scalar(v, t); };
  // Coordinates as [N, 1, P] (broadcast over the channels).
  auto coord = [&](int64_t which, int64_t size) {
    Value g = c.reshape(c.slice(grid, {0, 0, 0, which}, {1, 1, 1, 1}, {n, gs[1], gs[2], 1}),
                        {n, 1, points});
    return align ? c.mul(c.add(g, k(1)), k((size - 1) / 2.0))
                 : c.mul(c.sub(c.mul(c.add(g, k(1)), k((double)size)), k(1)), k(0.5));
  };
  auto clip = [&](Value v, int64_t size) {
    return c.make<px::ClipOp>({v}, {named("min", b.getF64FloatAttr(0.0)),
                                    named("max", b.getF64FloatAttr(size - 1.0))},
                              v.getType());
  };
  auto reflect = [&](Value v, double twiceLow, double twiceHigh) -> Value {
    if (twiceLow == twiceHigh)
      return c.mul(v, k(0));
    double lo = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
    Value in = c.unary<px::AbsOp>(c.sub(v, k(lo)));
    Value extra = c.make<px::ModOp>({in, k(span)}, {named("fmod", b.getUnitAttr())});
    Value flips = c.unary<px::FloorOp>(c.div(in, k(span)));
    Value even = c.equal(c.make<px::ModOp>({flips, k(2)}, {named("fmod", b.getUnitAttr())}),
                         k(0));
    return c.where(even, c.add(extra, k(lo)), c.sub(k(span + lo), extra));
  };
  auto pad = [&](Value v, int64_t size) -> Value {
    if (padding == "border")
      return clip(v, size);
    if (padding == "reflection")
      return clip(align ? reflect(v, 0, 2.0 * (size - 1)) : reflect(v, -1, 2.0 * size - 1),
                  size);
    return v;
  };
  // X at integer-valued coordinates (xi, yi), 0 outside.
  Value flat = c.reshape(x, {n, ch, h * w});
  Type i64 = b.getI64Type();
  auto sample = [&](Value xi, Value yi) {
    Value inside = c.where(c.less(xi, k(0)), c.scalar(0, b.getI1Type()),
                           c.unary<px::NotOp>(c.greater(xi, k(w - 1.0))));
    inside = c.where(c.less(yi, k(0)), c.scalar(0, b.getI1Type()), inside);
    inside = c.where(c.greater(yi, k(h - 1.0)), c.scalar(0, b.getI1Type()), inside);
    Value pos = c.add(c.mul(clip(yi, h), k((double)w)), clip(xi, w));
    Value index = c.expand(c.cast(pos, i64), {n, ch, points});
    Value v = c.make<px::GatherElementsOp>({flat, index},
                                           {named("axis", b.getI64IntegerAttr(2))});
    return c.where(inside, v, k(0));
  };
  Value ix = coord(0, w), iy = coord(1, h);
  Value y;
  if (mode == "nearest") {
    y = sample(c.unary<px::RoundOp>(pad(ix, w)), c.unary<px::RoundOp>(pad(iy, h)));
  } else if (mode == "bilinear") {
    ix = pad(ix, w);
    iy = pad(iy, h);
    Value x0 = c.unary<px::FloorOp>(ix), y0 = c.unary<px::FloorOp>(iy);
    Value x1 = c.add(x0, k(1)), y1 = c.add(y0, k(1));
    Value wx0 = c.sub(x1, ix), wx1 = c.sub(ix, x0), wy0 = c.sub(y1, iy), wy1 = c.sub(iy, y0);
    y = c.add(c.add(c.mul(sample(x0, y0), c.mul(wx0, wy0)),
                    c.mul(sample(x1, y0), c.mul(wx1, wy0))),
              c.add(c.mul(sample(x0, y1), c.mul(wx0, wy1)),
                    c.mul(sample(x1, y1), c.mul(wx1, wy1))));
  } else {
    // Bicubic (A = -0.75): 4 x 4 taps, the padding applied to each tap.
    const double a = -0.75;
    auto coefficients = [&](Value tt) {
      auto near = [&](Value d) { // |d| <= 1
        return c.add(c.mul(c.mul(c.sub(c.mul(d, k(a + 2)), k(a + 3)), d), d), k(1));
      };
      auto far = [&](Value d) { // 1 < |d| < 2
        return c.sub(c.mul(c.add(c.mul(c.sub(c.mul(d, k(a)), k(5 * a)), d), k(8 * a)), d),
                     k(4 * a));
      };
      return SmallVector<Value>{far(c.add(tt, k(1))), near(tt), near(c.sub(k(1), tt)),
                                far(c.sub(k(2), tt))};
    };
    Value x0 = c.unary<px::FloorOp>(ix), y0 = c.unary<px::FloorOp>(iy);
    SmallVector<Value> cx = coefficients(c.sub(ix, x0)), cy = coefficients(c.sub(iy, y0));
    for (int i = 0; i < 4; ++i) {
      Value yi = pad(c.add(y0, k(i - 1.0)), h);
      Value row;
      for (int j = 0; j < 4; ++j) {
        Value xj = pad(c.add(x0, k(j - 1.0)), w);
        Value term = c.mul(sample(xj, yi), cx[j]);
        row = row ? c.add(row, term) : term;
      }
      Value term = c.mul(row, cy[i]);
      y = y ? c.add(y, term) : term;
    }
  }
  y = c.reshape(y, {n, ch, gs[1], gs[2]});
  if (c.failed())
    return c.takeError();
  return y;
}

//===----------------------------------------------------------------------===//
// DFT
//===----------------------------------------------------------------------===//

/// The DFT of `x` [..., n, 1 or 2] (real, or complex as (re, im)) along
/// `axis` as products with constant cosine and sine matrices: O(n^2), for
/// the short signals of a training graph, and differentiable as any
/// px.matmul.
llvm::Expected<Value> GraphImporter::convertDft(const onnx::NodeProto &node, Value x,
                                                int64_t axisValue, bool inverse,
                                                bool onesided,
                                                std::optional<int64_t> length) {
  Composer c(*this, node);
  auto typeOf = Composer::typeOf;
  auto xs = typeOf(x).getShape();
  int64_t rank = xs.size();
  Type t = typeOf(x).getElementType();
  if (rank < 2 || (xs.back() != 1 && xs.back() != 2) || !isa<FloatType>(t))
    return nodeError(node, "needs a float input [..., 1 or 2]");
  auto axis = px::normalizeAxis(axisValue, rank);
  if (!axis || *axis == rank - 1)
    return nodeError(node, "axis " + llvm::Twine(axisValue) +
                               " must name a signal dimension");
  int64_t n = xs[*axis], len = length.value_or(n);
  if (len < 1)
    return nodeError(node, "dft_length must be positive");
  int64_t bins = onesided ? len / 2 + 1 : len;
  // Real and imaginary parts, the signal axis last, cut or zero-padded to len.
  SmallVector<int64_t> partShape(xs);
  partShape.back() = 1;
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  auto part = [&](int64_t which) {
    SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
    starts.back() = which;
    Value v = c.slice(x, starts, steps, partShape);
    SmallVector<int64_t> squeezed(xs.drop_back());
    v = c.transpose(c.reshape(v, squeezed), perm);
    SmallVector<int64_t> s(typeOf(v).getShape());
    if (len < n) {
      SmallVector<int64_t> begin(s.size(), 0), one(s.size(), 1), cut(s);
      cut.back() = len;
      v = c.slice(v, begin, one, cut);
    } else if (len > n) {
      SmallVector<int64_t> pads(2 * s.size(), 0);
      pads.back() = len - n;
      v = c.make<px::PadOp>({v}, {named("pads", b.getDenseI64ArrayAttr(pads))});
    }
    return v;
  };
  Value re = part(0), im = xs.back() == 2 ? part(1) : Value();
  // cos and sin of 2 pi k j / len, [len, bins]; the inverse conjugates and
  // divides by len.
  SmallVector<double> cosines, sines;
  double scale = inverse ? 1.0 / len : 1.0;
  for (int64_t j = 0; j < len; ++j)
    for (int64_t k = 0; k < bins; ++k) {
      double angle = 2 * M_PI * (double)((j * k) % len) / len;
      cosines.push_back(std::cos(angle) * scale);
      sines.push_back(std::sin(angle) * scale * (inverse ? 1 : -1));
    }
  Value cosM = c.constant({len, bins}, t, cosines), sinM = c.constant({len, bins}, t, sines);
  auto product = [&](Value v, Value m) { return c.make<px::MatMulOp>({v, m}); };
  // (re + i im)(cos + i sin) = re cos - im sin + i (re sin + im cos).
  Value yr = product(re, cosM), yi = product(re, sinM);
  if (im) {
    yr = c.sub(yr, product(im, sinM));
    yi = c.add(yi, product(im, cosM));
  }
  // Back to [..., bins at axis, ..., 2].
  SmallVector<int64_t> inverseOrder(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    inverseOrder[perm[d]] = d;
  SmallVector<int64_t> outShape(xs);
  outShape[*axis] = bins;
  outShape.back() = 1;
  auto back = [&](Value v) {
    return c.reshape(c.transpose(v, inverseOrder), outShape);
  };
  Value y = c.concat({back(yr), back(yi)}, rank - 1);
  if (c.failed())
    return c.takeError();
  return y;
}

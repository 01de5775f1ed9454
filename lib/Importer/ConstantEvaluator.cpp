//===- ConstantEvaluator.cpp - fold ONNX shape computations ---------------===//

#include "ConstantEvaluator.h"

#include "parallax/Dialect/Px/PxShapes.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <cstring>
#include <functional>

using llvm::createStringError;
using llvm::inconvertibleErrorCode;
using onnx::TensorProto;

namespace parallax::detail {

int64_t toInt64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 0x1p63)
    return INT64_MAX;
  if (v <= -0x1p63)
    return INT64_MIN;
  return (int64_t)v;
}

std::vector<int64_t> ConstTensor::asInts() const {
  std::vector<int64_t> out;
  out.reserve(values.size());
  for (double v : values)
    out.push_back(toInt64(v));
  return out;
}

namespace {

template <typename T>
void appendRaw(const std::string &raw, std::vector<double> &out) {
  size_t n = raw.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out.push_back((double)v);
  }
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

const llvm::fltSemantics *halfSemantics(int32_t dtype) {
  if (dtype == TensorProto::FLOAT16)
    return &llvm::APFloat::IEEEhalf();
  if (dtype == TensorProto::BFLOAT16)
    return &llvm::APFloat::BFloat();
  return nullptr;
}

/// Checks that a result of `shape` may be materialised: no negative
/// dimension, and at most kMaxEvaluatedElements elements (without overflow).
llvm::Error checkResultShape(const std::vector<int64_t> &shape);

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Element of `t` read at the multi-index `idx` of a broadcast result.
double broadcastRead(const ConstTensor &t, const std::vector<int64_t> &idx) {
  size_t offset = idx.size() - t.shape.size();
  auto strides = stridesOf(t.shape);
  int64_t flat = 0;
  for (size_t d = 0; d < t.shape.size(); ++d)
    flat += (t.shape[d] == 1 ? 0 : idx[offset + d]) * strides[d];
  return t.values[flat];
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = (int)shape.size() - 1; d >= 0; --d) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return idx;
}

llvm::Error bad(const llvm::Twine &what) {
  return createStringError(inconvertibleErrorCode(), what);
}

llvm::Error checkResultShape(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return bad("negative dimension " + llvm::Twine(d) + " in shape " +
                 px::shapeToString(shape));
    if (d && n > kMaxEvaluatedElements / d)
      return bad("the result of shape " + px::shapeToString(shape) +
                 " is too large to evaluate at compile time");
    n *= d;
  }
  if (n > kMaxEvaluatedElements)
    return bad("the result of shape " + px::shapeToString(shape) +
               " is too large to evaluate at compile time");
  return llvm::Error::success();
}

int64_t attrInt(const onnx::NodeProto &node, const std::string &name,
                int64_t def) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return a.i();
  return def;
}

bool isIntegral(int32_t dtype) {
  return dtype != TensorProto::FLOAT && dtype != TensorProto::DOUBLE &&
         dtype != TensorProto::FLOAT16 && dtype != TensorProto::BFLOAT16;
}

llvm::Expected<ConstTensor>
elementwise(const std::vector<const ConstTensor *> &ins, int32_t dtype,
            const std::function<double(const std::vector<double> &)> &fn) {
  std::vector<int64_t> shape;
  for (const ConstTensor *t : ins) {
    auto b = px::broadcastShapes(shape, t->shape);
    if (!b)
      return bad("operand shapes do not broadcast");
    shape.assign(b->begin(), b->end());
  }
  if (auto err = checkResultShape(shape))
    return std::move(err);
  ConstTensor out{dtype, shape, {}};
  int64_t n = product(shape);
  out.values.reserve(n);
  std::vector<double> args(ins.size());
  for (int64_t i = 0; i < n; ++i) {
    auto idx = unravel(i, shape);
    for (size_t k = 0; k < ins.size(); ++k)
      args[k] = broadcastRead(*ins[k], idx);
    out.values.push_back(castTo(dtype, fn(args)));
  }
  return out;
}

std::vector<int64_t> attrInts(const onnx::NodeProto &node,
                              const std::string &name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return {a.ints().begin(), a.ints().end()};
  return {};
}

/// Reduce{Prod,Sum,Min,Max} of `x` over `axes` (all when empty, unless
/// `noop`), keeping the reduced dimensions as 1 with `keepdims`.
llvm::Expected<ConstTensor> reduce(const ConstTensor &x, std::vector<int64_t> axes,
                                   bool keepdims, bool noop,
                                   const std::string &op) {
  int64_t rank = x.shape.size();
  if (axes.empty()) {
    if (noop)
      return x;
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes) {
    auto n = px::normalizeAxis(a, rank);
    if (!n)
      return bad("reduction axis " + llvm::Twine(a) + " is out of range");
    reduced[*n] = true;
  }
  std::vector<int64_t> kept(x.shape);
  ConstTensor out{x.dtype, {}, {}};
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d])
      kept[d] = 1;
    if (!reduced[d] || keepdims)
      out.shape.push_back(kept[d]);
  }
  double init = op == "ReduceProd"  ? 1.0
                : op == "ReduceSum" ? 0.0
                : op == "ReduceMin" ? INFINITY
                                    : -INFINITY;
  out.values.assign(product(kept), init);
  auto keptStrides = stridesOf(kept);
  for (int64_t i = 0; i < x.size(); ++i) {
    auto idx = unravel(i, x.shape);
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d)
      o += (reduced[d] ? 0 : idx[d]) * keptStrides[d];
    double &acc = out.values[o];
    double v = x.values[i];
    acc = op == "ReduceProd"  ? acc * v
          : op == "ReduceSum" ? acc + v
          : op == "ReduceMin" ? std::min(acc, v)
                              : std::max(acc, v);
  }
  for (double &v : out.values)
    v = castTo(out.dtype, v);
  return out;
}

/// Gathers along `axis` of `data` (ONNX Gather).
llvm::Expected<ConstTensor> gather(const ConstTensor &data,
                                   const ConstTensor &indices, int64_t axis) {
  int64_t rank = data.shape.size();
  auto a = px::normalizeAxis(axis, rank);
  if (!a)
    return bad("axis out of range");
  int64_t outer = 1, inner = 1, dim = data.shape[*a];
  for (int64_t d = 0; d < *a; ++d)
    outer *= data.shape[d];
  for (int64_t d = *a + 1; d < rank; ++d)
    inner *= data.shape[d];
  ConstTensor out{data.dtype, {}, {}};
  out.shape.assign(data.shape.begin(), data.shape.begin() + *a);
  out.shape.insert(out.shape.end(), indices.shape.begin(), indices.shape.end());
  out.shape.insert(out.shape.end(), data.shape.begin() + *a + 1,
                   data.shape.end());
  if (auto err = checkResultShape(out.shape))
    return std::move(err);
  for (int64_t o = 0; o < outer; ++o)
    for (double fi : indices.values) {
      int64_t i = toInt64(fi);
      if (i < -dim || i >= dim)
        return bad("index " + llvm::Twine(i) + " is out of range for size " +
                   llvm::Twine(dim));
      if (i < 0)
        i += dim;
      for (int64_t k = 0; k < inner; ++k)
        out.values.push_back(data.values[(o * dim + i) * inner + k]);
    }
  return out;
}

} // namespace

llvm::Expected<NormalizedSlice>
normalizeSlice(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &starts,
               const std::vector<int64_t> &ends, std::vector<int64_t> axes,
               std::vector<int64_t> steps) {
  int64_t rank = shape.size();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return bad("starts, ends, axes and steps must have the same length");
  NormalizedSlice r{std::vector<int64_t>(rank, 0),
                    std::vector<int64_t>(rank, 1), shape};
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = px::normalizeAxis(axes[i], rank);
    if (!a)
      return bad("slice axis " + llvm::Twine(axes[i]) + " is out of range");
    if (steps[i] == 0)
      return bad("slice step is zero");
    // Clamp as ONNX specifies: starts/ends beyond the bounds (INT64_MAX is
    // common for "to the end") are clamped, negatives count from the end.
    int64_t dim = shape[*a], s = starts[i], e = ends[i], st = steps[i];
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      r.count[*a] = std::max<int64_t>(0, (e - s + st - 1) / st);
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      r.count[*a] = std::max<int64_t>(0, (s - e - st - 1) / -st);
    }
    r.begin[*a] = r.count[*a] ? s : 0;
    r.step[*a] = st;
  }
  return r;
}

double castTo(int32_t dtype, double v) {
  if (const llvm::fltSemantics *sem = halfSemantics(dtype)) {
    llvm::APFloat f(v);
    bool lost;
    f.convert(*sem, llvm::APFloat::rmNearestTiesToEven, &lost);
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    return f.convertToDouble();
  }
  switch (dtype) {
  case TensorProto::FLOAT:
    return (double)(float)v;
  case TensorProto::DOUBLE:
    return v;
  case TensorProto::BOOL:
    return v != 0.0 ? 1.0 : 0.0;
  // Integer types: C-style truncation toward zero, then two's complement
  // wrap-around into the narrower types (as numpy's astype).
  case TensorProto::INT32:
    return (double)(int32_t)(uint32_t)(uint64_t)toInt64(v);
  case TensorProto::INT16:
    return (double)(int16_t)(uint16_t)(uint64_t)toInt64(v);
  case TensorProto::INT8:
    return (double)(int8_t)(uint8_t)(uint64_t)toInt64(v);
  case TensorProto::UINT8:
    return (double)(uint8_t)(uint64_t)toInt64(v);
  default:
    return std::trunc(v);
  }
}

std::optional<ConstTensor> readTensor(const TensorProto &tensor,
                                      int64_t maxElements) {
  ConstTensor t;
  t.dtype = tensor.data_type();
  t.shape.assign(tensor.dims().begin(), tensor.dims().end());
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || (d && n > maxElements / d))
      return std::nullopt;
    n *= d;
  }
  if (n > maxElements)
    return std::nullopt;
  const std::string &raw = tensor.raw_data();
  switch (t.dtype) {
  case TensorProto::FLOAT:
    if (tensor.has_raw_data())
      appendRaw<float>(raw, t.values);
    else
      t.values.assign(tensor.float_data().begin(), tensor.float_data().end());
    break;
  case TensorProto::DOUBLE:
    if (tensor.has_raw_data())
      appendRaw<double>(raw, t.values);
    else
      t.values.assign(tensor.double_data().begin(), tensor.double_data().end());
    break;
  case TensorProto::INT64:
    if (tensor.has_raw_data())
      appendRaw<int64_t>(raw, t.values);
    else
      t.values.assign(tensor.int64_data().begin(), tensor.int64_data().end());
    break;
  case TensorProto::INT32:
  case TensorProto::INT16:
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::BOOL:
    if (tensor.has_raw_data()) {
      if (t.dtype == TensorProto::INT32)
        appendRaw<int32_t>(raw, t.values);
      else if (t.dtype == TensorProto::INT16)
        appendRaw<int16_t>(raw, t.values);
      else if (t.dtype == TensorProto::INT8)
        appendRaw<int8_t>(raw, t.values);
      else
        appendRaw<uint8_t>(raw, t.values);
    } else {
      t.values.assign(tensor.int32_data().begin(), tensor.int32_data().end());
    }
    break;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16: {
    // Bit patterns: raw little-endian uint16s, or one per int32_data entry.
    std::vector<double> bits;
    if (tensor.has_raw_data())
      appendRaw<uint16_t>(raw, bits);
    else
      bits.assign(tensor.int32_data().begin(), tensor.int32_data().end());
    for (double b : bits) {
      llvm::APFloat f(*halfSemantics(t.dtype),
                      llvm::APInt(16, (uint64_t)b & 0xffff));
      bool lost;
      f.convert(llvm::APFloat::IEEEdouble(),
                llvm::APFloat::rmNearestTiesToEven, &lost);
      t.values.push_back(f.convertToDouble());
    }
    break;
  }
  default:
    return std::nullopt;
  }
  if ((int64_t)t.values.size() != n)
    return std::nullopt;
  return t;
}

bool isFoldable(const std::string &op) {
  static const char *kOps[] = {
      "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice",   "Cast",
      "Add",    "Sub",       "Mul",     "Div",    "Equal",   "Less",
      "Greater", "Not",      "Neg",     "Abs",    "Where",   "Range",
      "ConstantOfShape", "Reshape", "Identity", "Max", "Min", "Expand",
      "Sqrt", "ReduceProd", "ReduceSum", "ReduceMin", "ReduceMax", "Floor",
      "Ceil", "Round", "Sign", "Mod", "Sin", "Cos", "Exp", "Log", "Pow",
      "And", "Or", "Xor", "GreaterOrEqual", "LessOrEqual", "Trilu",
      "Transpose"};
  for (const char *k : kOps)
    if (op == k)
      return true;
  return false;
}

llvm::Expected<std::vector<ConstTensor>>
evaluateNode(const onnx::NodeProto &node,
             const std::vector<std::optional<ConstTensor>> &inputs) {
  const std::string &op = node.op_type();
  auto in = [&](size_t i) -> const ConstTensor * {
    return i < inputs.size() && inputs[i] ? &*inputs[i] : nullptr;
  };
  auto one = [](llvm::Expected<ConstTensor> t)
      -> llvm::Expected<std::vector<ConstTensor>> {
    if (!t)
      return t.takeError();
    return std::vector<ConstTensor>{std::move(*t)};
  };
  const ConstTensor *x = in(0);
  if (!x && op != "Concat")
    return bad("missing input");

  if (op == "Identity")
    return one(*x);
  if (op == "Gather") {
    if (!in(1))
      return bad("missing indices");
    return one(gather(*x, *in(1), attrInt(node, "axis", 0)));
  }

  if (op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> axes;
    if (in(1))
      axes = in(1)->asInts();
    ConstTensor out = *x;
    if (op == "Unsqueeze") {
      int64_t rank = x->shape.size() + axes.size();
      std::vector<bool> inserted(rank, false);
      for (int64_t a : axes) {
        auto n = px::normalizeAxis(a, rank);
        if (!n || inserted[*n])
          return bad("invalid unsqueeze axis " + llvm::Twine(a));
        inserted[*n] = true;
      }
      out.shape.clear();
      size_t k = 0;
      for (int64_t d = 0; d < rank; ++d)
        out.shape.push_back(inserted[d] ? 1 : x->shape[k++]);
    } else {
      int64_t rank = x->shape.size();
      std::vector<bool> removed(rank, axes.empty());
      for (int64_t a : axes) {
        auto n = px::normalizeAxis(a, rank);
        if (!n || x->shape[*n] != 1)
          return bad("cannot squeeze axis " + llvm::Twine(a) + " of shape " +
                     px::shapeToString(x->shape));
        removed[*n] = true;
      }
      out.shape.clear();
      for (int64_t d = 0; d < rank; ++d)
        if (!removed[d] || x->shape[d] != 1)
          out.shape.push_back(x->shape[d]);
    }
    return one(out);
  }

  if (op == "Concat") {
    int64_t axis = attrInt(node, "axis", 0);
    const ConstTensor *first = in(0);
    if (!first)
      return bad("missing input");
    auto a = px::normalizeAxis(axis, first->shape.size());
    if (!a)
      return bad("axis out of range");
    ConstTensor out{first->dtype, first->shape, {}};
    out.shape[*a] = 0;
    int64_t outer = 1;
    for (int64_t d = 0; d < *a; ++d)
      outer *= first->shape[d];
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ConstTensor *t = in(i);
      if (!t)
        return bad("missing input");
      if (t->shape.size() != first->shape.size())
        return bad("inputs differ in rank");
      for (size_t d = 0; d < t->shape.size(); ++d)
        if ((int64_t)d != *a && t->shape[d] != first->shape[d])
          return bad("inputs differ in dimension " + llvm::Twine(d) + ": " +
                     px::shapeToString(first->shape) + " vs " +
                     px::shapeToString(t->shape));
      out.shape[*a] += t->shape[*a];
    }
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < inputs.size(); ++i) {
        int64_t chunk = in(i)->size() / std::max<int64_t>(outer, 1);
        out.values.insert(out.values.end(), in(i)->values.begin() + o * chunk,
                          in(i)->values.begin() + (o + 1) * chunk);
      }
    return one(out);
  }

  if (op == "Slice") {
    if (!in(1) || !in(2))
      return bad("missing starts or ends");
    auto slice = normalizeSlice(x->shape, in(1)->asInts(), in(2)->asInts(),
                                in(3) ? in(3)->asInts() : std::vector<int64_t>{},
                                in(4) ? in(4)->asInts() : std::vector<int64_t>{});
    if (!slice)
      return slice.takeError();
    int64_t rank = x->shape.size();
    const auto &begin = slice->begin, &step = slice->step, &count = slice->count;
    ConstTensor out{x->dtype, count, {}};
    auto strides = stridesOf(x->shape);
    for (int64_t i = 0, n = product(count); i < n; ++i) {
      auto idx = unravel(i, count);
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d)
        flat += (begin[d] + idx[d] * step[d]) * strides[d];
      out.values.push_back(x->values[flat]);
    }
    return one(out);
  }

  if (op == "Cast") {
    ConstTensor out = *x;
    out.dtype = (int32_t)attrInt(node, "to", TensorProto::FLOAT);
    for (double &v : out.values)
      v = castTo(out.dtype, v);
    return one(out);
  }

  if (op == "Reshape" || op == "Expand" || op == "ConstantOfShape") {
    const ConstTensor *shapeT = op == "ConstantOfShape" ? x : in(1);
    if (!shapeT)
      return bad("missing shape");
    auto requested = shapeT->asInts();
    if (op == "ConstantOfShape") {
      double fill = 0.0;
      int32_t dtype = TensorProto::FLOAT;
      for (const auto &a : node.attribute())
        if (a.name() == "value") {
          auto v = readTensor(a.t());
          if (!v || v->size() != 1)
            return bad("value must be a one-element tensor");
          fill = v->values[0];
          dtype = v->dtype;
        }
      if (auto err = checkResultShape(requested))
        return std::move(err);
      return one(ConstTensor{dtype, requested,
                             std::vector<double>(product(requested), fill)});
    }
    if (op == "Expand") {
      auto b = px::broadcastShapes(x->shape, requested);
      if (!b)
        return bad("shape does not broadcast");
      std::vector<int64_t> target(b->begin(), b->end());
      if (auto err = checkResultShape(target))
        return std::move(err);
      ConstTensor out{x->dtype, target, {}};
      for (int64_t i = 0, n = product(target); i < n; ++i)
        out.values.push_back(broadcastRead(*x, unravel(i, target)));
      return one(out);
    }
    // Reshape: 0 copies the input dimension (allowzero = 0), -1 is inferred.
    std::vector<int64_t> shape = requested;
    bool allowZero = attrInt(node, "allowzero", 0) != 0;
    int64_t known = 1, inferred = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowZero) {
        if (i >= x->shape.size())
          return bad("0 in the shape has no input dimension to copy");
        shape[i] = x->shape[i];
      }
      if (shape[i] == -1) {
        if (inferred >= 0)
          return bad("the shape has more than one -1");
        inferred = i;
      } else if (shape[i] < 0) {
        return bad("invalid dimension " + llvm::Twine(shape[i]));
      } else {
        known *= shape[i];
      }
    }
    if (inferred >= 0) {
      if (known == 0 || x->size() % known != 0)
        return bad("cannot infer -1 when reshaping " +
                   px::shapeToString(x->shape));
      shape[inferred] = x->size() / known;
    }
    if (product(shape) != x->size())
      return bad("cannot reshape " + px::shapeToString(x->shape) + " into " +
                 px::shapeToString(requested));
    return one(ConstTensor{x->dtype, shape, x->values});
  }

  if (op == "Range") {
    if (!in(1) || !in(2) || x->size() != 1 || in(1)->size() != 1 ||
        in(2)->size() != 1)
      return bad("start, limit and delta must be scalars");
    double start = x->values[0], limit = in(1)->values[0],
           delta = in(2)->values[0];
    if (delta == 0)
      return bad("Range delta is zero");
    int64_t n = std::max<int64_t>(0, toInt64(std::ceil((limit - start) / delta)));
    if (auto err = checkResultShape({n}))
      return std::move(err);
    ConstTensor out{x->dtype, {n}, {}};
    for (int64_t i = 0; i < n; ++i)
      out.values.push_back(start + i * delta);
    return one(out);
  }

  if (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMin" ||
      op == "ReduceMax") {
    // ReduceSum takes its axes as an input from opset 13, the others from 18.
    std::vector<int64_t> axes =
        op == "ReduceSum" ? (in(1) ? in(1)->asInts() : std::vector<int64_t>{})
                          : attrInts(node, "axes");
    return one(reduce(*x, axes, attrInt(node, "keepdims", 1) != 0,
                      attrInt(node, "noop_with_empty_axes", 0) != 0, op));
  }
  if (op == "Transpose") { // torch's reflection/replication pads build their
                            // pads this way
    int64_t rank = x->shape.size();
    std::vector<int64_t> perm = attrInts(node, "perm");
    if (perm.empty())
      for (int64_t d = rank - 1; d >= 0; --d)
        perm.push_back(d);
    if ((int64_t)perm.size() != rank)
      return bad("perm must list every dimension");
    ConstTensor out{x->dtype, {}, {}};
    for (int64_t p : perm) {
      if (p < 0 || p >= rank)
        return bad("perm is out of range");
      out.shape.push_back(x->shape[p]);
    }
    auto inStrides = stridesOf(x->shape);
    for (int64_t i = 0, n = product(out.shape); i < n; ++i) {
      auto idx = unravel(i, out.shape);
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d)
        flat += idx[d] * inStrides[perm[d]];
      out.values.push_back(x->values[flat]);
    }
    return one(out);
  }
  if (op == "Trilu") {
    if (x->shape.size() < 2)
      return bad("Trilu needs rank >= 2");
    int64_t k = in(1) ? in(1)->asInts().at(0) : 0;
    bool upper = attrInt(node, "upper", 1) != 0;
    int64_t n = x->shape[x->shape.size() - 2], m = x->shape.back();
    ConstTensor out = *x;
    for (int64_t i = 0; i < out.size(); ++i) {
      int64_t r = (i / m) % std::max<int64_t>(n, 1), col = i % m;
      if (upper ? col - r < k : col - r > k)
        out.values[i] = 0.0;
    }
    return one(out);
  }
  auto unaryFn = [&](double (*fn)(double)) {
    return one(elementwise({x}, x->dtype, [fn](auto &a) { return fn(a[0]); }));
  };
  if (op == "Floor") return unaryFn(std::floor);
  if (op == "Ceil") return unaryFn(std::ceil);
  if (op == "Round") return unaryFn(std::nearbyint);
  if (op == "Sin") return unaryFn(std::sin);
  if (op == "Cos") return unaryFn(std::cos);
  if (op == "Exp") return unaryFn(std::exp);
  if (op == "Log") return unaryFn(std::log);
  if (op == "Sign")
    return one(elementwise({x}, x->dtype, [](auto &a) {
      return a[0] > 0 ? 1.0 : a[0] < 0 ? -1.0 : a[0];
    }));

  if (op == "Where") {
    if (!in(1) || !in(2))
      return bad("missing input");
    return one(elementwise({x, in(1), in(2)}, in(1)->dtype,
                           [](auto &a) { return a[0] != 0 ? a[1] : a[2]; }));
  }
  if (op == "Not")
    return one(elementwise({x}, TensorProto::BOOL,
                           [](auto &a) { return a[0] == 0 ? 1.0 : 0.0; }));
  if (op == "Neg")
    return one(elementwise({x}, x->dtype, [](auto &a) { return -a[0]; }));
  if (op == "Abs")
    return one(elementwise({x}, x->dtype, [](auto &a) { return std::fabs(a[0]); }));
  if (op == "Sqrt")
    return one(elementwise({x}, x->dtype, [](auto &a) { return std::sqrt(a[0]); }));

  const ConstTensor *y = in(1);
  if (!y)
    return bad("missing input");
  bool integral = isIntegral(x->dtype);
  if (op == "Add")
    return one(elementwise({x, y}, x->dtype, [](auto &a) { return a[0] + a[1]; }));
  if (op == "Sub")
    return one(elementwise({x, y}, x->dtype, [](auto &a) { return a[0] - a[1]; }));
  if (op == "Mul")
    return one(elementwise({x, y}, x->dtype, [](auto &a) { return a[0] * a[1]; }));
  if (op == "Div") {
    for (double v : y->values)
      if (integral && v == 0)
        return bad("integer division by zero");
    return one(elementwise({x, y}, x->dtype, [integral](auto &a) {
      return integral ? std::trunc(a[0] / a[1]) : a[0] / a[1];
    }));
  }
  if (op == "Max")
    return one(elementwise({x, y}, x->dtype, [](auto &a) { return std::max(a[0], a[1]); }));
  if (op == "Min")
    return one(elementwise({x, y}, x->dtype, [](auto &a) { return std::min(a[0], a[1]); }));
  if (op == "Equal")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] == a[1] ? 1.0 : 0.0; }));
  if (op == "Less")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] < a[1] ? 1.0 : 0.0; }));
  if (op == "Greater")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] > a[1] ? 1.0 : 0.0; }));
  if (op == "GreaterOrEqual")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] >= a[1] ? 1.0 : 0.0; }));
  if (op == "LessOrEqual")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] <= a[1] ? 1.0 : 0.0; }));
  if (op == "And")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] != 0 && a[1] != 0 ? 1.0 : 0.0; }));
  if (op == "Or")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return a[0] != 0 || a[1] != 0 ? 1.0 : 0.0; }));
  if (op == "Xor")
    return one(elementwise({x, y}, TensorProto::BOOL, [](auto &a) { return (a[0] != 0) != (a[1] != 0) ? 1.0 : 0.0; }));
  if (op == "Pow")
    return one(elementwise({x, y}, x->dtype, [](auto &a) { return std::pow(a[0], a[1]); }));
  if (op == "Mod") {
    bool fmod = attrInt(node, "fmod", 0) != 0;
    for (double v : y->values)
      if (integral && v == 0)
        return bad("integer modulo by zero");
    return one(elementwise({x, y}, x->dtype, [fmod](auto &a) {
      double r = std::fmod(a[0], a[1]);
      if (!fmod && r != 0 && ((r < 0) != (a[1] < 0)))
        r += a[1];
      return r;
    }));
  }
  return bad("operator " + op + " cannot be evaluated at compile time");
}

} // namespace parallax::detail

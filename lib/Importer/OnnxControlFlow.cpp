//===- OnnxControlFlow.cpp - Loop and If with compile-time control --------===//
//
// px has no control flow: a training step is one block of static shapes.
// What PyTorch exports as Loop and If usually has a trip count and a
// condition that are shape computations (nn.EmbeddingBag with offsets loops
// over the bags; a dynamic-shape squeeze tests a dimension), so once the
// input shapes are bound they are compile-time constants. Such a Loop is
// unrolled and such an If inlined: their subgraphs' nodes go through the
// ordinary converters, with the subgraph's names mapped to unique ones per
// iteration (scopes). Anything else is an error naming the node.
//
// nn.EmbeddingBag's loop body slices the ids with bounds read from the
// offsets input, a runtime tensor: a slice of data-dependent length, which
// static shapes cannot hold. It is kept pending (a DynamicSlice) until the
// body gathers the table rows at those ids and reduces them along the
// sliced axis; that reduction becomes px.segment_reduce over one gather of
// all the ids, so the table stays read only through px.gather (a sparse
// variable). The unrolled iterations' single-bag reductions are finally
// stacked into one px.segment_reduce over every bag.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "parallax/Dialect/Px/PxShapes.h"

using namespace mlir;
using namespace parallax;
using namespace parallax::detail;
using onnx::TensorProto;

namespace {

/// Loops unroll into this many iterations at most.
constexpr int64_t kMaxUnrolledIterations = 1 << 16;

const onnx::GraphProto *graphAttr(const onnx::NodeProto &node, const char *name) {
  for (const auto &a : node.attribute())
    if (a.name() == name && a.has_g())
      return &a.g();
  return nullptr;
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A compile-time scalar or one-element tensor as a number.
std::optional<double> scalarValue(const ConstTensor &t) {
  if (t.values.size() != 1)
    return std::nullopt;
  return t.values[0];
}

} // namespace

//===----------------------------------------------------------------------===//
// Names and scopes
//===----------------------------------------------------------------------===//

std::string GraphImporter::resolve(const std::string &name) const {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end())
      return found->second;
  }
  return name;
}

std::string GraphImporter::freshName(const std::string &base) {
  std::string name;
  do
    name = base + "@" + std::to_string(freshCounter++);
  while (values.count(name) || consts.count(name));
  inlinedNames.insert(name);
  return name;
}

void GraphImporter::forget(const std::string &name) {
  if (!inlinedNames.erase(name))
    return; // a name of the main graph
  values.erase(name);
  consts.erase(name);
  dynamicSlices.erase(name);
}

void GraphImporter::alias(const std::string &to, const std::string &from) {
  if (auto c = consts.find(from); c != consts.end())
    consts[to] = c->second;
  else if (auto v = values.find(from); v != values.end())
    values[to] = v->second;
  else if (auto d = dynamicSlices.find(from); d != dynamicSlices.end())
    dynamicSlices[to] = d->second;
}

llvm::Error GraphImporter::inlineGraph(const onnx::GraphProto &g,
                                       ArrayRef<std::string> inputs,
                                       SmallVectorImpl<std::string> &outputs) {
  scopes.emplace_back();
  struct Pop {
    std::vector<std::map<std::string, std::string>> &s;
    ~Pop() { s.pop_back(); }
  } pop{scopes};
  for (int i = 0; i < g.input_size() && i < (int)inputs.size(); ++i)
    scopes.back()[g.input(i).name()] = inputs[i];
  // Subgraph initializers are constants of the subgraph.
  for (const auto &init : g.initializer()) {
    auto t = readTensor(init);
    if (!t)
      return fileError("subgraph initializer '" + init.name() +
                       "' is too large or of an unsupported type");
    std::string name = freshName(init.name());
    consts[name] = *t;
    scopes.back()[init.name()] = name;
  }
  for (const auto &node : g.node()) {
    onnx::NodeProto copy = node;
    for (int i = 0; i < copy.input_size(); ++i)
      if (!copy.input(i).empty())
        copy.set_input(i, resolve(copy.input(i)));
    for (int i = 0; i < copy.output_size(); ++i) {
      if (copy.output(i).empty())
        continue;
      std::string name = freshName(copy.output(i));
      scopes.back()[copy.output(i)] = name;
      copy.set_output(i, name);
    }
    if (auto err = importNode(copy))
      return err;
  }
  for (const auto &out : g.output())
    outputs.push_back(resolve(out.name()));
  // The subgraph's own names are not needed any more (only its outputs).
  for (const auto &[inner, name] : scopes.back())
    if (!llvm::is_contained(outputs, name))
      forget(name);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// If
//===----------------------------------------------------------------------===//

llvm::Error GraphImporter::importIf(const onnx::NodeProto &node) {
  if (auto err = checkAttributes(node, {"then_branch", "else_branch"}))
    return err;
  auto it = consts.find(node.input_size() ? node.input(0) : "");
  if (it == consts.end())
    return nodeError(node, "the If condition depends on runtime data; only "
                           "conditions known at compile time (shape tests) "
                           "are supported, by inlining the branch taken");
  auto cond = scalarValue(it->second);
  if (!cond)
    return nodeError(node, "the If condition must have one element");
  const onnx::GraphProto *branch =
      graphAttr(node, *cond != 0 ? "then_branch" : "else_branch");
  if (!branch)
    return nodeError(node, "the If has no branch graph");
  SmallVector<std::string> outs;
  if (auto err = inlineGraph(*branch, {}, outs))
    return err;
  if ((int)outs.size() < node.output_size())
    return nodeError(node, "the branch taken has " + llvm::Twine(outs.size()) +
                               " outputs for " +
                               llvm::Twine(node.output_size()));
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      alias(node.output(i), outs[i]);
  for (const std::string &name : outs)
    forget(name);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Loop
//===----------------------------------------------------------------------===//

llvm::Error GraphImporter::importLoop(const onnx::NodeProto &node) {
  if (auto err = checkAttributes(node, {"body"}))
    return err;
  const onnx::GraphProto *body = graphAttr(node, "body");
  if (!body)
    return nodeError(node, "the Loop has no body graph");
  const char *unrolledOnly = "; only loops whose trip count and condition are "
                             "known at compile time are supported (they are "
                             "unrolled)";
  // Input `index` (the trip count or the condition) as a compile-time
  // scalar; nullopt when the Loop leaves it out.
  auto known = [&](int index,
                   const char *what) -> llvm::Expected<std::optional<double>> {
    if (node.input_size() <= index || node.input(index).empty())
      return std::nullopt;
    auto it = consts.find(node.input(index));
    if (it == consts.end())
      return nodeError(node, llvm::Twine("Loop ") + what +
                                 " depends on runtime data ('" + node.input(index) +
                                 "')" + unrolledOnly);
    auto v = scalarValue(it->second);
    if (!v)
      return nodeError(node, llvm::Twine("the Loop ") + what + " must have one element");
    return v;
  };
  auto trip = known(0, "trip count");
  if (!trip)
    return trip.takeError();
  auto condition = known(1, "condition");
  if (!condition)
    return condition.takeError();
  std::optional<int64_t> tripCount;
  if (*trip)
    tripCount = toInt64(**trip);
  bool running = !*condition || **condition != 0;
  if (!tripCount && node.input_size() < 2)
    return nodeError(node, "a Loop without trip count and condition never ends");
  int64_t carried = std::max(0, node.input_size() - 2);
  int64_t scans = body->output_size() - 1 - carried;
  if (body->input_size() != 2 + carried || scans < 0 ||
      node.output_size() > carried + scans)
    return nodeError(node, "the body's inputs and outputs do not match the "
                           "Loop's " + llvm::Twine(carried) +
                           " loop-carried values");

  std::vector<std::string> state;
  for (int64_t j = 0; j < carried; ++j)
    state.push_back(node.input(2 + j));
  std::vector<std::vector<std::string>> scanned(scans);
  int64_t i = 0;
  for (; running && (!tripCount || i < *tripCount); ++i) {
    if (i >= kMaxUnrolledIterations)
      return nodeError(node, "the Loop runs more than " +
                                 llvm::Twine(kMaxUnrolledIterations) +
                                 " iterations, too many to unroll");
    std::string iter = freshName(nodeName(node) + ".iter");
    consts[iter] = ConstTensor{TensorProto::INT64, {}, {(double)i}};
    std::string cond = freshName(nodeName(node) + ".cond");
    consts[cond] = ConstTensor{TensorProto::BOOL, {}, {1.0}};
    SmallVector<std::string> inputs{iter, cond};
    inputs.append(state.begin(), state.end());
    SmallVector<std::string> outs;
    if (auto err = inlineGraph(*body, inputs, outs))
      return err;
    auto c = consts.find(outs[0]);
    auto cv = c == consts.end() ? std::nullopt : scalarValue(c->second);
    if (!cv)
      return nodeError(node, "Loop condition depends on runtime data (the "
                             "body's condition output '" +
                             body->output(0).name() + "')" + unrolledOnly);
    running = *cv != 0;
    for (int64_t j = 0; j < carried; ++j)
      state[j] = outs[1 + j];
    for (int64_t k = 0; k < scans; ++k)
      scanned[k].push_back(outs[1 + carried + k]);
  }

  for (int64_t j = 0; j < carried && j < node.output_size(); ++j)
    if (!node.output(j).empty())
      alias(node.output(j), state[j]);
  for (int64_t k = 0; k < scans && carried + k < node.output_size(); ++k) {
    const std::string &out = node.output(carried + k);
    if (out.empty())
      continue;
    if (i == 0)
      return nodeError(node, "the Loop runs no iteration, so its scan output '" +
                                 out + "' has no known shape");
    // Scan outputs stack the iterations' values along a new axis 0.
    bool allConst = llvm::all_of(scanned[k], [&](const std::string &n) {
      return consts.count(n) > 0;
    });
    if (allConst) {
      ConstTensor stacked = consts[scanned[k][0]];
      stacked.shape.insert(stacked.shape.begin(), i);
      for (size_t n = 1; n < scanned[k].size(); ++n) {
        const ConstTensor &t = consts[scanned[k][n]];
        if (t.shape != consts[scanned[k][0]].shape)
          return nodeError(node, "the scan output '" + out +
                                     "' changes shape between iterations");
        stacked.values.insert(stacked.values.end(), t.values.begin(),
                              t.values.end());
      }
      consts[out] = stacked;
      continue;
    }
    SmallVector<Value> pieces;
    for (const std::string &n : scanned[k]) {
      onnx::NodeProto probe;
      probe.set_name(nodeName(node));
      probe.set_op_type(node.op_type());
      probe.add_input(n);
      auto v = value(probe, 0);
      if (!v)
        return v.takeError();
      pieces.push_back(*v);
    }
    auto stacked = stackSegments(node, pieces);
    if (!stacked)
      return stacked.takeError();
    if (*stacked) {
      values[out] = *stacked;
      continue;
    }
    RankedTensorType first = typeOf(pieces.front());
    for (Value &p : pieces) {
      if (typeOf(p) != first)
        return nodeError(node, "the scan output '" + out +
                                   "' changes shape between iterations");
      SmallVector<int64_t> shape{1};
      llvm::append_range(shape, typeOf(p).getShape());
      auto r = reshape(node, p, shape);
      if (!r)
        return r.takeError();
      p = *r;
    }
    auto cat = make<px::ConcatOp>(node, pieces,
                                  {named("axis", b.getI64IntegerAttr(0))});
    if (!cat)
      return cat.takeError();
    values[out] = (*cat)->getResult(0);
  }
  for (const std::string &name : state)
    forget(name);
  for (const auto &names : scanned)
    for (const std::string &name : names)
      forget(name);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Slices with runtime bounds (nn.EmbeddingBag)
//===----------------------------------------------------------------------===//

llvm::Expected<bool> GraphImporter::tryDynamicSlice(const onnx::NodeProto &node) {
  // Only inside an unrolled Loop: elsewhere the bounds must be constants.
  if (scopes.empty())
    return false;
  auto isRuntime = [&](int i) {
    return i < node.input_size() && !node.input(i).empty() &&
           !consts.count(node.input(i)) && values.count(node.input(i)) &&
           !initializers.count(node.input(i));
  };
  if (!isRuntime(1) && !isRuntime(2))
    return false;
  auto x = value(node, 0);
  if (!x)
    return x.takeError();
  int64_t rank = typeOf(*x).getRank();
  // One axis (given, or the only one), step 1.
  int64_t axis = 0;
  if (node.input_size() > 3 && !node.input(3).empty()) {
    auto a = constInput(node, 3, "axes", true);
    if (!a)
      return a.takeError();
    if ((*a)->size() != 1)
      return false;
    auto n = px::normalizeAxis(toInt64((*a)->values[0]), rank);
    if (!n)
      return nodeError(node, "axis is out of range");
    axis = *n;
  } else if (rank != 1) {
    return false;
  }
  if (node.input_size() > 4 && !node.input(4).empty()) {
    auto s = constInput(node, 4, "steps", true);
    if (!s)
      return s.takeError();
    if ((*s)->size() != 1 || (*s)->values[0] != 1)
      return false;
  }
  // Bounds as i64 [1] tensors.
  Value bounds[2];
  for (int k = 0; k < 2; ++k) {
    auto v = value(node, 1 + k);
    if (!v)
      return v.takeError();
    if (typeOf(*v).getNumElements() != 1)
      return false;
    Value bound = *v;
    if (!typeOf(bound).getElementType().isInteger(64)) {
      auto c = make<px::CastOp>(
          node, ValueRange{bound}, {},
          RankedTensorType::get(typeOf(bound).getShape(), b.getI64Type()));
      if (!c)
        return c.takeError();
      bound = (*c)->getResult(0);
    }
    auto r = reshape(node, bound, {1});
    if (!r)
      return r.takeError();
    bounds[k] = *r;
  }
  dynamicSlices[node.output(0)] =
      DynamicSlice{*x, axis, bounds[0], bounds[1], nodeName(node)};
  return true;
}

llvm::Error GraphImporter::convertDynamicUse(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  auto pendingAt = [&](int i) -> const DynamicSlice * {
    if (i >= node.input_size())
      return nullptr;
    auto it = dynamicSlices.find(node.input(i));
    return it == dynamicSlices.end() ? nullptr : &it->second;
  };
  // Gather(data, slice): the rows at a slice of the ids are a slice of the
  // rows at all the ids (one gather, shared by every iteration).
  if (op == "Gather" && pendingAt(1) && !pendingAt(0)) {
    if (auto err = checkAttributes(node, {"axis"}))
      return err;
    DynamicSlice s = *pendingAt(1);
    auto data = value(node, 0);
    if (!data)
      return data.takeError();
    int64_t rank = typeOf(*data).getRank();
    auto axis = px::normalizeAxis(attrInt(node, "axis", 0), rank);
    if (!axis)
      return nodeError(node, "axis is out of range");
    Value &rows = hoistedGathers[{data->getAsOpaquePointer(),
                                  s.base.getAsOpaquePointer(), *axis}];
    if (!rows) {
      auto made = make<px::GatherOp>(node, ValueRange{*data, s.base},
                                     {named("axis", b.getI64IntegerAttr(*axis))});
      if (!made)
        return made.takeError();
      rows = (*made)->getResult(0);
    }
    dynamicSlices[node.output(0)] =
        DynamicSlice{rows, *axis + s.axis, s.start, s.end, s.origin};
    return llvm::Error::success();
  }
  if ((op == "Identity" || op == "Cast") && pendingAt(0)) {
    DynamicSlice s = *pendingAt(0);
    if (op == "Cast") {
      auto elem = elementType((int32_t)attrInt(node, "to", 0), "Cast target");
      if (!elem)
        return elem.takeError();
      if (*elem != typeOf(s.base).getElementType()) {
        auto c = make<px::CastOp>(
            node, ValueRange{s.base}, {},
            RankedTensorType::get(typeOf(s.base).getShape(), *elem));
        if (!c)
          return c.takeError();
        s.base = (*c)->getResult(0);
      }
    }
    dynamicSlices[node.output(0)] = s;
    return llvm::Error::success();
  }
  // A reduction along the sliced axis: one segment of the rows.
  if ((op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax") &&
      pendingAt(0)) {
    const DynamicSlice &s = *pendingAt(0);
    auto read = reductionAxes(node);
    if (!read)
      return read.takeError();
    std::vector<int64_t> axes = std::move(*read);
    int64_t rank = typeOf(s.base).getRank();
    for (int64_t &a : axes)
      if (auto n = px::normalizeAxis(a, rank))
        a = *n;
    if (axes != std::vector<int64_t>{s.axis} || s.axis != 0 || rank < 1)
      return nodeError(node, "a slice whose bounds depend on runtime data (node '" +
                                 s.origin +
                                 "') can only be reduced along its sliced "
                                 "axis 0, as nn.EmbeddingBag does");
    if (options.ranks > 1)
      return nodeError(node, "bags sliced by runtime offsets (node '" + s.origin +
                                 "', nn.EmbeddingBag with offsets) cannot be "
                                 "split over " + llvm::Twine(options.ranks) +
                                 " ranks: the offsets index the whole step's "
                                 "ids. Train it on one rank, or give every bag "
                                 "the same size (a 2-D input without offsets)");
    std::string mode = op == "ReduceSum" ? "sum" : op == "ReduceMean" ? "mean" : "max";
    auto seg = make<px::SegmentReduceOp>(node, ValueRange{s.base, s.start, s.end},
                                         {named("mode", b.getStringAttr(mode))});
    if (!seg)
      return seg.takeError();
    SmallVector<int64_t> shape;
    if (attrInt(node, "keepdims", 1))
      shape.push_back(1);
    llvm::append_range(shape, typeOf(s.base).getShape().drop_front());
    auto r = reshape(node, (*seg)->getResult(0), shape);
    if (!r)
      return r.takeError();
    define(node, 0, *r);
    return llvm::Error::success();
  }
  std::string which;
  for (const std::string &in : node.input())
    if (auto it = dynamicSlices.find(in); it != dynamicSlices.end())
      which = it->second.origin;
  return nodeError(node, "its input is a slice whose bounds depend on runtime "
                         "data (node '" + which +
                         "'); such a slice can only be gathered from and then "
                         "reduced along the sliced axis (ReduceSum, "
                         "ReduceMean or ReduceMax), as nn.EmbeddingBag's "
                         "export does");
}

namespace {

/// The segment_reduce a piece of a scan output is, looking through
/// reshapes that keep its elements.
px::SegmentReduceOp segmentOf(Value v) {
  while (auto r = v.getDefiningOp<px::ReshapeOp>())
    v = r.getInput();
  auto seg = v.getDefiningOp<px::SegmentReduceOp>();
  if (!seg || typeOf(seg.getStarts()).getDimSize(0) != 1)
    return nullptr;
  return seg;
}

/// (vector, index) when `v` is element `index` of a rank-1 tensor taken by
/// px.gather with a constant index (looking through reshapes).
std::optional<std::pair<Value, int64_t>> elementOf(Value v) {
  while (auto r = v.getDefiningOp<px::ReshapeOp>())
    v = r.getInput();
  auto g = v.getDefiningOp<px::GatherOp>();
  if (!g || typeOf(g.getData()).getRank() != 1)
    return std::nullopt;
  auto c = g.getIndices().getDefiningOp<px::ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  int64_t index = (*dense.getValues<APInt>().begin()).getSExtValue();
  int64_t n = typeOf(g.getData()).getDimSize(0);
  if (index < 0)
    index += n;
  return std::make_pair(g.getData(), index);
}

} // namespace

llvm::Expected<Value> GraphImporter::stackSegments(const onnx::NodeProto &node,
                                                   ArrayRef<Value> pieces) {
  SmallVector<px::SegmentReduceOp> segs;
  for (Value p : pieces) {
    px::SegmentReduceOp seg = segmentOf(p);
    if (!seg || typeOf(p).getNumElements() != typeOf(seg.getOutput()).getNumElements() ||
        (!segs.empty() && (seg.getData() != segs.front().getData() ||
                           seg.getMode() != segs.front().getMode() ||
                           typeOf(p) != typeOf(pieces.front()))))
      return Value();
    segs.push_back(seg);
  }
  // The bounds: one px.slice when they are consecutive elements of one
  // vector (the offsets), else the bounds concatenated.
  auto bounds = [&](bool starts) -> llvm::Expected<Value> {
    SmallVector<Value> parts;
    for (px::SegmentReduceOp seg : segs)
      parts.push_back(starts ? seg.getStarts() : seg.getEnds());
    auto first = elementOf(parts.front());
    bool consecutive = (bool)first;
    for (size_t k = 1; consecutive && k < parts.size(); ++k) {
      auto e = elementOf(parts[k]);
      consecutive = e && e->first == first->first &&
                    e->second == first->second + (int64_t)k;
    }
    if (consecutive && first->second >= 0 &&
        first->second + (int64_t)parts.size() <= typeOf(first->first).getDimSize(0)) {
      auto s = make<px::SliceOp>(
          node, ValueRange{first->first},
          {named("starts", b.getDenseI64ArrayAttr({first->second})),
           named("steps", b.getDenseI64ArrayAttr({1}))},
          RankedTensorType::get({(int64_t)parts.size()}, b.getI64Type()));
      if (!s)
        return s.takeError();
      return (*s)->getResult(0);
    }
    if (parts.size() == 1)
      return parts.front();
    auto cat = make<px::ConcatOp>(node, parts, {named("axis", b.getI64IntegerAttr(0))});
    if (!cat)
      return cat.takeError();
    return (*cat)->getResult(0);
  };
  auto starts = bounds(true);
  if (!starts)
    return starts.takeError();
  auto ends = bounds(false);
  if (!ends)
    return ends.takeError();
  auto seg = make<px::SegmentReduceOp>(
      node, ValueRange{segs.front().getData(), *starts, *ends},
      {named("mode", segs.front().getModeAttr())});
  if (!seg)
    return seg.takeError();
  SmallVector<int64_t> shape{(int64_t)pieces.size()};
  llvm::append_range(shape, typeOf(pieces.front()).getShape());
  auto stacked = reshape(node, (*seg)->getResult(0), shape);
  // The single-bag ops (and the bounds only they read) are now unused.
  for (Value p : pieces)
    eraseUnused(p.getDefiningOp());
  return stacked;
}

void GraphImporter::eraseUnused(Operation *op) {
  if (!op || !op->use_empty() ||
      !isa<px::ReshapeOp, px::SegmentReduceOp, px::GatherOp, px::SliceOp,
           px::CastOp, px::ConstantOp, px::ConcatOp>(op))
    return;
  SmallVector<Operation *> producers;
  for (Value v : op->getOperands())
    producers.push_back(v.getDefiningOp());
  // A name may still refer to the value (a later node could read it).
  for (Value r : op->getResults())
    for (auto &[name, v] : values)
      if (v == r)
        return;
  op->erase();
  for (Operation *p : producers)
    eraseUnused(p);
}

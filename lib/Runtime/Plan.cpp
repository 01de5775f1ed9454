//===- Plan.cpp - plan serialization and validation -----------------------===//
//
// The reader trusts nothing: every size is checked against the file before it
// is used, the checksum before the JSON is parsed, and every tensor reference
// and arena range before a session could dereference it. A plan that passes
// parsePlan cannot make the session read or write outside its buffers.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/FramedFile.h"
#include "parallax/Runtime/Grid.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace parallax::rt {

using json = nlohmann::json;

namespace {

const FramedFormat kPlanFormat = {
    "PXPLAN\r\n", kPlanFormatVersion, "plan", "program and data",
    "; make one with parallax-opt MODEL.onnx --emit=plan -o FILE",
    "; recompile the model with this parallax-opt"};

} // namespace

uint32_t crc32Of(const void *data, size_t n, uint32_t start) {
  uLong crc = start;
  const char *p = static_cast<const char *>(data);
  // zlib takes uInt lengths: feed large buffers in pieces.
  while (n > 0) {
    uInt chunk = (uInt)std::min<size_t>(n, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef *>(p), chunk);
    p += chunk;
    n -= chunk;
  }
  return (uint32_t)crc;
}

std::optional<uint32_t> crc32OfFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return std::nullopt;
  std::vector<char> chunk(1 << 20);
  uint32_t crc = 0;
  while (f) {
    f.read(chunk.data(), (std::streamsize)chunk.size());
    crc = crc32Of(chunk.data(), (size_t)f.gcount(), crc);
  }
  if (f.bad())
    return std::nullopt;
  return crc;
}

std::optional<std::string> readFileBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f)
    return std::nullopt;
  std::streamoff size = f.tellg();
  if (size < 0)
    return std::nullopt;
  std::string bytes((size_t)size, '\0');
  f.seekg(0);
  if (!f.read(bytes.data(), size))
    return std::nullopt;
  return bytes;
}

namespace {

const char *kindName(PlanTensor::Kind k) {
  switch (k) {
  case PlanTensor::Kind::Arena: return "arena";
  case PlanTensor::Kind::Variable: return "variable";
  case PlanTensor::Kind::Constant: return "constant";
  case PlanTensor::Kind::Input: return "input";
  case PlanTensor::Kind::Alias: return "alias";
  }
  return "?";
}

json initToJson(const InitialValue &v) {
  switch (v.kind) {
  case InitialValue::Kind::Onnx:
    if (!v.paddedFrom.empty())
      return {{"onnx", v.onnxName}, {"padded_from", v.paddedFrom}};
    if (!v.blockOf.empty())
      return {{"onnx", v.onnxName}, {"block_of", v.blockOf}, {"block_origin", v.blockOrigin}};
    return {{"onnx", v.onnxName}};
  case InitialValue::Kind::Splat: return {{"splat", planDouble(v.splat)}};
  case InitialValue::Kind::Blob:
    return {{"blob", {v.blobOffset, v.blobBytes}}};
  }
  return nullptr;
}

/// Parse errors inside the program: the JSON is well-formed but wrong.
struct Reader {
  const std::string &what;
  [[noreturn]] void fail(const std::string &msg) const {
    throw PlanError(what + ": invalid plan: " + msg);
  }
  const json &field(const json &j, const char *name, const std::string &ctx) const {
    if (!j.is_object() || !j.contains(name))
      fail(ctx + " has no '" + name + "'");
    return j.at(name);
  }
  template <typename T> T get(const json &j, const char *name, const std::string &ctx) const {
    try {
      return field(j, name, ctx).get<T>();
    } catch (const json::exception &e) {
      fail(ctx + ": '" + name + "' has the wrong type (" + e.what() + ")");
    }
  }
  DType dtype(const json &j, const std::string &ctx) const {
    auto name = get<std::string>(j, "dtype", ctx);
    auto t = dtypeFromName(name);
    if (!t)
      fail(ctx + ": unknown element type '" + name + "'");
    return *t;
  }
  std::vector<int64_t> shape(const json &j, const std::string &ctx) const {
    auto s = get<std::vector<int64_t>>(j, "shape", ctx);
    for (int64_t d : s)
      if (d < 0)
        fail(ctx + ": negative dimension");
    return s;
  }
  InitialValue init(const json &j, const std::string &ctx) const {
    InitialValue v;
    if (!j.is_object())
      fail(ctx + ": initial value must be an object");
    if (j.contains("onnx")) {
      v.kind = InitialValue::Kind::Onnx;
      v.onnxName = get<std::string>(j, "onnx", ctx);
      if (j.contains("padded_from"))
        v.paddedFrom = get<std::vector<int64_t>>(j, "padded_from", ctx);
      if (j.contains("block_of") || j.contains("block_origin")) {
        v.blockOf = get<std::vector<int64_t>>(j, "block_of", ctx);
        v.blockOrigin = get<std::vector<int64_t>>(j, "block_origin", ctx);
      }
    } else if (j.contains("splat")) {
      v.kind = InitialValue::Kind::Splat;
      auto splat = planDoubleValue(field(j, "splat", ctx));
      if (!splat)
        fail(ctx + ": 'splat' is not a number");
      v.splat = *splat;
    } else if (j.contains("blob")) {
      v.kind = InitialValue::Kind::Blob;
      auto range = get<std::vector<uint64_t>>(j, "blob", ctx);
      if (range.size() != 2)
        fail(ctx + ": blob must be [offset, bytes]");
      v.blobOffset = range[0];
      v.blobBytes = range[1];
    } else {
      fail(ctx + ": initial value needs 'onnx', 'splat' or 'blob'");
    }
    return v;
  }
};

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > kMaxTensorElements / d)
      return -1; // absurd: reported by the validator
    n *= d;
  }
  return n;
}

void validateShardedUpdates(const Plan &p, const Reader &r);
void checkSplit(const Plan &p, const PlanVariable &v, const Reader &r);

void validate(const Plan &p, const Reader &r) {
  auto checkBlob = [&](const InitialValue &v, int64_t bytes,
                       const std::string &ctx) {
    if (v.kind != InitialValue::Kind::Blob)
      return;
    if (v.blobOffset > p.blobs.size() || v.blobBytes > p.blobs.size() - v.blobOffset)
      r.fail(ctx + ": blob range is outside the plan's data");
    if ((int64_t)v.blobBytes != bytes)
      r.fail(ctx + ": blob has " + std::to_string(v.blobBytes) +
             " bytes for a value of " + std::to_string(bytes));
  };
  for (size_t i = 0; i < p.variables.size(); ++i) {
    const auto &v = p.variables[i];
    int64_t n = elementsOf(v.shape);
    if (n < 0)
      r.fail("variable '" + v.name + "' is too large");
    if (v.split())
      checkSplit(p, v, r);
    int64_t whole = v.split() ? elementsOf(v.wholeShape) : n;
    if (whole < 0)
      r.fail("variable '" + v.name + "' is too large");
    checkBlob(v.init, whole * (int64_t)sizeOf(v.dtype), "variable '" + v.name + "'");
    const std::vector<int64_t> &value = v.split() ? v.wholeShape : v.shape;
    const std::vector<int64_t> &from = v.init.paddedFrom;
    bool fits = from.size() == value.size();
    for (size_t d = 0; fits && d < from.size(); ++d)
      fits = from[d] >= 0 && from[d] <= value[d];
    if (!from.empty() && !fits)
      r.fail("variable '" + v.name + "': its initial value cannot be padded from " +
             shapeString(from) + " to " + shapeString(value));
    const std::vector<int64_t> &of = v.init.blockOf, &at = v.init.blockOrigin;
    bool block = of.size() == value.size() && at.size() == value.size() && from.empty();
    for (size_t d = 0; block && d < of.size(); ++d)
      block = at[d] >= 0 && value[d] >= 0 && at[d] + value[d] <= of[d];
    if ((!of.empty() || !at.empty()) && !block)
      r.fail("variable '" + v.name + "': its initial value is no block of " + shapeString(of) +
             " at " + shapeString(at));
  }
  // An initializer is one variable, or blocks that are variables each:
  // --save writes it back either way, not both.
  std::map<std::string, std::pair<bool, bool>> wholeOrBlocks;
  for (const PlanVariable &v : p.variables)
    if (v.init.kind == InitialValue::Kind::Onnx) {
      auto &[whole, blocks] = wholeOrBlocks[v.init.onnxName];
      (v.init.blockOf.empty() ? whole : blocks) = true;
      if (whole && blocks)
        r.fail("initializer '" + v.init.onnxName +
               "' is both a variable and blocks that are variables");
    }
  // Variable blocks: every member inside its block, aligned, none overlapping.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> blockRanges(p.variableBlocks.size());
  for (int64_t bytes : p.variableBlocks)
    if (bytes < 0)
      r.fail("a variable block has a negative size");
  for (const auto &v : p.variables) {
    if (v.block < 0)
      continue;
    int64_t bytes = elementsOf(v.shape) * (int64_t)sizeOf(v.dtype);
    if (v.block >= (int32_t)p.variableBlocks.size())
      r.fail("variable '" + v.name + "' names variable block " +
             std::to_string(v.block) + ", which does not exist");
    if (v.blockOffset < 0 || v.blockOffset % kPlanAlignment != 0 ||
        bytes > p.variableBlocks[v.block] - v.blockOffset)
      r.fail("variable '" + v.name + "': range [" + std::to_string(v.blockOffset) +
             ", +" + std::to_string(bytes) + ") is outside variable block " +
             std::to_string(v.block) + " or misaligned");
    blockRanges[v.block].push_back({v.blockOffset, v.blockOffset + bytes});
  }
  for (size_t b = 0; b < blockRanges.size(); ++b) {
    auto &ranges = blockRanges[b];
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        r.fail("variable block " + std::to_string(b) + ": two variables overlap at byte " +
               std::to_string(ranges[i].first));
  }
  for (size_t i = 0; i < p.constants.size(); ++i) {
    const auto &c = p.constants[i];
    int64_t n = elementsOf(c.shape);
    if (n < 0)
      r.fail("constant " + std::to_string(i) + " is too large");
    checkBlob(c.value, n * (int64_t)sizeOf(c.dtype),
              "constant " + std::to_string(i));
    if (!c.value.paddedFrom.empty() || !c.value.blockOf.empty())
      r.fail("constant " + std::to_string(i) +
             ": a padded or block initial value is a variable's");
  }
  if (p.arenaBytes < 0)
    r.fail("negative arena size");
  for (size_t id = 0; id < p.tensors.size(); ++id) {
    const PlanTensor &t = p.tensors[id];
    std::string ctx = "tensor " + std::to_string(id) + " (" + t.name + ")";
    int64_t n = elementsOf(t.shape);
    if (n < 0)
      r.fail(ctx + " is too large");
    int64_t bytes = n * (int64_t)sizeOf(t.dtype);
    auto sameAs = [&](DType dtype, const std::vector<int64_t> &shape,
                      const char *what) {
      if (dtype != t.dtype || shape != t.shape)
        r.fail(ctx + " does not match the " + what + " it names");
    };
    switch (t.kind) {
    case PlanTensor::Kind::Arena:
      if (t.offset < 0 || t.offset % kPlanAlignment != 0 ||
          bytes > p.arenaBytes - t.offset)
        r.fail(ctx + ": arena range [" + std::to_string(t.offset) + ", +" +
               std::to_string(bytes) + ") is outside the arena of " +
               std::to_string(p.arenaBytes) + " bytes or misaligned");
      break;
    case PlanTensor::Kind::Variable:
      if (t.ref < 0 || t.ref >= (int32_t)p.variables.size())
        r.fail(ctx + ": no variable " + std::to_string(t.ref));
      sameAs(p.variables[t.ref].dtype, p.variables[t.ref].shape, "variable");
      break;
    case PlanTensor::Kind::Constant:
      if (t.ref < 0 || t.ref >= (int32_t)p.constants.size())
        r.fail(ctx + ": no constant " + std::to_string(t.ref));
      sameAs(p.constants[t.ref].dtype, p.constants[t.ref].shape, "constant");
      break;
    case PlanTensor::Kind::Input:
      if (t.ref < 0 || t.ref >= (int32_t)p.inputs.size())
        r.fail(ctx + ": no input " + std::to_string(t.ref));
      sameAs(p.inputs[t.ref].dtype, p.inputs[t.ref].shape, "input");
      break;
    case PlanTensor::Kind::Alias: {
      // Aliases point backwards, or to an arena buffer (a gradient bucket
      // made after the gradients it holds), so chains end.
      if (t.ref < 0 || t.ref >= (int32_t)p.tensors.size() ||
          (t.ref >= (int32_t)id && p.tensors[t.ref].kind != PlanTensor::Kind::Arena))
        r.fail(ctx + ": aliases tensor " + std::to_string(t.ref) +
               ", which is neither an earlier tensor nor an arena buffer");
      int64_t base = p.tensors[t.ref].bytes();
      if (t.offset < 0 || bytes > base - t.offset)
        r.fail(ctx + ": alias range is outside tensor " + std::to_string(t.ref));
      break;
    }
    }
  }
  auto checkId = [&](int32_t id, bool optional, const std::string &ctx) {
    if ((optional && id == -1) || (id >= 0 && id < (int32_t)p.tensors.size()))
      return;
    r.fail(ctx + " names tensor " + std::to_string(id) + ", which does not exist");
  };
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const PlanKernel &kernel = p.kernels[k];
    std::string ctx = "kernel " + std::to_string(k) + " (" + kernel.op + ")";
    for (int32_t id : kernel.inputs)
      checkId(id, /*optional=*/true, ctx);
    for (int32_t id : kernel.outputs)
      checkId(id, /*optional=*/false, ctx);
    // A token numbers a started collective for its wait kernel: the
    // session keeps one ticket per number, so it is bounded by the kernels.
    if (kernel.attrs.contains("token")) {
      const json &token = kernel.attrs["token"];
      if (!token.is_number_integer() || token.get<int64_t>() < 0 ||
          token.get<int64_t>() >= (int64_t)p.kernels.size())
        r.fail(ctx + ": token " + token.dump() + " is not a number below the " +
               std::to_string(p.kernels.size()) + " kernels");
    }
  }
  for (const PlanOutput &o : p.outputs)
    checkId(o.tensor, false, "output '" + o.name + "'");
  if (p.mode == Plan::Mode::Train &&
      (p.lossOutput < 0 || p.lossOutput >= (int)p.outputs.size()))
    r.fail("a training plan needs a loss output");
  if (p.worldSize < 1)
    r.fail("world size must be >= 1");
  if (p.ranksPerMachine < 1 || p.worldSize % p.ranksPerMachine != 0)
    r.fail("the world of " + std::to_string(p.worldSize) +
           " ranks does not divide into machines of " +
           std::to_string(p.ranksPerMachine));
  if (p.modelRanks < 1 || p.ranksPerMachine % p.modelRanks != 0)
    r.fail("model_ranks " + std::to_string(p.modelRanks) +
           " does not divide a machine's " + std::to_string(p.ranksPerMachine) + " ranks");
  for (const PlanGrid &g : p.grids) {
    int64_t n = 1;
    for (int64_t d : g.shape)
      n *= d;
    if (n != p.worldSize)
      r.fail("grid '" + g.name + "' has " + std::to_string(n) +
             " ranks, the plan is for " + std::to_string(p.worldSize));
  }
  validateShardedUpdates(p, r);
}

/// Weight-update sharding: a shard_update all-reduce and an
/// all_gather_variables kernel write G blocks of shard_bytes, which must fit
/// the bucket and the variable block (the kernels cannot see those sizes);
/// a sharded update's gradient must lie where its shard_offset says.
void validateShardedUpdates(const Plan &p, const Reader &r) {
  // The tensor an alias chain ends at, and the chain's byte offset into it.
  auto baseOf = [&](int32_t id) {
    int64_t at = 0;
    for (size_t hops = 0; hops <= p.tensors.size() &&
                          p.tensors[id].kind == PlanTensor::Kind::Alias; ++hops) {
      at += p.tensors[id].offset;
      id = p.tensors[id].ref;
    }
    return std::make_pair(id, at);
  };
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const PlanKernel &kernel = p.kernels[k];
    if (kernel.attrs.contains("shard_offset")) {
      // A sharded update reads its gradient from block r, which the
      // reduce-scatter leaves at the start of the bucket: the gradient must
      // lie at byte shard_offset of a bucket of at least shard_bytes.
      std::string ctx = "kernel " + std::to_string(k) + " (" + kernel.op + ")";
      try {
        int64_t offset = kernel.attrs.at("shard_offset").get<int64_t>();
        int64_t shard = kernel.attrs.at("shard_bytes").get<int64_t>();
        int32_t grad = kernel.inputs.empty() ? -1 : kernel.inputs.back();
        auto [id, at] = grad >= 0 ? baseOf(grad) : std::make_pair(-1, int64_t(0));
        if (id < 0 || p.tensors[id].kind != PlanTensor::Kind::Arena || at != offset ||
            shard <= 0 || shard > p.tensors[id].bytes())
          r.fail(ctx + ": its gradient is not at byte shard_offset " + std::to_string(offset) +
                 " of a bucket of at least shard_bytes " + std::to_string(shard));
      } catch (const json::exception &e) {
        r.fail(ctx + ": bad sharding attributes (" + e.what() + ")");
      }
      continue;
    }
    bool reduce = kernel.op == "all_reduce" && kernel.attrs.value("shard_update", false);
    if (!reduce && kernel.op != "all_gather_variables")
      continue;
    std::string ctx = "kernel " + std::to_string(k) + " (" + kernel.op + ")";
    try {
      int64_t g;
      try {
        g = kernelGridOf(kernel.attrs, p.worldSize).groupSize();
      } catch (const CommError &e) {
        r.fail(ctx + ": " + e.what());
      }
      int64_t shard = kernel.attrs.at("shard_bytes").get<int64_t>();
      if (g < 1 || g > p.worldSize || shard <= 0 || shard > INT_MAX)
        r.fail(ctx + ": shard_bytes " + std::to_string(shard) + " for a group of " +
               std::to_string(g) + " ranks is out of range");
      int64_t room = 0;
      const char *what = "bucket";
      if (reduce) {
        if (kernel.outputs.empty())
          r.fail(ctx + ": a sharded all-reduce needs its bucket's tensors");
        room = p.tensors[baseOf(kernel.outputs[0]).first].bytes();
      } else {
        auto offsets = kernel.attrs.at("offsets").get<std::vector<int64_t>>();
        if (kernel.inputs.empty() || offsets.size() != kernel.inputs.size())
          r.fail(ctx + ": needs one offset per variable");
        int32_t block = -1;
        for (size_t i = 0; i < kernel.inputs.size(); ++i) {
          int32_t id = kernel.inputs[i];
          const PlanTensor *t = id >= 0 ? &p.tensors[id] : nullptr;
          const PlanVariable *v =
              t && t->kind == PlanTensor::Kind::Variable ? &p.variables[t->ref] : nullptr;
          if (!v || v->block < 0 || (block >= 0 && v->block != block) ||
              v->blockOffset != offsets[i])
            r.fail(ctx + ": input " + std::to_string(i) +
                   " is not a variable of the kernel's variable block at offset " +
                   std::to_string(offsets[i]));
          block = v->block;
        }
        room = p.variableBlocks[block];
        what = "variable block";
      }
      if (shard * g > room)
        r.fail(ctx + ": " + std::to_string(g) + " blocks of " + std::to_string(shard) +
               " bytes do not fit its " + what + " of " + std::to_string(room) + " bytes");
    } catch (const json::exception &e) {
      r.fail(ctx + ": bad sharding attributes (" + e.what() + ")");
    }
  }
}

/// A split variable: a grid the plan declares, distinct axes of it, and a
/// block that divides the whole evenly along every dimension.
void checkSplit(const Plan &p, const PlanVariable &v, const Reader &r) {
  std::string ctx = "variable '" + v.name + "'";
  const PlanGrid *grid = p.grid(v.splitGrid);
  if (!grid)
    r.fail(ctx + ": split over grid '" + v.splitGrid + "', which the plan does not declare");
  if (v.wholeShape.size() != v.shape.size() || v.splitAxes.size() > v.shape.size())
    r.fail(ctx + ": its block and whole shapes disagree in rank");
  std::vector<bool> used(grid->shape.size(), false);
  for (size_t d = 0; d < v.shape.size(); ++d) {
    int64_t parts = 1;
    if (d < v.splitAxes.size())
      for (int64_t a : v.splitAxes[d]) {
        if (a < 0 || a >= (int64_t)grid->shape.size() || used[a])
          r.fail(ctx + ": split axis " + std::to_string(a) + " is not a free axis of grid '" +
                 v.splitGrid + "'");
        used[a] = true;
        parts *= grid->shape[a];
      }
    if (v.shape[d] * parts != v.wholeShape[d])
      r.fail(ctx + ": dimension " + std::to_string(d) + " of " + std::to_string(v.wholeShape[d]) +
             " is not " + std::to_string(parts) + " blocks of " + std::to_string(v.shape[d]));
  }
}

} // namespace

int64_t PlanTensor::numElements() const { return elementsOf(shape); }

const PlanGrid *Plan::grid(const std::string &name) const {
  for (const PlanGrid &g : grids)
    if (g.name == name)
      return &g;
  return nullptr;
}

json planDouble(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return v;
}

std::optional<double> planDoubleValue(const json &j) {
  if (j.is_number())
    return j.get<double>();
  if (j == "inf")
    return std::numeric_limits<double>::infinity();
  if (j == "-inf")
    return -std::numeric_limits<double>::infinity();
  if (j == "nan")
    return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

const char *roleName(PlanVariable::Role role) {
  switch (role) {
  case PlanVariable::Role::Parameter: return "parameter";
  case PlanVariable::Role::State: return "state";
  case PlanVariable::Role::OptimizerState: return "optimizer_state";
  }
  return "?";
}

json planToJson(const Plan &p) {
  json j;
  j["mode"] = p.mode == Plan::Mode::Train ? "train" : "inference";
  j["target"] = p.target;
  j["world_size"] = p.worldSize;
  j["ranks_per_machine"] = p.ranksPerMachine;
  if (p.modelRanks > 1)
    j["model_ranks"] = p.modelRanks;
  json grids = json::array();
  for (const auto &g : p.grids)
    grids.push_back({{"name", g.name}, {"shape", g.shape}});
  j["grids"] = grids;
  j["source"] = {{"path", p.sourcePath}, {"bytes", p.sourceBytes},
                 {"crc32", p.sourceCrc32}};
  j["options"] = p.options;
  json vars = json::array();
  for (const auto &v : p.variables) {
    json e = {{"name", v.name}, {"dtype", nameOf(v.dtype)}, {"shape", v.shape},
              {"role", roleName(v.role)}, {"init", initToJson(v.init)}};
    if (!v.parameter.empty())
      e["parameter"] = v.parameter;
    if (v.block >= 0) {
      e["block"] = v.block;
      e["block_offset"] = v.blockOffset;
    }
    if (v.split())
      e["split"] = {{"whole", v.wholeShape}, {"grid", v.splitGrid}, {"axes", v.splitAxes}};
    vars.push_back(e);
  }
  j["variables"] = vars;
  j["variable_blocks"] = p.variableBlocks;
  json consts = json::array();
  for (const auto &c : p.constants)
    consts.push_back({{"dtype", nameOf(c.dtype)}, {"shape", c.shape},
                      {"value", initToJson(c.value)}});
  j["constants"] = consts;
  json inputs = json::array();
  for (const auto &in : p.inputs)
    inputs.push_back({{"name", in.name}, {"dtype", nameOf(in.dtype)},
                      {"shape", in.shape}, {"batch_axis", in.batchAxis},
                      {"synthetic", in.synthetic}, {"range", in.range}});
  j["inputs"] = inputs;
  json outputs = json::array();
  for (const auto &o : p.outputs)
    outputs.push_back({{"name", o.name}, {"tensor", o.tensor}});
  j["outputs"] = outputs;
  j["loss"] = p.lossOutput;
  json tensors = json::array();
  for (const auto &t : p.tensors)
    tensors.push_back({{"name", t.name}, {"dtype", nameOf(t.dtype)},
                       {"shape", t.shape}, {"kind", kindName(t.kind)},
                       {"offset", t.offset}, {"ref", t.ref}});
  j["tensors"] = tensors;
  json kernels = json::array();
  for (const auto &k : p.kernels)
    kernels.push_back({{"op", k.op}, {"in", k.inputs}, {"out", k.outputs},
                       {"attrs", k.attrs}, {"loc", k.loc}});
  j["kernels"] = kernels;
  j["arena_bytes"] = p.arenaBytes;
  const MemoryEstimate &m = p.memory;
  j["memory"] = {{"parameters", m.parameters},    {"state", m.state},
                 {"optimizer_state", m.optimizerState},
                 {"gradients", m.gradients},      {"arena", m.arena},
                 {"inputs", m.inputs},            {"constants", m.constants},
                 {"collectives", m.collectives},  {"workspace", m.workspace},
                 {"libraries", m.libraries},
                 {"peak", m.peak()}};
  return j;
}

std::string packPlan(const std::string &program, const std::string &blobs) {
  return frame(kPlanFormat, program, blobs);
}

std::string serializePlan(const Plan &plan) {
  return packPlan(planToJson(plan).dump(), plan.blobs);
}

void writePlan(const Plan &plan, const std::string &path) {
  std::string bytes = serializePlan(plan);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw PlanError(path + ": cannot open for writing: " + std::strerror(errno));
  f.write(bytes.data(), (std::streamsize)bytes.size());
  f.close();
  if (!f)
    throw PlanError(path + ": write failed: " + std::strerror(errno));
}

Plan parsePlan(const std::string &bytes, const std::string &what) {
  FramedSections sections = unframe(bytes, kPlanFormat, [&](const std::string &why) {
    throw PlanError(what + ": " + why);
  });
  json j;
  try {
    j = json::parse(sections.first);
  } catch (const json::exception &e) {
    throw PlanError(what + ": corrupt plan program: " + e.what());
  }
  Reader r{what};
  Plan p;
  std::string mode = r.get<std::string>(j, "mode", "plan");
  if (mode != "train" && mode != "inference")
    r.fail("unknown mode '" + mode + "'");
  p.mode = mode == "train" ? Plan::Mode::Train : Plan::Mode::Inference;
  // Plans from before GPU targets existed are CPU plans.
  p.target = j.contains("target") ? r.get<std::string>(j, "target", "plan") : "cpu";
  if (p.target != "cpu" && p.target != "cuda")
    r.fail("unknown target '" + p.target + "' (this parallax-run knows cpu and cuda)");
  p.worldSize = r.get<int>(j, "world_size", "plan");
  p.ranksPerMachine = r.get<int>(j, "ranks_per_machine", "plan");
  p.modelRanks = j.contains("model_ranks") ? r.get<int>(j, "model_ranks", "plan") : 1;
  for (const json &g : r.get<json>(j, "grids", "plan"))
    p.grids.push_back({r.get<std::string>(g, "name", "grid"),
                       r.shape(g, "grid")});
  const json &source = r.field(j, "source", "plan");
  p.sourcePath = r.get<std::string>(source, "path", "source");
  p.sourceBytes = r.get<uint64_t>(source, "bytes", "source");
  p.sourceCrc32 = r.get<uint32_t>(source, "crc32", "source");
  if (j.contains("options"))
    p.options = j["options"];
  p.blobs = std::string(sections.second);

  for (const json &v : r.get<json>(j, "variables", "plan")) {
    PlanVariable var;
    var.name = r.get<std::string>(v, "name", "variable");
    std::string ctx = "variable '" + var.name + "'";
    var.dtype = r.dtype(v, ctx);
    var.shape = r.shape(v, ctx);
    std::string role = r.get<std::string>(v, "role", ctx);
    if (role == "parameter")
      var.role = PlanVariable::Role::Parameter;
    else if (role == "state")
      var.role = PlanVariable::Role::State;
    else if (role == "optimizer_state")
      var.role = PlanVariable::Role::OptimizerState;
    else
      r.fail(ctx + ": unknown role '" + role + "'");
    var.init = r.init(r.field(v, "init", ctx), ctx);
    if (v.contains("parameter"))
      var.parameter = r.get<std::string>(v, "parameter", ctx);
    if (v.contains("block")) {
      var.block = r.get<int32_t>(v, "block", ctx);
      var.blockOffset = r.get<int64_t>(v, "block_offset", ctx);
    }
    if (v.contains("split")) {
      const json &split = r.field(v, "split", ctx);
      var.wholeShape = r.get<std::vector<int64_t>>(split, "whole", ctx);
      var.splitGrid = r.get<std::string>(split, "grid", ctx);
      var.splitAxes = r.get<std::vector<std::vector<int64_t>>>(split, "axes", ctx);
    }
    p.variables.push_back(std::move(var));
  }
  if (j.contains("variable_blocks"))
    p.variableBlocks = r.get<std::vector<int64_t>>(j, "variable_blocks", "plan");
  for (const json &c : r.get<json>(j, "constants", "plan")) {
    PlanConstant constant;
    std::string ctx = "constant " + std::to_string(p.constants.size());
    constant.dtype = r.dtype(c, ctx);
    constant.shape = r.shape(c, ctx);
    constant.value = r.init(r.field(c, "value", ctx), ctx);
    p.constants.push_back(std::move(constant));
  }
  for (const json &in : r.get<json>(j, "inputs", "plan")) {
    PlanInput input;
    input.name = r.get<std::string>(in, "name", "input");
    std::string ctx = "input '" + input.name + "'";
    input.dtype = r.dtype(in, ctx);
    input.shape = r.shape(in, ctx);
    input.batchAxis = r.get<int>(in, "batch_axis", ctx);
    input.synthetic = r.get<std::string>(in, "synthetic", ctx);
    input.range = r.get<int64_t>(in, "range", ctx);
    if (input.batchAxis >= (int)input.shape.size() || input.batchAxis < -1)
      r.fail(ctx + ": batch axis out of range");
    p.inputs.push_back(std::move(input));
  }
  for (const json &o : r.get<json>(j, "outputs", "plan"))
    p.outputs.push_back({r.get<std::string>(o, "name", "output"),
                         r.get<int32_t>(o, "tensor", "output")});
  p.lossOutput = r.get<int>(j, "loss", "plan");
  for (const json &t : r.get<json>(j, "tensors", "plan")) {
    PlanTensor tensor;
    std::string ctx = "tensor " + std::to_string(p.tensors.size());
    tensor.name = r.get<std::string>(t, "name", ctx);
    tensor.dtype = r.dtype(t, ctx);
    tensor.shape = r.shape(t, ctx);
    std::string kind = r.get<std::string>(t, "kind", ctx);
    bool known = false;
    for (auto k : {PlanTensor::Kind::Arena, PlanTensor::Kind::Variable,
                   PlanTensor::Kind::Constant, PlanTensor::Kind::Input,
                   PlanTensor::Kind::Alias})
      if (kind == kindName(k)) {
        tensor.kind = k;
        known = true;
      }
    if (!known)
      r.fail(ctx + ": unknown kind '" + kind + "'");
    tensor.offset = r.get<int64_t>(t, "offset", ctx);
    tensor.ref = r.get<int32_t>(t, "ref", ctx);
    p.tensors.push_back(std::move(tensor));
  }
  for (const json &k : r.get<json>(j, "kernels", "plan")) {
    PlanKernel kernel;
    std::string ctx = "kernel " + std::to_string(p.kernels.size());
    kernel.op = r.get<std::string>(k, "op", ctx);
    kernel.inputs = r.get<std::vector<int32_t>>(k, "in", ctx);
    kernel.outputs = r.get<std::vector<int32_t>>(k, "out", ctx);
    kernel.attrs = r.get<json>(k, "attrs", ctx);
    kernel.loc = r.get<std::string>(k, "loc", ctx);
    p.kernels.push_back(std::move(kernel));
  }
  p.arenaBytes = r.get<int64_t>(j, "arena_bytes", "plan");
  if (j.contains("memory")) {
    // Only for reports, and optional: each field as checked as the rest.
    const json &m = j["memory"];
    auto num = [&](const char *k) {
      return m.is_object() && m.contains(k) ? r.get<int64_t>(m, k, "memory") : 0;
    };
    p.memory.parameters = num("parameters");
    p.memory.state = num("state");
    p.memory.optimizerState = num("optimizer_state");
    p.memory.gradients = num("gradients");
    p.memory.arena = num("arena");
    p.memory.inputs = num("inputs");
    p.memory.constants = num("constants");
    p.memory.collectives = num("collectives");
    p.memory.workspace = num("workspace");
    p.memory.libraries = num("libraries");
  }
  validate(p, r);
  p.checksum = sections.checksum;
  return p;
}

Plan readPlan(const std::string &path) {
  std::optional<std::string> bytes = readFileBytes(path);
  if (!bytes)
    throw PlanError(path + ": cannot open plan: " + std::strerror(errno));
  return parsePlan(*bytes, path);
}

} // namespace parallax::rt

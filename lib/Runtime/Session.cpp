//===- Session.cpp - storage, initial values, kernel binding, steps -------===//

#include "parallax/Runtime/Session.h"
#include "Blocks.h"
#include "HostStaged.h"
#include "parallax/Runtime/Finite.h"
#include "parallax/Runtime/Grid.h"
#include "parallax/Runtime/MachineMemory.h"
#include "parallax/Runtime/Random.h"
#include "parallax/Runtime/RowPartition.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <numeric>
#include <set>
#include <sstream>
#include <type_traits>

namespace parallax::rt {

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

namespace {

void fillSplat(const TensorView &t, double value) {
  int64_t n = t.numElements();
  auto fill = [&](auto *p, auto v) { std::fill(p, p + n, v); };
  switch (t.dtype) {
  case DType::F32: fill(t.as<float>(), (float)value); return;
  case DType::F64: fill(t.as<double>(), value); return;
  case DType::I64: fill(t.as<int64_t>(), (int64_t)value); return;
  case DType::I32: fill(t.as<int32_t>(), (int32_t)value); return;
  case DType::I16: fill(t.as<int16_t>(), (int16_t)value); return;
  case DType::I8: fill(t.as<int8_t>(), (int8_t)value); return;
  case DType::U8: fill(t.as<uint8_t>(), (uint8_t)value); return;
  case DType::Bool: fill(t.as<uint8_t>(), (uint8_t)(value != 0)); return;
  case DType::F16:
  case DType::BF16:
    if (value == 0.0) {
      if (t.bytes() > 0)
        std::memset(t.data, 0, t.bytes());
      return;
    }
    break;
  }
  throw RuntimeError(std::string("cannot fill a ") + nameOf(t.dtype) +
                     " tensor with " + std::to_string(value));
}

/// --weights=random: uniform in [-b, b) with b = 1/sqrt(fan-in) (PyTorch's
/// default for linear layers) for floats, zeros otherwise; stream `which`.
void fillRandom(const TensorView &t, uint64_t which, uint64_t seed) {
  int64_t n = t.numElements();
  int64_t fanIn = t.shape.size() > 1 ? n / std::max<int64_t>(t.shape[0], 1) : n;
  double b = 1.0 / std::sqrt((double)std::max<int64_t>(fanIn, 1));
  uint64_t key = streamKey(seed, 0x5745494748545300ull + which, 0);
  auto fill = [&](auto *p) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = (std::remove_pointer_t<decltype(p)>)((uniform53At(key, (uint64_t)i) * 2 - 1) * b);
  };
  if (t.dtype == DType::F32)
    fill(t.as<float>());
  else if (t.dtype == DType::F64)
    fill(t.as<double>());
  else if (t.bytes() > 0)
    std::memset(t.data, 0, t.bytes());
}

/// Bytes of a tensor; the plan reader bounds its element count.
int64_t bytesOf(DType t, const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n * (int64_t)sizeOf(t);
}

std::string describe(const PlanKernel &k, size_t index) {
  std::string s = "kernel " + std::to_string(index) + " (" + k.op;
  if (!k.loc.empty())
    s += " at " + k.loc;
  return s + ")";
}

} // namespace

Session::Session(Plan plan, SessionOptions options)
    : plan_(std::move(plan)), options_(std::move(options)) {
  if (options_.device) {
    device_ = options_.device;
  } else {
    ownDevice_ = makeCpuDevice();
    device_ = ownDevice_.get();
  }
  if (plan_.target != nameOf(device_->kind()))
    throw PlanError("the plan was compiled for --target=" + plan_.target +
                    ", but this run's device is " + device_->description() +
                    "; recompile with --target=" + nameOf(device_->kind()) +
                    " or run with --device=" + plan_.target);
  if (plan_.worldSize != options_.worldSize)
    throw PlanError("the plan was compiled for " +
                    std::to_string(plan_.worldSize) + " rank(s), but " +
                    std::to_string(options_.worldSize) +
                    " are running it; recompile with --np " +
                    std::to_string(options_.worldSize));
  env_.threads = std::max(1, options_.threads);
  env_.seed = options_.seed;
  env_.rank = options_.rank;
  env_.worldSize = options_.worldSize;
  env_.ranksPerMachine = std::max(1, plan_.ranksPerMachine);
  if (options_.comm) {
    env_.comm = options_.comm;
  } else {
    if (options_.worldSize != 1)
      throw RuntimeError("a session of " + std::to_string(options_.worldSize) +
                         " ranks needs a communicator");
    ownComm_ = makeLocalComm();
    env_.comm = ownComm_.get();
  }
  // Samples are numbered over the global batch, so per-sample randomness
  // (dropout) is the same whatever the rank count.
  int64_t localBatch = 1;
  for (const PlanInput &in : plan_.inputs)
    if (in.batchAxis == 0 && !in.shape.empty()) {
      localBatch = in.shape[0];
      break;
    }
  // On a Pr x Pc grid the Pr ranks of a model group share their samples.
  int modelRanks = std::max(1, plan_.modelRanks);
  env_.sampleOffset = (int64_t)(options_.rank / modelRanks) * localBatch;
  env_.dataRanks = std::max(1, options_.worldSize / modelRanks);
  env_.globalBatch = localBatch * env_.dataRanks;
  int64_t tokens = 0;
  for (const PlanKernel &k : plan_.kernels)
    if (k.attrs.contains("token"))
      tokens = std::max<int64_t>(tokens, k.attrs["token"].get<int64_t>() + 1);
  env_.pending.assign(tokens, nullptr);
  env_.device = device_;
  allocate();
  loadInitialValues();
  bindKernels();
  allocateWorkspace();
}

void Session::allocateWorkspace() {
  if (!env_.workspace)
    return;
  StorageBytes need = storageOf(plan_);
  need.workspace = env_.workspace->bytes();
  need.total = need.total > INT64_MAX - need.workspace ? INT64_MAX : need.total + need.workspace;
  checkFits(need);
  env_.workspace->base();
}

Session::~Session() = default;

StorageBytes storageOf(const Plan &plan) {
  // The reader bounds each size (2^53 bytes), not their sum.
  auto add = [](int64_t &sum, int64_t bytes) {
    sum = bytes > INT64_MAX - sum ? INT64_MAX : sum + bytes;
  };
  StorageBytes s;
  s.arena = plan.arenaBytes;
  for (int64_t bytes : plan.variableBlocks)
    add(s.variables, bytes);
  for (const auto &v : plan.variables)
    if (v.block < 0)
      add(s.variables, bytesOf(v.dtype, v.shape));
  for (const auto &c : plan.constants)
    add(s.constants, bytesOf(c.dtype, c.shape));
  for (const auto &in : plan.inputs)
    add(s.inputs, bytesOf(in.dtype, in.shape));
  s.collectives = std::max<int64_t>(0, plan.memory.collectives);
  s.libraries = std::max<int64_t>(0, plan.memory.libraries);
  s.total = s.arena;
  for (int64_t part : {s.variables, s.constants, s.inputs, s.collectives, s.libraries})
    add(s.total, part);
  return s;
}

void Session::checkFits(const StorageBytes &need) const {
  // A GPU's memory is its own (ranks sharing one GPU each see what is free
  // when they start); the host's is shared by the machine's ranks.
  int64_t usable = options_.memoryLimit > 0 ? options_.memoryLimit : device_->memoryBytes();
  int local = options_.memoryLimit > 0 || !onHost()
                  ? 1
                  : std::max(1, env_.comm->ranksPerMachine());
  double total = (double)need.total * local;
  if (usable > 0 && total > (double)usable)
    throw RuntimeError(
        "the plan needs " + bytesText(need.total) + " of memory per rank (arena " +
        bytesText(need.arena) + ", variables " + bytesText(need.variables) +
        ", inputs " + bytesText(need.inputs) + ", constants " + bytesText(need.constants) +
        (need.collectives > 0 ? ", collectives " + bytesText(need.collectives)
                              : std::string()) +
        (need.libraries > 0 ? ", libraries " + bytesText(need.libraries) : std::string()) +
        (need.workspace > 0 ? ", kernel workspace " + bytesText(need.workspace)
                            : std::string()) +
        ")" +
        (local > 1 ? ", " + bytesText((int64_t)std::min(total, 9.2e18)) + " for the " +
                         std::to_string(local) + " ranks of this machine"
                   : std::string()) +
        ", more than " +
        (options_.memoryLimit > 0 ? "the session's limit of " + bytesText(usable)
         : onHost()               ? "this machine's " + bytesText(usable)
                                  : device_->description() + "'s " + bytesText(usable)) +
        "; compile it with a smaller --batch-size, or for more machines");
}

void Session::allocate() {
  // Checked before any of it is allocated: a plan that does not fit would
  // otherwise be refused only by the kernel's OOM killer once the zeroing
  // touches its pages.
  checkFits(storageOf(plan_));
  Device *d = device_;
  arena_ = Buffer(plan_.arenaBytes, d);
  for (int64_t bytes : plan_.variableBlocks)
    variableBlocks_.emplace_back(bytes, d);
  for (const auto &v : plan_.variables) {
    bool inBlock = v.block >= 0;
    variables_.emplace_back(inBlock ? 0 : bytesOf(v.dtype, v.shape), d);
    variableData_.push_back(
        inBlock ? static_cast<char *>(variableBlocks_[v.block].data()) + v.blockOffset
                : static_cast<char *>(variables_.back().data()));
  }
  for (const auto &c : plan_.constants)
    constants_.emplace_back(bytesOf(c.dtype, c.shape), d);
  for (const auto &in : plan_.inputs) {
    int64_t bytes = bytesOf(in.dtype, in.shape);
    inputs_.emplace_back(bytes, d);
    if (!onHost())
      for (auto &set : hostInputs_)
        set.emplace_back(d->allocateHost(bytes), [d](void *p) { d->deallocateHost(p); });
  }
  outputMirrors_.resize(plan_.outputs.size());
  variableMirrors_.resize(plan_.variables.size());
}

void Session::loadInitialValues() {
  std::vector<std::string> onnxNames;
  std::vector<TensorView> onnxDests;
  uint64_t randomFilled = 0;
  // Padded initial values (InitialValue::paddedFrom): the initializer,
  // read into `data`, and the zeros it is placed into.
  struct Padded {
    std::vector<char> data;
    std::vector<int64_t> shape;
    TensorView dest;
  };
  std::vector<Padded> padded;
  // Initializers whose blocks are variables (InitialValue::blockOf): each
  // read once, whole, and its blocks copied out once read.
  struct BlockSource {
    std::vector<char> data;
    std::vector<int64_t> shape;
    std::vector<std::pair<TensorView, std::vector<int64_t>>> blocks;
  };
  std::deque<BlockSource> blockSources;
  std::map<std::string, BlockSource *> blockSourceOf;
  auto load = [&](const InitialValue &init, const TensorView &dest) {
    switch (init.kind) {
    case InitialValue::Kind::Splat:
      fillSplat(dest, init.splat);
      break;
    case InitialValue::Kind::Blob:
      if (init.blobBytes > 0) // an empty tensor has no storage (null data)
        std::memcpy(dest.data, plan_.blobs.data() + init.blobOffset, init.blobBytes);
      break;
    case InitialValue::Kind::Onnx: {
      TensorView into = dest;
      bool rowsOnly = !init.paddedFrom.empty() && init.paddedFrom.size() == dest.shape.size() &&
                      std::equal(init.paddedFrom.begin() + 1, init.paddedFrom.end(),
                                 dest.shape.begin() + 1);
      if (rowsOnly) {
        // Padded rows: the initializer is the value's leading bytes, read
        // in place (no second copy of a large table), the rest zeros.
        into = TensorView{dest.data, dest.dtype, init.paddedFrom};
        int64_t head = (int64_t)bytesOf(dest.dtype, init.paddedFrom);
        std::memset(static_cast<char *>(dest.data) + head, 0,
                    (size_t)(dest.bytes() - head));
      } else if (!init.blockOf.empty()) {
        BlockSource *&source = blockSourceOf[init.onnxName];
        if (source) { // already read for another of its blocks
          source->blocks.push_back({dest, init.blockOrigin});
          break;
        }
        source = &blockSources.emplace_back();
        source->data.resize(std::max<size_t>(bytesOf(dest.dtype, init.blockOf), 1));
        source->shape = init.blockOf;
        source->blocks.push_back({dest, init.blockOrigin});
        into = TensorView{source->data.data(), dest.dtype, init.blockOf};
      } else if (!init.paddedFrom.empty()) {
        // Read at the initializer's shape, placed into zeros once read.
        fillSplat(dest, 0.0);
        Padded p;
        p.data.resize(std::max<size_t>(bytesOf(dest.dtype, init.paddedFrom), 1));
        p.shape = init.paddedFrom;
        p.dest = dest;
        into = TensorView{p.data.data(), dest.dtype, init.paddedFrom};
        padded.push_back(std::move(p));
      }
      if (options_.weightsPath == kRandomWeights)
        fillRandom(into, randomFilled++, options_.seed);
      else {
        onnxNames.push_back(init.onnxName);
        onnxDests.push_back(into);
      }
      break;
    }
    }
  };
  // A GPU session loads into host copies and uploads them once checked.
  std::vector<Buffer> staged;
  std::vector<std::pair<void *, const Buffer *>> uploads;
  auto hostDest = [&](void *data, DType dtype, const std::vector<int64_t> &shape) {
    if (onHost())
      return TensorView{data, dtype, shape};
    staged.emplace_back(bytesOf(dtype, shape));
    uploads.push_back({data, &staged.back()});
    return TensorView{staged.back().data(), dtype, shape};
  };
  staged.reserve(plan_.variables.size() + plan_.constants.size());
  std::vector<const void *> variableHost;
  // A block of a split variable: the whole value is loaded, then the
  // rank's block copied out of it.
  struct Whole {
    std::vector<char> data;
    TensorView view, block;
    const PlanVariable *variable;
  };
  std::vector<Whole> wholes;
  for (size_t i = 0; i < plan_.variables.size(); ++i) {
    const PlanVariable &v = plan_.variables[i];
    TensorView dest = hostDest(variableData_[i], v.dtype, v.shape);
    variableHost.push_back(dest.data);
    if (!v.split()) {
      load(v.init, dest);
      continue;
    }
    Whole w;
    w.data.resize(std::max<size_t>(bytesOf(v.dtype, v.wholeShape), 1));
    w.view = TensorView{w.data.data(), v.dtype, v.wholeShape};
    w.block = dest;
    w.variable = &v;
    wholes.push_back(std::move(w));
    load(v.init, TensorView{wholes.back().data.data(), v.dtype, v.wholeShape});
  }
  for (size_t i = 0; i < plan_.constants.size(); ++i) {
    const auto &c = plan_.constants[i];
    load(c.value, hostDest(constants_[i].data(), c.dtype, c.shape));
  }
  auto finish = [&](const std::string &onnxPath) {
    for (Padded &p : padded)
      placeBlock(p.data.data(), p.shape, static_cast<char *>(p.dest.data), p.dest.shape,
                 std::vector<int64_t>(p.dest.shape.size(), 0), sizeOf(p.dest.dtype));
    for (BlockSource &source : blockSources)
      for (auto &[dest, origin] : source.blocks)
        copyBlock(source.data.data(), source.shape, static_cast<char *>(dest.data), dest.shape,
                  origin, sizeOf(dest.dtype));
    for (Whole &w : wholes) {
      const PlanVariable &v = *w.variable;
      copyBlock(w.data.data(), v.wholeShape, static_cast<char *>(w.block.data), v.shape,
                blockOriginOf(v, env_.rank), sizeOf(v.dtype));
    }
    checkInitialValuesFinite(onnxPath, variableHost);
    for (auto &[dest, host] : uploads)
      device_->upload(dest, host->data(), host->size());
  };
  if (onnxNames.empty())
    return finish("");
  std::string path = options_.weightsPath;
  std::optional<uint32_t> expectedCrc32;
  if (path.empty()) {
    path = plan_.sourcePath;
    expectedCrc32 = plan_.sourceCrc32;
    std::error_code ec;
    uint64_t size = std::filesystem::file_size(path, ec);
    if (ec)
      throw RuntimeError(path + ": cannot read the model the plan takes its "
                                "initial values from: " + ec.message() +
                         " (pass --weights FILE if it moved)");
    if (size != plan_.sourceBytes)
      throw RuntimeError(path + ": the model changed since the plan was "
                                "compiled (" + std::to_string(size) +
                         " bytes, the plan expects " +
                         std::to_string(plan_.sourceBytes) +
                         "); recompile the plan");
  }
  readOnnxInitializers(path, onnxNames, onnxDests, expectedCrc32);
  finish(path);
}

void Session::checkInitialValuesFinite(const std::string &onnxPath,
                                       const std::vector<const void *> &data) const {
  for (size_t i = 0; i < plan_.variables.size(); ++i) {
    const PlanVariable &v = plan_.variables[i];
    // A splat (optimizer state's zeros) is one value: no need to scan it.
    if (v.init.kind == InitialValue::Kind::Splat && std::isfinite(v.init.splat))
      continue;
    std::string bad = describeNonFinite(data[i], v.dtype, v.shape);
    if (bad.empty())
      continue;
    if (v.init.kind == InitialValue::Kind::Onnx)
      throw RuntimeError(onnxPath + ": initializer '" + v.init.onnxName +
                         "' holds " + bad);
    throw RuntimeError("the initial value of variable '" + v.name +
                       "' (from the plan) holds " + bad);
  }
}

TensorView Session::view(int32_t id) const {
  const PlanTensor &t = plan_.tensors.at(id);
  TensorView v{nullptr, t.dtype, t.shape, device_->space()};
  switch (t.kind) {
  case PlanTensor::Kind::Arena:
    v.data = static_cast<char *>(arena_.data()) + t.offset;
    break;
  case PlanTensor::Kind::Variable:
    v.data = variableData_[t.ref];
    break;
  case PlanTensor::Kind::Constant:
    v.data = constants_[t.ref].data();
    break;
  case PlanTensor::Kind::Input:
    v.data = inputs_[t.ref].data();
    break;
  case PlanTensor::Kind::Alias:
    v.data = static_cast<char *>(view(t.ref).data) + t.offset;
    break;
  }
  // Empty tensors have no storage; give kernels a valid pointer anyway so
  // "absent operand" (nullptr) stays distinguishable.
  if (!v.data)
    v.data = onHost() ? const_cast<char *>(plan_.blobs.data()) : arena_.data();
  return v;
}

void Session::bindKernels() {
  const KernelRegistry &registry = device_->kernels();
  for (size_t i = 0; i < plan_.kernels.size(); ++i) {
    const PlanKernel &k = plan_.kernels[i];
    const KernelFactory *factory = registry.find(k.op);
    // An op a device has no kernel of its own for runs on the host over
    // staged copies (reported: --report lists them).
    KernelFactory staged;
    if (!factory && !onHost())
      if (const KernelFactory *cpu = KernelRegistry::global().find(k.op)) {
        staged = hostStaged(*cpu);
        factory = &staged;
        hostFallbacks_.push_back(i);
      }
    if (!factory)
      throw RuntimeError(describe(k, i) +
                         ": this parallax-run has no kernel for '" + k.op + "'");
    std::vector<TensorView> ins, outs;
    for (int32_t id : k.inputs)
      ins.push_back(id < 0 ? TensorView{} : view(id));
    for (int32_t id : k.outputs)
      outs.push_back(view(id));
    KernelArgs args(k, std::move(ins), std::move(outs), env_);
    args.index = (int64_t)i;
    try {
      bound_.push_back((*factory)(args));
    } catch (const KernelError &e) {
      throw RuntimeError(describe(k, i) + ": " + e.what());
    } catch (const nlohmann::json::exception &e) {
      // Factories that read an attribute straight from the JSON (a list of
      // names, a nested object) meet a mistyped one here.
      throw RuntimeError(describe(k, i) + ": an attribute has the wrong type (" +
                         e.what() + ")");
    } catch (const std::runtime_error &e) {
      // A device that cannot give a kernel what it needs (memory, a library
      // handle).
      throw RuntimeError(describe(k, i) + ": " + e.what());
    }
  }
  if (!hostFallbacks_.empty())
    device_->markHostFallback();
}

TensorView Session::hostView(const TensorView &t, Buffer &mirror) const {
  if (onHost())
    return t;
  finishStep();
  if (mirror.size() != t.bytes())
    mirror = Buffer(t.bytes());
  device_->download(mirror.data(), t.data, t.bytes());
  return TensorView{mirror.data(), t.dtype, t.shape};
}

TensorView Session::input(size_t i) const {
  const PlanInput &in = plan_.inputs.at(i);
  return TensorView{onHost() ? inputs_[i].data() : hostInputs_[filling_].at(i).get(),
                    in.dtype, in.shape};
}

TensorView Session::output(size_t i) const {
  return hostView(view(plan_.outputs.at(i).tensor), outputMirrors_.at(i));
}

double Session::loss() const {
  if (plan_.lossOutput < 0)
    throw RuntimeError("an inference plan has no loss");
  TensorView t = output(plan_.lossOutput);
  return t.dtype == DType::F64 ? *t.as<double>() : (double)*t.as<float>();
}

TensorView Session::variable(size_t i) const {
  const PlanVariable &v = plan_.variables.at(i);
  return hostView(TensorView{variableData_[i], v.dtype, v.shape, device_->space()},
                  variableMirrors_.at(i));
}

void Session::commitVariable(size_t i) {
  if (onHost())
    return;
  finishStep();
  const Buffer &mirror = variableMirrors_.at(i);
  if (mirror.data())
    device_->upload(variableData_[i], mirror.data(), mirror.size());
}

TensorView Session::variable(const std::string &name) const {
  for (size_t i = 0; i < plan_.variables.size(); ++i)
    if (plan_.variables[i].name == name)
      return variable(i);
  throw RuntimeError("the plan has no variable '" + name + "'");
}

TensorView Session::tensor(int32_t id) const { return hostView(view(id), tensorMirrors_[id]); }

namespace {

/// The group a parameter-server pull serves its table's rows in.
Group &pullGroup(const PlanKernel &pull, Comm &comm, int worldSize) {
  KernelGrid grid = kernelGridOf(pull.attrs, worldSize);
  return comm.group(grid.shape, grid.axes);
}

/// Rows [begin, end) of a table of `rows` rows that group rank `q` serves,
/// in partition order.
std::vector<std::pair<int64_t, int64_t>> servedRows(const PlanKernel &pull,
                                                    int64_t rows, int q) {
  return RowPartition(rows, pull.attrs.at("placement").get<std::vector<int64_t>>())
      .servedBy(q);
}

} // namespace

const PlanKernel *Session::pullOf(size_t i) const {
  const PlanVariable &v = plan_.variables.at(i);
  // A table's optimizer state is updated where the table is: on its servers.
  const std::string &table =
      v.role == PlanVariable::Role::OptimizerState ? v.parameter : v.name;
  for (const PlanKernel &k : plan_.kernels) {
    if (k.op != "ps_pull" || k.inputs.empty())
      continue;
    const PlanTensor &t = plan_.tensors.at(k.inputs[0]);
    if (t.kind == PlanTensor::Kind::Variable && plan_.variables[t.ref].name == table &&
        plan_.variables[t.ref].shape == v.shape)
      return &k;
  }
  return nullptr;
}

std::vector<std::pair<int64_t, int64_t>> Session::currentRows(size_t i) const {
  TensorView v = variable(i);
  int64_t rows = v.shape.empty() ? 1 : v.shape[0];
  const PlanKernel *pull = pullOf(i);
  if (!pull)
    return {{0, rows}};
  return servedRows(*pull, rows, pullGroup(*pull, *env_.comm, env_.worldSize).rank());
}

void Session::gatherShardedVariables() {
  std::set<int32_t> done;
  for (const PlanKernel &k : plan_.kernels) {
    if (k.op != "ps_pull" || k.inputs.empty())
      continue;
    const PlanTensor &table = plan_.tensors.at(k.inputs[0]);
    if (table.kind != PlanTensor::Kind::Variable || !done.insert(table.ref).second)
      continue;
    TensorView v = variable(table.ref);
    int64_t rows = v.dim(0);
    int64_t rowBytes = v.bytes() / std::max<int64_t>(rows, 1);
    Comm *comm = env_.comm;
    Group &group = pullGroup(k, *comm, env_.worldSize);
    std::vector<int64_t> bytes(group.size(), 0);
    for (int q = 0; q < group.size(); ++q)
      for (auto [a, b] : servedRows(k, rows, q))
        bytes[q] += (b - a) * rowBytes;
    std::vector<char> send, recv(std::max<int64_t>(
                                     std::accumulate(bytes.begin(), bytes.end(), int64_t(0)), 1));
    for (auto [a, b] : servedRows(k, rows, group.rank()))
      send.insert(send.end(), static_cast<char *>(v.data) + a * rowBytes,
                  static_cast<char *>(v.data) + b * rowBytes);
    comm->run([&] {
      comm->allgatherv(group, send.data(), (int64_t)send.size(), recv.data(), bytes);
    });
    int64_t at = 0;
    for (int q = 0; q < group.size(); ++q)
      for (auto [a, b] : servedRows(k, rows, q)) {
        std::memcpy(static_cast<char *>(v.data) + a * rowBytes, recv.data() + at,
                    (b - a) * rowBytes);
        at += (b - a) * rowBytes;
      }
    commitVariable(table.ref);
  }
}

std::vector<char> Session::wholeVariable(size_t i) {
  const PlanVariable &v = plan_.variables.at(i);
  TensorView block = variable(i);
  int64_t blockBytes = block.bytes();
  std::vector<char> all(std::max<int64_t>(blockBytes * env_.worldSize, 1));
  Comm *comm = env_.comm;
  Group &world = comm->group({env_.worldSize}, {0});
  comm->run([&] {
    comm->allgatherv(world, block.data, blockBytes, all.data(),
                     std::vector<int64_t>(env_.worldSize, blockBytes));
  });
  std::vector<char> whole(std::max<size_t>(bytesOf(v.dtype, v.wholeShape), 1));
  // Ranks that hold the same block (replicas along other axes) write the
  // same bytes.
  for (int q = 0; q < env_.worldSize; ++q)
    placeBlock(all.data() + q * blockBytes, v.shape, whole.data(), v.wholeShape,
               blockOriginOf(v, q), sizeOf(v.dtype));
  return whole;
}

std::pair<std::vector<char>, std::vector<int64_t>>
Session::savedValue(size_t i, const TensorView &value) const {
  const PlanVariable &v = plan_.variables.at(i);
  std::vector<int64_t> shape = v.init.paddedFrom.empty() ? value.shape : v.init.paddedFrom;
  std::vector<char> bytes(std::max<size_t>(bytesOf(v.dtype, shape), 1));
  copyBlock(static_cast<const char *>(value.data), value.shape, bytes.data(), shape,
            std::vector<int64_t>(shape.size(), 0), sizeOf(v.dtype));
  return {std::move(bytes), shape};
}

std::vector<int64_t> Session::blockOriginOf(const PlanVariable &v, int rank) const {
  return blockOrigin(plan_.grid(v.splitGrid)->shape, v.splitAxes, v.shape, rank);
}

void Session::runKernel(size_t i) {
  try {
    bound_[i]();
  } catch (const KernelError &e) {
    throw RuntimeError("step " + std::to_string(env_.step) + ", " +
                       describe(plan_.kernels[i], i) + ": " + e.what());
  }
}

void Session::finishStep() const {
  if (!stepPending_)
    return;
  stepPending_ = false;
  synchronize();
}

void Session::synchronize() const {
  try {
    device_->synchronize();
  } catch (const DeviceError &e) {
    if (e.kernel >= 0 && e.kernel < (int64_t)plan_.kernels.size())
      throw RuntimeError("step " + std::to_string(env_.step) + ", " +
                         describe(plan_.kernels[e.kernel], e.kernel) + ": " + e.what());
    throw RuntimeError("step " + std::to_string(env_.step) + ": " + e.what());
  }
}

void Session::runStep() {
  finishStep();
  ++env_.step;
  env_.comm->setStep(env_.step);
  device_->setStep(env_.step, env_.seed);
  if (options_.profile || options_.trace) {
    runTimedStep();
    synchronize();
    return;
  }
  // Uploaded outside the step a GPU captures: the staging set alternates.
  uploadInputs();
  device_->runStep([this] {
    for (size_t i = 0; i < bound_.size(); ++i)
      runKernel(i);
  });
  stepPending_ = true;
  if (onHost())
    finishStep();
}

void Session::uploadInputs() {
  if (onHost())
    return;
  for (size_t i = 0; i < inputs_.size(); ++i)
    device_->uploadAsync(inputs_[i].data(), hostInputs_[filling_][i].get(),
                         inputs_[i].size());
  uploaded_[filling_] = device_->mark();
  // The host fills the other set next; the step before this one uploaded
  // it, and that copy is done before this step's.
  filling_ ^= 1;
  device_->waitFor(uploaded_[filling_]);
}

void Session::runTimedStep() {
  if (options_.profile && times_.empty())
    times_.resize(bound_.size());
  Trace *trace = options_.trace;
  int64_t begin = Trace::now();
  uploadInputs();
  for (size_t i = 0; i < bound_.size(); ++i) {
    int64_t t0 = Trace::now();
    runKernel(i);
    // A GPU kernel's time is until it finished, not until it was queued.
    if (!onHost())
      synchronize();
    int64_t t1 = Trace::now();
    if (options_.profile) {
      times_[i].seconds += (double)(t1 - t0) * 1e-9;
      ++times_[i].calls;
    }
    if (trace)
      trace->kernel((int32_t)i, env_.step, t0, t1);
  }
  if (trace)
    trace->step(env_.step, begin, Trace::now());
}

} // namespace parallax::rt

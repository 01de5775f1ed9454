//===- KernelSupport.cpp - kernel arguments, registry, parallel loops -----===//

#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/Device.h"

#include <omp.h>

#include <exception>

namespace parallax::rt {

char *Workspace::base() {
  if (need_ > 0 && (!storage_ || storage_->size() < need_))
    storage_ = std::make_shared<Buffer>(need_);
  return storage_ ? static_cast<char *>(storage_->data()) : nullptr;
}

int64_t KernelArgs::reserveScratch(int64_t bytes) {
  if (!env.workspace)
    env.workspace = std::make_shared<Workspace>();
  // Each piece on its own cache lines.
  int64_t offset = (scratchBytes_ + 63) / 64 * 64;
  scratchBytes_ = offset + bytes;
  env.workspace->reserve(scratchBytes_);
  return offset;
}

int64_t TensorView::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

const TensorView &KernelArgs::in(size_t i) const {
  if (i >= ins.size() || !ins[i].data)
    fail("missing input " + std::to_string(i));
  return ins[i];
}

const TensorView &KernelArgs::out(size_t i) const {
  if (i >= outs.size())
    fail("missing output " + std::to_string(i));
  return outs[i];
}

bool KernelArgs::has(const char *name) const {
  return kernel.attrs.contains(name);
}

void KernelArgs::fail(const std::string &message) const {
  throw KernelError(message);
}

void KernelArgs::expectDType(const TensorView &t, DType dtype,
                             const char *what) const {
  if (t.dtype != dtype)
    fail(std::string(what) + " must be " + nameOf(dtype) + ", got " +
         nameOf(t.dtype));
}

namespace {
template <typename T>
T attrAs(const KernelArgs &k, const char *name) {
  if (!k.has(name))
    k.fail(std::string("missing attribute '") + name + "'");
  try {
    return k.kernel.attrs.at(name).get<T>();
  } catch (const nlohmann::json::exception &) {
    k.fail(std::string("attribute '") + name + "' has the wrong type");
  }
}
} // namespace

int64_t KernelArgs::i64(const char *name) const { return attrAs<int64_t>(*this, name); }
int64_t KernelArgs::i64Or(const char *name, int64_t dflt) const {
  return has(name) ? i64(name) : dflt;
}
double KernelArgs::f64(const char *name) const {
  if (!has(name))
    fail(std::string("missing attribute '") + name + "'");
  auto v = planDoubleValue(kernel.attrs.at(name)); // "inf", "-inf", "nan" too
  if (!v)
    fail(std::string("attribute '") + name + "' has the wrong type");
  return *v;
}
double KernelArgs::f64Or(const char *name, double dflt) const {
  return has(name) ? f64(name) : dflt;
}
std::vector<int64_t> KernelArgs::i64s(const char *name) const {
  return attrAs<std::vector<int64_t>>(*this, name);
}
std::string KernelArgs::str(const char *name) const {
  return attrAs<std::string>(*this, name);
}
std::string KernelArgs::strOr(const char *name, const std::string &dflt) const {
  return has(name) ? str(name) : dflt;
}
bool KernelArgs::flag(const char *name) const {
  return has(name) && attrAs<bool>(*this, name);
}

void KernelRegistry::add(const std::string &op, KernelFactory factory) {
  factories[op] = std::move(factory);
}

const KernelFactory *KernelRegistry::find(const std::string &op) const {
  auto it = factories.find(op);
  return it == factories.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::ops() const {
  std::vector<std::string> names;
  for (const auto &[name, _] : factories)
    names.push_back(name);
  return names;
}

const KernelRegistry &KernelRegistry::global() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerAllKernels(r);
    return r;
  }();
  return registry;
}

void registerAllKernels(KernelRegistry &registry) {
  registerElementwiseKernels(registry);
  registerShapeKernels(registry);
  registerIndexingKernels(registry);
  registerLinalgKernels(registry);
  registerReductionKernels(registry);
  registerAxisKernels(registry);
  registerNormKernels(registry);
  registerLossKernels(registry);
  registerConvKernels(registry);
  registerOptimizerKernels(registry);
  registerCollectiveKernels(registry);
  registerRnnKernels(registry);
}

void parallelFor(int threads, int64_t n, int64_t grain, RangeBody body) {
  if (n <= 0)
    return;
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    body(0, n);
    return;
  }
  // An exception must not leave an OpenMP region (it would terminate the
  // process): keep the first one and rethrow it after the join.
  std::exception_ptr error;
#pragma omp parallel for num_threads((int)chunks) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    try {
      body(begin, end);
    } catch (...) {
#pragma omp critical(parallax_parallel_for_error)
      if (!error)
        error = std::current_exception();
    }
  }
  if (error)
    std::rethrow_exception(error);
}

} // namespace parallax::rt

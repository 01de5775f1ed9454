//===- Kernel.h - how plan kernels become bound CPU functions --*- C++ -*-===//
//
// Each plan kernel is bound once, when a session starts: its factory reads
// the attributes, checks the tensors, precomputes what it can (strides, BLAS
// arguments) and returns a closure over raw pointers into the arena and the
// variables. A training step then only calls closures, so the per-kernel
// overhead is one indirect call.
//
// Factories throw KernelError for anything wrong with the kernel itself (a
// missing attribute, a shape the kernel cannot handle); closures throw it for
// bad data (an index out of range). The session adds the kernel's position,
// op and source location to the message.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNEL_H
#define PARALLAX_RUNTIME_KERNEL_H

#include "parallax/Runtime/DType.h"
#include "parallax/Runtime/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace parallax::rt {

class KernelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Which memory a pointer is in: the host's, or a GPU's (Device.h).
enum class MemorySpace : uint8_t { Host, Cuda };

/// A tensor as a kernel sees it: dense, row-major, contiguous.
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  MemorySpace space = MemorySpace::Host;

  int64_t numElements() const;
  int64_t rank() const { return (int64_t)shape.size(); }
  int64_t dim(int64_t d) const { return shape.at(d); }
  int64_t bytes() const { return numElements() * (int64_t)sizeOf(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Row-major strides (in elements) of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

class Buffer;

/// Scratch that kernels need only while they run (im2col columns, per-worker
/// partial sums, a permuted copy of the weights). A session's kernels run
/// one at a time, so they share one workspace sized to the largest request
/// rather than keeping a buffer each (ResNet-18's convolutions kept 180 MB
/// that way, as much as the rest of its plan). Host memory; its contents
/// are undefined whenever a kernel starts.
class Workspace {
public:
  /// Makes room for `bytes` (while kernels are bound).
  void reserve(int64_t bytes) { need_ = bytes > need_ ? bytes : need_; }
  /// The largest request.
  int64_t bytes() const { return need_; }
  /// The workspace, allocated to the largest request so far (the session
  /// does so once every kernel is bound, so that no step allocates).
  char *base();

private:
  int64_t need_ = 0;
  std::shared_ptr<Buffer> storage_;
};

/// `count` elements of a kernel's scratch, at their offset in the workspace.
template <typename T> struct ScratchSpan {
  std::shared_ptr<Workspace> workspace;
  int64_t offset = 0;
  /// Once per run of the kernel, before any thread uses it.
  T *get() const { return reinterpret_cast<T *>(workspace->base() + offset); }
};

/// What every kernel may read while it runs; owned by the session.
class Comm;
class Group;
class Device;
class Work;

struct ExecEnv {
  int threads = 1;
  /// The other ranks (a world of one without MPI); owned by the caller.
  Comm *comm = nullptr;
  /// Collectives started by one kernel and awaited by a later "wait"
  /// kernel, indexed by the kernels' "token" attribute (a host job, NCCL's
  /// work on a GPU, followed by whatever the device does with the results).
  std::vector<std::shared_ptr<Work>> pending;
  /// The step being run, 1 for the first (Adam's t; dropout's stream).
  int64_t step = 0;
  /// --seed: dropout masks and anything else random derive from it.
  uint64_t seed = 0;
  int rank = 0, worldSize = 1;
  /// Offset of this rank's first sample in the global batch, so that a
  /// per-sample random stream (dropout) is the same whatever the rank count.
  int64_t sampleOffset = 0;
  int64_t globalBatch = 0;
  /// Ranks the batch is split over: the world, or Pc of a Pr x Pc grid.
  int dataRanks = 1;
  /// The plan's ranks per machine (world ranks are numbered machine by
  /// machine): where a parameter server's exchange sums rows per machine.
  int ranksPerMachine = 1;
  /// The device the kernels run on (null: the host, as in unit tests).
  Device *device = nullptr;
  /// The kernels' shared scratch (null until a kernel asks for some).
  std::shared_ptr<Workspace> workspace;
};

using KernelFn = std::function<void()>;

/// A kernel at bind time: its tensors and attributes.
class KernelArgs {
public:
  KernelArgs(const PlanKernel &kernel, std::vector<TensorView> inputs,
             std::vector<TensorView> outputs, ExecEnv &env)
      : kernel(kernel), ins(std::move(inputs)), outs(std::move(outputs)),
        env(env) {}

  const PlanKernel &kernel;
  /// The kernel's position in the plan (-1 outside a session), for messages.
  int64_t index = -1;
  /// Absent optional operands have data == nullptr.
  std::vector<TensorView> ins, outs;
  ExecEnv &env;

  const TensorView &in(size_t i) const;
  const TensorView &out(size_t i) const;
  bool hasIn(size_t i) const { return i < ins.size() && ins[i].data; }

  // Attribute accessors: the *Or forms return the default when absent; the
  // others throw KernelError naming the attribute when it is missing.
  bool has(const char *name) const;
  int64_t i64(const char *name) const;
  int64_t i64Or(const char *name, int64_t dflt) const;
  double f64(const char *name) const;
  double f64Or(const char *name, double dflt) const;
  std::vector<int64_t> i64s(const char *name) const;
  std::string str(const char *name) const;
  std::string strOr(const char *name, const std::string &dflt) const;
  /// Unit attributes: true when present.
  bool flag(const char *name) const;

  /// Throws KernelError with `message` (the session adds the location).
  [[noreturn]] void fail(const std::string &message) const;
  /// Checks dtype of input/output tensors.
  void expectDType(const TensorView &t, DType dtype, const char *what) const;

  /// This kernel's next `count` elements of scratch, after those it already
  /// has (ExecEnv::workspace, made here outside a session).
  template <typename T> ScratchSpan<T> scratch(int64_t count) {
    int64_t offset = reserveScratch(count * (int64_t)sizeof(T));
    return ScratchSpan<T>{env.workspace, offset};
  }

private:
  int64_t reserveScratch(int64_t bytes);
  int64_t scratchBytes_ = 0;
};

using KernelFactory = std::function<KernelFn(KernelArgs &)>;

/// op name -> factory, one registry per device kind (Device::kernels()).
/// Families register themselves from registerAllKernels (the CPU's) or
/// registerAllCudaKernels; there are no static initialisers, which a static
/// library would drop.
class KernelRegistry {
public:
  void add(const std::string &op, KernelFactory factory);
  const KernelFactory *find(const std::string &op) const;
  std::vector<std::string> ops() const;
  /// The CPU kernels.
  static const KernelRegistry &global();

private:
  std::map<std::string, KernelFactory> factories;
};

void registerAllKernels(KernelRegistry &registry);

// One function per kernel family (Kernels/*.cpp).
void registerElementwiseKernels(KernelRegistry &registry);
void registerShapeKernels(KernelRegistry &registry);
void registerIndexingKernels(KernelRegistry &registry);
void registerLinalgKernels(KernelRegistry &registry);
void registerReductionKernels(KernelRegistry &registry);
void registerAxisKernels(KernelRegistry &registry);
void registerNormKernels(KernelRegistry &registry);
void registerLossKernels(KernelRegistry &registry);
void registerConvKernels(KernelRegistry &registry);
void registerOptimizerKernels(KernelRegistry &registry);
void registerCollectiveKernels(KernelRegistry &registry);
void registerRnnKernels(KernelRegistry &registry);

/// The library the f32 matrix products run on: "oneDNN" or "OpenBLAS"
/// (lib/Runtime/Kernels/Blas.h says when each).
const char *sgemmLibrary();

struct JobInfo;
/// What a job the kernel submits is, for messages and traces: its op and
/// position ("all_reduce (kernel #17, bucket 0)").
JobInfo jobInfoOf(const KernelArgs &args);

/// The group a kernel's grid_shape and grid_axes attributes name (no axes:
/// the whole grid; no grid: the world), as the collective kernels find it.
Group &collectiveGroup(KernelArgs &args);

/// A loop body parallelFor calls: the callable's address and how to call
/// it, for the duration of the call. A std::function there allocated on
/// every call for a lambda capturing more than two references (most do),
/// in the step's hot path and in each OpenMP worker that nested one.
class RangeBody {
public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeBody>>>
  RangeBody(F &&f) // NOLINT: implicit, as a std::function's is
      : callable_(const_cast<void *>(static_cast<const void *>(std::addressof(f)))),
        call_([](void *c, int64_t begin, int64_t end) {
          (*static_cast<std::remove_reference_t<F> *>(c))(begin, end);
        }) {}
  void operator()(int64_t begin, int64_t end) const { call_(callable_, begin, end); }

private:
  void *callable_;
  void (*call_)(void *, int64_t, int64_t);
};

/// Runs body(begin, end) over [0, n) split into contiguous chunks on up to
/// `threads` OpenMP threads; serial when n is below `grain`.
void parallelFor(int threads, int64_t n, int64_t grain, RangeBody body);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_KERNEL_H

//===- Session.h - one rank executing a plan -------------------*- C++ -*-===//
//
// A session owns the storage of one rank: the arena the compiler planned,
// the variables (initialised from the source ONNX model or the plan), the
// constants and one step's input buffers; it binds every kernel once and then
// runs steps. Data loading is separate (Data.h): the caller fills the input
// buffers before each step.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_SESSION_H
#define PARALLAX_RUNTIME_SESSION_H

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Device.h"
#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/Trace.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace parallax::rt {

/// Anything that stops a step: a kernel failure, a missing initializer. The
/// message names the kernel (index, op, source location) or the file.
class RuntimeError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// SessionOptions::weightsPath that draws initial values instead of reading.
inline constexpr const char *kRandomWeights = "random";

struct SessionOptions {
  int threads = 1;
  uint64_t seed = 0;
  int rank = 0;
  int worldSize = 1;
  /// Read initial values from this ONNX file instead of the plan's source;
  /// kRandomWeights: draw them from the seed instead (benchmarks, and
  /// checks on machines the model file is not on).
  std::string weightsPath;
  /// Time every kernel (parallax-run --profile); costs two clock reads per
  /// kernel.
  bool profile = false;
  /// The other ranks; null for a world of one (the session makes one).
  Comm *comm = nullptr;
  /// Most bytes the plan's storage (arena, variables, constants, inputs)
  /// may take; a plan that needs more is refused before anything is
  /// allocated. 0: the machine's physical memory.
  int64_t memoryLimit = 0;
  /// Record every step and kernel into this timeline (parallax-run --trace;
  /// the caller also hands it to the Comm for the jobs); null: off.
  Trace *trace = nullptr;
  /// Where the tensors live and the kernels run; null: the host (the
  /// session makes a CPU device). Must be the kind the plan targets.
  Device *device = nullptr;
};

/// Accumulated time of one kernel over the steps run (with profiling on).
struct KernelTime {
  double seconds = 0;
  int64_t calls = 0;
};

struct StorageBytes;

class Session {
public:
  /// Allocates storage, loads initial values and binds every kernel. Throws
  /// PlanError / RuntimeError with a message naming the problem.
  Session(Plan plan, SessionOptions options);
  ~Session();

  const Plan &plan() const { return plan_; }
  ExecEnv &env() { return env_; }
  const ExecEnv &env() const { return env_; }

  Device &device() const { return *device_; }

  // The views below are host memory whatever the device: on a GPU the
  // session keeps host copies and moves them as each function says.

  /// The buffer of graph input `i`: fill every input before each runStep.
  /// A GPU session has two pinned buffers per input and hands out the one
  /// the step after the running one will upload, so that the host prepares
  /// the next batch while the device runs this step.
  TensorView input(size_t i) const;
  /// Graph output `i`, valid after runStep until the next one (downloaded
  /// from a GPU on each call, after the step finished).
  TensorView output(size_t i) const;
  /// The loss of the last step (Train mode).
  double loss() const;

  /// Variable storage, by plan index or name (throws if unknown); on a GPU
  /// a host copy downloaded on each call. After writing into it, call
  /// commitVariable.
  TensorView variable(size_t i) const;
  TensorView variable(const std::string &name) const;
  /// Makes what was written into variable(i) the variable's value (uploads
  /// it to a GPU; nothing on the host).
  void commitVariable(size_t i);
  /// The kernels this device has none of its own for, which run on the
  /// host over staged copies (plan indices), for --report.
  const std::vector<size_t> &hostFallbackKernels() const { return hostFallbacks_; }

  /// Parameter-server variables are current only on the ranks that serve
  /// their rows: bring every rank's copy up to date (a collective; call it
  /// on every rank, e.g. before saving the model).
  void gatherShardedVariables();

  /// The whole value of variable `i`, a block of a variable split over the
  /// grid (--grid): every rank's block gathered and put in its place (a
  /// collective; call it on every rank). Row-major host bytes.
  std::vector<char> wholeVariable(size_t i);
  /// What --save writes of variable `i` whose whole value is `value`: the
  /// value, or where the plan pads its initializer (a vocabulary padded to
  /// a multiple of the model ranks) the initializer's part of it.
  /// Row-major host bytes and their shape.
  std::pair<std::vector<char>, std::vector<int64_t>> savedValue(size_t i,
                                                                const TensorView &value) const;

  /// The rows of variable `i` this rank keeps current, as [begin, end)
  /// ranges of its first dimension: all of them, except for a
  /// parameter-server table and its optimizer state, which only the ranks
  /// that serve a row update (the other copies of the row keep their
  /// initial value and are never read). A checkpoint saves these.
  std::vector<std::pair<int64_t, int64_t>> currentRows(size_t i) const;

  /// Runs one step: every kernel in schedule order. Advances env().step.
  /// On a GPU it returns once the step is queued; whatever reads its
  /// results (output, loss, variable, the next runStep) waits for it, and
  /// a kernel's failure is thrown there.
  void runStep();
  int64_t stepsRun() const { return env_.step; }

  /// Per-kernel times, in plan order (empty unless profiling).
  const std::vector<KernelTime> &kernelTimes() const { return times_; }

  /// The value of any plan tensor after the last step (tests, debugging);
  /// arena tensors may have been overwritten by later kernels.
  TensorView tensor(int32_t id) const;

private:
  /// Where rank `rank`'s block of split variable `v` starts (the plan
  /// checked its grid).
  std::vector<int64_t> blockOriginOf(const PlanVariable &v, int rank) const;
  /// Refuses storage that does not fit the memory limit or the machine.
  void checkFits(const StorageBytes &need) const;
  /// The kernels' shared workspace, once they are bound (so that no step
  /// allocates).
  void allocateWorkspace();
  void allocate();
  void loadInitialValues();
  /// Refuses a NaN or infinity in any variable's initial value, naming the
  /// initializer of `onnxPath` it came from.
  void checkInitialValuesFinite(const std::string &onnxPath,
                                const std::vector<const void *> &data) const;
  /// Copies the inputs' host buffers to a GPU (nothing on the host).
  void uploadInputs();
  /// Waits for the device; a kernel's failure becomes a RuntimeError
  /// naming it.
  void synchronize() const;
  /// Waits for a step runStep left running on the device.
  void finishStep() const;
  void bindKernels();
  /// Runs kernel i, naming it in the error of a kernel that fails.
  void runKernel(size_t i);
  /// runStep with --profile or --trace: two clock reads per kernel.
  void runTimedStep();
  TensorView view(int32_t id) const;
  /// A host view of device tensor `t` through `mirror` (downloaded now);
  /// `t` itself on the host.
  TensorView hostView(const TensorView &t, Buffer &mirror) const;
  bool onHost() const { return device_->space() == MemorySpace::Host; }
  /// The parameter-server pull that serves variable `i`'s rows, if any.
  const PlanKernel *pullOf(size_t i) const;

  Plan plan_;
  SessionOptions options_;
  std::unique_ptr<Device> ownDevice_;
  Device *device_ = nullptr;
  ExecEnv env_;
  Buffer arena_;
  std::vector<Buffer> variables_, constants_, inputs_;
  /// Storage of the variable blocks; a variable in a block has an empty
  /// Buffer of its own and its data in variableData_.
  std::vector<Buffer> variableBlocks_;
  std::vector<char *> variableData_;
  /// A GPU session's host side: pinned input staging, and copies of what
  /// the host reads (outputs, variables, tensors) made on request.
  /// Two sets of input buffers: the host fills set filling_ while the
  /// step that uploaded the other may still run.
  std::vector<std::unique_ptr<void, std::function<void(void *)>>> hostInputs_[2];
  int filling_ = 0;
  /// Where the device stood after uploading each set (Device::mark).
  uint64_t uploaded_[2] = {0, 0};
  mutable bool stepPending_ = false;
  mutable std::vector<Buffer> outputMirrors_, variableMirrors_;
  mutable std::map<int32_t, Buffer> tensorMirrors_;
  std::vector<size_t> hostFallbacks_;
  std::vector<KernelFn> bound_;
  std::vector<KernelTime> times_;
  std::unique_ptr<Comm> ownComm_;
};

/// Bytes of the storage a session allocates for `plan`, by kind (each
/// sum saturates at INT64_MAX).
struct StorageBytes {
  int64_t arena = 0, variables = 0, constants = 0, inputs = 0, total = 0;
  /// What the plan's estimate says its collectives' buffers and MPI's
  /// largest temporary, and the kernels' libraries, take: allocated as the
  /// steps run, so counted from the estimate, not from the session.
  int64_t collectives = 0, libraries = 0;
  /// The kernels' workspace (Kernel.h), known once they are bound.
  int64_t workspace = 0;
};
StorageBytes storageOf(const Plan &plan);

/// Reads initializers `names` of an ONNX model (embedded or external data)
/// into `dests` (same order), converting nothing: the element type and size
/// must match. With `expectedCrc32`, first refuses a model file whose bytes
/// have another CRC-32 (the plan's record of its source). Throws
/// RuntimeError naming the file and initializer.
void readOnnxInitializers(const std::string &path,
                          const std::vector<std::string> &names,
                          const std::vector<TensorView> &dests,
                          std::optional<uint32_t> expectedCrc32 = std::nullopt);

/// Writes a copy of ONNX model `sourcePath` to `destPath` with the listed
/// initializers replaced by `values` (all data embedded, external data
/// references dropped), atomically (AtomicFile.h). Where `origins[i]` is
/// not empty, `values[i]` is the block at that origin of its initializer
/// (InitialValue::blockOf), put in place over the source's values; an
/// initializer may be named once per block. Throws RuntimeError on failure.
void saveOnnxWithInitializers(const std::string &sourcePath,
                              const std::string &destPath,
                              const std::vector<std::string> &names,
                              const std::vector<TensorView> &values,
                              const std::vector<std::vector<int64_t>> &origins = {});

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_SESSION_H

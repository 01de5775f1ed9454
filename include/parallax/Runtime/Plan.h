//===- Plan.h - the artifact between parallax-opt and parallax-run -*- C++ -*-===//
//
// A plan is everything parallax-run needs to execute one training (or
// inference) step SPMD, and nothing that needs MLIR to read: the tensors with
// their static storage (an arena offset from the compiler's memory planner, a
// variable, a constant, a data input, or an alias of another tensor), the
// variables with where their initial values come from, and the schedule of
// kernels. Large initial values stay in the source ONNX file and are
// referenced by initializer name (IREE-style external parameters).
//
// On disk (all integers little-endian):
//
//   offset 0   "PXPLAN\r\n"            8-byte magic (the \r\n catches text-mode
//                                      transfers that would corrupt it)
//   offset 8   u32 format version      kPlanFormatVersion
//   offset 12  u32 reserved (0)
//   offset 16  u64 program bytes P     the program, JSON text
//   offset 24  u64 blob bytes B        constant and initial-value data
//   offset 32  P bytes of JSON, then B bytes of blobs
//   end - 4    u32 CRC-32 (zlib) of every byte before it
//
// The JSON is text so that a plan can be inspected with ordinary tools
// (`parallax-run --print-plan` pretty-prints it).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_PLAN_H
#define PARALLAX_RUNTIME_PLAN_H

#include "parallax/Runtime/DType.h"
#include "parallax/Runtime/PlanAlignment.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace parallax::rt {

/// Bumped whenever the program's meaning or layout changes; a runtime reads
/// exactly its own version and asks for a recompile otherwise.
/// Version 2: an alias may name a later tensor when that one is an arena
/// buffer (the all-reduce buckets laid out in place).
/// Version 3: variables may share a block of storage (weight-update
/// sharding: a bucket's parameters laid out as its gradients are).
/// Version 4: the source model's CRC-32 ("source": {"crc32"}), so that a
/// model edited in place without changing its size is noticed.
/// Version 5: variables may be blocks of a variable split over a grid
/// ("split"), and "model_ranks" says how many ranks share each sample.
constexpr uint32_t kPlanFormatVersion = 5;

/// Where a variable's or constant's initial value comes from.
struct InitialValue {
  enum class Kind { Onnx, Splat, Blob };
  Kind kind = Kind::Splat;
  std::string onnxName;  ///< Onnx: initializer name in the source model
  double splat = 0.0;    ///< Splat: every element
  uint64_t blobOffset = 0, blobBytes = 0; ///< Blob: a range of Plan::blobs
  /// Onnx: the initializer's own shape where the value is larger (a
  /// vocabulary padded to a multiple of the model ranks): the value is the
  /// initializer followed by zeros in every dimension, and --save writes
  /// back the initializer's part. Empty: the value's shape.
  std::vector<int64_t> paddedFrom;
  /// Onnx: the initializer's shape where the value is a block of it (one of
  /// a fused projection's query, key and value thirds), and the block's
  /// origin in it; --save writes each block back into its place. Empty:
  /// the value is the whole initializer.
  std::vector<int64_t> blockOf, blockOrigin;
};

struct PlanVariable {
  enum class Role { Parameter, State, OptimizerState };
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Role role = Role::Parameter;
  InitialValue init;
  /// For OptimizerState: the parameter it belongs to.
  std::string parameter;
  /// >= 0: the variable lives at byte `blockOffset` of variable block
  /// `block` (Plan::variableBlocks), beside the other parameters of one
  /// all-reduce bucket at the offsets their gradients have in it, so that
  /// one in-place all-gather can hand every rank the updated bucket.
  int32_t block = -1;
  int64_t blockOffset = 0;
  /// A block of a variable split over grid axes (--grid; shard semantics):
  /// the whole variable's shape, which its initial value has, the grid, and
  /// per dimension the grid axes that split it evenly. Empty when whole.
  std::vector<int64_t> wholeShape;
  std::string splitGrid;
  std::vector<std::vector<int64_t>> splitAxes;
  bool split() const { return !wholeShape.empty(); }
};

struct PlanConstant {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  InitialValue value;
};

struct PlanInput {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// The dimension that holds samples (0), or -1 for an input that is the
  /// same for every sample of the step (e.g. sampled-softmax candidates).
  int batchAxis = 0;
  /// What --synthetic should draw: "normal" floats, "ids" in [0, range)
  /// (Zipf, for inputs feeding a gather), "labels" in [0, range), "binary"
  /// 0/1 floats (BCE targets), "index" (any integer in [0, range)).
  std::string synthetic = "normal";
  int64_t range = 0;
};

struct PlanTensor {
  enum class Kind { Arena, Variable, Constant, Input, Alias };
  std::string name; ///< for messages: the IR location of the defining op
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Kind kind = Kind::Arena;
  int64_t offset = 0; ///< Arena: byte offset; Alias: byte offset in `ref`
  int32_t ref = -1;   ///< Variable/Constant/Input index, or aliased tensor id

  int64_t numElements() const;
  int64_t bytes() const { return numElements() * (int64_t)sizeOf(dtype); }
};

struct PlanKernel {
  std::string op; ///< the px op's name without "px.", e.g. "matmul"
  std::vector<int32_t> inputs, outputs; ///< tensor ids; -1 = absent optional
  nlohmann::json attrs = nlohmann::json::object();
  std::string loc; ///< source location, for error messages
};

/// A process grid (an upstream `shard.grid`): ranks numbered row-major over
/// its shape, whose product is the world size.
struct PlanGrid {
  std::string name;
  std::vector<int64_t> shape;
};

struct PlanOutput {
  std::string name;
  int32_t tensor = -1;
};

/// Predicted memory per rank, in bytes (what `--report` prints).
struct MemoryEstimate {
  int64_t parameters = 0;     ///< trainable variables
  int64_t state = 0;          ///< non-trainable variables (BN statistics)
  int64_t optimizerState = 0; ///< moments, accumulators
  int64_t gradients = 0;      ///< peak bytes of live gradient tensors
  int64_t arena = 0;          ///< activations + gradients + temporaries
  int64_t inputs = 0;         ///< one step's data
  int64_t constants = 0;
  /// What the collectives keep beside the arena: the staging buffers their
  /// kernels hold (an all-gather's send and receive buffers, a bucket
  /// reduced out of place) and the largest temporary Open MPI allocates
  /// in one of them (a ring all-reduce's blocks, or the copy an in-place
  /// reduce-scatter of a sharded update's bucket makes).
  int64_t collectives = 0;
  /// The CPU kernels' shared workspace (Kernel.h's Workspace): what the
  /// largest kernel's scratch takes (KernelMemory.h's workspaceBytes).
  int64_t workspace = 0;
  /// What the kernels' libraries hold once they run (libraryBytes).
  int64_t libraries = 0;
  int64_t peak() const {
    return parameters + state + optimizerState + arena + inputs + constants + collectives +
           workspace + libraries;
  }
};

struct Plan {
  enum class Mode { Train, Inference };
  Mode mode = Mode::Train;
  /// The device kind the plan was compiled for ("cpu", "cuda"); a runtime
  /// refuses to run it on another.
  std::string target = "cpu";
  int worldSize = 1;
  /// Ranks per machine; ranks are numbered machine by machine.
  int ranksPerMachine = 1;
  /// Pr of a Pr x Pc grid (--grid): consecutive ranks that share their
  /// samples and split the model; the batch is split over worldSize / Pr.
  int modelRanks = 1;
  std::vector<PlanGrid> grids;
  /// The grid called `name`, or null.
  const PlanGrid *grid(const std::string &name) const;
  /// The ONNX model initial values are read from (as given to parallax-opt,
  /// made absolute), its size and the CRC-32 of its bytes, checked at load
  /// time.
  std::string sourcePath;
  uint64_t sourceBytes = 0;
  uint32_t sourceCrc32 = 0;
  /// Free-form description of how the plan was made (optimizer, flags).
  nlohmann::json options = nlohmann::json::object();

  std::vector<PlanTensor> tensors;
  std::vector<PlanVariable> variables;
  /// Bytes of each variable block (see PlanVariable::block).
  std::vector<int64_t> variableBlocks;
  std::vector<PlanConstant> constants;
  std::vector<PlanInput> inputs;
  std::vector<PlanOutput> outputs;
  int lossOutput = -1; ///< index into outputs (Train), -1 otherwise
  std::vector<PlanKernel> kernels;
  int64_t arenaBytes = 0;
  MemoryEstimate memory;
  std::string blobs; ///< raw bytes referenced by InitialValue::Blob
  /// The CRC-32 of the plan file as read (its trailer; 0 for a plan made
  /// in memory): what a checkpoint records to know the plan it belongs to.
  uint32_t checksum = 0;
};

/// A double as the program holds it: a JSON number, or "inf", "-inf" or
/// "nan" (JSON has no non-finite numbers; nlohmann::json writes them as
/// null). Initial values (a mask's -inf) and float attributes use it.
nlohmann::json planDouble(double v);
/// The double `j` holds in planDouble's form; nullopt if it holds none.
std::optional<double> planDoubleValue(const nlohmann::json &j);

/// Every plan problem the runtime reports: file and reason in one line.
class PlanError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// zlib's CRC-32 of `n` bytes, continuing from `crc` (0 to start): the
/// checksum of plans and checkpoints, and the identity of a source model.
uint32_t crc32Of(const void *data, size_t n, uint32_t crc = 0);
/// The CRC-32 of a whole file; nullopt if it cannot be read.
std::optional<uint32_t> crc32OfFile(const std::string &path);
/// A whole file's bytes, read in one piece into a string of its size (no
/// stream buffer growing and copying); nullopt, with errno set, if it
/// cannot be read.
std::optional<std::string> readFileBytes(const std::string &path);

/// Serializes `plan` (format above).
std::string serializePlan(const Plan &plan);
/// The file around a program (JSON text) and its blobs: header, checksum.
std::string packPlan(const std::string &program, const std::string &blobs);
/// Writes `plan` to `path`; throws PlanError on I/O failure.
void writePlan(const Plan &plan, const std::string &path);

/// Parses a serialized plan; `what` names it in errors (usually the path).
/// Refuses, with a PlanError naming `what`: a truncated or corrupt file (bad
/// magic, sizes that do not add up, checksum mismatch), another format
/// version, and a program that is inconsistent (tensor ids out of range,
/// arena offsets outside the arena, shapes that do not match storage).
Plan parsePlan(const std::string &bytes, const std::string &what);
Plan readPlan(const std::string &path);

/// The program as JSON (what --print-plan shows); blobs are summarised.
nlohmann::json planToJson(const Plan &plan);

const char *roleName(PlanVariable::Role role);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_PLAN_H

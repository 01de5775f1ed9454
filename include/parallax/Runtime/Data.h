//===- Data.h - feeding a step: .npy files or synthetic data ---*- C++ -*-===//
//
// `--data DIR` holds one NumPy .npy file per graph input, named after it
// (`DIR/tokens.npy`); the first axis is samples. Step s of a run takes the
// next global batch of samples in order and wraps at the end of the epoch;
// with several ranks, rank r takes its contiguous part of that global batch,
// so the ranks together see exactly what one process would. An input that is
// not batched (the same for every sample, e.g. sampled-softmax candidates)
// is either stored with exactly its shape, used every step, or with one
// extra leading axis of steps.
//
// `--synthetic` draws the same kind of data instead: normal floats; ids of
// inputs that feed a gather from a Zipf distribution over the table's rows
// (the word-frequency shape that makes embeddings sparse); labels uniform in
// range. Every value is a function of (seed, input, step, global sample), so
// synthetic runs are also identical whatever the rank count.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_DATA_H
#define PARALLAX_RUNTIME_DATA_H

#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/Plan.h"

#include <memory>
#include <string>
#include <vector>

namespace parallax::rt {

class Session;

/// A NumPy array read from or written to a .npy file (format 1.0-3.0,
/// little-endian, C order).
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string data;
};

/// Throws RuntimeError naming the file on anything it cannot read: missing
/// file, bad magic, big-endian or Fortran-order data, unsupported dtype,
/// a size that does not match the header.
NpyArray readNpy(const std::string &path);
void writeNpy(const std::string &path, const TensorView &tensor);

/// Where each rank's slice of the global batch is.
struct Sharding {
  int rank = 0, worldSize = 1;
};

class DataSource {
public:
  virtual ~DataSource();
  /// Fills every input buffer of `session` for step `step` (0-based).
  virtual void fill(Session &session, int64_t step) = 0;
  /// Samples per global batch.
  int64_t globalBatch() const { return globalBatch_; }

protected:
  int64_t globalBatch_ = 1;
};

/// Checks every input's file up front (name, dtype, shape, every float
/// finite unless `allowNonFinite`, the same number of samples in every
/// batched input) so that a bad data directory fails before the first step,
/// naming the file and input.
std::unique_ptr<DataSource> openNpyData(const Plan &plan, const std::string &dir,
                                        Sharding sharding, bool allowNonFinite = false);
std::unique_ptr<DataSource> makeSyntheticData(const Plan &plan, uint64_t seed,
                                              Sharding sharding);

/// The per-rank batch of a plan (dimension 0 of its batched inputs; 1 if it
/// has none).
int64_t localBatchOf(const Plan &plan);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_DATA_H

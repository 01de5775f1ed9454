//===- RowPartition.h - a parameter server's rows, by partition -*- C++ -*-===//
//
// px-partition splits a sparse table of `rows` rows into P partitions of
// ceil(rows / P) rows (at least one; the last may be short or empty) and
// places partition p on group rank placement[p]. The parameter-server
// kernels route rows by it; the session gathers and checkpoints by it.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_ROWPARTITION_H
#define PARALLAX_RUNTIME_ROWPARTITION_H

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace parallax::rt {

struct RowPartition {
  RowPartition() = default;
  /// `placement` must name one rank per partition (at least one).
  RowPartition(int64_t rows, std::vector<int64_t> placement)
      : rows(rows), placement(std::move(placement)) {
    int64_t parts = (int64_t)this->placement.size();
    perPartition = std::max<int64_t>(1, (rows + parts - 1) / parts);
  }

  /// The group rank that serves `row`.
  int owner(int64_t row) const { return (int)placement[row / perPartition]; }

  /// The rows [begin, end) group rank `q` serves, in partition order.
  std::vector<std::pair<int64_t, int64_t>> servedBy(int q) const {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (int64_t p = 0; p < (int64_t)placement.size(); ++p)
      if (placement[p] == q)
        r.push_back({std::min(rows, p * perPartition), std::min(rows, (p + 1) * perPartition)});
    return r;
  }

  int64_t rows = 0, perPartition = 1;
  std::vector<int64_t> placement; ///< partition -> group rank
};

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_ROWPARTITION_H

//===- Grid.h - process groups of a grid (shard semantics) -----*- C++ -*-===//
//
// The px dialect's sync ops name a grid and some of its axes, as the
// upstream shard dialect does: ranks are numbered row-major over the grid's
// shape, and the group of a rank over a list of axes is every rank that
// shares its coordinates on the other axes (on a machines x local-ranks
// grid, axes [1] are the ranks of one machine, axes [0, 1] everybody). An
// empty list of axes means the whole grid.
//
// The one place that turns a grid and its axes into groups, for the plan
// emitter, the plan's checks and the runtime's communicators alike: no MPI
// here (ParallaxPlan, which parallax-opt links too).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_GRID_H
#define PARALLAX_RUNTIME_GRID_H

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace parallax::rt {

/// An error between ranks: a grid that does not fit the ranks running, or
/// (Comm.h) a collective that failed.
class CommError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// `axes`, or every axis of `shape` when empty (the px dialect's convention).
std::vector<int64_t> groupAxes(const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &axes);

/// Ranks in each group over `axes` (empty: all) of a grid of `shape`.
/// Throws CommError when a dimension is below 1, an axis is not one of the
/// grid's or is named twice, or the count does not fit in an int64_t.
int64_t groupSize(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes);

/// A rank's group over `axes` of a grid of `shape` (the group every
/// Comm::group forms): its world ranks in group-rank order, the rank's place
/// among them, and which of the grid's groups it is (MPI_Comm_split's
/// color). `axes` as they are: none leaves each rank alone (resolve the px
/// convention with groupAxes first). Throws CommError when the grid does not
/// hold `world` ranks or `axes` are not some of its axes, each once.
struct GroupPlace {
  std::vector<int> members;
  int rank = 0;
  int color = 0;
};
GroupPlace placeInGroup(int world, int rank, const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &axes);

/// Whether some group over `axes` (empty: all) of the grid holds ranks of
/// two machines, world ranks being numbered machine by machine with
/// `ranksPerMachine` each. Throws CommError on a grid groupSize refuses, one
/// of more than INT_MAX ranks, or ranksPerMachine below 1.
bool groupsSpanMachines(const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &axes, int ranksPerMachine);

/// The element offset, per dimension, of rank `rank`'s block of a variable
/// of `blockShape` split over `splitAxes` (per dimension, grid axes) of a
/// grid of `shape`: along each dimension, the block index counts the
/// rank's coordinates on those axes in order, as upstream shard does.
std::vector<int64_t> blockOrigin(const std::vector<int64_t> &shape,
                                 const std::vector<std::vector<int64_t>> &splitAxes,
                                 const std::vector<int64_t> &blockShape, int rank);

/// A kernel's grid as the plan names it.
struct KernelGrid {
  std::vector<int64_t> shape, axes;
  int64_t groupSize() const;
};

/// Attributes "grid_shape" (default {worldSize}) and "grid_axes" (default:
/// all), axes resolved by groupAxes. Throws CommError ("attribute
/// 'grid_shape' has the wrong type") when one is not a list of integers;
/// the grid itself is checked where it is used (groupSize, placeInGroup).
KernelGrid kernelGridOf(const nlohmann::json &attrs, int worldSize);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_GRID_H

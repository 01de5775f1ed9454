//===- Grid.cpp - process groups of a grid (shard semantics) --------------===//
//
// Grids come from plans, whose attributes are not trusted: every function
// checks the grid before it computes a coordinate.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Grid.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

namespace parallax::rt {

namespace {

std::string gridString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void checkDimensions(const std::vector<int64_t> &shape) {
  for (int64_t d : shape)
    if (d < 1)
      throw CommError("grid " + gridString(shape) + " has a dimension below 1");
}

/// `axes` are some of the grid's axes, each once.
void checkAxes(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes) {
  std::vector<bool> seen(shape.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= (int64_t)shape.size())
      throw CommError("grid axis " + std::to_string(a) + " is not an axis of grid " +
                      gridString(shape));
    if (seen[a])
      throw CommError("grid axis " + std::to_string(a) + " is named twice");
    seen[a] = true;
  }
}

/// The product of `shape`'s dimensions on `axes` (dimensions checked), or
/// past `limit`: limit + 1.
int64_t productUpTo(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes,
                    int64_t limit) {
  int64_t n = 1;
  for (int64_t a : axes) {
    int64_t d = shape[a];
    if (d > limit / n)
      return limit + 1;
    n *= d;
  }
  return n;
}

/// A grid of `shape` over `world` ranks, and `axes` some of its axes, each
/// once.
void checkGrid(int world, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &axes) {
  checkDimensions(shape);
  if (productUpTo(shape, groupAxes(shape, {}), world) != world)
    throw CommError("a grid " + gridString(shape) + " does not hold the " +
                    std::to_string(world) + " ranks running");
  checkAxes(shape, axes);
}

/// (color, key) of `rank` for the group over `axes`: the color numbers the
/// coordinates on the other axes, the key the coordinates on `axes`.
std::pair<int, int> colorAndKey(int rank, const std::vector<int64_t> &shape,
                                const std::vector<int64_t> &axes) {
  std::vector<int64_t> coord(shape.size());
  int64_t r = rank;
  for (int i = (int)shape.size() - 1; i >= 0; --i) {
    coord[i] = r % shape[i];
    r /= shape[i];
  }
  std::vector<bool> inGroup(shape.size(), false);
  for (int64_t a : axes)
    inGroup.at(a) = true;
  int64_t color = 0, key = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (inGroup[i])
      key = key * shape[i] + coord[i];
    else
      color = color * shape[i] + coord[i];
  }
  return {(int)color, (int)key};
}

} // namespace

std::vector<int64_t> groupAxes(const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &axes) {
  if (!axes.empty())
    return axes;
  std::vector<int64_t> all(shape.size());
  for (size_t a = 0; a < all.size(); ++a)
    all[a] = (int64_t)a;
  return all;
}

int64_t groupSize(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes) {
  checkDimensions(shape);
  std::vector<int64_t> group = groupAxes(shape, axes);
  checkAxes(shape, group);
  int64_t n = productUpTo(shape, group, INT64_MAX - 1);
  if (n == INT64_MAX)
    throw CommError("grid " + gridString(shape) + " has too many ranks");
  return n;
}

GroupPlace placeInGroup(int world, int rank, const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &axes) {
  checkGrid(world, shape, axes);
  GroupPlace place;
  auto [color, key] = colorAndKey(rank, shape, axes);
  for (int r = 0; r < world; ++r)
    if (colorAndKey(r, shape, axes).first == color)
      place.members.push_back(r);
  std::sort(place.members.begin(), place.members.end(), [&](int a, int b) {
    return colorAndKey(a, shape, axes).second < colorAndKey(b, shape, axes).second;
  });
  place.rank = key;
  place.color = color;
  return place;
}

bool groupsSpanMachines(const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &axes, int ranksPerMachine) {
  if (ranksPerMachine < 1)
    throw CommError("a machine of " + std::to_string(ranksPerMachine) + " ranks");
  std::vector<int64_t> group = groupAxes(shape, axes);
  groupSize(shape, group); // checks the grid
  int64_t world = productUpTo(shape, groupAxes(shape, {}), INT_MAX);
  if (world > INT_MAX)
    throw CommError("grid " + gridString(shape) + " has too many ranks");
  // The machine of each group's first rank (by color), -1 before it is seen.
  std::vector<int> machineOf(world, -1);
  for (int r = 0; r < (int)world; ++r) {
    int color = colorAndKey(r, shape, group).first;
    int machine = r / ranksPerMachine;
    if (machineOf[color] < 0)
      machineOf[color] = machine;
    else if (machineOf[color] != machine)
      return true;
  }
  return false;
}

int64_t KernelGrid::groupSize() const { return rt::groupSize(shape, axes); }

KernelGrid kernelGridOf(const nlohmann::json &attrs, int worldSize) {
  auto list = [&](const char *name, std::vector<int64_t> dflt) {
    if (!attrs.is_object() || !attrs.contains(name))
      return dflt;
    try {
      return attrs.at(name).get<std::vector<int64_t>>();
    } catch (const nlohmann::json::exception &) {
      throw CommError(std::string("attribute '") + name + "' has the wrong type");
    }
  };
  KernelGrid grid;
  grid.shape = list("grid_shape", {worldSize});
  grid.axes = groupAxes(grid.shape, list("grid_axes", {}));
  return grid;
}

std::vector<int64_t> blockOrigin(const std::vector<int64_t> &shape,
                                 const std::vector<std::vector<int64_t>> &splitAxes,
                                 const std::vector<int64_t> &blockShape, int rank) {
  // Row-major coordinates of the rank on the grid.
  std::vector<int64_t> coord(shape.size());
  int64_t rest = rank;
  for (size_t a = shape.size(); a-- > 0;) {
    coord[a] = rest % shape[a];
    rest /= shape[a];
  }
  std::vector<int64_t> origin(blockShape.size(), 0);
  for (size_t d = 0; d < splitAxes.size() && d < blockShape.size(); ++d) {
    int64_t index = 0;
    for (int64_t a : splitAxes[d])
      index = index * shape[a] + coord[a];
    origin[d] = index * blockShape[d];
  }
  return origin;
}

} // namespace parallax::rt

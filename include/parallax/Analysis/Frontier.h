//===- Frontier.h - the (time, memory) Pareto frontier of a strategy graph -*- C++ -*-===//
//
// TensorOpt's FT ("frontier tracking", Cai et al., TPDS'21): OptCNN's
// node and edge eliminations over a graph whose nodes choose one of a few
// configurations (how an operator is split), with the minimum replaced by a
// Pareto set of (step seconds, bytes per rank) kept for every pair of
// configurations at an eliminated node's boundary. Both costs add up over
// nodes and edges (time: compute plus resharding; memory: what each
// operator holds on a rank), so combining two sets is their Minkowski sum,
// pruned of dominated points. When no elimination applies, one node's
// configuration is fixed in turn and the rest searched again
// (enumeration); the frontiers of each choice are merged. Every point
// keeps the configuration of every node that gives it.
//
// The library knows nothing about MLIR or the cost model: StrategySpace
// builds the graph for a model, and unit tests check the search against
// enumerating every assignment of small graphs.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_FRONTIER_H
#define PARALLAX_ANALYSIS_FRONTIER_H

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace parallax::strategy {

/// What a choice costs: predicted seconds per step and bytes per rank.
struct Cost {
  double seconds = 0, bytes = 0;
  Cost &operator+=(const Cost &o) {
    seconds += o.seconds;
    bytes += o.bytes;
    return *this;
  }
  friend Cost operator+(Cost a, const Cost &b) { return a += b; }
  /// Neither larger, and not equal.
  bool dominates(const Cost &o) const {
    return seconds <= o.seconds && bytes <= o.bytes && (seconds < o.seconds || bytes < o.bytes);
  }
};

/// The configurations behind a point, as a tree shared between the points
/// that were combined from it (a leaf fixes one node's configuration).
struct Choice {
  int node = -1, config = -1;
  /// Which of the configuration's costs (Graph::Node::variants).
  int variant = 0;
  std::shared_ptr<const Choice> left, right;
  /// Writes each fixed node's configuration into `configs` (by node), and
  /// its variant into `variants` where given.
  void collect(std::vector<int> &configs, std::vector<int> *variants = nullptr) const;
};
using ChoicePtr = std::shared_ptr<const Choice>;

/// A set of points none of which dominates another, ascending in seconds
/// (and so descending in bytes). Of two equal points the first kept stays.
class Frontier {
public:
  struct Point {
    Cost cost;
    ChoicePtr choice;
  };

  Frontier() = default;
  /// One point.
  Frontier(Cost cost, ChoicePtr choice);

  const std::vector<Point> &points() const { return points_; }
  bool empty() const { return points_.empty(); }
  size_t size() const { return points_.size(); }

  /// Adds `p` unless a point dominates or equals it, dropping the points it
  /// dominates.
  void insert(Point p);
  /// The union of both, pruned.
  void merge(const Frontier &o);
  /// Every sum of a point of each (the choices joined), pruned.
  static Frontier sum(const Frontier &a, const Frontier &b);

  /// TensorOpt's epsilon merge, which bounds a frontier's size: drops a
  /// point within `epsilon` (relative) of the last point kept in both
  /// seconds and bytes, so that every dropped point has a kept one no
  /// slower and at most (1 + epsilon) times its bytes. The fastest and the
  /// smallest stay; 0 keeps all.
  void thin(double epsilon);

private:
  std::vector<Point> points_;
};

/// The search's input: operators that choose one configuration each, and
/// the costs of each choice and of each pair of choices on an edge
/// (resharding a producer's output into what its consumer reads).
struct Graph {
  struct Node {
    std::string name;
    /// The cost of each configuration (compute, communication inside the
    /// operator, the memory it holds).
    std::vector<Cost> configs;
    /// Per configuration (or none), other costs of the same configuration
    /// that change none of its edges: its activation recomputed instead of
    /// kept. They enter the configuration's frontier beside its own cost;
    /// Solution::variants says which one a point took.
    std::vector<std::vector<Cost>> variants;
  };
  struct Edge {
    int from = 0, to = 0;
    /// cost[f * to's configs + t]: from in configuration f, to in t.
    std::vector<Cost> cost;
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;

  int addNode(std::string name, std::vector<Cost> configs,
              std::vector<std::vector<Cost>> variants = {});
  /// The cost of node `n` in configuration `config`, variant `variant` (0:
  /// the configuration's own cost, k: its variants[k - 1]).
  const Cost &costOf(int n, int config, int variant) const;
  /// An edge whose costs are `cost(f, t)`.
  template <typename F>
  void addEdge(int from, int to, F cost) {
    Edge e{from, to, {}};
    for (size_t f = 0; f < nodes[from].configs.size(); ++f)
      for (size_t t = 0; t < nodes[to].configs.size(); ++t)
        e.cost.push_back(cost((int)f, (int)t));
    edges.push_back(std::move(e));
  }
};

/// One point of the whole graph's frontier.
struct Solution {
  Cost cost;
  /// The configuration of each node, by node index.
  std::vector<int> configs;
  /// The variant of each node's configuration (Graph::costOf), by node.
  std::vector<int> variants;
};

struct SearchOptions {
  /// Relative epsilon merge of every intermediate frontier (0: exact).
  double epsilon = 0;
};

struct SearchStats {
  int nodeEliminations = 0, edgeEliminations = 0, leafEliminations = 0;
  /// Nodes whose configurations were enumerated when nothing could be
  /// eliminated, and the searches that gave.
  int enumeratedNodes = 0, branches = 0;
  /// The largest frontier any node or edge held.
  size_t largestFrontier = 0;
};

/// The Pareto frontier of (seconds, bytes) over every assignment of a
/// configuration to each node, ascending in seconds. Empty when a node has
/// no configuration.
std::vector<Solution> searchFrontier(const Graph &graph, const SearchOptions &options = {},
                                     SearchStats *stats = nullptr);

} // namespace parallax::strategy

#endif // PARALLAX_ANALYSIS_FRONTIER_H

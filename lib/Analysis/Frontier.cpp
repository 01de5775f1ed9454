//===- Frontier.cpp - the (time, memory) Pareto frontier of a graph -------===//
//
// The search keeps, for every live node, one frontier per configuration and,
// for every live edge, one frontier per pair of its endpoints'
// configurations. Eliminations rewrite these in place until none applies
// (OptCNN's rules, with min replaced by the Pareto merge); what remains is
// split by enumerating one node's configurations.
//
//===----------------------------------------------------------------------===//

#include "parallax/Analysis/Frontier.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace parallax::strategy {

namespace {

/// Both choices, without allocating when one side carries none (edge costs
/// and the starting constant have none).
ChoicePtr join(const ChoicePtr &a, const ChoicePtr &b) {
  if (!a)
    return b;
  if (!b)
    return a;
  auto c = std::make_shared<Choice>();
  c->left = a;
  c->right = b;
  return c;
}

bool lessCost(const Cost &a, const Cost &b) {
  return a.seconds < b.seconds || (a.seconds == b.seconds && a.bytes < b.bytes);
}

} // namespace

//===----------------------------------------------------------------------===//
// Choice and Frontier
//===----------------------------------------------------------------------===//

void Choice::collect(std::vector<int> &configs, std::vector<int> *variants) const {
  // Iterative: a long chain's tree is as deep as the chain.
  std::vector<const Choice *> stack{this};
  while (!stack.empty()) {
    const Choice *c = stack.back();
    stack.pop_back();
    if (c->node >= 0) {
      if ((size_t)c->node >= configs.size())
        configs.resize(c->node + 1, -1);
      configs[c->node] = c->config;
      if (variants) {
        if ((size_t)c->node >= variants->size())
          variants->resize(c->node + 1, 0);
        (*variants)[c->node] = c->variant;
      }
    }
    if (c->right)
      stack.push_back(c->right.get());
    if (c->left)
      stack.push_back(c->left.get());
  }
}

Frontier::Frontier(Cost cost, ChoicePtr choice) { points_.push_back({cost, std::move(choice)}); }

void Frontier::insert(Point p) {
  // Appending in ascending order (as sums are built) is the common case.
  if (points_.empty() || p.cost.seconds > points_.back().cost.seconds) {
    if (points_.empty() || p.cost.bytes < points_.back().cost.bytes)
      points_.push_back(std::move(p));
    return;
  }
  // Points with seconds <= p's form a prefix; its last has the fewest bytes.
  auto after = std::upper_bound(points_.begin(), points_.end(), p.cost.seconds,
                                [](double s, const Point &q) { return s < q.cost.seconds; });
  if (after != points_.begin() && std::prev(after)->cost.bytes <= p.cost.bytes)
    return;
  // What p dominates: from the first point no faster than p, while its bytes
  // are no fewer (bytes descend, so this is a contiguous run).
  auto first = std::lower_bound(points_.begin(), points_.end(), p.cost.seconds,
                                [](const Point &q, double s) { return q.cost.seconds < s; });
  auto last = first;
  while (last != points_.end() && last->cost.bytes >= p.cost.bytes)
    ++last;
  first = points_.erase(first, last);
  points_.insert(first, std::move(p));
}

void Frontier::merge(const Frontier &o) {
  if (o.points_.empty())
    return;
  if (points_.empty()) {
    points_ = o.points_;
    return;
  }
  // Both are sorted: one pass in (seconds, bytes) order, ours first among
  // equals, keeping strictly falling bytes; only survivors are copied.
  std::vector<Point> out;
  out.reserve(points_.size() + o.points_.size());
  size_t i = 0, j = 0;
  while (i < points_.size() || j < o.points_.size()) {
    bool theirs = i == points_.size() ||
                  (j < o.points_.size() && lessCost(o.points_[j].cost, points_[i].cost));
    const Cost &c = theirs ? o.points_[j].cost : points_[i].cost;
    if (out.empty() || c.bytes < out.back().cost.bytes)
      out.push_back(theirs ? o.points_[j] : std::move(points_[i]));
    ++(theirs ? j : i);
  }
  points_ = std::move(out);
}

namespace {

/// The merge of several sums of two frontiers. Costs come first and choices
/// are built only for the points that survive: most sums are dominated, and
/// a choice is an allocation.
class SumMerge {
public:
  /// Merges in every sum of a point of `a` and one of `b`, which must
  /// outlive this. Earlier sums stay first among equal points.
  void add(const Frontier &a, const Frontier &b) {
    if (a.empty() || b.empty())
      return;
    const auto &pa = a.points(), &pb = b.points();
    auto at = [&](size_t i, size_t j) -> Candidate {
      return {pa[i].cost + pb[j].cost, &pa[i], &pb[j]};
    };
    if (std::min(pa.size(), pb.size()) <= 16) {
      // A point plus a whole frontier is still sorted: merge in one such
      // row at a time, with no sort.
      bool rowsOfA = pa.size() <= pb.size();
      size_t rows = rowsOfA ? pa.size() : pb.size(), cols = rowsOfA ? pb.size() : pa.size();
      for (size_t r = 0; r < rows; ++r) {
        row.clear();
        for (size_t c = 0; c < cols; ++c)
          row.push_back(rowsOfA ? at(r, c) : at(c, r));
        mergeIn(row);
      }
      return;
    }
    row.clear();
    for (size_t i = 0; i < pa.size(); ++i)
      for (size_t j = 0; j < pb.size(); ++j)
        row.push_back(at(i, j));
    // Stable: the first generated of equal sums stays.
    std::stable_sort(row.begin(), row.end(), [](const Candidate &x, const Candidate &y) {
      return lessCost(x.cost, y.cost);
    });
    mergeIn(row);
  }

  Frontier take() {
    Frontier out;
    // Ascending and pruned already: each insert appends.
    for (const Candidate &c : kept)
      out.insert({c.cost, join(c.a->choice, c.b->choice)});
    kept.clear();
    return out;
  }

private:
  struct Candidate {
    Cost cost;
    const Frontier::Point *a, *b;
  };
  std::vector<Candidate> kept, next, row;

  /// Appends `c` to a frontier being swept in ascending seconds. Rounding can
  /// tie the seconds of two sums whose bytes are then out of order; the later
  /// one, having fewer bytes, replaces the earlier.
  static void sweep(std::vector<Candidate> &out, const Candidate &c) {
    if (!out.empty() && c.cost.bytes >= out.back().cost.bytes)
      return;
    if (!out.empty() && c.cost.seconds == out.back().cost.seconds)
      out.back() = c;
    else
      out.push_back(c);
  }

  /// `seq`, ascending in seconds, into `kept`; kept first among equals.
  void mergeIn(const std::vector<Candidate> &seq) {
    next.clear();
    size_t k = 0;
    for (const Candidate &c : seq) {
      while (k < kept.size() && !lessCost(c.cost, kept[k].cost))
        sweep(next, kept[k++]);
      sweep(next, c);
    }
    while (k < kept.size())
      sweep(next, kept[k++]);
    kept.swap(next);
  }
};

} // namespace

Frontier Frontier::sum(const Frontier &a, const Frontier &b) {
  SumMerge m;
  m.add(a, b);
  return m.take();
}

void Frontier::thin(double epsilon) {
  if (epsilon <= 0 || points_.size() <= 2)
    return;
  // A point is dropped when it is within epsilon of the last kept point in
  // both seconds and bytes. The kept point is no slower and holds at most
  // (1 + epsilon) times the bytes, so every dropped point stays covered to
  // that factor. The first (fastest) and last (smallest) always stay.
  // In place: `k` is the last point kept.
  size_t k = 0, last = points_.size() - 1;
  for (size_t i = 1; i < last; ++i) {
    const Cost &kc = points_[k].cost, &c = points_[i].cost;
    if (c.seconds > kc.seconds * (1 + epsilon) || c.bytes * (1 + epsilon) < kc.bytes)
      if (++k != i)
        points_[k] = std::move(points_[i]);
  }
  if (++k != last)
    points_[k] = std::move(points_[last]);
  points_.resize(k + 1);
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

int Graph::addNode(std::string name, std::vector<Cost> configs,
                   std::vector<std::vector<Cost>> variants) {
  assert((variants.empty() || variants.size() == configs.size()) &&
         "variants are per configuration");
  nodes.push_back({std::move(name), std::move(configs), std::move(variants)});
  return (int)nodes.size() - 1;
}

const Cost &Graph::costOf(int n, int config, int variant) const {
  const Node &node = nodes[n];
  assert(variant == 0 || ((size_t)config < node.variants.size() &&
                          (size_t)variant <= node.variants[config].size()));
  return variant == 0 ? node.configs[config] : node.variants[config][variant - 1];
}

//===----------------------------------------------------------------------===//
// The search
//===----------------------------------------------------------------------===//

namespace {

/// The graph being reduced; copied whole for each enumerated configuration.
struct State {
  struct Edge {
    int u, v;
    /// f[cu * |C(v)| + cv].
    std::vector<Frontier> f;
  };
  /// Per node, per configuration.
  std::vector<std::vector<Frontier>> node;
  std::vector<char> alive;
  std::vector<Edge> edges;
  /// Per node, its live edges (a multigraph: the same neighbour may repeat).
  std::vector<std::vector<int>> incident;
  /// What the nodes removed so far add to every assignment.
  Frontier constant{Cost{}, nullptr};
  int liveNodes = 0;

  size_t configs(int n) const { return node[n].size(); }
  int other(int e, int n) const { return edges[e].u == n ? edges[e].v : edges[e].u; }
  /// Edge `e`'s frontier with its endpoint `x` in `cx` and `y` in `cy`.
  const Frontier &at(int e, int x, size_t cx, size_t cy) const {
    const Edge &ed = edges[e];
    if (ed.u == x)
      return ed.f[cx * configs(ed.v) + cy];
    return ed.f[cy * configs(ed.v) + cx];
  }
  void unlink(int n, int e) {
    auto &inc = incident[n];
    inc.erase(std::find(inc.begin(), inc.end(), e));
  }
  void killEdge(int e) {
    edges[e].f.clear();
    unlink(edges[e].u, e);
    unlink(edges[e].v, e);
  }
  void killNode(int n) {
    assert(incident[n].empty());
    alive[n] = 0;
    node[n].clear();
    --liveNodes;
  }
};

class Search {
public:
  Search(const SearchOptions &options, SearchStats &stats) : options(options), stats(stats) {}

  /// The frontier of `s`'s constant plus every assignment of its live nodes.
  Frontier run(State &s) {
    reduce(s);
    if (s.liveNodes == 0)
      return std::move(s.constant);
    // Fix the node touching the most edges: it breaks the most cycles.
    int pick = -1;
    for (int n = 0; n < (int)s.alive.size(); ++n)
      if (s.alive[n] && (pick < 0 || s.incident[n].size() > s.incident[pick].size()))
        pick = n;
    ++stats.enumeratedNodes;
    Frontier all;
    for (size_t c = 0; c < s.configs(pick); ++c) {
      State branch = s;
      fix(branch, pick, c);
      ++stats.branches;
      all.merge(run(branch));
      finish(all);
    }
    return all;
  }

private:
  const SearchOptions &options;
  SearchStats &stats;

  /// Every combination goes through here: thinned, and its size recorded.
  void finish(Frontier &f) {
    if (options.epsilon > 0)
      f.thin(options.epsilon);
    stats.largestFrontier = std::max(stats.largestFrontier, f.size());
  }

  static Frontier mergeAll(const std::vector<Frontier> &fs) {
    Frontier out;
    for (const Frontier &f : fs)
      out.merge(f);
    return out;
  }

  /// Node `v` in configuration `c` for good: its edges fold into its
  /// neighbours, its own cost into the constant.
  void fix(State &s, int v, size_t c) {
    while (!s.incident[v].empty()) {
      int e = s.incident[v].back();
      int u = s.other(e, v);
      for (size_t cu = 0; cu < s.configs(u); ++cu) {
        Frontier &nu = s.node[u][cu];
        nu = Frontier::sum(nu, s.at(e, u, cu, c));
        finish(nu);
      }
      s.killEdge(e);
    }
    s.constant = Frontier::sum(s.constant, s.node[v][c]);
    finish(s.constant);
    s.killNode(v);
  }

  void reduce(State &s) {
    std::vector<int> queue;
    std::vector<char> queued(s.alive.size(), 0);
    auto push = [&](int n) {
      if (s.alive[n] && !queued[n]) {
        queued[n] = 1;
        queue.push_back(n);
      }
    };
    for (int n = (int)s.alive.size() - 1; n >= 0; --n)
      push(n);
    std::vector<std::pair<int, int>> neighbours;
    while (!queue.empty()) {
      int v = queue.back();
      queue.pop_back();
      queued[v] = 0;
      if (!s.alive[v])
        continue;
      const std::vector<int> &inc = s.incident[v];
      if (inc.empty()) {
        s.constant = Frontier::sum(s.constant, mergeAll(s.node[v]));
        finish(s.constant);
        s.killNode(v);
        continue;
      }
      // Two edges to the same neighbour become one.
      neighbours.clear();
      for (int e : inc)
        neighbours.push_back({s.other(e, v), e});
      std::sort(neighbours.begin(), neighbours.end());
      auto dup = std::adjacent_find(neighbours.begin(), neighbours.end(),
                                    [](auto &a, auto &b) { return a.first == b.first; });
      if (dup != neighbours.end()) {
        mergeEdges(s, dup->second, std::next(dup)->second);
        push(v);
        push(dup->first);
        continue;
      }
      if (inc.size() == 1) {
        int u = s.other(inc[0], v);
        eliminateLeaf(s, v);
        push(u);
      } else if (inc.size() == 2) {
        int u = s.other(inc[0], v), w = s.other(inc[1], v);
        eliminateNode(s, v);
        push(u);
        push(w);
      }
    }
  }

  /// Edge `b` (between the same nodes as `a`, either way round) into `a`.
  void mergeEdges(State &s, int a, int b) {
    ++stats.edgeEliminations;
    State::Edge &ea = s.edges[a];
    for (size_t cu = 0; cu < s.configs(ea.u); ++cu)
      for (size_t cv = 0; cv < s.configs(ea.v); ++cv) {
        Frontier &f = ea.f[cu * s.configs(ea.v) + cv];
        f = Frontier::sum(f, s.at(b, ea.u, cu, cv));
        finish(f);
      }
    s.killEdge(b);
  }

  /// A node with one edge folds into its neighbour's configurations.
  void eliminateLeaf(State &s, int v) {
    ++stats.leafEliminations;
    int e = s.incident[v][0];
    int u = s.other(e, v);
    SumMerge best;
    for (size_t cu = 0; cu < s.configs(u); ++cu) {
      for (size_t cv = 0; cv < s.configs(v); ++cv)
        best.add(s.at(e, u, cu, cv), s.node[v][cv]);
      Frontier &nu = s.node[u][cu];
      nu = Frontier::sum(nu, best.take());
      finish(nu);
    }
    s.killEdge(e);
    s.killNode(v);
  }

  /// A node between two distinct neighbours u and w becomes an edge u-w;
  /// its configuration rides in the choices of the node costs summed in.
  void eliminateNode(State &s, int v) {
    ++stats.nodeEliminations;
    int e1 = s.incident[v][0], e2 = s.incident[v][1];
    int u = s.other(e1, v), w = s.other(e2, v);
    size_t nu = s.configs(u), nv = s.configs(v), nw = s.configs(w);
    // u-v plus v, shared by every configuration of w.
    std::vector<Frontier> left(nu * nv);
    for (size_t cu = 0; cu < nu; ++cu)
      for (size_t cv = 0; cv < nv; ++cv)
        left[cu * nv + cv] = Frontier::sum(s.at(e1, u, cu, cv), s.node[v][cv]);
    std::vector<Frontier> f(nu * nw);
    SumMerge best;
    for (size_t cu = 0; cu < nu; ++cu)
      for (size_t cw = 0; cw < nw; ++cw) {
        for (size_t cv = 0; cv < nv; ++cv)
          best.add(left[cu * nv + cv], s.at(e2, v, cv, cw));
        Frontier &out = f[cu * nw + cw];
        out = best.take();
        finish(out);
      }
    // e1 becomes u -> w; e2 goes.
    s.killEdge(e2);
    s.unlink(v, e1);
    State::Edge &ed = s.edges[e1];
    ed.u = u;
    ed.v = w;
    ed.f = std::move(f);
    s.incident[w].push_back(e1);
    s.killNode(v);
  }
};

} // namespace

std::vector<Solution> searchFrontier(const Graph &graph, const SearchOptions &options,
                                     SearchStats *stats) {
  SearchStats local;
  SearchStats &st = stats ? *stats : local;
  st = SearchStats();
  size_t n = graph.nodes.size();
  for (const Graph::Node &node : graph.nodes)
    if (node.configs.empty())
      return {};

  State s;
  s.node.resize(n);
  s.alive.assign(n, 1);
  s.incident.resize(n);
  s.liveNodes = (int)n;
  for (size_t v = 0; v < n; ++v) {
    const Graph::Node &node = graph.nodes[v];
    for (size_t c = 0; c < node.configs.size(); ++c) {
      auto leaf = [&](int variant) {
        auto l = std::make_shared<Choice>();
        l->node = (int)v;
        l->config = (int)c;
        l->variant = variant;
        return l;
      };
      // The configuration's own cost and its variants: a frontier already.
      Frontier f(node.configs[c], leaf(0));
      if (!node.variants.empty())
        for (size_t k = 0; k < node.variants[c].size(); ++k)
          f.insert({node.variants[c][k], leaf((int)k + 1)});
      s.node[v].push_back(std::move(f));
    }
  }
  for (const Graph::Edge &e : graph.edges) {
    assert(e.from >= 0 && (size_t)e.from < n && e.to >= 0 && (size_t)e.to < n);
    size_t nf = s.configs(e.from), nt = s.configs(e.to);
    assert(e.cost.size() == nf * nt && "edge cost is not |from| x |to|");
    if (e.from == e.to) {
      // A self-loop only ever sees equal configurations: a node cost.
      for (size_t c = 0; c < nf; ++c) {
        Frontier &f = s.node[e.from][c];
        f = Frontier::sum(f, Frontier(e.cost[c * nt + c], nullptr));
      }
      continue;
    }
    State::Edge ed{e.from, e.to, {}};
    ed.f.reserve(e.cost.size());
    for (const Cost &c : e.cost)
      ed.f.emplace_back(c, nullptr);
    int id = (int)s.edges.size();
    s.edges.push_back(std::move(ed));
    s.incident[e.from].push_back(id);
    s.incident[e.to].push_back(id);
  }

  Search search(options, st);
  Frontier result = search.run(s);

  std::vector<Solution> out;
  out.reserve(result.size());
  for (const Frontier::Point &p : result.points()) {
    Solution sol{p.cost, std::vector<int>(n, -1), std::vector<int>(n, 0)};
    if (p.choice)
      p.choice->collect(sol.configs, &sol.variants);
    assert(std::find(sol.configs.begin(), sol.configs.end(), -1) == sol.configs.end() &&
           "a node's configuration was lost");
    out.push_back(std::move(sol));
  }
  return out;
}

} // namespace parallax::strategy

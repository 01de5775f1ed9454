//===- FrontierTest.cpp - the FT search against enumerating assignments ---===//
//
// Frontier's set operations on hand-computed points, then searchFrontier on
// small graphs of every shape the eliminations meet (chains, residual
// diamonds, parallel edges, stars, K4 and a grid that need enumeration),
// each compared with the Pareto set of every assignment; the configurations
// a solution reports must reproduce its cost.
//
//===----------------------------------------------------------------------===//

#include "parallax/Analysis/Frontier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

using namespace parallax::strategy;

namespace {

std::vector<Cost> costsOf(const Frontier &f) {
  std::vector<Cost> out;
  for (const Frontier::Point &p : f.points())
    out.push_back(p.cost);
  return out;
}

void expectCosts(const Frontier &f, const std::vector<Cost> &want) {
  std::vector<Cost> got = costsOf(f);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].seconds, want[i].seconds) << "point " << i;
    EXPECT_EQ(got[i].bytes, want[i].bytes) << "point " << i;
  }
}

ChoicePtr leaf(int node, int config) {
  auto c = std::make_shared<Choice>();
  c->node = node;
  c->config = config;
  return c;
}

Frontier frontierOf(const std::vector<Cost> &costs, int node = 0) {
  Frontier f;
  for (size_t i = 0; i < costs.size(); ++i)
    f.insert({costs[i], leaf(node, (int)i)});
  return f;
}

/// The cost of one assignment, straight from the graph.
Cost costOf(const Graph &g, const std::vector<int> &configs, const std::vector<int> &variants = {}) {
  Cost total;
  for (size_t v = 0; v < g.nodes.size(); ++v)
    total += g.costOf((int)v, configs[v], variants.empty() ? 0 : variants[v]);
  for (const Graph::Edge &e : g.edges)
    total += e.cost[configs[e.from] * g.nodes[e.to].configs.size() + configs[e.to]];
  return total;
}

/// `g` with each configuration's variants as configurations of their own,
/// whose edges cost what the configuration's do.
Graph withVariantsAsConfigs(const Graph &g) {
  Graph out;
  std::vector<std::vector<int>> configOf(g.nodes.size());
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    std::vector<Cost> cs;
    const Graph::Node &n = g.nodes[v];
    for (size_t c = 0; c < n.configs.size(); ++c) {
      size_t k = n.variants.empty() ? 0 : n.variants[c].size();
      for (size_t i = 0; i <= k; ++i) {
        cs.push_back(g.costOf((int)v, (int)c, (int)i));
        configOf[v].push_back((int)c);
      }
    }
    out.addNode(n.name, cs);
  }
  for (const Graph::Edge &e : g.edges) {
    size_t to = g.nodes[e.to].configs.size();
    out.addEdge(e.from, e.to, [&](int f, int t) {
      return e.cost[configOf[e.from][f] * to + configOf[e.to][t]];
    });
  }
  return out;
}

/// The Pareto set of every assignment, ascending in seconds.
std::vector<Cost> bruteForce(const Graph &g) {
  for (const Graph::Node &n : g.nodes)
    if (n.configs.empty())
      return {};
  for (const Graph::Node &n : g.nodes)
    if (!n.variants.empty())
      return bruteForce(withVariantsAsConfigs(g));
  std::vector<Cost> all;
  std::vector<int> configs(g.nodes.size(), 0);
  while (true) {
    all.push_back(costOf(g, configs));
    size_t i = 0;
    for (; i < configs.size(); ++i) {
      if (++configs[i] < (int)g.nodes[i].configs.size())
        break;
      configs[i] = 0;
    }
    if (i == configs.size())
      break;
  }
  std::sort(all.begin(), all.end(), [](const Cost &a, const Cost &b) {
    return a.seconds != b.seconds ? a.seconds < b.seconds : a.bytes < b.bytes;
  });
  std::vector<Cost> pareto;
  for (const Cost &c : all)
    if (pareto.empty() || c.bytes < pareto.back().bytes)
      pareto.push_back(c);
  return pareto;
}

/// Every solution names a configuration for each node that reproduces its
/// cost, and the solutions are strictly Pareto-sorted.
void checkSolutions(const Graph &g, const std::vector<Solution> &got) {
  for (size_t i = 0; i < got.size(); ++i) {
    const Solution &s = got[i];
    ASSERT_EQ(s.configs.size(), g.nodes.size());
    ASSERT_EQ(s.variants.size(), g.nodes.size());
    for (size_t v = 0; v < g.nodes.size(); ++v) {
      ASSERT_GE(s.configs[v], 0) << "node " << v << " has no configuration";
      ASSERT_LT(s.configs[v], (int)g.nodes[v].configs.size());
      const Graph::Node &n = g.nodes[v];
      ASSERT_GE(s.variants[v], 0);
      ASSERT_LE(s.variants[v], n.variants.empty() ? 0 : (int)n.variants[s.configs[v]].size());
    }
    // Exact up to the order of the additions.
    Cost c = costOf(g, s.configs, s.variants);
    EXPECT_NEAR(c.seconds, s.cost.seconds, 1e-9 * std::max(1.0, std::abs(c.seconds)))
        << "solution " << i;
    EXPECT_NEAR(c.bytes, s.cost.bytes, 1e-9 * std::max(1.0, std::abs(c.bytes))) << "solution " << i;
    if (i > 0) {
      EXPECT_LT(got[i - 1].cost.seconds, s.cost.seconds);
      EXPECT_GT(got[i - 1].cost.bytes, s.cost.bytes);
    }
  }
}

/// searchFrontier equals the brute-force frontier.
void checkExact(const Graph &g, SearchStats *stats = nullptr) {
  std::vector<Solution> got = searchFrontier(g, {}, stats);
  std::vector<Cost> want = bruteForce(g);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].cost.seconds, want[i].seconds, 1e-9) << "point " << i;
    EXPECT_NEAR(got[i].cost.bytes, want[i].bytes, 1e-9) << "point " << i;
  }
  checkSolutions(g, got);
}

/// Node costs trading time for memory: config c is faster and bigger.
std::vector<Cost> tradeoff(int n, double base) {
  std::vector<Cost> cs;
  for (int c = 0; c < n; ++c)
    cs.push_back({base / (c + 1), base * (c + 1)});
  return cs;
}

/// Resharding between different configurations costs time and a buffer.
auto reshard(double s, double b) {
  return [=](int f, int t) { return f == t ? Cost{0, 0} : Cost{s * (1 + std::abs(f - t)), b}; };
}

/// Small integers so that sums tie.
Graph randomGraph(std::mt19937 &rng, int nodes, int maxConfigs, int edges) {
  std::uniform_int_distribution<int> configs(1, maxConfigs), cost(0, 6), node(0, nodes - 1);
  Graph g;
  for (int v = 0; v < nodes; ++v) {
    std::vector<Cost> cs;
    int k = configs(rng);
    for (int c = 0; c < k; ++c)
      cs.push_back({(double)cost(rng), (double)cost(rng)});
    g.addNode("n" + std::to_string(v), cs);
  }
  for (int i = 0; i < edges; ++i) {
    int a = node(rng), b = node(rng);
    while (b == a)
      b = node(rng);
    g.addEdge(a, b, [&](int, int) { return Cost{(double)cost(rng), (double)cost(rng)}; });
  }
  return g;
}

//===----------------------------------------------------------------------===//
// Frontier
//===----------------------------------------------------------------------===//

TEST(Frontier, InsertKeepsParetoOrder) {
  Frontier f;
  f.insert({{3, 3}, leaf(0, 0)});
  f.insert({{1, 5}, leaf(0, 1)});
  f.insert({{5, 1}, leaf(0, 2)});
  expectCosts(f, {{1, 5}, {3, 3}, {5, 1}});

  // Dominated: larger in one, equal in the other; larger in both.
  f.insert({{3, 4}, leaf(0, 3)});
  f.insert({{4, 3}, leaf(0, 4)});
  f.insert({{6, 6}, leaf(0, 5)});
  expectCosts(f, {{1, 5}, {3, 3}, {5, 1}});

  // Equal: the first kept stays.
  f.insert({{3, 3}, leaf(0, 6)});
  expectCosts(f, {{1, 5}, {3, 3}, {5, 1}});
  EXPECT_EQ(f.points()[1].choice->config, 0);

  // Incomparable, between two points.
  f.insert({{2, 4}, leaf(0, 7)});
  expectCosts(f, {{1, 5}, {2, 4}, {3, 3}, {5, 1}});

  // Dominating several (equal seconds with fewer bytes included).
  f.insert({{2, 2}, leaf(0, 8)});
  expectCosts(f, {{1, 5}, {2, 2}, {5, 1}});
  f.insert({{1, 2}, leaf(0, 9)});
  expectCosts(f, {{1, 2}, {5, 1}});
  f.insert({{0, 0}, leaf(0, 10)});
  expectCosts(f, {{0, 0}});
  EXPECT_EQ(f.points()[0].choice->config, 10);
}

TEST(Frontier, MergeIsThePrunedUnion) {
  Frontier a = frontierOf({{1, 9}, {4, 5}, {8, 2}}, 0);
  Frontier b = frontierOf({{2, 7}, {4, 5}, {5, 6}, {9, 1}}, 1);
  a.merge(b);
  expectCosts(a, {{1, 9}, {2, 7}, {4, 5}, {8, 2}, {9, 1}});
  // Of the equal (4, 5), the one already held stays.
  EXPECT_EQ(a.points()[2].choice->node, 0);

  Frontier empty;
  empty.merge(b);
  expectCosts(empty, costsOf(b));
  b.merge(Frontier());
  expectCosts(b, {{2, 7}, {4, 5}, {9, 1}});
}

TEST(Frontier, SumIsThePrunedMinkowskiSum) {
  Frontier a = frontierOf({{1, 4}, {3, 1}}, 0);
  Frontier b = frontierOf({{0, 3}, {2, 0}}, 1);
  // (1,7) (3,4) (3,4) (5,1): one of the equal pair goes.
  Frontier s = Frontier::sum(a, b);
  expectCosts(s, {{1, 7}, {3, 4}, {5, 1}});
  // Choices join both sides.
  for (const Frontier::Point &p : s.points()) {
    std::vector<int> configs(2, -1);
    p.choice->collect(configs);
    Cost c = a.points()[configs[0]].cost + b.points()[configs[1]].cost;
    EXPECT_EQ(c.seconds, p.cost.seconds);
    EXPECT_EQ(c.bytes, p.cost.bytes);
  }

  Frontier c = frontierOf({{1, 5}, {2, 3}, {4, 2}}, 0);
  Frontier d = frontierOf({{0, 4}, {1, 1}}, 1);
  // All six: (1,9) (2,6) (2,7) (3,4) (4,6) (5,3); (2,7) and (4,6) dominated.
  expectCosts(Frontier::sum(c, d), {{1, 9}, {2, 6}, {3, 4}, {5, 3}});

  // A point without a choice adds no tree node.
  Frontier zero(Cost{}, nullptr);
  Frontier z = Frontier::sum(zero, c);
  ASSERT_EQ(z.size(), 3u);
  EXPECT_EQ(z.points()[0].choice, c.points()[0].choice);

  EXPECT_TRUE(Frontier::sum(c, Frontier()).empty());

  // Rounding ties the seconds of two sums (2^53 + 1 rounds to 2^53): only
  // the one with fewer bytes is a frontier point.
  Frontier big = frontierOf({{9007199254740992.0, 0}}, 0);
  Frontier small = frontierOf({{0, 5}, {1, 3}}, 1);
  expectCosts(Frontier::sum(big, small), {{9007199254740992.0, 3}});
  expectCosts(Frontier::sum(small, big), {{9007199254740992.0, 3}});
}

TEST(Frontier, RandomSumAndMergeMatchNaive) {
  // Sizes that take both ways of summing (a small side merged row by row,
  // and two large sides sorted), on costs with ties.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> v(0, 3);
  // Near a falling line, so that most points are kept.
  auto randomFrontier = [&](int n, int node) {
    Frontier f;
    for (int i = 0; i < n; ++i)
      f.insert({{(double)(2 * i + v(rng)), (double)(2 * (n - i) + v(rng))}, leaf(node, i)});
    return f;
  };
  auto naive = [](const std::vector<Cost> &all) {
    Frontier f;
    for (const Cost &c : all)
      f.insert({c, nullptr});
    return costsOf(f);
  };
  for (int n : {1, 3, 30, 100}) {
    for (int m : {1, 5, 30, 100}) {
      Frontier a = randomFrontier(n, 0), b = randomFrontier(m, 1);
      std::vector<Cost> sums, both = costsOf(a);
      for (const Frontier::Point &p : a.points())
        for (const Frontier::Point &q : b.points())
          sums.push_back(p.cost + q.cost);
      for (const Frontier::Point &q : b.points())
        both.push_back(q.cost);
      SCOPED_TRACE(std::to_string(a.size()) + " x " + std::to_string(b.size()));
      if (n >= 30 && m >= 30) {
        EXPECT_GT(std::min(a.size(), b.size()), 16u) << "both sides large";
      }

      Frontier s = Frontier::sum(a, b);
      expectCosts(s, naive(sums));
      for (const Frontier::Point &p : s.points()) {
        std::vector<int> configs(2, -1);
        p.choice->collect(configs);
        Cost c = a.points()[0].cost;
        // Leaves name the index a point was inserted with, not its rank.
        bool found = false;
        for (const Frontier::Point &x : a.points())
          for (const Frontier::Point &y : b.points())
            if (x.choice->config == configs[0] && y.choice->config == configs[1]) {
              c = x.cost + y.cost;
              found = true;
            }
        ASSERT_TRUE(found);
        EXPECT_EQ(c.seconds, p.cost.seconds);
        EXPECT_EQ(c.bytes, p.cost.bytes);
      }

      Frontier merged = a;
      merged.merge(b);
      expectCosts(merged, naive(both));
    }
  }
}

TEST(Frontier, ThinKeepsEndsAndSpreadPoints) {
  Frontier f = frontierOf({{100, 1000}, {101, 990}, {102, 900}, {150, 899}, {151, 500},
                           {152, 499}, {153, 498}});
  Frontier exact = f;
  exact.thin(0);
  EXPECT_EQ(exact.size(), f.size());

  f.thin(0.05);
  // 101: within 5% of 100 in both. 102: 900 * 1.05 < 1000. 150: 50% slower.
  // 151: far in bytes. 152: close to 151. 153: the last, always kept.
  expectCosts(f, {{100, 1000}, {102, 900}, {150, 899}, {151, 500}, {153, 498}});

  Frontier g = frontierOf({{1, 10}, {1.01, 9.99}, {1.02, 9.98}});
  g.thin(0.5);
  expectCosts(g, {{1, 10}, {1.02, 9.98}});
}

TEST(Frontier, CollectWalksTheTree) {
  auto root = std::make_shared<Choice>();
  auto inner = std::make_shared<Choice>();
  inner->left = leaf(0, 2);
  inner->right = leaf(3, 1);
  root->left = inner;
  root->right = leaf(1, 0);
  std::vector<int> configs(4, -1);
  root->collect(configs);
  EXPECT_EQ(configs, (std::vector<int>{2, 0, -1, 1}));
}

//===----------------------------------------------------------------------===//
// searchFrontier on fixed shapes
//===----------------------------------------------------------------------===//

TEST(SearchFrontier, EmptyGraph) {
  Graph g;
  std::vector<Solution> s = searchFrontier(g);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cost.seconds, 0);
  EXPECT_EQ(s[0].cost.bytes, 0);
  EXPECT_TRUE(s[0].configs.empty());
}

TEST(SearchFrontier, NodeWithoutConfigurations) {
  Graph g;
  int a = g.addNode("a", tradeoff(3, 1));
  int b = g.addNode("b", {});
  g.addEdge(a, b, reshard(1, 1));
  EXPECT_TRUE(searchFrontier(g).empty());
}

TEST(SearchFrontier, SingleNode) {
  Graph g;
  g.addNode("a", {{1, 8}, {2, 4}, {3, 4}, {4, 1}, {5, 5}});
  std::vector<Solution> s = searchFrontier(g);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].configs, std::vector<int>{1});
  checkExact(g);
}

TEST(SearchFrontier, IsolatedNodes) {
  Graph g;
  g.addNode("a", {{1, 4}, {3, 1}});
  g.addNode("b", {{0, 3}, {2, 0}});
  g.addNode("c", {{5, 5}});
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_EQ(stats.enumeratedNodes, 0);
}

TEST(SearchFrontier, NodeWithOneConfiguration) {
  Graph g;
  int a = g.addNode("a", tradeoff(3, 4));
  int b = g.addNode("b", {{2, 2}});
  int c = g.addNode("c", tradeoff(2, 3));
  g.addEdge(a, b, reshard(1, 2));
  g.addEdge(b, c, reshard(1, 2));
  g.addEdge(a, c, [](int f, int t) { return Cost{(double)(f + t), (double)(f * t)}; });
  checkExact(g);
}

TEST(SearchFrontier, Chain) {
  Graph g;
  int prev = -1;
  for (int i = 0; i < 6; ++i) {
    int n = g.addNode("n" + std::to_string(i), tradeoff(3, 2 + i));
    if (prev >= 0)
      g.addEdge(prev, n, reshard(0.5 * i, 1 + i));
    prev = n;
  }
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_EQ(stats.enumeratedNodes, 0);
  EXPECT_GT(stats.leafEliminations + stats.nodeEliminations, 0);
}

TEST(SearchFrontier, ResidualDiamond) {
  // a -> b -> c -> d and a -> d: the skip connection closes a cycle.
  Graph g;
  int a = g.addNode("a", tradeoff(3, 4));
  int b = g.addNode("b", tradeoff(3, 6));
  int c = g.addNode("c", tradeoff(3, 5));
  int d = g.addNode("d", tradeoff(3, 3));
  g.addEdge(a, b, reshard(1, 3));
  g.addEdge(b, c, reshard(2, 1));
  g.addEdge(c, d, reshard(1, 2));
  g.addEdge(a, d, reshard(3, 4));
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_EQ(stats.enumeratedNodes, 0);
  EXPECT_GT(stats.nodeEliminations, 0);
  EXPECT_GT(stats.edgeEliminations, 0);
}

TEST(SearchFrontier, ParallelEdgesBothWays) {
  Graph g;
  int a = g.addNode("a", tradeoff(2, 3));
  int b = g.addNode("b", tradeoff(3, 5));
  // Asymmetric costs so that a missed transpose shows.
  g.addEdge(a, b, [](int f, int t) { return Cost{(double)(f + 2 * t), (double)(3 * f + t)}; });
  g.addEdge(b, a, [](int f, int t) { return Cost{(double)(4 * f + t), (double)(f * 2 + 5 * t)}; });
  g.addEdge(a, b, [](int f, int t) { return Cost{(double)(f * t), (double)(t)}; });
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_EQ(stats.edgeEliminations, 2);
}

TEST(SearchFrontier, SelfLoop) {
  Graph g;
  int a = g.addNode("a", tradeoff(3, 2));
  int b = g.addNode("b", tradeoff(2, 2));
  g.addEdge(a, a, [](int f, int t) { return Cost{(double)(10 * f + t), (double)(f == t ? 3 : 100)}; });
  g.addEdge(a, b, reshard(1, 1));
  checkExact(g);
}

TEST(SearchFrontier, Star) {
  Graph g;
  int hub = g.addNode("hub", tradeoff(4, 10));
  for (int i = 0; i < 6; ++i) {
    int n = g.addNode("leaf" + std::to_string(i), tradeoff(3, 1 + i));
    if (i % 2)
      g.addEdge(hub, n, reshard(1 + i, 2));
    else
      g.addEdge(n, hub, reshard(2, 1 + i));
  }
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_EQ(stats.enumeratedNodes, 0);
  // Six of the seven nodes go (the hub may go as a node between its last
  // two leaves); the last is isolated.
  EXPECT_EQ(stats.leafEliminations + stats.nodeEliminations, 6);
}

TEST(SearchFrontier, CompleteGraphNeedsEnumeration) {
  Graph g;
  for (int i = 0; i < 4; ++i)
    g.addNode("k" + std::to_string(i), tradeoff(3, 2 + i));
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j)
      g.addEdge(i, j, [=](int f, int t) {
        return Cost{(double)((f + 1) * (t + i + 1) % 5), (double)((f + j) * (t + 2) % 7)};
      });
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_GT(stats.enumeratedNodes, 0);
  EXPECT_EQ(stats.branches, 3 * stats.enumeratedNodes);
}

TEST(SearchFrontier, Grid3x3) {
  Graph g;
  for (int i = 0; i < 9; ++i)
    g.addNode("g" + std::to_string(i), tradeoff(2 + i % 2, 1 + i));
  auto edge = [&](int a, int b) {
    g.addEdge(a, b, [=](int f, int t) {
      return Cost{(double)((a + 1) * (f + 2 * t) % 4), (double)((b + f + t) % 3)};
    });
  };
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      if (c + 1 < 3)
        edge(3 * r + c, 3 * r + c + 1);
      if (r + 1 < 3)
        edge(3 * r + c, 3 * (r + 1) + c);
    }
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_GT(stats.enumeratedNodes, 0);
}

TEST(SearchFrontier, LongFrontiersMatchEnumeration) {
  // Two blocks of two parallel branches in series with real-valued
  // trade-offs: longer frontiers than the random graphs reach, and sums that
  // round (11 nodes, 3^11 assignments).
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  Graph g;
  auto node = [&](const std::string &name) {
    std::vector<Cost> cs;
    for (int c = 0; c < 3; ++c)
      cs.push_back({u(rng) * 8 / (1 << c), u(rng) * (1 << c)});
    return g.addNode(name, cs);
  };
  auto edge = [&](int a, int b) {
    g.addEdge(a, b, [&](int f, int t) { return Cost{u(rng) * std::abs(f - t), u(rng) * (f != t)}; });
  };
  int s = node("s"), t = node("t"), x = node("x");
  for (auto [from, to] : {std::pair{s, t}, std::pair{s, t}, std::pair{t, x}, std::pair{t, x}}) {
    int a = node("a"), b = node("b");
    edge(from, a);
    edge(a, b);
    edge(b, to);
  }
  SearchStats stats;
  checkExact(g, &stats);
  EXPECT_GT(stats.largestFrontier, 16u);
  EXPECT_EQ(stats.enumeratedNodes, 0);
}

TEST(SearchFrontier, RandomGraphsMatchEnumeration) {
  std::mt19937 rng(20210601);
  std::uniform_int_distribution<int> nodes(2, 7), extra(0, 8);
  int enumerated = 0;
  for (int iter = 0; iter < 200; ++iter) {
    int n = nodes(rng);
    Graph g = randomGraph(rng, n, 4, n - 1 + extra(rng) % (n + 2));
    SCOPED_TRACE("graph " + std::to_string(iter));
    SearchStats stats;
    checkExact(g, &stats);
    if (::testing::Test::HasFatalFailure())
      return;
    enumerated += stats.enumeratedNodes > 0;
  }
  // The sample does reach enumeration.
  EXPECT_GT(enumerated, 10);
}

TEST(SearchFrontier, VariantsJoinTheirConfigurationsFrontier) {
  // a keeps its activation (1 s, 4 B) or recomputes it (2 s, 1 B); b has
  // two configurations. Every combination is on the frontier, and each
  // point says which variant of a gives it.
  Graph g;
  int a = g.addNode("a", {{1, 4}}, {{{2, 1}}});
  int b = g.addNode("b", {{1, 1}, {0.5, 3}});
  g.addEdge(a, b, [](int, int) { return Cost{}; });
  std::vector<Solution> got = searchFrontier(g);
  ASSERT_EQ(got.size(), 4u);
  std::vector<Cost> want = {{1.5, 7}, {2, 5}, {2.5, 4}, {3, 2}};
  std::vector<std::pair<int, int>> aVariantBConfig = {{0, 1}, {0, 0}, {1, 1}, {1, 0}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].cost.seconds, want[i].seconds) << "point " << i;
    EXPECT_EQ(got[i].cost.bytes, want[i].bytes) << "point " << i;
    EXPECT_EQ(got[i].configs[a], 0);
    EXPECT_EQ(got[i].variants[a], aVariantBConfig[i].first) << "point " << i;
    EXPECT_EQ(got[i].configs[b], aVariantBConfig[i].second) << "point " << i;
    EXPECT_EQ(got[i].variants[b], 0);
  }
  checkSolutions(g, got);
}

TEST(SearchFrontier, RandomGraphsWithVariantsMatchEnumeration) {
  std::mt19937 rng(20261127);
  std::uniform_int_distribution<int> nodes(2, 6), extra(0, 6), variants(0, 2), cost(0, 6);
  for (int iter = 0; iter < 150; ++iter) {
    int n = nodes(rng);
    Graph g = randomGraph(rng, n, 3, n - 1 + extra(rng) % (n + 2));
    for (Graph::Node &node : g.nodes) {
      if (variants(rng) == 0)
        continue; // some nodes have none
      node.variants.resize(node.configs.size());
      for (std::vector<Cost> &vs : node.variants)
        for (int k = variants(rng); k > 0; --k)
          vs.push_back({(double)cost(rng), (double)cost(rng)});
    }
    SCOPED_TRACE("graph " + std::to_string(iter));
    checkExact(g);
    if (::testing::Test::HasFatalFailure())
      return;
  }
}

//===----------------------------------------------------------------------===//
// Epsilon and size
//===----------------------------------------------------------------------===//

TEST(SearchFrontier, EpsilonApproximates) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(1, 10);
  const double eps = 0.05, slack = std::pow(1 + eps, 10);
  int smaller = 0;
  for (int iter = 0; iter < 60; ++iter) {
    // Real-valued costs so that frontiers are long enough to thin.
    Graph g;
    int n = 3 + iter % 5;
    for (int v = 0; v < n; ++v) {
      std::vector<Cost> cs;
      for (int c = 0; c < 4; ++c)
        cs.push_back({u(rng) / (c + 1), u(rng) * (c + 1)});
      g.addNode("n" + std::to_string(v), cs);
    }
    for (int v = 1; v < n; ++v)
      g.addEdge(v - 1, v, [&](int f, int t) { return Cost{f == t ? 0 : u(rng), u(rng)}; });
    if (n > 3)
      g.addEdge(0, n - 1, [&](int, int) { return Cost{u(rng), u(rng)}; });
    SCOPED_TRACE("graph " + std::to_string(iter));

    SearchOptions opts;
    opts.epsilon = eps;
    std::vector<Solution> got = searchFrontier(g, opts);
    std::vector<Cost> exact = bruteForce(g);
    ASSERT_FALSE(got.empty());
    EXPECT_LE(got.size(), exact.size());
    smaller += got.size() < exact.size();
    checkSolutions(g, got);
    // The fastest assignment survives every thinning exactly.
    EXPECT_NEAR(got.front().cost.seconds, exact.front().seconds, 1e-9);
    for (const Cost &q : exact) {
      bool covered = std::any_of(got.begin(), got.end(), [&](const Solution &p) {
        return p.cost.seconds <= q.seconds * slack && p.cost.bytes <= q.bytes * slack;
      });
      EXPECT_TRUE(covered) << "(" << q.seconds << ", " << q.bytes << ") lost";
    }
  }
  // Thinning does thin.
  EXPECT_GT(smaller, 20);
}

TEST(SearchFrontier, LargeResidualChain) {
  // 400 operators, 4 configurations each: a chain with a skip edge over
  // every block of three, as in a residual network.
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> jitter(0, 3);
  Graph g;
  const int n = 400;
  for (int v = 0; v < n; ++v) {
    std::vector<Cost> cs;
    for (int c = 0; c < 4; ++c)
      cs.push_back({(double)(8 / (1 << c) + jitter(rng)), (double)((1 << c) + jitter(rng))});
    g.addNode("op" + std::to_string(v), cs);
  }
  for (int v = 1; v < n; ++v)
    g.addEdge(v - 1, v, [&](int f, int t) {
      return f == t ? Cost{0, 0} : Cost{(double)(1 + jitter(rng)), (double)jitter(rng)};
    });
  for (int v = 3; v < n; v += 3)
    g.addEdge(v - 3, v, [&](int f, int t) {
      return f == t ? Cost{0, 0} : Cost{(double)(2 + jitter(rng)), (double)(1 + jitter(rng))};
    });

  SearchStats stats;
  auto start = std::chrono::steady_clock::now();
  std::vector<Solution> got = searchFrontier(g, {}, &stats);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
  ASSERT_FALSE(got.empty());
  EXPECT_GT(got.size(), 1u);
  checkSolutions(g, got);
  EXPECT_EQ(stats.enumeratedNodes, 0);
  std::printf("400 nodes: %zu solutions, largest frontier %zu, %.1f ms\n", got.size(),
              stats.largestFrontier, ms);

  // Too many assignments to enumerate; instead the same graph with its
  // nodes shuffled and some edges reversed, which eliminates in another
  // order, must give the same frontier (integer costs: exactly).
  std::vector<int> perm(n);
  for (int v = 0; v < n; ++v)
    perm[v] = v;
  std::shuffle(perm.begin(), perm.end(), rng);
  Graph h;
  h.nodes.resize(n);
  for (int v = 0; v < n; ++v)
    h.nodes[perm[v]] = g.nodes[v];
  for (const Graph::Edge &e : g.edges) {
    if (rng() % 2) {
      h.edges.push_back({perm[e.from], perm[e.to], e.cost});
      continue;
    }
    size_t nt = g.nodes[e.to].configs.size();
    h.addEdge(perm[e.to], perm[e.from], [&](int t, int f) { return e.cost[f * nt + t]; });
  }
  std::vector<Solution> other = searchFrontier(h);
  ASSERT_EQ(other.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(other[i].cost.seconds, got[i].cost.seconds) << "point " << i;
    EXPECT_EQ(other[i].cost.bytes, got[i].cost.bytes) << "point " << i;
  }
  checkSolutions(h, other);
}

} // namespace

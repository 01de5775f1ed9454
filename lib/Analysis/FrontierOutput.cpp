//===- FrontierOutput.cpp - a strategy frontier as JSON and as a figure ---===//

#include "parallax/Analysis/FrontierOutput.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>

namespace parallax::strategy {

void writeFrontierJson(const FrontierSummary &summary, const std::vector<CompiledPoint> &points,
                       llvm::raw_ostream &os) {
  llvm::json::Array frontier, references;
  int index = 0;
  for (const CompiledPoint &c : points) {
    llvm::json::Object splits;
    for (const auto &[name, split] : c.point.strategy.splits)
      splits[name] = nameOf(split);
    llvm::json::Array recomputed;
    for (const std::string &name : c.point.strategy.recomputed)
      recomputed.push_back(name);
    llvm::json::Array sharded;
    for (const std::string &name : c.point.strategy.shardedUpdates)
      sharded.push_back(name);
    llvm::json::Object schemes;
    for (const auto &[name, scheme] : c.point.strategy.tableSchemes)
      schemes[name] = scheme;
    llvm::json::Object o{
        {"grid", c.point.strategy.grid.str()},
        {"zero1", c.point.strategy.shardUpdates > 0 ||
                      !c.point.strategy.shardedUpdates.empty()},
        {"zero1_fraction", c.point.strategy.shardUpdates},
        {"zero1_layers", std::move(sharded)},
        {"recompute", c.point.strategy.recompute > 0},
        {"sequence_parallel", c.point.strategy.sequenceParallel},
        {"recompute_fraction", c.point.strategy.recompute},
        {"recompute_layers", std::move(recomputed)},
        {"sync_variables", std::move(schemes)},
        {"pairing_rule", c.point.strategy.byPairingRule},
        {"step_seconds", c.seconds},
        {"memory_bytes", c.bytes},
        {"splits", std::move(splits)},
    };
    if (c.closedForm)
      o["closed_form"] = llvm::json::Object{{"step_seconds", c.point.predicted.seconds},
                                            {"memory_bytes", c.point.predicted.bytes}};
    if (!c.label.empty())
      o["label"] = c.label;
    if (c.measuredSeconds)
      o["measured_step_seconds"] = *c.measuredSeconds;
    if (c.measuredBytes)
      o["measured_memory_bytes"] = *c.measuredBytes;
    if (c.onFrontier) {
      o["point"] = index++;
      o["chosen"] = c.chosen;
      frontier.push_back(std::move(o));
    } else {
      references.push_back(std::move(o));
    }
  }
  llvm::json::Object root{
      {"model", summary.model},
      {"ranks", summary.ranks},
      {"objective", summary.objective},
      {"search_seconds", summary.searchSeconds},
      {"compile_seconds", summary.compileSeconds},
      {"spaces", summary.spaces},
      {"closed_form_points", (int64_t)summary.closedFormPoints},
      {"frontier", std::move(frontier)},
      {"dominated_references", std::move(references)},
  };
  if (summary.memoryLimit)
    root["memory_limit_bytes"] = *summary.memoryLimit;
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

namespace {

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

} // namespace

void writeFrontierSvg(const FrontierSummary &summary, const std::vector<CompiledPoint> &points,
                      llvm::raw_ostream &os) {
  const double width = 720, height = 480, left = 80, right = 200, top = 50, bottom = 60;
  double maxMiB = 0, maxMs = 0;
  for (const CompiledPoint &c : points) {
    maxMiB = std::max({maxMiB, c.bytes / 1048576.0,
                       c.measuredBytes ? *c.measuredBytes / 1048576.0 : 0.0});
    maxMs = std::max({maxMs, c.seconds * 1e3, c.measuredSeconds ? *c.measuredSeconds * 1e3 : 0.0});
  }
  if (summary.memoryLimit)
    maxMiB = std::max(maxMiB, *summary.memoryLimit / 1048576.0);
  maxMiB = maxMiB > 0 ? maxMiB * 1.1 : 1;
  maxMs = maxMs > 0 ? maxMs * 1.1 : 1;
  const double plotW = width - left - right, plotH = height - top - bottom;
  auto x = [&](double mib) { return left + plotW * mib / maxMiB; };
  auto y = [&](double ms) { return top + plotH * (1 - ms / maxMs); };

  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                      "font-family=\"sans-serif\" font-size=\"12\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv("<text x=\"{0}\" y=\"24\" font-size=\"14\">{1} on {2} ranks: predicted "
                      "step time and memory per rank of each strategy</text>\n",
                      left, escape(summary.model), summary.ranks);
  // Axes with five ticks each.
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left,
                      top + plotH, left + plotW);
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left,
                      top, top + plotH);
  for (int i = 0; i <= 5; ++i) {
    double mib = maxMiB * i / 5, ms = maxMs * i / 5;
    os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1:F1}\" text-anchor=\"middle\">{2:F1}</text>\n",
                        x(mib), top + plotH + 18, mib);
    os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1:F1}\" text-anchor=\"end\">{2:F2}</text>\n",
                        left - 6, y(ms) + 4, ms);
  }
  os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1:F1}\" text-anchor=\"middle\">memory per rank "
                      "(MiB)</text>\n",
                      left + plotW / 2, height - 16);
  os << llvm::formatv("<text transform=\"translate(18,{0:F1}) rotate(-90)\" "
                      "text-anchor=\"middle\">step time (ms)</text>\n",
                      top + plotH / 2);
  if (summary.memoryLimit) {
    double lx = x(*summary.memoryLimit / 1048576.0);
    os << llvm::formatv("<line x1=\"{0:F1}\" y1=\"{1}\" x2=\"{0:F1}\" y2=\"{2}\" stroke=\"gray\" "
                        "stroke-dasharray=\"4 3\"/>\n<text x=\"{0:F1}\" y=\"{3}\" fill=\"gray\" "
                        "text-anchor=\"middle\">memory limit</text>\n",
                        lx, top, top + plotH, top - 6);
  }
  // The frontier as a staircase, its points, then the references.
  std::vector<const CompiledPoint *> frontier;
  for (const CompiledPoint &c : points)
    if (c.onFrontier)
      frontier.push_back(&c);
  std::sort(frontier.begin(), frontier.end(),
            [](const CompiledPoint *a, const CompiledPoint *b) { return a->bytes < b->bytes; });
  if (!frontier.empty()) {
    os << "<polyline fill=\"none\" stroke=\"steelblue\" points=\"";
    for (size_t i = 0; i < frontier.size(); ++i) {
      double px = x(frontier[i]->bytes / 1048576.0), py = y(frontier[i]->seconds * 1e3);
      if (i > 0)
        os << llvm::formatv("{0:F1},{1:F1} ", px, y(frontier[i - 1]->seconds * 1e3));
      os << llvm::formatv("{0:F1},{1:F1} ", px, py);
    }
    os << "\"/>\n";
  }
  bool measured = false;
  for (const CompiledPoint &c : points) {
    double px = x(c.bytes / 1048576.0), py = y(c.seconds * 1e3);
    os << llvm::formatv("<circle cx=\"{0:F1}\" cy=\"{1:F1}\" r=\"4\" fill=\"{2}\"><title>{3}: "
                        "{4:F3} ms, {5:F1} MiB</title></circle>\n",
                        px, py, c.onFrontier ? "steelblue" : "lightgray",
                        escape(c.point.strategy.summary()), c.seconds * 1e3, c.bytes / 1048576.0);
    if (c.chosen)
      os << llvm::formatv("<circle cx=\"{0:F1}\" cy=\"{1:F1}\" r=\"8\" fill=\"none\" "
                          "stroke=\"crimson\" stroke-width=\"2\"/>\n<text x=\"{2:F1}\" "
                          "y=\"{3:F1}\" fill=\"crimson\">chosen: {4}</text>\n",
                          px, py, px + 10, py - 10, escape(c.point.strategy.summary()));
    if (!c.label.empty())
      os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1:F1}\">{2}</text>\n", px + 8, py + 16,
                          escape(c.label));
    if (c.measuredSeconds && c.measuredBytes) {
      measured = true;
      double mx = x(*c.measuredBytes / 1048576.0), my = y(*c.measuredSeconds * 1e3);
      os << llvm::formatv("<path d=\"M{0:F1},{1:F1} l4,4 m-8,0 l4,-4 l4,-4 m-8,0 l4,4\" "
                          "stroke=\"darkorange\" stroke-width=\"2\"/>\n<line x1=\"{0:F1}\" "
                          "y1=\"{1:F1}\" x2=\"{2:F1}\" y2=\"{3:F1}\" stroke=\"darkorange\" "
                          "stroke-dasharray=\"2 2\"/>\n",
                          mx, my, px, py);
    }
  }
  // Legend.
  double lx = left + plotW + 16;
  os << llvm::formatv("<circle cx=\"{0:F1}\" cy=\"{1}\" r=\"4\" fill=\"steelblue\"/><text "
                      "x=\"{2:F1}\" y=\"{3}\">predicted frontier</text>\n",
                      lx, top + 10, lx + 10, top + 14);
  os << llvm::formatv("<circle cx=\"{0:F1}\" cy=\"{1}\" r=\"4\" fill=\"lightgray\"/><text "
                      "x=\"{2:F1}\" y=\"{3}\">dominated</text>\n",
                      lx, top + 30, lx + 10, top + 34);
  if (measured)
    os << llvm::formatv("<path d=\"M{0:F1},{1} l4,4 m-8,0 l4,-4 l4,-4 m-8,0 l4,4\" "
                        "stroke=\"darkorange\" stroke-width=\"2\"/><text x=\"{2:F1}\" "
                        "y=\"{3}\">measured</text>\n",
                        lx, top + 50, lx + 10, top + 54);
  os << "</svg>\n";
}

} // namespace parallax::strategy

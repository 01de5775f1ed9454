//===- ReplayTest.cpp - every input the fuzzers found, replayed ------------===//
//
// regressions/onnx/NAME.onnx and regressions/plan/NAME.pxplan are inputs
// that once crashed, leaked, hung or tripped a sanitizer; NAME.error beside
// each holds the message the input must now get (a substring of it, one
// line), or "(accepted)" for an input that is valid. Each goes through the fuzz target's own code (FuzzTargets.cpp), in
// every build: the normal one checks the message, scripts/sanitize.sh's
// ASan+UBSan build also that nothing is touched out of bounds on the way.
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Replays every input of regressions/`dir` with extension `ext`; returns
/// how many there were.
int replay(const std::string &dir, const std::string &ext,
           std::string (*target)(const uint8_t *, size_t)) {
  fs::path root = fs::path(PARALLAX_SOURCE_DIR) / "test" / "Fuzz" / "regressions" / dir;
  int count = 0;
  if (!fs::exists(root))
    return 0;
  for (const auto &entry : fs::directory_iterator(root)) {
    if (entry.path().extension() != ext)
      continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    std::string input = slurp(entry.path());
    std::string message =
        target(reinterpret_cast<const uint8_t *>(input.data()), input.size());
    fs::path expectedPath = entry.path();
    expectedPath += ".error";
    if (!fs::exists(expectedPath)) {
      ADD_FAILURE() << "no " << expectedPath << " beside the input; its message is\n  "
                    << (message.empty() ? "(accepted)" : message);
      continue;
    }
    std::string expected = slurp(expectedPath);
    while (!expected.empty() && (expected.back() == '\n' || expected.back() == '\r'))
      expected.pop_back();
    if (expected.empty()) {
      ADD_FAILURE() << expectedPath << " is empty";
      continue;
    }
    if (expected == "(accepted)") {
      EXPECT_EQ(message, "") << "expected the input to be accepted";
      continue;
    }
    EXPECT_NE(message.find(expected), std::string::npos)
        << "expected an error containing\n  " << expected << "\ngot\n  "
        << (message.empty() ? "(accepted)" : message);
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  }
  return count;
}

TEST(FuzzRegressions, OnnxImport) {
  if (replay("onnx", ".onnx", parallax::fuzz::compileOnnx) == 0)
    GTEST_SKIP() << "no inputs under regressions/onnx";
}

TEST(FuzzRegressions, Plan) {
  if (replay("plan", ".pxplan", parallax::fuzz::bindPlan) == 0)
    GTEST_SKIP() << "no inputs under regressions/plan";
}

} // namespace

//===- TempDirTest.h - tests that write files in a fresh directory -*- C++ -*-===//

#ifndef PARALLAX_TEST_UNIT_RUNTIME_TEMPDIRTEST_H
#define PARALLAX_TEST_UNIT_RUNTIME_TEMPDIRTEST_H

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace parallax::rt::testing {

/// The message of what `f` throws, or "" when it returns.
inline std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

/// The bytes of file `p`.
inline std::string contents(const std::filesystem::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// A fixture whose `dir` is an empty directory of its own, named after the
/// process and the test (ctest runs tests in parallel), removed afterwards.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir = std::filesystem::temp_directory_path() /
          ("parallax-" + std::string(info->test_suite_name()) + "-" +
           std::to_string(::getpid()) + "-" + info->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
};

} // namespace parallax::rt::testing

#endif // PARALLAX_TEST_UNIT_RUNTIME_TEMPDIRTEST_H

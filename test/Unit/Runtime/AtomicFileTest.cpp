// Files written atomically (a temporary beside the destination, renamed over
// it when complete) and destinations checked before any work.

#include "parallax/Runtime/AtomicFile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unistd.h>

using namespace parallax::rt;
namespace fs = std::filesystem;

namespace {

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

std::string contents(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class AtomicFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("parallax-atomic-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(AtomicFileTest, ReplacesTheFileOnlyWhenCommitted) {
  std::string path = (dir / "out.bin").string();
  std::ofstream(path) << "old";
  {
    AtomicFile f(path);
    f.write("new!", 4);
    // Until commit the destination is the old file; the new bytes are in
    // the temporary beside it.
    EXPECT_EQ(contents(path), "old");
    EXPECT_TRUE(fs::exists(f.temporaryPath()));
  } // no commit: a failed or interrupted write
  EXPECT_EQ(contents(path), "old");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  {
    AtomicFile f(path);
    f.write("new!", 4);
    f.commit();
  }
  EXPECT_EQ(contents(path), "new!");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(AtomicFileTest, DestinationsAreCheckedBeforeAnyWork) {
  std::string missing = (dir / "no" / "m.onnx").string();
  EXPECT_EQ(errorOf([&] { checkWritableFile(missing, "--save"); }),
            missing + ": cannot write --save there: directory '" +
                (dir / "no").string() + "' does not exist");
  EXPECT_EQ(errorOf([&] { checkWritableFile(dir.string(), "--save"); }),
            dir.string() + ": --save needs a file name, and this is a directory");
  std::string ok = (dir / "m.onnx").string();
  EXPECT_EQ(errorOf([&] { checkWritableFile(ok, "--save"); }), "");
  EXPECT_FALSE(fs::exists(ok));
  EXPECT_FALSE(fs::exists(ok + ".tmp"));
}

} // namespace

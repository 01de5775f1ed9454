// Files written atomically (a temporary beside the destination, renamed over
// it when complete) and destinations checked before any work.

#include "TempDirTest.h"
#include "parallax/Runtime/AtomicFile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace parallax::rt;
using namespace parallax::rt::testing;
namespace fs = std::filesystem;

namespace {

class AtomicFileTest : public TempDirTest {};

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

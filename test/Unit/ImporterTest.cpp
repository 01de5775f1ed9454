// Importer tests that need files lit cannot express well: binary models
// that are corrupt, truncated or empty, and initializers in external data
// files. Models are built with the ONNX protobuf API and written to a
// temporary directory.

#include "parallax/Analysis/VariableAccess.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Importer/OnnxImporter.h"

#include "onnx/onnx_pb.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fstream>
#include <gtest/gtest.h>

using namespace parallax;

namespace {

class ImporterTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("parallax-importer", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(const std::string &name) {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  void writeBytes(const std::string &name, const std::string &bytes) {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }

  /// loss = ReduceSum(MatMul(x, w)), w 3x2 float, optionally external.
  onnx::ModelProto matmulModel(bool externalWeights) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto *g = m.mutable_graph();
    g->set_name("g");
    auto *x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto *shape = x->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->add_dim()->set_dim_value(4);
    shape->add_dim()->set_dim_value(3);
    auto *w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    w->add_dims(2);
    float values[6] = {1, 2, 3, 4, 5, 6};
    std::string raw(reinterpret_cast<const char *>(values), sizeof(values));
    if (externalWeights) {
      writeBytes("w.bin", std::string(16, '\0') + raw); // at offset 16
      w->set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const char *k, const std::string &v) {
        auto *e = w->add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", "w.bin");
      add("offset", "16");
      add("length", std::to_string(raw.size()));
    } else {
      w->set_raw_data(raw);
    }
    auto *mm = g->add_node();
    mm->set_op_type("MatMul");
    mm->set_name("mm");
    mm->add_input("x");
    mm->add_input("w");
    mm->add_output("y");
    auto *sum = g->add_node();
    sum->set_op_type("ReduceSum");
    sum->set_name("sum");
    sum->add_input("y");
    sum->add_output("loss");
    auto *keep = sum->add_attribute();
    keep->set_name("keepdims");
    keep->set_type(onnx::AttributeProto::INT);
    keep->set_i(0);
    auto *out = g->add_output();
    out->set_name("loss");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    out->mutable_type()->mutable_tensor_type()->mutable_shape();
    return m;
  }

  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
  import(const std::string &file, ImportOptions options = {}) {
    return importOnnxModel(context, path(file), options);
  }
  static std::string message(llvm::Error err) {
    return llvm::toString(std::move(err));
  }

  llvm::SmallString<128> dir;
  mlir::MLIRContext context;
};

TEST_F(ImporterTest, ImportsBinaryModel) {
  writeBytes("m.onnx", matmulModel(false).SerializeAsString());
  auto module = import("m.onnx");
  ASSERT_TRUE(static_cast<bool>(module)) << message(module.takeError());
  auto vars = analyzeVariables(**module);
  ASSERT_EQ(vars.size(), 1u);
  EXPECT_EQ(vars[0].name, "w");
  EXPECT_EQ(vars[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(vars[0].bytes, 24);
  EXPECT_TRUE(vars[0].trainable);
  EXPECT_EQ(vars[0].access, VariableAccess::Dense);
}

TEST_F(ImporterTest, ReadsExternalData) {
  writeBytes("m.onnx", matmulModel(true).SerializeAsString());
  auto module = import("m.onnx");
  ASSERT_TRUE(static_cast<bool>(module)) << message(module.takeError());
  EXPECT_EQ(analyzeVariables(**module).at(0).bytes, 24);
}

TEST_F(ImporterTest, MissingExternalDataNamesFileAndInitializer) {
  writeBytes("m.onnx", matmulModel(true).SerializeAsString());
  llvm::sys::fs::remove(path("w.bin"));
  auto module = import("m.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  std::string msg = message(module.takeError());
  EXPECT_NE(msg.find("m.onnx: cannot read external data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("w.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("initializer 'w'"), std::string::npos) << msg;
}

TEST_F(ImporterTest, ExternalDataBeyondEndOfFile) {
  auto m = matmulModel(true);
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(1)->set_value("1000");
  writeBytes("m.onnx", m.SerializeAsString());
  auto module = import("m.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(message(module.takeError()).find("lies beyond the end"), std::string::npos);
}

TEST_F(ImporterTest, ExternalDataOutsideModelDirectoryIsRefused) {
  auto m = matmulModel(true);
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value("../etc/passwd");
  writeBytes("m.onnx", m.SerializeAsString());
  auto module = import("m.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(message(module.takeError()).find("invalid external data location"),
            std::string::npos);
}

TEST_F(ImporterTest, UnreadableFile) {
  auto module = import("does-not-exist.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  std::string msg = message(module.takeError());
  EXPECT_NE(msg.find("does-not-exist.onnx: cannot read file"), std::string::npos) << msg;
}

TEST_F(ImporterTest, CorruptFile) {
  writeBytes("junk.onnx", std::string("\x0a\xff\xff\xff\xff\x0f garbage", 15));
  auto module = import("junk.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(message(module.takeError()).find("junk.onnx: not an ONNX model"),
            std::string::npos);
}

TEST_F(ImporterTest, TruncatedFile) {
  std::string bytes = matmulModel(false).SerializeAsString();
  writeBytes("cut.onnx", bytes.substr(0, bytes.size() / 2));
  auto module = import("cut.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(message(module.takeError()).find("cut.onnx: not an ONNX model"),
            std::string::npos);
}

TEST_F(ImporterTest, EmptyFile) {
  writeBytes("empty.onnx", "");
  auto module = import("empty.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(message(module.takeError()).find("no graph"), std::string::npos);
}

TEST_F(ImporterTest, CheckerRejectsInvalidGraph) {
  auto m = matmulModel(false);
  m.mutable_graph()->mutable_node(0)->set_input(1, "missing"); // undefined input
  writeBytes("bad.onnx", m.SerializeAsString());
  auto module = import("bad.onnx");
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_NE(message(module.takeError()).find("bad.onnx: the ONNX checker rejects"),
            std::string::npos);
}

TEST_F(ImporterTest, ExampleMlpReportsFourDenseVariables) {
  auto module = importOnnxModel(
      context, std::string(PARALLAX_SOURCE_DIR) + "/examples/models/mlp.onnx", {});
  ASSERT_TRUE(static_cast<bool>(module)) << message(module.takeError());
  auto vars = analyzeVariables(**module);
  ASSERT_EQ(vars.size(), 4u);
  int64_t bytes = 0;
  for (const auto &v : vars) {
    EXPECT_EQ(v.access, VariableAccess::Dense) << v.name;
    bytes += v.bytes;
  }
  EXPECT_EQ(bytes, 9610 * 4); // 64*128 + 128 + 128*10 + 10 parameters
}

} // namespace

// Tests of the Indexing kernels (gather, gather_elements, scatter_add,
// scatter_elements_add) against naive references.
#include "KernelTestCases.h"

#include "parallax/Runtime/Grid.h"

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;

namespace {

std::vector<double> refGather(const std::vector<int64_t> &ds,
                              const std::vector<double> &data,
                              const std::vector<double> &idx, int64_t axis) {
  int64_t outer = numel(ds, 0, axis), len = ds[axis], inner = numel(ds, axis + 1);
  int64_t n = (int64_t)idx.size();
  std::vector<double> out(outer * n * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < n; ++p) {
      int64_t i = (int64_t)idx[p];
      if (i < 0)
        i += len;
      for (int64_t j = 0; j < inner; ++j)
        out[(o * n + p) * inner + j] = data[(o * len + i) * inner + j];
    }
  return out;
}

void checkGather(DType dt, DType it, std::vector<int64_t> ds,
                 std::vector<int64_t> is, int64_t axis, int threads = 1,
                 bool setAxis = true) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(ds) << " "
                                    << ::testing::PrintToString(is) << " axis "
                                    << axis);
  int64_t rank = (int64_t)ds.size(), a = axis < 0 ? axis + rank : axis;
  TestTensor data(dt, ds, smallValues(numel(ds), 7, dt));
  TestTensor idx(it, is, randomIndices(numel(is), 8, -ds[a], ds[a] - 1));
  TestTensor out(dt, gatherShape(ds, is, a));
  nlohmann::json attrs = nlohmann::json::object();
  if (setAxis)
    attrs["axis"] = axis;
  ExecEnv env;
  env.threads = threads;
  runKernel("gather", {&data, &idx}, {&out}, attrs, env);
  expectNear(out.values(), refGather(ds, data.values(), idx.values(), a), 0, 0);
}

TEST(IndexingKernels, GatherAxis0EmbeddingRows) {
  for (DType it : {DType::I64, DType::I32}) {
    for (const GatherRowsCase &c : kGatherRowsCases)
      checkGather(c.dt, it, c.data, c.idx, 0);
  }
  checkGather(DType::F32, DType::I64, {9, 4}, {5, 2}, 0, 1, /*setAxis=*/false);
  checkGather(DType::F32, DType::I64, {50, 16}, {40, 30}, 0, /*threads=*/2);
}

TEST(IndexingKernels, GatherOtherAxesAndTypes) {
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I16,
                   DType::I8, DType::Bool}) {
    checkGather(dt, DType::I64, {2, 5, 3}, {4}, 1);
    checkGather(dt, DType::I32, {2, 5, 3}, {2, 2}, -2);
    checkGather(dt, DType::I64, {2, 3, 4}, {3}, -1); // one element per row
    checkGather(dt, DType::I32, {3, 4}, {2, 2}, 1);
  }
  checkGather(DType::F32, DType::I64, {20, 30, 5}, {7}, 1, /*threads=*/2);
  checkGather(DType::F64, DType::I32, {20, 300}, {70}, -1, /*threads=*/2);
}

TEST(IndexingKernels, GatherF16IsCopiedBitwise) {
  TestTensor data(DType::F16, {3, 2}), idx(DType::I64, {2}, {2, -3}),
      out(DType::F16, {2, 2});
  auto *d = reinterpret_cast<uint16_t *>(data.data());
  for (int i = 0; i < 6; ++i)
    d[i] = (uint16_t)(0x3c00 + i);
  runKernel("gather", {&data, &idx}, {&out});
  auto *o = reinterpret_cast<uint16_t *>(out.data());
  EXPECT_EQ(o[0], 0x3c04);
  EXPECT_EQ(o[1], 0x3c05);
  EXPECT_EQ(o[2], 0x3c00);
  EXPECT_EQ(o[3], 0x3c01);
}

TEST(IndexingKernels, GatherFromATrainableTableRefusesNegativeIds) {
  // "nonnegative_ids": the plan marks an embedding lookup so (PyTorch's
  // rule); the first negative id is named, whatever the thread count.
  TestTensor data(DType::F32, {5, 3}), out(DType::F32, {4, 3});
  TestTensor ids(DType::I64, {4}, {0, 4, -1, -5});
  std::string e = kernelError("gather", {&data, &ids}, {&out}, {{"nonnegative_ids", true}});
  EXPECT_EQ(e, "gather: id -1 at position 2 of the ids is negative: PyTorch's "
               "nn.Embedding refuses it, ONNX's Gather would read row 4 of 5 "
               "(compile with parallax-opt --allow-negative-ids for that)");
  TestTensor ids32(DType::I32, {4}, {0, 4, 3, -5});
  e = kernelError("gather", {&data, &ids32}, {&out}, {{"nonnegative_ids", true}});
  EXPECT_NE(e.find("id -5 at position 3"), std::string::npos) << e;
  // Without the attribute, ONNX's rule: counted from the end.
  EXPECT_EQ(kernelError("gather", {&data, &ids}, {&out}), "");
}

TEST(IndexingKernels, GatherErrors) {
  TestTensor data(DType::F32, {5, 3}), out(DType::F32, {2, 3});
  TestTensor bad(DType::I64, {2}, {1, 5});
  std::string e = kernelError("gather", {&data, &bad}, {&out});
  EXPECT_NE(e.find("index 5"), std::string::npos) << e;
  EXPECT_NE(e.find("[-5, 5)"), std::string::npos) << e;
  TestTensor neg(DType::I32, {2}, {-6, 0});
  e = kernelError("gather", {&data, &neg}, {&out});
  EXPECT_NE(e.find("index -6"), std::string::npos) << e;
  TestTensor ok(DType::I64, {2}, {-5, 4});
  EXPECT_EQ(kernelError("gather", {&data, &ok}, {&out}), "");
  // A table padded to 5 rows of which 4 are real (a padded vocabulary, the
  // plan's "rows"): row 4 is no id.
  TestTensor four(DType::I64, {2}, {1, 4});
  e = kernelError("gather", {&data, &four}, {&out}, {{"rows", 4}});
  EXPECT_NE(e.find("index 4 (at position 1 of indices) is out of range [-4, 4)"),
            std::string::npos)
      << e;
  EXPECT_NE(kernelError("gather", {&data, &ok}, {&out}, {{"rows", 6}}).find("rows 6 of a table of 5"),
            std::string::npos);
  EXPECT_NE(kernelError("gather", {&data, &ok}, {&out}, {{"axis", 2}}).find("axis 2"),
            std::string::npos);
  TestTensor fidx(DType::F32, {2});
  EXPECT_NE(kernelError("gather", {&data, &fidx}, {&out}).find("i32 or i64"),
            std::string::npos);
  TestTensor wrong(DType::F32, {3, 2});
  EXPECT_NE(kernelError("gather", {&data, &ok}, {&wrong}).find("shape"),
            std::string::npos);
  TestTensor wrongType(DType::F64, {2, 3});
  EXPECT_NE(kernelError("gather", {&data, &ok}, {&wrongType}).find("element type"),
            std::string::npos);
  // Out of range on a later, threaded row.
  TestTensor big(DType::F32, {100, 8}), bigIdx(DType::I64, {400}),
      bigOut(DType::F32, {400, 8});
  for (int i = 0; i < 400; ++i)
    bigIdx.set(i, i % 100);
  bigIdx.set(399, 100);
  ExecEnv env;
  env.threads = 2;
  EXPECT_THROW(runKernel("gather", {&big, &bigIdx}, {&bigOut}, {}, env),
               KernelError);
}

//===----------------------------------------------------------------------===//
// Row blocks (vocabulary-parallel embeddings): gather and make_sparse_grad
// `block of` a grid
//===----------------------------------------------------------------------===//

/// Rank `rank`'s block of `rows` rows of `whole` (rows x width).
std::vector<double> blockOf(const std::vector<double> &whole, int64_t width,
                            int64_t first, int64_t rows) {
  return {whole.begin() + first * width, whole.begin() + (first + rows) * width};
}

/// Every rank of a grid gathers from its block of a table split by rows
/// over `axes`: the rows it holds, zeros for the others; the group's
/// results add up to the whole table's gather (what the all-reduce after a
/// vocabulary-parallel lookup relies on), negative ids included.
void checkRowBlocks(std::vector<int64_t> gridShape, std::vector<int64_t> axes,
                    int64_t tableRows) {
  SCOPED_TRACE(::testing::Message() << "grid " << ::testing::PrintToString(gridShape)
                                    << " axes " << ::testing::PrintToString(axes));
  const int64_t width = 3;
  int world = 1, group = 1;
  for (size_t a = 0; a < gridShape.size(); ++a) {
    world *= (int)gridShape[a];
    if (std::count(axes.begin(), axes.end(), (int64_t)a))
      group *= (int)gridShape[a];
  }
  const int64_t rows = tableRows / group;
  std::vector<double> whole = smallValues(tableRows * width, 5, DType::F32);
  std::vector<double> ids{(double)tableRows - 1, 0, (double)rows, (double)rows - 1, -1, 2};
  TestTensor idx(DType::I64, {2, 3}, ids);
  std::vector<double> expected = refGather({tableRows, width}, whole, ids, 0);
  std::vector<std::vector<double>> sums(world, std::vector<double>(expected.size(), 0.0));
  for (int rank = 0; rank < world; ++rank) {
    GroupPlace place = placeInGroup(world, rank, gridShape, axes);
    int64_t first = place.rank * rows;
    TestTensor data(DType::F32, {rows, width}, blockOf(whole, width, first, rows));
    TestTensor out(DType::F32, {2, 3, width});
    ExecEnv env;
    env.rank = rank;
    env.worldSize = world;
    runKernel("gather", {&data, &idx}, {&out},
              {{"grid_shape", gridShape}, {"grid_axes", axes}}, env);
    std::vector<double> got = out.values();
    for (size_t p = 0; p < ids.size(); ++p) {
      int64_t id = ids[p] < 0 ? (int64_t)ids[p] + tableRows : (int64_t)ids[p];
      bool mine = id >= first && id < first + rows;
      for (int64_t j = 0; j < width; ++j)
        EXPECT_EQ(got[p * width + j], mine ? expected[p * width + j] : 0.0)
            << "rank " << rank << " id " << ids[p];
    }
    // The rank's group: the ranks that share its coordinates off `axes`.
    for (int member : place.members)
      for (size_t i = 0; i < got.size(); ++i)
        sums[member][i] += got[i];
  }
  for (int rank = 0; rank < world; ++rank)
    expectNear(sums[rank], expected, 0, 0);
}

TEST(IndexingKernels, GatherRowBlockReadsItsRowsAndZerosForOthers) {
  checkRowBlocks({2, 2}, {1}, 8); // a 2 x 2 grid's model axis
  checkRowBlocks({2, 2}, {0}, 8); // its batch axis
  checkRowBlocks({4}, {0}, 12);   // 4 x 1: pure model parallelism
  checkRowBlocks({2, 3}, {0, 1}, 12);
}

TEST(IndexingKernels, GatherRowBlockErrors) {
  TestTensor data(DType::F32, {4, 2}), idx(DType::I64, {2}, {1, 8}), out(DType::F32, {2, 2});
  ExecEnv env;
  env.rank = 1;
  env.worldSize = 2;
  nlohmann::json block = {{"grid_shape", {2}}, {"grid_axes", {0}}};
  // Row 8 is in neither block of a table of 8 rows.
  EXPECT_THROW(runKernel("gather", {&data, &idx}, {&out}, block, env), KernelError);
  auto message = [&](nlohmann::json attrs, ExecEnv e, std::vector<int64_t> outShape) {
    TestTensor o(DType::F32, outShape), ok(DType::I64, {2}, {1, 7});
    try {
      runKernel("gather", {&data, &ok}, {&o}, attrs, e);
    } catch (const KernelError &err) {
      return std::string(err.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(block, env, {2, 2}), "");
  ExecEnv three = env;
  three.worldSize = 3;
  EXPECT_NE(message(block, three, {2, 2}).find("does not hold the 3 ranks"), std::string::npos);
  nlohmann::json axis1 = block;
  axis1["axis"] = 1;
  EXPECT_NE(message(axis1, env, {4, 2}).find("gathered on axis 0 only"), std::string::npos);
}

TEST(IndexingKernels, MakeSparseGradMovesRowsIntoTheBlock) {
  // Rows of a table of 8 split over 2 ranks: rank 1 holds rows 4..7.
  TestTensor idx(DType::I64, {5}, {5, -1, 0, 3, 7});
  std::vector<double> rows = smallValues(5 * 2, 3, DType::F32);
  TestTensor values(DType::F32, {5, 2}, rows);
  nlohmann::json attrs = {{"grid_shape", {2}}, {"grid_axes", {0}}, {"block_rows", 4}};
  const std::vector<std::vector<double>> local = {{-1, -1, 0, 3, -1}, {1, -1, -1, -1, 3}};
  for (int rank = 0; rank < 2; ++rank) {
    TestTensor outIdx(DType::I64, {5}), outValues(DType::F32, {5, 2});
    ExecEnv env;
    env.rank = rank;
    env.worldSize = 2;
    runKernel("make_sparse_grad", {&idx, &values}, {&outIdx, &outValues}, attrs, env);
    EXPECT_EQ(outIdx.values(), local[rank]) << "rank " << rank;
    EXPECT_EQ(outValues.values(), rows);
  }
  // A row outside the whole table is an error naming it.
  TestTensor bad(DType::I64, {5}, {5, -1, 0, 8, 7}), outIdx(DType::I64, {5}),
      outValues(DType::F32, {5, 2});
  ExecEnv env;
  env.worldSize = 2;
  try {
    runKernel("make_sparse_grad", {&bad, &values}, {&outIdx, &outValues}, attrs, env);
    ADD_FAILURE() << "row 8 of 8 accepted";
  } catch (const KernelError &e) {
    EXPECT_NE(std::string(e.what()).find("row 8 at position 3 is outside the 8 rows"),
              std::string::npos)
        << e.what();
  }
}

//===----------------------------------------------------------------------===//
// gather_elements / scatter_elements_add
//===----------------------------------------------------------------------===//

/// For each position of the indices: (flat index position, flat data
/// position) with the axis coordinate replaced by the (wrapped) index.
std::vector<std::pair<int64_t, int64_t>>
elementPairs(const std::vector<int64_t> &ds, const std::vector<int64_t> &is,
             const std::vector<double> &idx, int64_t axis) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  int64_t rank = (int64_t)is.size();
  for (int64_t p = 0; p < numel(is); ++p) {
    std::vector<int64_t> c(rank);
    int64_t rem = p;
    for (int64_t d = rank - 1; d >= 0; --d) {
      c[d] = rem % is[d];
      rem /= is[d];
    }
    int64_t i = (int64_t)idx[p];
    c[axis] = i < 0 ? i + ds[axis] : i;
    int64_t q = 0;
    for (int64_t d = 0; d < rank; ++d)
      q = q * ds[d] + c[d];
    pairs.push_back({p, q});
  }
  return pairs;
}

void checkGatherElements(DType dt, DType it, std::vector<int64_t> ds,
                         std::vector<int64_t> is, int64_t axis, int threads = 1) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(ds) << " "
                                    << ::testing::PrintToString(is) << " axis "
                                    << axis);
  int64_t a = axis < 0 ? axis + (int64_t)ds.size() : axis;
  TestTensor data(dt, ds, smallValues(numel(ds), 11, dt));
  TestTensor idx(it, is, randomIndices(numel(is), 12, -ds[a], ds[a] - 1));
  TestTensor out(dt, is);
  ExecEnv env;
  env.threads = threads;
  runKernel("gather_elements", {&data, &idx}, {&out}, {{"axis", axis}}, env);
  std::vector<double> ref(numel(is)), dv = data.values();
  for (auto [p, q] : elementPairs(ds, is, idx.values(), a))
    ref[p] = dv[q];
  expectNear(out.values(), ref, 0, 0);
}

TEST(IndexingKernels, GatherElementsMatchesReference) {
  for (DType it : {DType::I64, DType::I32}) {
    checkGatherElements(DType::F32, it, {3, 4}, {2, 4}, 0);
    checkGatherElements(DType::F32, it, {3, 4}, {3, 6}, 1);
    checkGatherElements(DType::F64, it, {3, 4}, {2, 3}, -1);
    checkGatherElements(DType::I64, it, {2, 5, 3}, {2, 7, 2}, 1);
    checkGatherElements(DType::I8, it, {2, 5, 3}, {1, 2, 3}, 0);
    checkGatherElements(DType::Bool, it, {2, 5, 3}, {2, 5, 4}, 2);
    checkGatherElements(DType::I16, it, {4}, {6}, 0);
  }
  checkGatherElements(DType::F32, DType::I64, {30, 40, 6}, {30, 40, 5}, 2, 2);
  // Default axis (0).
  TestTensor data(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6}),
      idx(DType::I64, {2, 2}, {2, 0, -1, 1}), out(DType::F32, {2, 2});
  runKernel("gather_elements", {&data, &idx}, {&out});
  expectNear(out.values(), {5, 2, 5, 4}, 0, 0);
}

TEST(IndexingKernels, GatherElementsErrors) {
  TestTensor data(DType::F32, {3, 4}), idx(DType::I64, {2, 4}), out(DType::F32, {2, 4});
  idx.set(5, 4);
  std::string e = kernelError("gather_elements", {&data, &idx}, {&out});
  EXPECT_NE(e.find("index 4"), std::string::npos) << e;
  EXPECT_NE(e.find("[-3, 3)"), std::string::npos) << e;
  TestTensor idx3(DType::I64, {2, 4, 1}), out3(DType::F32, {2, 4, 1});
  EXPECT_NE(kernelError("gather_elements", {&data, &idx3}, {&out3}).find("same rank"),
            std::string::npos);
  TestTensor wide(DType::I64, {2, 5}), outw(DType::F32, {2, 5});
  EXPECT_NE(kernelError("gather_elements", {&data, &wide}, {&outw}).find("exceeds"),
            std::string::npos);
  TestTensor good(DType::I64, {2, 4});
  EXPECT_NE(kernelError("gather_elements", {&data, &good}, {&out}, {{"axis", -3}})
                .find("axis -3"),
            std::string::npos);
  TestTensor badOut(DType::F32, {4, 2});
  EXPECT_NE(kernelError("gather_elements", {&data, &good}, {&badOut}).find("result"),
            std::string::npos);
  EXPECT_EQ(kernelError("gather_elements", {&data, &good}, {&out}), "");
}

void checkScatterElementsAdd(DType dt, DType it, std::vector<int64_t> os,
                             std::vector<int64_t> is, int64_t axis,
                             int threads = 1) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(os) << " "
                                    << ::testing::PrintToString(is) << " axis "
                                    << axis);
  int64_t a = axis < 0 ? axis + (int64_t)os.size() : axis;
  // Few distinct indices: many repeats.
  TestTensor idx(it, is, randomIndices(numel(is), 13, -2, 1));
  TestTensor upd(dt, is, randomValues(numel(is), 14));
  TestTensor out(dt, os);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.set(i, 99); // garbage
  ExecEnv env;
  env.threads = threads;
  runKernel("scatter_elements_add", {&idx, &upd}, {&out}, {{"axis", axis}}, env);
  std::vector<double> ref(numel(os), 0.0), uv = upd.values();
  for (auto [p, q] : elementPairs(os, is, idx.values(), a))
    ref[q] += uv[p];
  expectNear(out.values(), ref, dt == DType::F32 ? 1e-6 : 1e-14, 1e-6);
}

TEST(IndexingKernels, ScatterElementsAddAccumulates) {
  for (DType dt : {DType::F32, DType::F64})
    for (DType it : {DType::I64, DType::I32})
      for (const ScatterElementsCase &c : kScatterElementsCases)
        checkScatterElementsAdd(dt, it, c.out, c.idx, c.axis);
  checkScatterElementsAdd(DType::F32, DType::I64, {40, 30, 4}, {40, 30, 9}, 2, 2);
  checkScatterElementsAdd(DType::F64, DType::I32, {4, 300}, {20, 300}, 0, 2);
}

TEST(IndexingKernels, ScatterElementsAddErrors) {
  TestTensor idx(DType::I64, {2, 2}, {0, 1, 2, 3}), upd(DType::F32, {2, 2}),
      out(DType::F32, {3, 3});
  std::string e = kernelError("scatter_elements_add", {&idx, &upd}, {&out});
  EXPECT_NE(e.find("index 3"), std::string::npos) << e;
  EXPECT_NE(e.find("[-3, 3)"), std::string::npos) << e;
  TestTensor upd2(DType::F32, {2, 3});
  EXPECT_NE(kernelError("scatter_elements_add", {&idx, &upd2}, {&out}).find("same shape"),
            std::string::npos);
  TestTensor updi(DType::I32, {2, 2}), outi(DType::I32, {3, 3});
  EXPECT_NE(kernelError("scatter_elements_add", {&idx, &updi}, {&outi}).find("not supported"),
            std::string::npos);
  TestTensor out1(DType::F32, {1, 3});
  idx.set(3, 0);
  EXPECT_NE(kernelError("scatter_elements_add", {&idx, &upd}, {&out1}, {{"axis", 1}})
                .find("exceeds"),
            std::string::npos);
  EXPECT_EQ(kernelError("scatter_elements_add", {&idx, &upd}, {&out}), "");
}

//===----------------------------------------------------------------------===//
// scatter_add
//===----------------------------------------------------------------------===//

void checkScatterAdd(DType dt, DType it, std::vector<int64_t> os,
                     std::vector<int64_t> is, int64_t axis, int threads = 1,
                     int64_t lo = -2, int64_t hi = 2) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(os) << " "
                                    << ::testing::PrintToString(is) << " axis "
                                    << axis << " threads " << threads);
  int64_t a = axis < 0 ? axis + (int64_t)os.size() : axis;
  std::vector<int64_t> us = gatherShape(os, is, a);
  TestTensor idx(it, is, randomIndices(numel(is), 15, std::max(lo, -os[a]),
                                       std::min(hi, os[a] - 1)));
  TestTensor upd(dt, us, randomValues(numel(us), 16));
  TestTensor out(dt, os);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.set(i, -7); // garbage
  ExecEnv env;
  env.threads = threads;
  runKernel("scatter_add", {&idx, &upd}, {&out}, {{"axis", axis}}, env);
  int64_t outer = numel(os, 0, a), len = os[a], inner = numel(os, a + 1);
  int64_t n = numel(is);
  std::vector<double> ref(numel(os), 0.0), uv = upd.values(), iv = idx.values();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < n; ++p) {
      int64_t i = (int64_t)iv[p];
      if (i < 0)
        i += len;
      for (int64_t j = 0; j < inner; ++j)
        ref[(o * len + i) * inner + j] += uv[(o * n + p) * inner + j];
    }
  expectNear(out.values(), ref, dt == DType::F32 ? 1e-6 : 1e-14, 1e-5);
}

TEST(IndexingKernels, ScatterAddIsTheGradientOfGather) {
  for (DType dt : {DType::F32, DType::F64})
    for (DType it : {DType::I64, DType::I32})
      for (const ScatterAddCase &c : kScatterAddCases)
        checkScatterAdd(dt, it, c.out, c.idx, c.axis);
  // Threaded: split over columns (one outer row) and over outer rows.
  checkScatterAdd(DType::F32, DType::I64, {10, 64}, {300}, 0, 2, -10, 9);
  checkScatterAdd(DType::F64, DType::I32, {10, 64}, {30, 10}, 0, 2, -3, 3);
  checkScatterAdd(DType::F32, DType::I64, {8, 6, 2}, {40}, 1, 2);
  checkScatterAdd(DType::F64, DType::I64, {50, 9, 3}, {4, 5}, -2, 2);
}

TEST(IndexingKernels, ScatterAddErrors) {
  TestTensor idx(DType::I64, {3}, {0, -1, 4}), upd(DType::F32, {3, 2}),
      out(DType::F32, {4, 2});
  std::string e = kernelError("scatter_add", {&idx, &upd}, {&out});
  EXPECT_NE(e.find("index 4"), std::string::npos) << e;
  EXPECT_NE(e.find("[-4, 4)"), std::string::npos) << e;
  idx.set(2, -5);
  e = kernelError("scatter_add", {&idx, &upd}, {&out});
  EXPECT_NE(e.find("index -5"), std::string::npos) << e;
  idx.set(2, 3);
  EXPECT_EQ(kernelError("scatter_add", {&idx, &upd}, {&out}), "");
  TestTensor upd2(DType::F32, {2, 2});
  EXPECT_NE(kernelError("scatter_add", {&idx, &upd2}, {&out}).find("updates must have shape"),
            std::string::npos);
  EXPECT_NE(kernelError("scatter_add", {&idx, &upd}, {&out}, {{"axis", 5}}).find("axis 5"),
            std::string::npos);
  TestTensor updi(DType::I64, {3, 2}), outi(DType::I64, {4, 2});
  EXPECT_NE(kernelError("scatter_add", {&idx, &updi}, {&outi}).find("not supported"),
            std::string::npos);
  TestTensor outd(DType::F64, {4, 2});
  EXPECT_NE(kernelError("scatter_add", {&idx, &upd}, {&outd}).find("element type"),
            std::string::npos);
}

} // namespace

// Data feeding: .npy reading and writing, the --data directory rules (names,
// dtypes, shapes, epoch wrap, per-rank slices) and synthetic data (in range,
// Zipf-skewed ids, identical whatever the rank count).

#include "parallax/Runtime/Data.h"
#include "parallax/Runtime/Random.h"
#include "parallax/Runtime/Session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

using namespace parallax::rt;
namespace fs = std::filesystem;

namespace {

class DataTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("parallax-data-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// x f32 [B,3] batched; ids i64 [B] feeding a 100-row gather; lab i64 [B]
  /// labels of 5 classes; s i64 [6] not batched.
  static Plan inputsPlan(int64_t batch, int world = 1) {
    Plan p;
    p.mode = Plan::Mode::Inference;
    p.worldSize = world;
    auto input = [&](const char *name, DType t, std::vector<int64_t> shape,
                     int axis, const char *kind, int64_t range) {
      PlanInput in;
      in.name = name;
      in.dtype = t;
      in.shape = shape;
      in.batchAxis = axis;
      in.synthetic = kind;
      in.range = range;
      p.tensors.push_back({name, t, shape, PlanTensor::Kind::Input, 0,
                           (int32_t)p.inputs.size()});
      p.inputs.push_back(in);
    };
    input("x", DType::F32, {batch, 3}, 0, "normal", 0);
    input("ids", DType::I64, {batch}, 0, "ids", 100);
    input("lab", DType::I64, {batch}, 0, "labels", 5);
    input("s", DType::I64, {6}, -1, "index", 7);
    return p;
  }

  void writeArray(const std::string &name, DType t, std::vector<int64_t> shape,
                  std::vector<double> values) {
    std::string bytes(values.size() * sizeOf(t), '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      if (t == DType::F32)
        reinterpret_cast<float *>(bytes.data())[i] = (float)values[i];
      else
        reinterpret_cast<int64_t *>(bytes.data())[i] = (int64_t)values[i];
    }
    writeNpy((dir / (name + ".npy")).string(), TensorView{bytes.data(), t, shape});
  }

  /// A directory of 10 samples (x[i] = i, i+.1, i+.2; ids = i; lab = i % 5)
  /// and s with 3 steps of 6 values.
  void writeGoodData() {
    std::vector<double> x, ids, lab, s;
    for (int i = 0; i < 10; ++i) {
      x.insert(x.end(), {i + 0.0, i + 0.1, i + 0.2});
      ids.push_back(i);
      lab.push_back(i % 5);
    }
    for (int i = 0; i < 18; ++i)
      s.push_back(i);
    writeArray("x", DType::F32, {10, 3}, x);
    writeArray("ids", DType::I64, {10}, ids);
    writeArray("lab", DType::I64, {10}, lab);
    writeArray("s", DType::I64, {3, 6}, s);
  }

  static std::vector<double> values(const TensorView &t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.numElements(); ++i)
      v.push_back(t.dtype == DType::F32 ? t.as<float>()[i]
                                        : (double)t.as<int64_t>()[i]);
    return v;
  }

  std::string errorOf(const std::function<void()> &f) {
    try {
      f();
    } catch (const RuntimeError &e) {
      return e.what();
    }
    return "";
  }

  fs::path dir;
};

TEST_F(DataTest, NpyRoundTrip) {
  std::vector<int64_t> data{1, -2, 3, 4, 5, 6};
  writeNpy((dir / "a.npy").string(), TensorView{data.data(), DType::I64, {2, 3}});
  NpyArray a = readNpy((dir / "a.npy").string());
  EXPECT_EQ(a.dtype, DType::I64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a.data.size(), 48u);
  EXPECT_EQ(reinterpret_cast<const int64_t *>(a.data.data())[1], -2);
  // A scalar keeps its empty shape.
  float one = 1.0f;
  writeNpy((dir / "s.npy").string(), TensorView{&one, DType::F32, {}});
  EXPECT_TRUE(readNpy((dir / "s.npy").string()).shape.empty());
}

TEST_F(DataTest, NpyErrorsNameTheFile) {
  auto write = [&](const std::string &name, const std::string &bytes) {
    std::ofstream((dir / name).string(), std::ios::binary) << bytes;
    return (dir / name).string();
  };
  auto header = [](const std::string &dict) {
    std::string h = dict + std::string(118 - dict.size(), ' ') + "\n";
    return std::string("\x93NUMPY\x01\x00", 8) + char(h.size()) + char(0) + h;
  };
  std::string p = write("bad.npy", "PK\x03\x04 zip");
  EXPECT_EQ(errorOf([&] { readNpy(p); }), p + ": not a .npy file (bad magic)");
  p = write("fortran.npy", header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") + "abcd");
  EXPECT_NE(errorOf([&] { readNpy(p); }).find("Fortran-order arrays are not supported"), std::string::npos);
  p = write("big.npy", header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + "abcd");
  EXPECT_NE(errorOf([&] { readNpy(p); }).find("unsupported dtype '>f4'"), std::string::npos);
  p = write("short.npy", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }") + "abcd");
  EXPECT_EQ(errorOf([&] { readNpy(p); }),
            p + ": holds 4 bytes of data, its header announces 16");
  EXPECT_NE(errorOf([&] { readNpy((dir / "none.npy").string()); }).find("cannot open"),
            std::string::npos);
}

TEST_F(DataTest, BatchesInOrderAndWrapAtTheEpochEnd) {
  writeGoodData();
  Session session(inputsPlan(4), SessionOptions{});
  auto data = openNpyData(session.plan(), dir.string(), Sharding{});
  EXPECT_EQ(data->globalBatch(), 4);
  data->fill(session, 0);
  EXPECT_EQ(values(session.input(1)), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(values(session.input(3)), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  data->fill(session, 2); // samples 8, 9, then wrap to 0, 1
  EXPECT_EQ(values(session.input(1)), (std::vector<double>{8, 9, 0, 1}));
  EXPECT_EQ(values(session.input(2)), (std::vector<double>{3, 4, 0, 1}));
  EXPECT_FLOAT_EQ(session.input(0).as<float>()[4], 9.1f);
  // The non-batched input has 3 steps' worth of rows: step 2 is row 2.
  EXPECT_EQ(values(session.input(3))[0], 12);
}

TEST_F(DataTest, EachRankTakesItsPartOfTheGlobalBatch) {
  writeGoodData();
  Plan plan = inputsPlan(2, 2);
  // Data loading needs no collectives: a local communicator stands in.
  auto comm = makeLocalComm();
  SessionOptions options;
  options.worldSize = 2;
  options.rank = 1;
  options.comm = comm.get();
  Session session(plan, options);
  auto data = openNpyData(session.plan(), dir.string(), Sharding{1, 2});
  EXPECT_EQ(data->globalBatch(), 4);
  data->fill(session, 1); // global batch 1 is samples 4..7; rank 1 has 6, 7
  EXPECT_EQ(values(session.input(1)), (std::vector<double>{6, 7}));
}

TEST_F(DataTest, BadDataFailsBeforeTheFirstStepNamingFileAndInput) {
  writeGoodData();
  Session session(inputsPlan(4), SessionOptions{});
  const Plan &plan = session.plan();
  std::string ids = (dir / "ids.npy").string();

  writeArray("ids", DType::F32, {10}, std::vector<double>(10, 0));
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            ids + ": input 'ids' needs i64 data, the file holds f32");
  writeArray("ids", DType::I64, {10, 2}, std::vector<double>(20, 0));
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            ids + ": input 'ids' has shape [10,2], expected [samples]");
  writeArray("ids", DType::I64, {3}, std::vector<double>(3, 0));
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            ids + ": input 'ids' has 3 samples, fewer than one global batch of 4");
  fs::remove(ids);
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            ids + ": missing data for input 'ids' (--data needs one .npy file "
                  "per graph input)");
  writeArray("ids", DType::I64, {10}, std::vector<double>(10, 0));
  writeArray("s", DType::I64, {5}, std::vector<double>(5, 0));
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            (dir / "s.npy").string() +
                ": input 's' has shape [5], expected [6] or [steps,6]");
  EXPECT_NE(errorOf([&] { openNpyData(plan, (dir / "nope").string(), {}); })
                .find("--data must be a directory"),
            std::string::npos);
}

TEST_F(DataTest, NonFiniteValuesAreRefusedNamingFileAndIndex) {
  writeGoodData();
  Session session(inputsPlan(4), SessionOptions{});
  const Plan &plan = session.plan();
  std::string x = (dir / "x.npy").string();
  std::vector<double> values(30, 1.0);
  values[7] = std::nan("");
  writeArray("x", DType::F32, {10, 3}, values);
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            x + ": input 'x' holds NaN at index [2, 1] (element 7)");
  values[7] = 1.0;
  values[29] = -INFINITY;
  writeArray("x", DType::F32, {10, 3}, values);
  EXPECT_EQ(errorOf([&] { openNpyData(plan, dir.string(), {}); }),
            x + ": input 'x' holds -inf at index [9, 2] (element 29)");
}

TEST_F(DataTest, InputsWithDifferentSampleCountsAreRefused) {
  writeGoodData();
  Session session(inputsPlan(4), SessionOptions{});
  // x 10 samples, ids 10, lab 8: lab would pair with the wrong samples.
  writeArray("lab", DType::I64, {8}, std::vector<double>(8, 0));
  EXPECT_EQ(errorOf([&] { openNpyData(session.plan(), dir.string(), {}); }),
            (dir / "lab.npy").string() + ": input 'lab' has 8 samples, but " +
                (dir / "x.npy").string() +
                " has 10; every batched input needs one entry per sample");
}

TEST_F(DataTest, SyntheticDataIsInRangeAndSkewed) {
  Session session(inputsPlan(512), SessionOptions{});
  auto data = makeSyntheticData(session.plan(), 7, Sharding{});
  std::map<int64_t, int> counts;
  double sum = 0, sumSq = 0;
  for (int step = 0; step < 4; ++step) {
    data->fill(session, step);
    for (double id : values(session.input(1))) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 100);
      ++counts[(int64_t)id];
    }
    for (double l : values(session.input(2))) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 5);
    }
    for (double s : values(session.input(3))) {
      ASSERT_GE(s, 0);
      ASSERT_LT(s, 7);
    }
    for (double x : values(session.input(0))) {
      sum += x;
      sumSq += x * x;
    }
  }
  // Zipf(1) over 100 ids: id 0 has probability 1 / H(100) ~ 0.19; id 99
  // about 0.002.
  EXPECT_GT(counts[0], 4 * 512 * 0.15);
  EXPECT_LT(counts[99], 4 * 512 * 0.01);
  double n = 4 * 512 * 3, mean = sum / n, var = sumSq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.08);
}

TEST_F(DataTest, SyntheticDataDoesNotDependOnTheRankCount) {
  Session one(inputsPlan(4), SessionOptions{});
  auto whole = makeSyntheticData(one.plan(), 3, Sharding{});
  whole->fill(one, 5);
  auto comm = makeLocalComm(); // data loading needs no collectives
  for (int rank = 0; rank < 2; ++rank) {
    SessionOptions options;
    options.worldSize = 2;
    options.rank = rank;
    options.comm = comm.get();
    Session part(inputsPlan(2, 2), options);
    auto data = makeSyntheticData(part.plan(), 3, Sharding{rank, 2});
    data->fill(part, 5);
    for (size_t i = 0; i < 3; ++i) {
      std::vector<double> all = values(one.input(i)), mine = values(part.input(i));
      size_t per = all.size() / 2;
      EXPECT_EQ(mine, std::vector<double>(all.begin() + rank * per,
                                          all.begin() + (rank + 1) * per))
          << "input " << i << " rank " << rank;
    }
    EXPECT_EQ(values(part.input(3)), values(one.input(3)));
  }
  // Another step or seed gives other data.
  auto again = makeSyntheticData(one.plan(), 4, Sharding{});
  std::vector<double> before = values(one.input(0));
  again->fill(one, 5);
  EXPECT_NE(values(one.input(0)), before);
}

} // namespace

// Synthetic ids are the inverse of the Zipf CDF at a counter-based uniform:
// the guide table that speeds the search up must give exactly the plain
// binary search's ids (the data of a seed never changes), over a large
// table (the guide is coarser than the CDF) and tiny ones (finer).
TEST_F(DataTest, SyntheticIdsAreTheInverseCdfOfTheirUniforms) {
  for (int64_t range : {100000, 70000, 3, 1}) {
    Plan p = inputsPlan(4096);
    p.inputs[1].range = range;
    Session session(p, SessionOptions{});
    auto data = makeSyntheticData(session.plan(), 11, Sharding{});
    std::vector<double> cdf(range);
    double sum = 0;
    for (int64_t k = 0; k < range; ++k)
      cdf[k] = sum += 1.0 / double(k + 1);
    for (double &c : cdf)
      c /= sum;
    uint64_t key = splitmix64(splitmix64(11) ^ (2 * kGolden)); // input 1
    for (int step : {0, 3}) {
      data->fill(session, step);
      std::vector<double> ids = values(session.input(1));
      for (int64_t e = 0; e < 4096; ++e) {
        double u = uniform53At(key, (uint64_t)(step * 4096 + e));
        int64_t expected = std::min<int64_t>(
            std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin(), range - 1);
        ASSERT_EQ((int64_t)ids[e], expected) << "range " << range << " step " << step
                                             << " sample " << e;
      }
    }
  }
}

// A large batch is drawn on the session's threads in chunks: the values
// are the serial draw's, element by element (each a function of its
// counter), and element e of the normal input is Box-Muller at counters 2e
// and 2e + 1.
TEST_F(DataTest, SyntheticDataOnSeveralThreadsIsTheSerialDraw) {
  Session serial(inputsPlan(40000), SessionOptions{});
  SessionOptions threaded;
  threaded.threads = 3;
  Session parallel(inputsPlan(40000), threaded);
  auto a = makeSyntheticData(serial.plan(), 5, Sharding{});
  auto b = makeSyntheticData(parallel.plan(), 5, Sharding{});
  a->fill(serial, 2);
  b->fill(parallel, 2);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(values(parallel.input(i)), values(serial.input(i))) << "input " << i;
  std::vector<double> x = values(parallel.input(0));
  ASSERT_EQ(x.size(), 120000u);
  uint64_t key = splitmix64(splitmix64(5) ^ kGolden); // input 0
  for (int64_t e : {0, 16383, 16384, 77777, 119999}) {
    uint64_t c = (uint64_t)(2 * 120000 + e);
    double u1 = uniform53At(key, 2 * c), u2 = uniform53At(key, 2 * c + 1);
    EXPECT_EQ(x[e], (float)(std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2 * M_PI * u2)))
        << "element " << e;
  }
}

//===- Data.cpp - .npy and synthetic data sources -------------------------===//

#include "parallax/Runtime/Data.h"
#include "parallax/Runtime/Finite.h"
#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/Random.h"
#include "parallax/Runtime/Session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace parallax::rt {

DataSource::~DataSource() = default;

int64_t localBatchOf(const Plan &plan) {
  for (const PlanInput &in : plan.inputs)
    if (in.batchAxis == 0 && !in.shape.empty())
      return in.shape[0];
  return 1;
}

namespace {

int64_t product(const std::vector<int64_t> &shape, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// "[name,d0,d1]" (or "[name]" for an empty shape).
std::string withLeading(const std::string &name, const std::vector<int64_t> &shape) {
  std::string rest = shapeText(shape).substr(1); // "d0,d1]" or "]"
  return "[" + name + (shape.empty() ? "" : ",") + rest;
}

//===----------------------------------------------------------------------===//
// .npy files
//===----------------------------------------------------------------------===//

class NpyData : public DataSource {
public:
  NpyData(const Plan &plan, const std::string &dir, Sharding sharding, bool allowNonFinite)
      : sharding(sharding) {
    int64_t local = localBatchOf(plan);
    globalBatch_ = local * sharding.worldSize;
    std::string firstBatched;
    int64_t samples = 0;
    for (const PlanInput &in : plan.inputs) {
      std::string path = (std::filesystem::path(dir) / (in.name + ".npy")).string();
      if (!std::filesystem::exists(path))
        throw RuntimeError(path + ": missing data for input '" + in.name +
                           "' (--data needs one .npy file per graph input)");
      NpyArray a = readNpy(path);
      if (a.dtype != in.dtype)
        throw RuntimeError(path + ": input '" + in.name + "' needs " +
                           nameOf(in.dtype) + " data, the file holds " +
                           nameOf(a.dtype));
      std::vector<int64_t> sample(in.shape.begin() + (in.batchAxis == 0 ? 1 : 0),
                                  in.shape.end());
      bool ok;
      if (in.batchAxis == 0) {
        ok = a.shape.size() == in.shape.size() &&
             std::equal(a.shape.begin() + 1, a.shape.end(), sample.begin());
        if (ok && a.shape[0] < globalBatch_)
          throw RuntimeError(path + ": input '" + in.name + "' has " +
                             std::to_string(a.shape[0]) +
                             " samples, fewer than one global batch of " +
                             std::to_string(globalBatch_));
      } else {
        ok = a.shape == in.shape ||
             (a.shape.size() == in.shape.size() + 1 &&
              std::equal(a.shape.begin() + 1, a.shape.end(), in.shape.begin()) &&
              a.shape[0] > 0);
      }
      if (!ok)
        throw RuntimeError(
            path + ": input '" + in.name + "' has shape " + shapeText(a.shape) +
            ", expected " +
            (in.batchAxis == 0
                 ? withLeading("samples", sample)
                 : shapeText(in.shape) + " or " + withLeading("steps", in.shape)));
      // Once per file, as it is loaded: a NaN in the data would otherwise
      // surface steps later as a "diverged" loss, or never.
      std::string bad =
          allowNonFinite ? "" : describeNonFinite(a.data.data(), a.dtype, a.shape);
      if (!bad.empty())
        throw RuntimeError(path + ": input '" + in.name + "' holds " + bad);
      // Samples are paired across inputs by index: inputs of different
      // lengths would wrap at different points and pair samples with the
      // wrong labels from there on.
      if (in.batchAxis == 0) {
        if (firstBatched.empty()) {
          firstBatched = path;
          samples = a.shape[0];
        } else if (a.shape[0] != samples) {
          throw RuntimeError(path + ": input '" + in.name + "' has " +
                             std::to_string(a.shape[0]) + " samples, but " +
                             firstBatched + " has " + std::to_string(samples) +
                             "; every batched input needs one entry per sample");
        }
      }
      files.push_back(std::move(a));
    }
  }

  void fill(Session &session, int64_t step) override {
    const Plan &plan = session.plan();
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const PlanInput &in = plan.inputs[i];
      const NpyArray &a = files[i];
      TensorView dest = session.input(i);
      if (in.batchAxis != 0) {
        int64_t bytes = dest.bytes();
        int64_t rows = a.shape.size() == in.shape.size() ? 1 : a.shape[0];
        if (bytes > 0) // an empty tensor has no storage (null data)
          std::memcpy(dest.data, a.data.data() + (step % rows) * bytes, bytes);
        continue;
      }
      // Samples of this rank's part of global batch `step`, wrapping.
      int64_t samples = a.shape[0], local = in.shape[0];
      int64_t sampleBytes = product(in.shape, 1) * (int64_t)sizeOf(in.dtype);
      int64_t first = step * globalBatch_ + sharding.rank * local;
      for (int64_t j = 0; j < local && sampleBytes > 0; ++j) {
        int64_t s = (first + j) % samples;
        std::memcpy(static_cast<char *>(dest.data) + j * sampleBytes,
                    a.data.data() + s * sampleBytes, sampleBytes);
      }
    }
  }

private:
  Sharding sharding;
  std::vector<NpyArray> files;
};

//===----------------------------------------------------------------------===//
// Synthetic data
//===----------------------------------------------------------------------===//

/// Zipf(s = 1) over [0, n): P(k) proportional to 1 / (k + 1), sampled by
/// inverting the CDF. A guide table (the first k whose CDF reaches j / G)
/// narrows each search to a few neighbouring entries: a binary search of a
/// 100000-row table's whole CDF misses the cache at most of its 17 steps,
/// and the lm example draws 1200 ids a step. The result is the plain
/// search's, so the data does not change.
class Zipf {
public:
  explicit Zipf(int64_t n) : cdf(std::max<int64_t>(n, 1)) {
    double sum = 0;
    for (int64_t k = 0; k < (int64_t)cdf.size(); ++k)
      cdf[k] = sum += 1.0 / double(k + 1);
    for (double &c : cdf)
      c /= sum;
    int64_t g = std::min<int64_t>((int64_t)cdf.size(), kGuide);
    guide.resize(g + 1);
    for (int64_t j = 0; j <= g; ++j)
      guide[j] = std::lower_bound(cdf.begin(), cdf.end(), (double)j / (double)g) -
                 cdf.begin();
  }
  int64_t sample(double u) const {
    int64_t g = (int64_t)guide.size() - 1;
    // u lies in [j / g, (j + 1) / g) up to rounding: one bucket of slack on
    // either side.
    int64_t j = std::clamp<int64_t>((int64_t)(u * (double)g), 0, g - 1);
    int64_t lo = guide[std::max<int64_t>(j - 1, 0)];
    int64_t hi = std::min<int64_t>(guide[std::min<int64_t>(j + 2, g)] + 1,
                                   (int64_t)cdf.size());
    return std::min<int64_t>(
        std::lower_bound(cdf.begin() + lo, cdf.begin() + hi, u) - cdf.begin(),
        cdf.size() - 1);
  }

private:
  static constexpr int64_t kGuide = 1 << 16;
  std::vector<double> cdf;
  std::vector<int64_t> guide;
};

class SyntheticData : public DataSource {
public:
  SyntheticData(const Plan &plan, uint64_t seed, Sharding sharding)
      : seed(seed), sharding(sharding) {
    globalBatch_ = localBatchOf(plan) * sharding.worldSize;
    for (const PlanInput &in : plan.inputs) {
      if ((in.synthetic == "ids" || in.synthetic == "labels" ||
           in.synthetic == "index") &&
          in.range < 1)
        throw RuntimeError("input '" + in.name + "': --synthetic needs a value "
                           "range for integer inputs, and the plan has none");
      switch (in.dtype) {
      case DType::F32: case DType::F64: case DType::I64: case DType::I32:
      case DType::I16: case DType::I8: case DType::U8: case DType::Bool: break;
      default:
        throw RuntimeError("input '" + in.name + "': --synthetic cannot make " +
                           nameOf(in.dtype) + " data");
      }
      kinds.push_back(in.synthetic == "normal" ? Kind::Normal
                      : in.synthetic == "ids"  ? Kind::Ids
                      : in.synthetic == "binary" ? Kind::Binary
                                                 : Kind::Below);
      zipf.push_back(kinds.back() == Kind::Ids ? std::make_unique<Zipf>(in.range)
                                               : nullptr);
    }
  }

  void fill(Session &session, int64_t step) override {
    const Plan &plan = session.plan();
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const PlanInput &in = plan.inputs[i];
      TensorView dest = session.input(i);
      uint64_t key = splitmix64(splitmix64(seed) ^ ((i + 1) * kGolden));
      int64_t n = dest.numElements();
      // The counter of element 0 of this rank's first sample.
      uint64_t base;
      if (in.batchAxis == 0) {
        int64_t perSample = product(in.shape, 1);
        base = (uint64_t)(step * globalBatch_ + sharding.rank * in.shape[0]) *
               perSample;
      } else {
        base = (uint64_t)step * n;
      }
      // Every element is a function of its counter, so the threads' chunks
      // give the serial loop's values; a batch of images takes ~40 ns an
      // element serially, which a GPU's step would wait for.
      Draw draw{kinds[i], zipf[i].get(), (double)in.range, key, base};
      parallelFor(session.env().threads, n, kGrain, [&](int64_t b, int64_t e) {
        switch (in.dtype) {
        case DType::F32: draw.into(dest.as<float>(), b, e); break;
        case DType::F64: draw.into(dest.as<double>(), b, e); break;
        case DType::I64: draw.into(dest.as<int64_t>(), b, e); break;
        case DType::I32: draw.into(dest.as<int32_t>(), b, e); break;
        case DType::I16: draw.into(dest.as<int16_t>(), b, e); break;
        case DType::I8: draw.into(dest.as<int8_t>(), b, e); break;
        default: draw.into(dest.as<uint8_t>(), b, e); break; // U8, Bool
        }
      });
    }
  }

private:
  enum class Kind { Normal, Ids, Binary, Below };
  static constexpr int64_t kGrain = 1 << 14;

  /// One input's values at counters base + e.
  struct Draw {
    Kind kind;
    const Zipf *zipf;
    double range;
    uint64_t key, base;

    double at(uint64_t counter) const {
      if (kind == Kind::Normal) {
        // Box-Muller on two uniforms from one counter's two halves.
        double u1 = uniform53At(key, 2 * counter), u2 = uniform53At(key, 2 * counter + 1);
        return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2 * M_PI * u2);
      }
      double u = uniform53At(key, counter);
      if (kind == Kind::Ids)
        return (double)zipf->sample(u);
      if (kind == Kind::Binary)
        return u < 0.5 ? 0.0 : 1.0;
      return std::floor(u * range); // labels, index
    }
    template <typename T> void into(T *out, int64_t begin, int64_t end) const {
      for (int64_t e = begin; e < end; ++e)
        out[e] = (T)at(base + (uint64_t)e);
    }
  };

  uint64_t seed;
  Sharding sharding;
  std::vector<Kind> kinds;
  std::vector<std::unique_ptr<Zipf>> zipf;
};

} // namespace

std::unique_ptr<DataSource> openNpyData(const Plan &plan, const std::string &dir,
                                        Sharding sharding, bool allowNonFinite) {
  if (!std::filesystem::is_directory(dir))
    throw RuntimeError(dir + ": --data must be a directory of .npy files");
  return std::make_unique<NpyData>(plan, dir, sharding, allowNonFinite);
}

std::unique_ptr<DataSource> makeSyntheticData(const Plan &plan, uint64_t seed,
                                              Sharding sharding) {
  return std::make_unique<SyntheticData>(plan, seed, sharding);
}

} // namespace parallax::rt

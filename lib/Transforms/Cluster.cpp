//===- Cluster.cpp - the ranks, machines and links a plan is for ----------===//
//
// The cluster file (`parallax-opt --cluster FILE`):
//
//   {
//     "machines": [{"host": "node1", "ranks": 4}, {"host": "node2", "ranks": 4}],
//     "intra_machine": {"bandwidth_gbps": 40, "latency_us": 5},
//     "inter_machine": {"bandwidth_gbps": 10, "latency_us": 50}
//   }
//
// ("machines" may also be a count with "ranks_per_machine".) Every machine
// must run the same number of ranks: the grid is machines x ranks. Link
// figures from a calibration profile (parallax-run --calibrate) take
// precedence; without either, the defaults describe shared memory inside a
// machine and 10 Gb/s Ethernet between machines.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Transforms/Cluster.h"
#include "parallax/Transforms/ClusterMachine.h"
#include "parallax/Runtime/KernelRates.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace parallax {
#define GEN_PASS_DEF_PXCLUSTER
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace parallax {

ClusterModel ClusterModel::fromModule(ModuleOp module) {
  ClusterModel c;
  if (auto n = px::getAttr<px::PxDialect::WorldSizeAttrHelper>(module))
    c.worldSize = n.getInt();
  if (auto m = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module))
    c.modelRanks = m.getInt();
  if (auto r = px::getAttr<px::PxDialect::RanksPerMachineAttrHelper>(module))
    c.ranksPerMachine = r.getInt();
  else
    c.ranksPerMachine = c.worldSize;
  if (auto d = px::getAttr<px::PxDialect::ClusterAttrHelper>(module)) {
    auto get = [&](StringRef k, double &v) {
      if (auto f = d.getAs<FloatAttr>(k))
        v = f.getValueAsDouble();
    };
    get("intra_bandwidth", c.intraBandwidth);
    get("intra_latency", c.intraLatency);
    get("inter_bandwidth", c.interBandwidth);
    get("inter_latency", c.interLatency);
    get("update_seconds_per_byte", c.updateSecondsPerByte);
    get("flops_per_second", c.flopsPerSecond);
    get("conv_flops_per_second", c.convFlopsPerSecond);
    get("stream_bytes_per_second", c.streamBytesPerSecond);
    get("kernel_seconds", c.kernelSeconds);
    if (auto rates = d.getAs<DictionaryAttr>("op_rates"))
      for (NamedAttribute r : rates)
        if (auto points = dyn_cast<DenseF64ArrayAttr>(r.getValue())) {
          rt::RateCurve &curve = c.opRates[r.getName().str()];
          for (int64_t i = 0; i + 1 < points.size(); i += 2)
            curve.points.push_back({points[i], points[i + 1]});
        }
  }
  return c;
}

double ClusterModel::bandwidth() const {
  return machines() > 1 ? interBandwidth : intraBandwidth;
}
double ClusterModel::latency() const {
  return machines() > 1 ? interLatency : intraLatency;
}

} // namespace parallax

namespace {

llvm::Expected<llvm::json::Value> readJson(StringRef path, StringRef what) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "%s %s: %s", what.str().c_str(),
                                   path.str().c_str(),
                                   buffer.getError().message().c_str());
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s %s: %s",
                                   what.str().c_str(), path.str().c_str(),
                                   llvm::toString(json.takeError()).c_str());
  return std::move(*json);
}

/// The calibrated kernels' rates as px.cluster keeps them: per kernel, its
/// [work, rate] points flattened.
DictionaryAttr opRatesAttr(Builder &b, const std::map<std::string, rt::RateCurve> &rates) {
  SmallVector<NamedAttribute> entries;
  for (const auto &[name, curve] : rates) {
    SmallVector<double> flat;
    for (auto [work, rate] : curve.points) {
      flat.push_back(work);
      flat.push_back(rate);
    }
    entries.push_back(b.getNamedAttr(name, b.getDenseF64ArrayAttr(flat)));
  }
  return b.getDictionaryAttr(entries);
}

/// Reads {"bandwidth_gbps": x, "latency_us": y} into bytes/s and seconds.
void readLink(const llvm::json::Object *link, double &bandwidth, double &latency) {
  if (!link)
    return;
  if (auto g = link->getNumber("bandwidth_gbps"))
    bandwidth = *g * 1e9 / 8;
  if (auto l = link->getNumber("latency_us"))
    latency = *l * 1e-6;
}

struct ClusterPass : parallax::impl::PxClusterBase<ClusterPass> {
  using PxClusterBase::PxClusterBase;

  LogicalResult fail(const llvm::Twine &msg) {
    getOperation().emitError("px-cluster: ") << msg;
    return failure();
  }

  LogicalResult readCluster(ClusterModel &c) {
    if (clusterFile.empty()) {
      if (np < 1)
        return fail("np must be >= 1");
      c.worldSize = np;
      c.ranksPerMachine = np;
      return success();
    }
    auto json = readJson(clusterFile, "cluster file");
    if (!json)
      return fail(llvm::toString(json.takeError()));
    auto *obj = json->getAsObject();
    if (!obj)
      return fail("cluster file " + clusterFile + ": expected a JSON object");
    int64_t machines = 0, perMachine = 0;
    if (auto *list = obj->getArray("machines")) {
      for (const auto &m : *list) {
        auto *mo = m.getAsObject();
        auto ranks = mo ? mo->getInteger("ranks") : std::nullopt;
        if (!ranks || *ranks < 1)
          return fail("cluster file " + clusterFile +
                      ": every machine needs \"ranks\" >= 1");
        if (perMachine && *ranks != perMachine)
          return fail("cluster file " + clusterFile +
                      ": every machine must run the same number of ranks "
                      "(the process grid is machines x ranks)");
        perMachine = *ranks;
        ++machines;
      }
    } else if (auto count = obj->getInteger("machines")) {
      machines = *count;
      perMachine = obj->getInteger("ranks_per_machine").value_or(1);
    }
    if (machines < 1 || perMachine < 1)
      return fail("cluster file " + clusterFile +
                  ": needs \"machines\" (a list, or a count with "
                  "\"ranks_per_machine\")");
    c.worldSize = machines * perMachine;
    c.ranksPerMachine = perMachine;
    if (np > 1 && np != c.worldSize)
      return fail("--np " + llvm::Twine(np) + " disagrees with the cluster file's " +
                  llvm::Twine(c.worldSize) + " ranks");
    readLink(obj->getObject("intra_machine"), c.intraBandwidth, c.intraLatency);
    readLink(obj->getObject("inter_machine"), c.interBandwidth, c.interLatency);
    return success();
  }

  LogicalResult readProfile(ClusterModel &c) {
    if (profileFile.empty())
      return success();
    auto json = readJson(profileFile, "profile");
    if (!json)
      return fail(llvm::toString(json.takeError()));
    auto *obj = json->getAsObject();
    if (!obj || obj->getString("format") != "parallax-profile")
      return fail("profile " + profileFile +
                  ": not a calibration profile (make one with parallax-run "
                  "--calibrate)");
    auto link = [&](StringRef key, double &bw, double &lat) {
      if (auto *l = obj->getObject(key)) {
        if (auto b = l->getNumber("bandwidth_bytes_per_s"))
          bw = *b;
        if (auto t = l->getNumber("latency_s"))
          lat = *t;
      }
    };
    link("intra_machine", c.intraBandwidth, c.intraLatency);
    link("inter_machine", c.interBandwidth, c.interLatency);
    if (auto u = obj->getNumber("update_seconds_per_byte"))
      c.updateSecondsPerByte = *u;
    if (auto f = obj->getNumber("flops_per_second"))
      c.flopsPerSecond = *f;
    if (auto f = obj->getNumber("conv_flops_per_second"))
      c.convFlopsPerSecond = *f;
    if (auto b = obj->getNumber("stream_bytes_per_second"))
      c.streamBytesPerSecond = *b;
    if (const llvm::json::Value *k = obj->get("kernel_seconds")) {
      auto seconds = k->getAsNumber();
      if (!seconds || !(*seconds >= 0))
        return fail("profile " + profileFile + ": kernel_seconds must be a number >= 0");
      c.kernelSeconds = *seconds;
    }
    if (obj->get("op_rates") && !obj->getObject("op_rates"))
      return fail("profile " + profileFile +
                  ": op_rates must be an object of kernel names and rates");
    if (auto *rates = obj->getObject("op_rates"))
      for (const auto &[name, value] : *rates) {
        if (!rt::ratedWorkOf(name.str()))
          return fail("profile " + profileFile + ": op_rates names '" + name.str() +
                      "', which has no rate of its own (a newer parallax-run's profile?)");
        // A rate, or [work, rate] points by increasing work.
        rt::RateCurve curve;
        if (auto r = value.getAsNumber()) {
          curve.points.push_back({0.0, *r});
        } else if (auto *list = value.getAsArray()) {
          for (const auto &point : *list) {
            auto *pair = point.getAsArray();
            std::optional<double> work, rate;
            if (pair && pair->size() == 2) {
              work = (*pair)[0].getAsNumber();
              rate = (*pair)[1].getAsNumber();
            }
            if (!work || !rate || !(*work > 0) ||
                (!curve.points.empty() && !(*work > curve.points.back().first)))
              return fail("profile " + profileFile + ": op_rates." + name.str() +
                          " must be a rate or [work, rate] pairs by positive, increasing work");
            curve.points.push_back({*work, *rate});
          }
        }
        if (curve.points.empty() ||
            llvm::any_of(curve.points, [](auto p) { return !(p.second > 0); }))
          return fail("profile " + profileFile + ": op_rates." + name.str() +
                      " must be a positive rate, or [work, rate] pairs of positive rates");
        c.opRates[name.str()] = std::move(curve);
      }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ClusterModel c;
    if (failed(readCluster(c)) || failed(readProfile(c)))
      return signalPassFailure();
    // A model group is Pr consecutive ranks of one machine.
    if (modelRanks < 1 || c.ranksPerMachine % modelRanks != 0) {
      (void)fail("model-ranks " + llvm::Twine(modelRanks) + " must divide the " +
                 llvm::Twine(c.ranksPerMachine) + " ranks of a machine");
      return signalPassFailure();
    }
    c.modelRanks = modelRanks;
    OpBuilder b(module.getContext());
    px::setAttr<px::PxDialect::WorldSizeAttrHelper>(module, b.getI64IntegerAttr(c.worldSize));
    px::setAttr<px::PxDialect::RanksPerMachineAttrHelper>(
        module, b.getI64IntegerAttr(c.ranksPerMachine));
    px::setAttr<px::PxDialect::ClusterAttrHelper>(
        module,
        b.getDictionaryAttr({
            b.getNamedAttr("intra_bandwidth", b.getF64FloatAttr(c.intraBandwidth)),
            b.getNamedAttr("intra_latency", b.getF64FloatAttr(c.intraLatency)),
            b.getNamedAttr("inter_bandwidth", b.getF64FloatAttr(c.interBandwidth)),
            b.getNamedAttr("inter_latency", b.getF64FloatAttr(c.interLatency)),
            b.getNamedAttr("update_seconds_per_byte",
                           b.getF64FloatAttr(c.updateSecondsPerByte)),
            b.getNamedAttr("flops_per_second", b.getF64FloatAttr(c.flopsPerSecond)),
            b.getNamedAttr("conv_flops_per_second", b.getF64FloatAttr(c.convFlopsPerSecond)),
            b.getNamedAttr("stream_bytes_per_second",
                           b.getF64FloatAttr(c.streamBytesPerSecond)),
            b.getNamedAttr("kernel_seconds", b.getF64FloatAttr(c.kernelSeconds)),
            b.getNamedAttr("op_rates", opRatesAttr(b, c.opRates)),
        }));
    if (auto old = module.lookupSymbol<shard::GridOp>(kWorldGrid))
      old.erase();
    b.setInsertionPointToStart(module.getBody());
    SmallVector<int64_t> shape;
    if (c.machines() > 1)
      shape = {c.machines(), c.ranksPerMachine / c.modelRanks};
    else
      shape = {c.worldSize / c.modelRanks};
    if (c.modelRanks > 1) {
      shape.push_back(c.modelRanks);
      px::setAttr<px::PxDialect::ModelRanksAttrHelper>(module,
                                                       b.getI64IntegerAttr(c.modelRanks));
    } else {
      px::removeAttr<px::PxDialect::ModelRanksAttrHelper>(module);
    }
    shard::GridOp::create(b, module.getLoc(), kWorldGrid, shape);
  }
};

} // namespace

parallax::grid::Machine parallax::machineOf(const ClusterModel &c, int optimizerSlots) {
  grid::Machine m;
  m.intra = {c.intraLatency, 1.0 / c.intraBandwidth};
  m.inter = {c.interLatency, 1.0 / c.interBandwidth};
  m.ranksPerMachine = c.ranksPerMachine;
  m.flopsPerSecond = c.flopsPerSecond;
  m.convFlopsPerSecond = c.convFlopsPerSecond;
  m.streamBytesPerSecond = c.streamBytesPerSecond;
  m.kernelSeconds = c.kernelSeconds;
  m.opRates = c.opRates;
  m.optimizerSlots = optimizerSlots;
  return m;
}

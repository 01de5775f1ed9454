//===- VariableAccess.cpp - how each variable is read ---------------------===//

#include "parallax/Analysis/VariableAccess.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "llvm/Support/Format.h"

using namespace mlir;

namespace parallax {

std::vector<VariableInfo> analyzeVariables(ModuleOp module) {
  std::vector<VariableInfo> result;
  module.walk([&](px::VariableOp var) {
    // Optimizer slots are reported with the memory figures, not as model
    // variables.
    if (px::hasAttr<px::PxDialect::OptimizerStateOfAttrHelper>(var))
      return;
    VariableInfo info;
    auto type = var.getType();
    info.name = var.getName().str();
    info.shape.assign(type.getShape().begin(), type.getShape().end());
    llvm::raw_string_ostream elem(info.elementType);
    elem << type.getElementType();
    info.bytes = type.getNumElements() *
                 ((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
    info.trainable = var.getTrainable();
    bool any = false, onlyRowGather = true;
    auto accessAttr = px::getAttr<px::PxDialect::AccessAttrHelper>(var);
    for (OpOperand &use : var->getUses()) {
      // Updates write the variable; they do not read it in the step's graph.
      if (isa<px::GradientOp, px::AssignOp, px::SgdOp, px::MomentumOp,
              px::AdamOp, px::AdagradOp>(use.getOwner()))
        continue;
      any = true;
      auto gather = dyn_cast<px::GatherOp>(use.getOwner());
      auto axis = gather ? px::normalizeAxis((int64_t)gather.getAxis(),
                                             type.getRank())
                         : std::nullopt;
      auto pull = dyn_cast<px::PsPullOp>(use.getOwner());
      if (gather && use.getOperandNumber() == 0 && axis == 0)
        info.rowsReadPerStep += gather.getIndices().getType().getNumElements();
      else if (pull && use.getOperandNumber() == 0 &&
               accessAttr && accessAttr.getValue() == "sparse")
        // After px-sync a sparse variable's gathers are parameter-server
        // pulls; a dense variable on servers is pulled whole (not sparse).
        info.rowsReadPerStep += pull.getIds().getType().getNumElements();
      else
        onlyRowGather = false;
    }
    info.access = !any            ? VariableAccess::Unused
                  : onlyRowGather ? VariableAccess::RowGather
                                  : VariableAccess::Dense;
    if (info.access != VariableAccess::RowGather)
      info.rowsReadPerStep = 0;
    if (auto sync = px::getAttr<px::PxDialect::SyncAttrHelper>(var))
      info.sync = sync.getValue().str();
    if (auto place = px::getAttr<px::PxDialect::PlacementAttrHelper>(var))
      if (info.sync == "ps") {
        info.placement.assign(place.asArrayRef().begin(), place.asArrayRef().end());
        if (auto pr = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module))
          info.placementInBatchGroup = pr.getInt() > 1;
      }
    if (auto bytes = px::getAttr<px::PxDialect::BytesPerStepAttrHelper>(var))
      info.bytesPerStep = bytes.getInt();
    if (auto exact = px::getAttr<px::PxDialect::BytesExactAttrHelper>(var))
      info.bytesExact = exact.getValue();
    if (auto source = px::getAttr<px::PxDialect::BytesSourceAttrHelper>(var))
      info.bytesProfiled = source.getValue() == "profile";
    if (auto rows = px::getAttr<px::PxDialect::RowsPerStepAttrHelper>(var))
      info.rowsTouched = rows.getInt();
    if (auto source = px::getAttr<px::PxDialect::AlphaSourceAttrHelper>(var))
      info.alphaMeasured = source.getValue() == "profile";
    if (auto whole = px::getAttr<px::PxDialect::WholeOnGridAttrHelper>(var))
      info.wholeOnGrid = whole.getValue().str();
    if (auto ref = dyn_cast<px::OnnxInitializerAttr>(var.getInit()))
      info.paddedFrom.assign(ref.getStored().begin(), ref.getStored().end());
    result.push_back(std::move(info));
  });
  return result;
}

static std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  double v = bytes;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return s;
}

static std::string describeSync(const VariableInfo &v) {
  if (v.sync.empty())
    return "";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v.sync;
  if (v.sync == "ps") {
    os << " P=" << v.placement.size() << (v.placementInBatchGroup ? " on batch rank" : " on rank");
    if (v.placement.size() > 1)
      os << "s";
    for (size_t i = 0; i < v.placement.size(); ++i)
      os << (i ? "," : " ") << v.placement[i];
  }
  if (v.bytesPerStep >= 0)
    os << ", " << (v.bytesExact || v.bytesProfiled ? "" : "~")
       << humanBytes(v.bytesPerStep) << "/step"
       << (v.bytesProfiled ? " on the profiled data" : "");
  return s;
}

static std::string describeAccess(const VariableInfo &v) {
  if (!v.trainable)
    return "state (not trained)";
  switch (v.access) {
  case VariableAccess::RowGather: {
    int64_t rows = v.shape.empty() ? 0 : v.shape[0];
    int64_t touched = std::min(v.rowsReadPerStep, rows);
    std::string s;
    llvm::raw_string_ostream os(s);
    if (v.alphaMeasured && v.rowsTouched >= 0) {
      os << "gather rows: sparse, ~" << v.rowsTouched << " of " << rows
         << " rows/step measured"
         << llvm::format(" (alpha %.4f)", rows ? (double)v.rowsTouched / rows : 0.0);
      return s;
    }
    os << "gather rows: sparse, <= " << touched << " of " << rows
       << " rows/step"
       << llvm::format(" (alpha <= %.4f)", rows ? (double)touched / rows : 0.0);
    return s;
  }
  case VariableAccess::Dense:
    return "dense";
  case VariableAccess::Unused:
    return "unused";
  }
  return "";
}

/// The access, and why a table stays whole on a model-split grid.
static std::string describeAccessOnGrid(const VariableInfo &v) {
  std::string s = describeAccess(v);
  if (!v.wholeOnGrid.empty())
    s += "; whole on every model rank: " + v.wholeOnGrid;
  if (!v.paddedFrom.empty())
    s += "; padded from " + px::shapeToString(v.paddedFrom) + " to divide over the model ranks";
  return s;
}

void printVariableReport(ArrayRef<VariableInfo> variables, raw_ostream &os) {
  size_t nameWidth = 8, shapeWidth = 5;
  for (const auto &v : variables) {
    nameWidth = std::max(nameWidth, v.name.size());
    shapeWidth = std::max(shapeWidth, px::shapeToString(v.shape).size() + 4);
  }
  auto row = [&](StringRef name, StringRef shape, StringRef bytes,
                 StringRef access) {
    os << llvm::left_justify(name, nameWidth) << "  "
       << llvm::left_justify(shape, shapeWidth) << "  "
       << llvm::right_justify(bytes, 10) << "  " << access << "\n";
  };
  bool synced = llvm::any_of(variables, [](const VariableInfo &v) {
    return !v.sync.empty();
  });
  size_t accessWidth = 7;
  if (synced)
    for (const auto &v : variables)
      accessWidth = std::max(accessWidth, describeAccessOnGrid(v).size());
  auto line = [&](StringRef name, StringRef shape, StringRef bytes,
                  StringRef access, StringRef sync) {
    if (!synced)
      return row(name, shape, bytes, access);
    os << llvm::left_justify(name, nameWidth) << "  "
       << llvm::left_justify(shape, shapeWidth) << "  "
       << llvm::right_justify(bytes, 10) << "  "
       << llvm::left_justify(access, accessWidth) << "  " << sync << "\n";
  };
  line("variable", "shape", "bytes", "read as", "synchronized by");
  int64_t total = 0, sparse = 0, dense = 0, state = 0, params = 0, traffic = 0;
  bool trafficExact = true;
  int count = 0;
  for (const auto &v : variables) {
    line(v.name, px::shapeToString(v.shape) + " " + v.elementType,
         humanBytes(v.bytes), describeAccessOnGrid(v), describeSync(v));
    if (v.bytesPerStep > 0) {
      traffic += v.bytesPerStep;
      trafficExact &= v.bytesExact;
    }
    total += v.bytes;
    if (!v.trainable) {
      state += v.bytes;
      continue;
    }
    ++count;
    params += px::numElements(v.shape);
    (v.access == VariableAccess::RowGather ? sparse : dense) += v.bytes;
  }
  os << "\n"
     << count << " trainable variables, " << params << " parameters, "
     << humanBytes(sparse + dense) << " (sparse " << humanBytes(sparse)
     << ", dense " << humanBytes(dense) << ")";
  if (state)
    os << "; state " << humanBytes(state);
  os << "; all variables " << humanBytes(total) << "\n";
  if (synced)
    os << "predicted traffic per rank and step: " << (trafficExact ? "" : "~")
       << humanBytes(traffic) << " sent, as much received\n";
}

} // namespace parallax

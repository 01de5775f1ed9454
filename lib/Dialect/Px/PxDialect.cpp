//===- PxDialect.cpp - px dialect registration ----------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace parallax::px;

#include "parallax/Dialect/Px/PxDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "parallax/Dialect/Px/PxAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "parallax/Dialect/Px/PxTypes.cpp.inc"

void PxDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "parallax/Dialect/Px/PxAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "parallax/Dialect/Px/PxTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "parallax/Dialect/Px/PxOps.cpp.inc"
      >();
}

bool parallax::runsOnCommThread(Operation *op) {
  return isa<px::AllReduceOp, px::AllGatherOp, px::ReduceScatterOp, px::AllToAllOp,
             px::AllGatherVOp, px::PsPullOp, px::PsPushOp, px::HaloExchangeOp,
             px::HaloReduceOp>(op);
}

Value parallax::splatConstant(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Type elem = type.getElementType();
  Attribute a = isa<FloatType>(elem) ? Attribute(b.getFloatAttr(elem, value))
                                     : Attribute(b.getIntegerAttr(elem, (int64_t)value));
  return px::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, a)).getResult();
}

func::FuncOp parallax::getEntryFunction(ModuleOp module) {
  func::FuncOp found;
  module.walk([&](func::FuncOp f) {
    if (!found && px::hasAttr<PxDialect::LossAttrHelper>(f))
      found = f;
  });
  if (!found)
    found = module.lookupSymbol<func::FuncOp>("main");
  return found;
}

std::string parallax::locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) +
            ":" + llvm::Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string s = locationName(inner); !s.empty())
        return s;
  return "";
}

Attribute OnnxInitializerAttr::parse(AsmParser &parser, Type type) {
  std::string name;
  SmallVector<int64_t> stored, origin, whole;
  auto dims = [&](SmallVector<int64_t> &out) {
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
      return parser.parseInteger(out.emplace_back());
    });
  };
  if (parser.parseLess() || parser.parseString(&name))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("padded"))) {
      if (parser.parseKeyword("from") || dims(stored))
        return {};
    } else if (parser.parseKeyword("block") || parser.parseKeyword("at") || dims(origin) ||
               parser.parseKeyword("of") || dims(whole)) {
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  if (!type) {
    parser.emitError(parser.getCurrentLocation(), "expected the initializer's type");
    return {};
  }
  return parser.getChecked<OnnxInitializerAttr>(parser.getContext(), name, type, stored, origin,
                                               whole);
}

void OnnxInitializerAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printString(getName());
  auto dims = [&](ArrayRef<int64_t> d) {
    printer << "[";
    llvm::interleaveComma(d, printer);
    printer << "]";
  };
  if (!getStored().empty()) {
    printer << ", padded from ";
    dims(getStored());
  }
  if (!getOrigin().empty()) {
    printer << ", block at ";
    dims(getOrigin());
    printer << " of ";
    dims(getWhole());
  }
  printer << ">";
}

LogicalResult OnnxInitializerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          StringRef name, Type type, ArrayRef<int64_t> stored,
                                          ArrayRef<int64_t> origin, ArrayRef<int64_t> whole) {
  if (!origin.empty() || !whole.empty()) {
    auto shaped = dyn_cast<RankedTensorType>(type);
    bool fits = shaped && stored.empty() && origin.size() == whole.size() &&
                shaped.getRank() == (int64_t)whole.size();
    for (size_t d = 0; fits && d < whole.size(); ++d)
      fits = origin[d] >= 0 && origin[d] + shaped.getDimSize(d) <= whole[d];
    if (!fits)
      return emitError() << "initializer '" << name << "': " << type
                         << " is no block of it at [" << llvm::make_range(origin.begin(), origin.end())
                         << "] of [" << llvm::make_range(whole.begin(), whole.end()) << "]";
    return success();
  }
  if (stored.empty())
    return success();
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped || shaped.getRank() != (int64_t)stored.size())
    return emitError() << "initializer '" << name << "': padded from a shape of rank "
                       << stored.size() << " to " << type;
  for (auto [have, to] : llvm::zip(stored, shaped.getShape()))
    if (have < 0 || have > to)
      return emitError() << "initializer '" << name << "': cannot be padded from ["
                         << llvm::make_range(stored.begin(), stored.end()) << "] to " << type;
  return success();
}

Operation *PxDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  // Both kinds of px.constant value: a literal, or a reference to an
  // initializer of the source model (what px.constant folds to).
  if (!isa<ElementsAttr, OnnxInitializerAttr>(value) ||
      cast<TypedAttr>(value).getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, value);
}

//===----------------------------------------------------------------------===//
// The px.* discardable attributes (PxBase.td)
//===----------------------------------------------------------------------===//

namespace {

/// What a px.* attribute whose helper holds an `AttrT` must be, in messages.
template <typename AttrT>
constexpr llvm::StringLiteral expectedKind() {
  if constexpr (std::is_same_v<AttrT, BoolAttr>)
    return "a bool";
  else if constexpr (std::is_same_v<AttrT, IntegerAttr>)
    return "an integer";
  else if constexpr (std::is_same_v<AttrT, FloatAttr>)
    return "a float";
  else if constexpr (std::is_same_v<AttrT, StringAttr>)
    return "a string";
  else if constexpr (std::is_same_v<AttrT, ArrayAttr>)
    return "an array of strings";
  else if constexpr (std::is_same_v<AttrT, DenseI64ArrayAttr>)
    return "an array<i64>";
  else if constexpr (std::is_same_v<AttrT, DenseF64ArrayAttr>)
    return "an array<f64>";
  else if constexpr (std::is_same_v<AttrT, DictionaryAttr>)
    return "a dictionary";
  else if constexpr (std::is_same_v<AttrT, UnitAttr>)
    return "a unit attribute";
  else
    static_assert(!sizeof(AttrT), "describe this px.* attribute type");
}

/// Whether `value` has the type `AttrT`; every px.* ArrayAttr is a list of
/// names.
template <typename AttrT>
bool isKind(Attribute value) {
  if constexpr (std::is_same_v<AttrT, ArrayAttr>) {
    auto array = dyn_cast<ArrayAttr>(value);
    return array && llvm::all_of(array, llvm::IsaPred<StringAttr>);
  } else {
    return isa<AttrT>(value);
  }
}

struct PxAttrRule {
  llvm::StringLiteral name;
  bool (*valid)(Attribute);
  llvm::StringLiteral expected;
};

/// The name and type of the px.* attribute `AttrHelper` manages.
template <typename AttrHelper>
constexpr PxAttrRule rule() {
  using AttrT = decltype(std::declval<AttrHelper>().getAttr(nullptr));
  return {AttrHelper::getNameStr(), isKind<AttrT>, expectedKind<AttrT>()};
}

/// Every discardableAttrs entry of PxBase.td.
constexpr PxAttrRule kPxAttrs[] = {
    rule<PxDialect::SourceAttrHelper>(),
    rule<PxDialect::OpsetAttrHelper>(),
    rule<PxDialect::GraphAttrHelper>(),
    rule<PxDialect::OutputsAttrHelper>(),
    rule<PxDialect::LossAttrHelper>(),
    rule<PxDialect::WorldSizeAttrHelper>(),
    rule<PxDialect::RanksPerMachineAttrHelper>(),
    rule<PxDialect::ModelRanksAttrHelper>(),
    rule<PxDialect::ClusterAttrHelper>(),
    rule<PxDialect::GradientScaleAttrHelper>(),
    rule<PxDialect::OptimizerStateOfAttrHelper>(),
    rule<PxDialect::AccessAttrHelper>(),
    rule<PxDialect::RowsPerStepAttrHelper>(),
    rule<PxDialect::AlphaAttrHelper>(),
    rule<PxDialect::AlphaSourceAttrHelper>(),
    rule<PxDialect::ProfileDataAttrHelper>(),
    rule<PxDialect::ProfileStepsAttrHelper>(),
    rule<PxDialect::WholeOnGridAttrHelper>(),
    rule<PxDialect::LayerSplitAttrHelper>(),
    rule<PxDialect::ClassesAttrHelper>(),
    rule<PxDialect::RecomputedAttrHelper>(),
    rule<PxDialect::PartitionsAttrHelper>(),
    rule<PxDialect::PlacementAttrHelper>(),
    rule<PxDialect::PartitionCostAttrHelper>(),
    rule<PxDialect::SyncAttrHelper>(),
    rule<PxDialect::VariablesAttrHelper>(),
    rule<PxDialect::BytesPerStepAttrHelper>(),
    rule<PxDialect::BytesExactAttrHelper>(),
    rule<PxDialect::BytesSourceAttrHelper>(),
    rule<PxDialect::BytesProfiledAttrHelper>(),
    rule<PxDialect::BatchnormBytesPerStepAttrHelper>(),
};

} // namespace

LogicalResult PxDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  const PxAttrRule *rule = llvm::find_if(
      kPxAttrs, [&](const PxAttrRule &r) { return r.name == name; });
  if (rule == std::end(kPxAttrs))
    return op->emitOpError() << "unknown px attribute '" << name << "'";
  if (!rule->valid(attr.getValue()))
    return op->emitOpError() << "attribute '" << name << "' must be "
                             << rule->expected << ", got " << attr.getValue();
  // Counts of ranks: the group helpers (parallax/Runtime/Grid.h) divide by them.
  if (name == WorldSizeAttrHelper::getNameStr() ||
      name == RanksPerMachineAttrHelper::getNameStr() ||
      name == ModelRanksAttrHelper::getNameStr())
    if (cast<IntegerAttr>(attr.getValue()).getInt() < 1)
      return op->emitOpError() << "attribute '" << name << "' must be at least 1, got "
                               << attr.getValue();
  return success();
}

//===----------------------------------------------------------------------===//
// SparseGradType
//===----------------------------------------------------------------------===//

LogicalResult
SparseGradType::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t rows, RankedTensorType denseType) {
  if (rows < 0)
    return emitError() << "sparse gradient row count must be >= 0, got "
                       << rows;
  if (!denseType || denseType.getRank() < 1 || !denseType.hasStaticShape())
    return emitError()
           << "sparse gradient needs a static dense type of rank >= 1";
  return success();
}

RankedTensorType SparseGradType::getValuesType() const {
  SmallVector<int64_t> shape{getRows()};
  llvm::append_range(shape, getDenseType().getShape().drop_front());
  return RankedTensorType::get(shape, getDenseType().getElementType());
}

RankedTensorType SparseGradType::getIndicesType() const {
  return RankedTensorType::get({getRows()},
                               IntegerType::get(getContext(), 64));
}

//===- parallax-opt.cpp - the Parallax compiler driver --------------------===//
//
// mlir-opt for Parallax. `.mlir` input goes through upstream MlirOptMain (so
// --split-input-file, --verify-diagnostics and every mlir-opt flag work as
// usual); `.onnx` / `.onnxtxt` input is imported into the px dialect first
// and then runs the same pass pipeline options. `--report` prints the
// variable table after the pipeline.
//
//===----------------------------------------------------------------------===//

#include "parallax/Analysis/VariableAccess.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Importer/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory parallaxCategory("Parallax options");

enum class EmitKind { None, Mlir };
static cl::opt<EmitKind> emit(
    "emit", cl::desc("What to write to -o"), cl::init(EmitKind::Mlir),
    cl::values(clEnumValN(EmitKind::Mlir, "mlir", "px dialect IR (default)"),
               clEnumValN(EmitKind::None, "none", "nothing")),
    cl::cat(parallaxCategory));
static cl::opt<bool>
    report("report",
           cl::desc("Print the variable table (name, shape, bytes, how it is "
                    "read) and totals; without an explicit --emit, print only "
                    "the table"),
           cl::cat(parallaxCategory));
static cl::opt<int64_t> batchSize(
    "batch-size",
    cl::desc("Bind dimension 0 of inputs whose batch dimension is dynamic"),
    cl::init(0), cl::cat(parallaxCategory));
static cl::list<std::string> inputShapes(
    "input-shape", cl::desc("Static shape of an input: name=d0,d1,... "
                            "(repeatable)"),
    cl::cat(parallaxCategory));
static cl::list<std::string>
    freeze("freeze", cl::desc("Float initializers to keep constant: a,b,..."),
           cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::opt<std::string>
    loss("loss", cl::desc("The graph output to use as the loss (default: the "
                          "single scalar output)"),
         cl::cat(parallaxCategory));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "parallax-opt") << message << "\n";
  return 1;
}

static bool isOnnx(StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtxt");
}

static llvm::Expected<parallax::ImportOptions> importOptions() {
  parallax::ImportOptions options;
  if (batchSize.getNumOccurrences()) {
    if (batchSize < 1)
      return llvm::createStringError("--batch-size must be >= 1");
    options.batchSize = batchSize;
  }
  for (const std::string &spec : inputShapes) {
    auto [name, dims] = StringRef(spec).rsplit('=');
    if (name.empty() || dims.empty())
      return llvm::createStringError("--input-shape expects name=d0,d1,..., got '" +
                                     spec + "'");
    std::vector<int64_t> shape;
    SmallVector<StringRef> parts;
    dims.split(parts, ',');
    for (StringRef part : parts) {
      int64_t d;
      if (part.trim().getAsInteger(10, d))
        return llvm::createStringError("--input-shape " + spec +
                                       ": '" + part + "' is not an integer");
      shape.push_back(d);
    }
    options.inputShapes[name.str()] = shape;
  }
  options.freeze.insert(freeze.begin(), freeze.end());
  options.loss = loss;
  return options;
}

/// Imports or parses, runs the pass pipeline, writes IR and the report.
static int compile(DialectRegistry &registry, StringRef inputFilename,
                   StringRef outputFilename) {
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  if (isOnnx(inputFilename)) {
    auto options = importOptions();
    if (!options)
      return fail(llvm::toString(options.takeError()));
    auto imported =
        parallax::importOnnxModel(context, inputFilename.str(), *options);
    if (!imported)
      return fail(llvm::toString(imported.takeError()));
    module = std::move(*imported);
  } else {
    std::string error;
    auto file = openInputFile(inputFilename, &error);
    if (!file)
      return fail(error);
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return 1;
  }

  auto config = MlirOptMainConfig::createFromCLOptions();
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
    return 1;

  // With --report alone the table is the output; ask for IR with --emit.
  bool writeIr = emit == EmitKind::Mlir &&
                 (!report || emit.getNumOccurrences() > 0 ||
                  outputFilename != "-");
  if (writeIr) {
    std::string error;
    auto output = openOutputFile(outputFilename, &error);
    if (!output)
      return fail(error);
    module->print(output->os());
    output->os() << "\n";
    output->keep();
  }
  if (report)
    parallax::printVariableReport(parallax::analyzeVariables(*module),
                                  llvm::outs());
  return 0;
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  registry.insert<parallax::px::PxDialect, func::FuncDialect,
                  shard::ShardDialect>();
  registerTransformsPasses();

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "Parallax compiler driver: ONNX or px IR in, px IR out",
      registry);

  if (isOnnx(inputFilename) || report)
    return compile(registry, inputFilename, outputFilename);
  return asMainReturnCode(
      MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}

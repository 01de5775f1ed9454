//===- PxBase.td - px dialect definition ---------------------*- tablegen -*-===//
//
// The px dialect: the training graph Parallax compiles. It is a static-shape
// dialect: every value is a ranked tensor of fully known shape. Operands that
// ONNX passes as shape tensors (Reshape's shape, Slice's starts, ...) are
// folded at import and become attributes or the result type, so passes that
// reason about bytes and partitions never see a dynamic dimension.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXBASE_TD
#define PARALLAX_DIALECT_PX_PXBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Px_Dialect : Dialect {
  let name = "px";
  let cppNamespace = "::parallax::px";
  let summary = "Training graphs and their synchronization, for distributed SGD";
  let description = [{
    Tensor operations with ONNX semantics (one training step's forward graph,
    its gradients and its optimizer), the variables and data inputs they read,
    and the collective and parameter-server operations that synchronize
    variables across ranks. Collectives act over a grid declared with the
    upstream `shard.grid` op and name its axes, as `shard` collectives do.
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::shard::ShardDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // Inherent attributes live in the attribute dictionary, not in properties:
  // the parser infers result types (InferTypeOpAdaptor) from `attr-dict`
  // attributes before it would move them into properties.
  let usePropertiesForAttributes = 0;

  // verifyOperationAttribute checks the discardableAttrs below.
  let hasOperationAttrVerify = 1;

  // The `px.*` attributes the importer, the passes, the analyses and the plan
  // emitter hand to each other. Each gets a generated
  // PxDialect::<Name>AttrHelper (px::getAttr and friends in PxDialect.h wrap
  // them), and verifyOperationAttribute (PxDialect.cpp) rejects a px.* name
  // not listed here or a value of another type. Set by / read by, and on
  // which op; docs/dialect.md has the same list.
  let discardableAttrs = (ins
    // --- The imported module (OnnxImporter) ---
    // module: the ONNX file; #px.onnx_initializer resolves against it. Read
    // by the plan emitter (the plan's source path, size and CRC).
    "::mlir::StringAttr":$source,
    // module: the model's default-domain opset. Informational.
    "::mlir::IntegerAttr":$opset,
    // module: the ONNX graph's name, when it has one. Informational.
    "::mlir::StringAttr":$graph,
    // module: the ONNX names of the entry function's results (an array of
    // strings). Read by the plan emitter (the plan's output names); the
    // index profiler drops it.
    "::mlir::ArrayAttr":$outputs,
    // func.func: the index of the scalar loss among the results; absent in
    // an inference module. Marks the entry function (getEntryFunction);
    // read by px-autodiff, px-sync and the plan emitter (training mode).
    "::mlir::IntegerAttr":$loss,

    // --- The cluster (px-cluster) ---
    // module: the number of ranks. Read by ClusterModel::fromModule, by
    // px-autodiff (the 1/N seed) and the plan emitter.
    "::mlir::IntegerAttr":$world_size,
    // module: ranks per machine. Read as px.world_size.
    "::mlir::IntegerAttr":$ranks_per_machine,
    // module: Pr, the ranks each layer's model is split over (--grid=PrxPc;
    // absent: 1, data parallelism). The world grid's last axis. Read by
    // ClusterModel::fromModule (px-autodiff's seed and px-sync use the
    // world size over it), px-shard-model.
    "::mlir::IntegerAttr":$model_ranks,
    // module: the link model ({intra,inter}_{bandwidth,latency},
    // update_seconds_per_byte, flops_per_second, conv_flops_per_second and
    // stream_bytes_per_second, f64). Read by
    // ClusterModel::fromModule.
    "::mlir::DictionaryAttr":$cluster,

    // --- Differentiation (px-autodiff) ---
    // module: the backward seed 1/N when px.world_size > 1; px-sync then
    // sums the gradients instead of averaging them (and checks the N).
    "::mlir::FloatAttr":$gradient_scale,

    // --- Optimizer (px-optimizer) ---
    // px.variable: marks an optimizer slot with its parameter's name. Read
    // by the variable analysis (not a model variable) and the plan emitter
    // (optimizer-state role).
    "::mlir::StringAttr":$optimizer_state_of,

    // --- Sparsity (px-sparsity) ---
    // px.variable: "sparse" (read only by row gathers) or "dense". Read by
    // px-partition and the variable analysis.
    "::mlir::StringAttr":$access,
    // px.variable: rows one rank's step touches (a bound, or measured with
    // --profile-data). Read by px-partition, px-sync, the report.
    "::mlir::IntegerAttr":$rows_per_step,
    // px.variable: px.rows_per_step over the variable's rows. Informational.
    "::mlir::FloatAttr":$alpha,
    // px.variable: "bound" or "profile", how px.rows_per_step was found.
    // Read by the variable analysis (the report's `<=` or `~ measured`).
    "::mlir::StringAttr":$alpha_source,
    // module: the --profile-data directory and --profile-steps, set when
    // rows were measured; px-sync re-runs the profile to predict
    // parameter-server bytes exactly.
    "::mlir::StringAttr":$profile_data,
    "::mlir::IntegerAttr":$profile_steps,

    // --- Partitioning (px-partition, px-sync) ---
    // px.variable: the parameter-server partition count. Set by
    // px-partition (and px-sync when it had none); read by px-sync.
    "::mlir::IntegerAttr":$partitions,
    // px.variable: the rank serving each partition. As px.partitions; also
    // read by the variable analysis (the report).
    "::mlir::DenseI64ArrayAttr":$placement,
    // px.variable: [theta1, theta2] of the partition cost model at the
    // chosen count (docs/sync.md). Informational.
    "::mlir::DenseF64ArrayAttr":$partition_cost,

    // --- Vocabulary padding (px-pad-vocabulary) ---
    // px.softmax_cross_entropy_loss (and the px.nll_loss of its
    // vocabulary-parallel form): the classes its labels index, where its
    // scores are padded to more (the padding masked). Read by the plan
    // emitter (the synthetic labels' range).
    "::mlir::IntegerAttr":$classes,

    // --- Model parallelism (px-shard-model) ---
    // px.variable: why a table read only by row gathers stays whole on a
    // grid that splits the model (its rows do not divide over the model
    // ranks). Read by the variable analysis (the report).
    "::mlir::StringAttr":$whole_on_grid,
    // px.variable: how px-shard-model split a layer's weight or a table
    // over the model axis: "whole", "out", "in" or "rows" (layer-splits'
    // words). Read by the strategy search (a point compiled by the pairing
    // rule names its splits) and the report.
    "::mlir::StringAttr":$layer_split,

    // --- Recomputation (px-recompute) ---
    // An element-wise op px-recompute cloned into the backward pass (so
    // that CSE does not merge it back into the forward op it repeats).
    "::mlir::UnitAttr":$recomputed,

    // --- Synchronization (px-sync) ---
    // px.variable: the chosen scheme, "allreduce", "allgatherv" or "ps".
    // Read by the variable analysis (the report).
    "::mlir::StringAttr":$sync,
    // px.all_reduce, px.all_gatherv, px.ps_pull, px.ps_push: the names of
    // the variables (or "(loss)") the collective carries (an array of
    // strings). Read by the plan emitter (per-variable traffic).
    "::mlir::ArrayAttr":$variables,
    // px.variable: predicted bytes one rank sends per step, and whether the
    // figure is exact. Read by the variable analysis (the report).
    "::mlir::IntegerAttr":$bytes_per_step,
    "::mlir::BoolAttr":$bytes_exact,
    // px.variable: "profile" when px.bytes_per_step was replayed from
    // --profile-data. Read by the variable analysis.
    "::mlir::StringAttr":$bytes_source,
    // px.variable: each rank's bytes sent over the px.profile_steps profiled
    // steps. Read by test/Distributed/check_bytes.py.
    "::mlir::DenseI64ArrayAttr":$bytes_profiled,
    // module: bytes per rank and step of synchronized batch-norm
    // statistics. Read by parallax-opt --report.
    "::mlir::IntegerAttr":$batchnorm_bytes_per_step
  );
}

class Px_Op<string mnemonic, list<Trait> traits = []>
    : Op<Px_Dialect, mnemonic, traits>;

// Elementwise with ONNX multidirectional broadcasting: every result has the
// operands' broadcast shape, and its element at an index depends only on the
// operands' elements at the (broadcast) same index. The batch analysis
// (lib/Analysis/BatchDimension.cpp) follows samples through such ops without
// a rule of their own.
def Px_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::parallax::px::OpTrait";
}

// An op whose kernel evaluates a transcendental function (or draws a random
// number) per element of its tensor: bound by that arithmetic where plain
// arithmetic (add, relu, where) is bound by memory, so the step prediction
// times it at a calibrated rate of its own ("costly_per_element"): the
// element-wise ones (exp, erf ..., dropout) and the softmax family's exp and
// log. The runtime runs the element-wise ones in smaller chunks per thread
// (the `costly` flags of lib/Runtime/Kernels/ElementwiseLayout.h, pow,
// dropout): keep the two lists alike.
def Px_CostlyPerElement : NativeOpTrait<"CostlyPerElement"> {
  let cppNamespace = "::parallax::px::OpTrait";
}

//===----------------------------------------------------------------------===//
// Element and tensor type constraints.
//===----------------------------------------------------------------------===//

def Px_Float : AnyTypeOf<[F16, BF16, F32, F64]>;
def Px_Int : AnyTypeOf<[I8, I16, I32, I64]>;
def Px_Index : AnyTypeOf<[I32, I64]>;
def Px_Bool : I<1>;

// Every px tensor has a static shape; a dynamic dimension is a verifier error.
class Px_StaticTensorOf<list<Type> allowed>
    : StaticShapeTensorOf<allowed>;

def Px_FloatTensor : Px_StaticTensorOf<[Px_Float]>;
def Px_IndexTensor : Px_StaticTensorOf<[Px_Index]>;
def Px_BoolTensor : Px_StaticTensorOf<[Px_Bool]>;
def Px_NumericTensor : Px_StaticTensorOf<[Px_Float, Px_Int]>;
def Px_AnyTensor : Px_StaticTensorOf<[Px_Float, Px_Int, Px_Bool]>;

#endif // PARALLAX_DIALECT_PX_PXBASE_TD

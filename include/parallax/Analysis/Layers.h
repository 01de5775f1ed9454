//===- Layers.h - the layers of a px step, as the grid model sees them -*- C++ -*-===//
//
// Every product with a trainable weight (px.gemm, px.matmul, px.conv whose
// weight is a trainable px.variable) is one layer of the SPAA'18 cost model
// (GridCost.h), in step order, with the batch its shapes carry.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_LAYERS_H
#define PARALLAX_ANALYSIS_LAYERS_H

#include "parallax/Analysis/GridCost.h"

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

namespace parallax {

/// The trainable variable `v` reads, through reshapes and transposes (a
/// linear layer's x W^T is a matmul of the transposed weight), or null.
px::VariableOp trainableWeightOf(mlir::Value v);

/// The layers of `module`'s step function. A weight read through a reshape
/// or a transpose counts; a product of two computed values (attention scores) has no
/// weight and is left out.
std::vector<grid::Layer> layersOf(mlir::ModuleOp module);

/// `parallax-opt --grid-costs`: every Pr x Pc grid of `ranks` ranks with
/// its predicted bytes, time and memory per rank, the cheapest marked, and
/// the cheapest grid's layers one by one.
void printGridReport(const std::vector<grid::Layer> &layers, int64_t ranks,
                     const grid::Machine &machine, llvm::raw_ostream &os);

} // namespace parallax

#endif // PARALLAX_ANALYSIS_LAYERS_H

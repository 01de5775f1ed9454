//===- Passes.td - Parallax passes ----------------------------*- tablegen -*-===//
//
// Every pass over px IR, one per file in lib/Transforms. parallax-opt
// registers them all, so each stage can be run and dumped on its own:
//
//   parallax-opt m.onnx --px-autodiff --px-optimizer='kind=adam lr=1e-3'
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_PASSES_TD
#define PARALLAX_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PxAutodiff : Pass<"px-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss with respect to every trainable variable";
  let description = [{
    Appends the backward pass to the function that carries `px.loss` and
    ends it with one `px.gradient` per trainable variable. Gradients are
    built from px ops (and the backward kernels in PxTrainingOps.td); the
    gradient of a variable read only through `px.gather` on axis 0 is a
    `!px.sparse_grad` of the gathered rows and is never densified. The loss
    is seeded with 1, so a mean-reduced loss gets exactly the single-process
    gradients. Ops with no useful gradient (comparisons, Shape-like integer
    computations, casts to integers) propagate none. A trainable variable
    the loss does not depend on gets no `px.gradient`.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxOptimizer : Pass<"px-optimizer", "mlir::ModuleOp"> {
  let summary = "Replace each px.gradient by an optimizer update";
  let description = [{
    Creates the optimizer's state variables (zero-initialised, named
    `<variable>:<slot>`) and replaces every `px.gradient` with `px.sgd`,
    `px.momentum`, `px.adam` or `px.adagrad`, placed right after the later
    of the gradient and the variable's last reader, so that each gradient
    dies as early as it can. Training-mode BatchNormalization's updated
    running statistics are written back with `px.assign`.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"sgd\"",
           "sgd, momentum, adam or adagrad">,
    Option<"lr", "lr", "double", /*default=*/"0.01", "learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "momentum (kind=momentum)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "Nesterov momentum (kind=momentum)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"-1",
           "epsilon (default: 1e-8 for adam, 1e-10 for adagrad)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "L2 weight decay added to the gradient">,
  ];
}

#endif // PARALLAX_TRANSFORMS_PASSES_TD

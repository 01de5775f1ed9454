// px-optimizer: state variables per optimizer, updates placed after the
// variable's last reader, BatchNorm statistics written back.
// RUN: parallax-opt %s --split-input-file --px-optimizer='kind=adam lr=0.001 weight-decay=0.01' | FileCheck %s --check-prefix=ADAM
// RUN: parallax-opt %s --split-input-file --px-optimizer='kind=sgd lr=0.5' | FileCheck %s --check-prefix=SGD
// RUN: parallax-opt %s --split-input-file --px-optimizer='kind=momentum lr=0.1 momentum=0.8 nesterov=true' | FileCheck %s --check-prefix=MOM
// RUN: parallax-opt %s --split-input-file --px-optimizer='kind=adagrad lr=0.1' | FileCheck %s --check-prefix=ADAGRAD

// ADAM-LABEL: func.func @main
// ADAM: %[[W:.*]] = px.variable "w" trainable
// ADAM-NEXT: %[[M:.*]] = px.variable "w:adam.m" = dense<0.000000e+00> : tensor<4x3xf32> {px.optimizer_state_of = "w"}
// ADAM-NEXT: %[[V:.*]] = px.variable "w:adam.v" = dense<0.000000e+00> : tensor<4x3xf32> {px.optimizer_state_of = "w"}
// ADAM: %[[E:.*]] = px.variable "e" trainable
// ADAM-NEXT: px.variable "e:adam.m"
// ADAM-NEXT: px.variable "e:adam.v"
// e has no reader: its update follows its gradient. The update of w comes
// after its last reader (the second matmul), not at the gradient marker.
// ADAM: px.adam %[[E]], {{.*}} : tensor<10x4xf32>, !px.sparse_grad<2, tensor<10x4xf32>>
// ADAM: px.matmul %{{.*}}, %[[W]]
// ADAM: %[[LAST:.*]] = px.matmul %{{.*}}, %[[W]]
// ADAM-NEXT: px.adam %[[W]], %[[M]], %[[V]], %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = {{.*}} : f64, epsilon = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64} : tensor<4x3xf32>, tensor<4x3xf32>
// ADAM-NOT: px.gradient

// SGD-LABEL: func.func @main
// SGD-NOT: px.variable "w:
// SGD: px.sgd {{.*}} : tensor<10x4xf32>, !px.sparse_grad<2, tensor<10x4xf32>>
// SGD: px.sgd %{{.*}}, %{{.*}} {lr = 5.000000e-01 : f64} : tensor<4x3xf32>, tensor<4x3xf32>

// MOM: px.variable "w:momentum"
// MOM: px.momentum {{.*}} {lr = 1.000000e-01 : f64, momentum = 8.000000e-01 : f64, nesterov}

// ADAGRAD: px.variable "w:adagrad.sum"
// ADAGRAD: px.adagrad {{.*}} {epsilon = 1.000000e-10 : f64, lr = 1.000000e-01 : f64}
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.input "x" : tensor<2x4xf32> batched
  %ids = px.input "ids" : tensor<2xi64> batched
  %w = px.variable "w" trainable = dense<0.5> : tensor<4x3xf32>
  %e = px.variable "e" trainable = dense<0.5> : tensor<10x4xf32>
  %g = px.constant dense<1.0> : tensor<4x3xf32>
  %rows = px.constant dense<1.0> : tensor<2x4xf32>
  %sg = px.make_sparse_grad %ids, %rows : tensor<2xi64>, tensor<2x4xf32> -> !px.sparse_grad<2, tensor<10x4xf32>>
  px.gradient %w, %g : tensor<4x3xf32>, tensor<4x3xf32>
  px.gradient %e, %sg : tensor<10x4xf32>, !px.sparse_grad<2, tensor<10x4xf32>>
  %0 = px.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %1 = px.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %2 = px.add %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
  %3 = px.reduce_sum %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32>
  return %3 : tensor<f32>
}

// -----

// Training-mode batch_norm's updated statistics go back to the state
// variables they were read from.
// SGD-LABEL: func.func @main
// SGD: %[[RM:.*]] = px.variable "rm"
// SGD: %[[RV:.*]] = px.variable "rv"
// SGD: %{{.*}}, %[[NM:.*]], %[[NV:.*]] = px.batch_norm
// SGD-DAG: px.assign %[[RM]], %[[NM]] : tensor<3xf32>
// SGD-DAG: px.assign %[[RV]], %[[NV]] : tensor<3xf32>
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.input "x" : tensor<2x3x4x4xf32> batched
  %s = px.variable "s" trainable = dense<1.0> : tensor<3xf32>
  %b = px.variable "b" trainable = dense<0.0> : tensor<3xf32>
  %rm = px.variable "rm" = dense<0.0> : tensor<3xf32>
  %rv = px.variable "rv" = dense<1.0> : tensor<3xf32>
  %y:3 = px.batch_norm %x, %s, %b, %rm, %rv {training} : tensor<2x3x4x4xf32>, tensor<3xf32>
  %l = px.reduce_sum %y#0 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x3x4x4xf32>
  return %l : tensor<f32>
}

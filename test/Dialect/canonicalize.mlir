// Folders and dead-code removal of px ops under the greedy canonicalizer.
// RUN: parallax-opt %s -canonicalize --split-input-file | FileCheck %s

// A reshape to its own type folds to its input.
// CHECK-LABEL: func.func @reshape_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NOT: px.reshape
// CHECK: return %[[X]] : tensor<2x3xf32>
func.func @reshape_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = px.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Reshapes that change the type stay (there is no reshape-of-reshape folder).
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK: %[[A:.*]] = px.reshape %{{.*}} : tensor<4xf32> -> tensor<2x2xf32>
// CHECK: %[[B:.*]] = px.reshape %[[A]] : tensor<2x2xf32> -> tensor<4xf32>
// CHECK: return %[[B]]
func.func @reshape_round_trip(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = px.reshape %x : tensor<4xf32> -> tensor<2x2xf32>
  %1 = px.reshape %0 : tensor<2x2xf32> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A chain of identity reshapes folds away entirely.
// CHECK-LABEL: func.func @reshape_identity_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4xi64>)
// CHECK-NEXT: return %[[X]], %[[X]] : tensor<4xi64>, tensor<4xi64>
func.func @reshape_identity_chain(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %0 = px.reshape %x : tensor<4xi64> -> tensor<4xi64>
  %1 = px.reshape %0 : tensor<4xi64> -> tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}

// -----

// px.constant folds to its value, so the canonicalizer uniques equal
// constants (per value and type) and hoists them to the top of the block.
// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %[[A:.*]] = px.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %[[B:.*]] = px.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf64>
// CHECK-NEXT: %[[C:.*]] = px.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-NEXT: %[[W:.*]] = px.constant #px.onnx_initializer<"w"> : tensor<4xf32>
// CHECK-NEXT: %[[V:.*]] = px.constant #px.onnx_initializer<"v"> : tensor<4xf32>
// CHECK-NEXT: return %[[A]], %[[A]], %[[B]], %[[C]], %[[W]], %[[W]], %[[V]]
func.func @constants() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf64>, tensor<2xi64>,
                           tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = px.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = px.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %c = px.constant dense<[1.0, 2.0]> : tensor<2xf64>
  %d = px.constant dense<[1, 2]> : tensor<2xi64>
  %w1 = px.constant #px.onnx_initializer<"w"> : tensor<4xf32>
  %w2 = px.constant #px.onnx_initializer<"w"> : tensor<4xf32>
  %v = px.constant #px.onnx_initializer<"v"> : tensor<4xf32>
  return %a, %b, %c, %d, %w1, %w2, %v
      : tensor<2xf32>, tensor<2xf32>, tensor<2xf64>, tensor<2xi64>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Constants are hoisted above the ops that use them.
// CHECK-LABEL: func.func @hoist
// CHECK-NEXT: %[[C:.*]] = px.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = px.add
// CHECK-NEXT: px.mul %[[S]], %[[C]]
func.func @hoist(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = px.add %x, %x : tensor<4xf32>, tensor<4xf32>
  %c = px.constant dense<2.0> : tensor<4xf32>
  %1 = px.mul %0, %c : tensor<4xf32>, tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Unused pure ops (variables, inputs, constants, arithmetic, collectives)
// are erased; px.dropout draws a random mask and is not Pure, so it stays.
// CHECK-LABEL: func.func @dead_code
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %{{.*}}, %{{.*}} = px.dropout %[[X]] {ratio = 5.000000e-01 : f32} : tensor<4xf32>
// CHECK-NEXT: return %[[X]] : tensor<4xf32>
shard.grid @world(shape = 4)
func.func @dead_code(%x: tensor<4xf32>) -> tensor<4xf32> {
  %v = px.variable "w" trainable = dense<1.0> : tensor<4xf32>
  %i = px.input "x" : tensor<4xf32>
  %c = px.constant dense<1.0> : tensor<4xf32>
  %0 = px.add %x, %v : tensor<4xf32>, tensor<4xf32>
  %1 = px.softmax %0 : tensor<4xf32>
  %2 = px.all_reduce %1 on @world reduction = average : tensor<4xf32>
  %y, %mask = px.dropout %x {ratio = 0.5 : f32} : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// Ops whose results are used stay; an identity reshape between them folds.
// CHECK-LABEL: func.func @live
// CHECK: px.variable "w"
// CHECK: px.gather
// CHECK: px.reduce_sum
// CHECK-NOT: px.reshape
// CHECK: return
func.func @live(%ids: tensor<3xi64>) -> tensor<f32> {
  %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<10x4xf32>
  %0 = px.gather %w[%ids] : tensor<10x4xf32>, tensor<3xi64>
  %1 = px.reshape %0 : tensor<3x4xf32> -> tensor<3x4xf32>
  %2 = px.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x4xf32>
  return %2 : tensor<f32>
}

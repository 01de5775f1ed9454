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

// -----

// matmul(x, transpose(w)) with a 2-D float w (PyTorch's export of nn.Linear
// on a rank-3 input) becomes one gemm that reads w transposed in place; the
// transpose is dead and goes.
// CHECK-LABEL: func.func @matmul_of_transposed_weight
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>)
// CHECK-NOT: px.transpose
// CHECK: %[[XF:.*]] = px.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[G:.*]] = px.gemm %[[XF]], %[[W]] {trans_b} : tensor<6x4xf32>, tensor<5x4xf32>
// CHECK: %[[Y:.*]] = px.reshape %[[G]] : tensor<6x5xf32> -> tensor<2x3x5xf32>
// CHECK: return %[[Y]]
func.func @matmul_of_transposed_weight(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %t = px.transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32>
  %0 = px.matmul %x, %t : tensor<2x3x4xf32>, tensor<4x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// A matrix left operand needs no reshapes.
// CHECK-LABEL: func.func @matmul_of_transposed_weight_2d
// CHECK-NEXT: %[[G:.*]] = px.gemm %arg0, %arg1 {trans_b} : tensor<3x4xf32>, tensor<5x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @matmul_of_transposed_weight_2d(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>) -> tensor<3x5xf32> {
  %t = px.transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32>
  %0 = px.matmul %x, %t : tensor<3x4xf32>, tensor<4x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// Not rewritten: integer operands (px.gemm is float-only), a vector left
// operand, and a batched transpose.
// CHECK-LABEL: func.func @matmul_not_gemm
// CHECK-COUNT-3: px.transpose
// CHECK-NOT: px.gemm
func.func @matmul_not_gemm(%xi: tensor<3x4xi32>, %wi: tensor<5x4xi32>,
                           %v: tensor<4xf32>, %w: tensor<5x4xf32>,
                           %xb: tensor<2x3x4xf32>, %wb: tensor<2x5x4xf32>)
    -> (tensor<3x5xi32>, tensor<5xf32>, tensor<2x3x5xf32>) {
  %ti = px.transpose %wi {perm = array<i64: 1, 0>} : tensor<5x4xi32>
  %0 = px.matmul %xi, %ti : tensor<3x4xi32>, tensor<4x5xi32>
  %t = px.transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32>
  %1 = px.matmul %v, %t : tensor<4xf32>, tensor<4x5xf32>
  %tb = px.transpose %wb {perm = array<i64: 0, 2, 1>} : tensor<2x5x4xf32>
  %2 = px.matmul %xb, %tb : tensor<2x3x4xf32>, tensor<2x4x5xf32>
  return %0, %1, %2 : tensor<3x5xi32>, tensor<5xf32>, tensor<2x3x5xf32>
}

// -----

// An average pool over the whole unpadded image (avg_pool2d(x, H)) is the
// spatial mean, as GlobalAveragePool imports; a window smaller than the
// image, or a padded one, stays a pool.
// CHECK-LABEL: func.func @whole_image_average_pool
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x5xf32>)
// CHECK: %[[M:.*]] = px.reduce_mean %[[X]] {axes = array<i64: 2, 3>} : tensor<2x3x4x5xf32>
// CHECK: %[[P:.*]] = px.avg_pool %[[X]] {kernel_shape = array<i64: 2, 5>
// CHECK: %[[Q:.*]] = px.avg_pool %[[X]] {count_include_pad, kernel_shape = array<i64: 4, 5>, pads = array<i64: 1, 0, 1, 0>
// CHECK: return %[[M]], %[[P]], %[[Q]]
func.func @whole_image_average_pool(%x: tensor<2x3x4x5xf32>)
    -> (tensor<2x3x1x1xf32>, tensor<2x3x2x1xf32>, tensor<2x3x3x1xf32>) {
  %0 = px.avg_pool %x {kernel_shape = array<i64: 4, 5>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 4, 5>} : tensor<2x3x4x5xf32>
  %1 = px.avg_pool %x {kernel_shape = array<i64: 2, 5>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 5>} : tensor<2x3x4x5xf32>
  %2 = px.avg_pool %x {count_include_pad, kernel_shape = array<i64: 4, 5>, pads = array<i64: 1, 0, 1, 0>, strides = array<i64: 1, 1>} : tensor<2x3x4x5xf32>
  return %0, %1, %2 : tensor<2x3x1x1xf32>, tensor<2x3x2x1xf32>, tensor<2x3x3x1xf32>
}

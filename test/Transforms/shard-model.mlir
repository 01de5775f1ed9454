// px-shard-model alone, on a differentiated two-layer MLP on a 1 x 2 grid
// (the model axis last): fc1's weight and bias are split by output
// features, fc2's weight (fed by fc1 through the relu) by input features,
// so the step's one model-axis collective is the all-reduce of fc2's
// partial products; every gradient stays local, and the bias gradients'
// reduce-then-reshape (px-autodiff's form) becomes one reduction that drops
// the dimension.
// RUN: parallax-opt %s --px-shard-model | FileCheck %s
// Without a model axis the pass changes nothing.
// RUN: parallax-opt %s --px-cluster=np=2 --px-shard-model | FileCheck %s --check-prefix=DATA

// CHECK: %[[X:.*]] = px.input "x" : tensor<4x8xf32> batched
// CHECK: %[[W1:.*]] = px.variable "fc1.weight" trainable = dense<1.000000e-01> : tensor<6x8xf32> -> tensor<3x8xf32> {grid = @world, px.layer_split = "out", split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK: %[[B1:.*]] = px.variable "fc1.bias" trainable = dense<0.000000e+00> : tensor<6xf32> -> tensor<3xf32> {grid = @world, split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK: %[[W2:.*]] = px.variable "fc2.weight" trainable = dense<2.000000e-01> : tensor<2x6xf32> -> tensor<2x3xf32> {grid = @world, px.layer_split = "in", split_axes = #shard<axisarray{{\[\[}}], [1]]>}
// CHECK: %[[B2:.*]] = px.variable "fc2.bias" trainable = dense<0.000000e+00> : tensor<2xf32>
// CHECK-NOT: split_axes
// CHECK: %[[H:.*]] = px.gemm %[[X]], %[[W1]], %[[B1]] {trans_b} : tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>
// CHECK: %[[P:.*]] = px.gemm %{{.*}}, %[[W2]] {trans_b} : tensor<4x3xf32>, tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = px.all_reduce %[[P]] on @world grid_axes = [1] : tensor<4x2xf32>
// CHECK-NEXT: px.add %[[Y]], %[[B2]] : tensor<4x2xf32>, tensor<2xf32>
// CHECK-NOT: px.all_reduce
// CHECK: %[[DB1:.*]] = px.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false} : tensor<4x3xf32>
// CHECK-NOT: px.reshape
// CHECK: px.gradient %[[W1]], %{{.*}} : tensor<3x8xf32>, tensor<3x8xf32>
// CHECK-NEXT: px.gradient %[[B1]], %[[DB1]] : tensor<3xf32>, tensor<3xf32>
// CHECK-NEXT: px.gradient %[[W2]], %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT: px.gradient %[[B2]], %{{.*}} : tensor<2xf32>, tensor<2xf32>
// DATA-NOT: split_axes
// DATA-NOT: all_reduce
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<4x2xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32> batched
    %dy = px.input "dy" : tensor<4x2xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x8xf32>
    %b1 = px.variable "fc1.bias" trainable = dense<0.0> : tensor<6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<2x6xf32>
    %b2 = px.variable "fc2.bias" trainable = dense<0.0> : tensor<2xf32>
    %h = px.gemm %x, %w1, %b1 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>
    %r = px.relu %h : tensor<4x6xf32>
    %y = px.gemm %r, %w2, %b2 {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>, tensor<2xf32>
    %dr = px.gemm %dy, %w2 : tensor<4x2xf32>, tensor<2x6xf32>
    %dw2 = px.gemm %dy, %r {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
    %db2k = px.reduce_sum %dy {axes = array<i64: 0>} : tensor<4x2xf32>
    %db2 = px.reshape %db2k : tensor<1x2xf32> -> tensor<2xf32>
    %zero = px.constant dense<0.0> : tensor<f32>
    %pos = px.greater %h, %zero : tensor<4x6xf32>, tensor<f32>
    %dh = px.where %pos, %dr, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw1 = px.gemm %dh, %x {trans_a} : tensor<4x6xf32>, tensor<4x8xf32>
    %db1k = px.reduce_sum %dh {axes = array<i64: 0>} : tensor<4x6xf32>
    %db1 = px.reshape %db1k : tensor<1x6xf32> -> tensor<6xf32>
    px.gradient %w1, %dw1 : tensor<6x8xf32>, tensor<6x8xf32>
    px.gradient %b1, %db1 : tensor<6xf32>, tensor<6xf32>
    px.gradient %w2, %dw2 : tensor<2x6xf32>, tensor<2x6xf32>
    px.gradient %b2, %db2 : tensor<2xf32>, tensor<2xf32>
    return %y : tensor<4x2xf32>
  }
}

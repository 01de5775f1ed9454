// px-shard-model alone with sequence-parallel (Megatron-LM's sequence
// parallelism) on a pre-LN feed-forward block: the layer norm, the dropout
// and the residual addition run on each model rank's block of rows (the
// leading dimension), the block is all-gathered before the layer pair
// (fc1 split by output features, fc2 by input features), and fc2's
// partial products, all-reduced and sliced, become one reduce-scatter of
// the rows. The dropout on a block records it (split_dim 0).
// RUN: parallax-opt %s --split-input-file --px-shard-model="sequence-parallel=true" --cse | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: %[[X:.*]] = px.all_slice %{{.*}} on @world grid_axes = [1] slice_axis = 0 : tensor<2x4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = px.layer_norm %[[X]], %{{.*}}, %{{.*}} : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[G:.*]] = px.all_gather %[[Y]] on @world grid_axes = [1] gather_axis = 0 : tensor<1x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: px.reshape %[[G]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: px.gemm %{{.*}}, %{{.*}} {trans_b} : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: px.relu
// CHECK-NEXT: %[[P:.*]] = px.gemm %{{.*}}, %{{.*}} {trans_b} : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: %[[R:.*]] = px.reduce_scatter %[[P]] on @world grid_axes = [1] scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[B:.*]] = px.reshape %[[R]] : tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[D:.*]], %{{.*}} = px.dropout %[[B]] {grid = @world, grid_axes = array<i16: 1>, ratio = 1.000000e-01 : f32, split_dim = 0 : i64} : tensor<1x4x8xf32>
// CHECK-NEXT: %[[Z:.*]] = px.add %[[X]], %[[D]] : tensor<1x4x8xf32>, tensor<1x4x8xf32>
// CHECK-NEXT: px.all_gather %[[Z]] on @world grid_axes = [1] gather_axis = 0 : tensor<1x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NOT: px.all_reduce
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %g = px.variable "ln.weight" trainable = dense<1.0> : tensor<8xf32>
    %b = px.variable "ln.bias" trainable = dense<0.0> : tensor<8xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<16x8xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<8x16xf32>
    %y, %mean, %inv = px.layer_norm %x, %g, %b : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
    %y2 = px.reshape %y : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %h = px.gemm %y2, %w1 {trans_b} : tensor<8x8xf32>, tensor<16x8xf32>
    %r = px.relu %h : tensor<8x16xf32>
    %o = px.gemm %r, %w2 {trans_b} : tensor<8x16xf32>, tensor<8x16xf32>
    %o3 = px.reshape %o : tensor<8x8xf32> -> tensor<2x4x8xf32>
    %d, %mask = px.dropout %o3 {ratio = 1.000000e-01 : f32} : tensor<2x4x8xf32>
    %z = px.add %x, %d : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %s = px.reduce_sum %z {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x8xf32>
    return %s : tensor<f32>
  }
}

// -----

// Rows the model ranks do not divide (3 samples on 2 ranks): the layer
// norm runs whole, and fc2's partial products are all-reduced as without
// sequence parallelism.
// CHECK-LABEL: func.func @main
// CHECK-NOT: px.all_slice
// CHECK: px.layer_norm %{{.*}} : tensor<3x4x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK-NOT: px.all_gather
// CHECK: px.all_reduce %{{.*}} on @world grid_axes = [1] : tensor<12x8xf32>
// CHECK-NOT: px.reduce_scatter
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<3x4x8xf32> batched
    %g = px.variable "ln.weight" trainable = dense<1.0> : tensor<8xf32>
    %b = px.variable "ln.bias" trainable = dense<0.0> : tensor<8xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<16x8xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<8x16xf32>
    %y, %mean, %inv = px.layer_norm %x, %g, %b : tensor<3x4x8xf32>, tensor<8xf32>, tensor<8xf32>
    %y2 = px.reshape %y : tensor<3x4x8xf32> -> tensor<12x8xf32>
    %h = px.gemm %y2, %w1 {trans_b} : tensor<12x8xf32>, tensor<16x8xf32>
    %r = px.relu %h : tensor<12x16xf32>
    %o = px.gemm %r, %w2 {trans_b} : tensor<12x16xf32>, tensor<8x16xf32>
    %o3 = px.reshape %o : tensor<12x8xf32> -> tensor<3x4x8xf32>
    %d, %mask = px.dropout %o3 {ratio = 1.000000e-01 : f32} : tensor<3x4x8xf32>
    %z = px.add %x, %d : tensor<3x4x8xf32>, tensor<3x4x8xf32>
    %s = px.reduce_sum %z {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<3x4x8xf32>
    return %s : tensor<f32>
  }
}

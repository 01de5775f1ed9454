// px-shard-model alone: partial sums added after each is all-reduced over
// the model axis (an activation read by several products split by input
// features; in a transformer, the input gradient of the query, key and
// value projections) are added first and all-reduced once, as
// Megatron-LM's fused QKV product is, also through the reshapes that bring
// a product's rows back to [B, T, H].
// RUN: parallax-opt %s --split-input-file --px-shard-model="layer-splits=w1=in,w2=in" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = px.gemm %{{.*}}, %{{.*}} {trans_b} : tensor<4x4xf32>, tensor<6x4xf32>
// CHECK: %[[B:.*]] = px.gemm %{{.*}}, %{{.*}} {trans_b} : tensor<4x4xf32>, tensor<6x4xf32>
// CHECK-NEXT: %[[S:.*]] = px.add %[[A]], %[[B]] : tensor<4x6xf32>, tensor<4x6xf32>
// CHECK-NEXT: %[[R:.*]] = px.all_reduce %[[S]] on @world grid_axes = [1] : tensor<4x6xf32>
// CHECK-NEXT: px.reshape %[[R]] : tensor<4x6xf32> -> tensor<2x2x6xf32>
// CHECK-NOT: px.all_reduce
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<4x6xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32> batched
    %w1 = px.variable "w1" trainable = dense<0.1> : tensor<6x8xf32>
    %w2 = px.variable "w2" trainable = dense<0.2> : tensor<6x8xf32>
    %a = px.gemm %x, %w1 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %b = px.gemm %x, %w2 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %a3 = px.reshape %a : tensor<4x6xf32> -> tensor<2x2x6xf32>
    %b3 = px.reshape %b : tensor<4x6xf32> -> tensor<2x2x6xf32>
    %s = px.add %a3, %b3 : tensor<2x2x6xf32>, tensor<2x2x6xf32>
    %s2 = px.reshape %s : tensor<2x2x6xf32> -> tensor<4x6xf32>
    return %s2 : tensor<4x6xf32>
  }
}

// -----

// A partial sum read again after its all-reduce keeps it: each is reduced.
// CHECK-LABEL: func.func @main
// CHECK: px.all_reduce %{{.*}} on @world grid_axes = [1] : tensor<4x6xf32>
// CHECK: px.all_reduce %{{.*}} on @world grid_axes = [1] : tensor<4x6xf32>
// CHECK: px.add %{{.*}}, %{{.*}} : tensor<2x2x6xf32>, tensor<2x2x6xf32>
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> (tensor<4x6xf32>, tensor<2x2x6xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32> batched
    %w1 = px.variable "w1" trainable = dense<0.1> : tensor<6x8xf32>
    %w2 = px.variable "w2" trainable = dense<0.2> : tensor<6x8xf32>
    %a = px.gemm %x, %w1 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %b = px.gemm %x, %w2 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %a3 = px.reshape %a : tensor<4x6xf32> -> tensor<2x2x6xf32>
    %b3 = px.reshape %b : tensor<4x6xf32> -> tensor<2x2x6xf32>
    %s = px.add %a3, %b3 : tensor<2x2x6xf32>, tensor<2x2x6xf32>
    %s2 = px.reshape %s : tensor<2x2x6xf32> -> tensor<4x6xf32>
    return %s2, %a3 : tensor<4x6xf32>, tensor<2x2x6xf32>
  }
}

// px-shard-model alone with a strategy's explicit splits (layer-splits, as
// the strategy search compiles its points) instead of the pairing rule: fc1
// stays whole on both model ranks and fc2 is split by output features, so
// fc2's input gradient is the all-reduce of the two ranks' partial products
// and fc1's weight gradient is whole.
// RUN: parallax-opt %s --px-shard-model="layer-splits=fc1.weight=whole,fc2.weight=out" | FileCheck %s
// A split a layer cannot take, or a name that is no layer, is an error
// naming it.
// RUN: not parallax-opt %s --px-shard-model="layer-splits=fc2.weight=rows" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not parallax-opt %s --px-shard-model="layer-splits=fc1.bias=out" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not parallax-opt %s --px-shard-model="layer-splits=fc1.weight=sideways" 2>&1 | FileCheck %s --check-prefix=SPEC
// RUN: not parallax-opt %s --px-cluster="np=3 model-ranks=3" --px-shard-model="layer-splits=fc2.weight=out" 2>&1 | FileCheck %s --check-prefix=DIVIDE

// CHECK: %[[W1:.*]] = px.variable "fc1.weight" trainable = dense<1.000000e-01> : tensor<6x8xf32> {px.layer_split = "whole"}{{$}}
// CHECK: %[[W2:.*]] = px.variable "fc2.weight" trainable = dense<2.000000e-01> : tensor<2x6xf32> -> tensor<1x6xf32> {grid = @world, px.layer_split = "out", split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK: px.gemm %{{.*}}, %[[W1]], %{{.*}} {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>
// CHECK: px.gemm %{{.*}}, %[[W2]], %{{.*}} {trans_b} : tensor<4x6xf32>, tensor<1x6xf32>, tensor<1xf32>
// CHECK: %[[DR:.*]] = px.gemm %{{.*}}, %[[W2]] : tensor<4x1xf32>, tensor<1x6xf32>
// CHECK-NEXT: px.all_reduce %[[DR]] on @world grid_axes = [1] : tensor<4x6xf32>
// CHECK: px.gradient %[[W1]], %{{.*}} : tensor<6x8xf32>, tensor<6x8xf32>
// CHECK: px.gradient %[[W2]], %{{.*}} : tensor<1x6xf32>, tensor<1x6xf32>

// ROWS: error: px-shard-model: layer-splits: 'fc2.weight' is no convolution's or embedding table's weight: it splits whole, out or in
// NAME: error: px-shard-model: layer-splits names 'fc1.bias', which is no layer's weight or embedding table
// SPEC: error: px-shard-model: layer-splits entry 'fc1.weight=sideways': expected VARIABLE=whole|out|in|rows
// DIVIDE: error: px-shard-model: layer-splits: the 2 output features of 'fc2.weight' do not divide over 3 model ranks

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

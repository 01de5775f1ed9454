// The shard models that carry a split of heads or features through a
// transformer block (lib/Dialect/Px/PxShardingHeads.cpp) under upstream's
// sharding-propagation and shard-partition, on a grid of 2 ranks.
// RUN: parallax-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// Attention's heads: [B, T, H*D] split by features becomes [B, T, H, D]
// split by heads (the leading dimension of the group the reshape factors),
// the transpose moves the split to dimension 1, softmax along the keys,
// dropout and its gradient run on the rank's head, and the reshape back
// merges the block again. No collective. The dropout knows it is a block
// (of @g, dimension 1) so that it numbers its random stream in the whole
// tensor.
// CHECK-LABEL: func.func @heads(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[H:.*]] = px.reshape %[[X]] : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
// CHECK-NEXT: %[[T:.*]] = px.transpose %[[H]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x1x4xf32>
// CHECK-NEXT: %[[P:.*]] = px.softmax %[[T]] : tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[D:.*]], %[[M:.*]] = px.dropout %[[P]] {grid = @g, grid_axes = array<i16: 0>, ratio = 5.000000e-01 : f32, split_dim = 1 : i64} : tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[G:.*]] = px.dropout_grad %[[D]], %[[M]] {ratio = 5.000000e-01 : f32} : tensor<2x1x4x4xf32>, tensor<2x1x4x4xi1>
// CHECK-NEXT: %[[B:.*]] = px.transpose %[[G]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = px.reshape %[[B]] : tensor<2x4x1x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: return %[[Y]] : tensor<2x4x4xf32>
shard.grid @g(shape = 2)
func.func @heads(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x4x8xf32>
  %h = px.reshape %xs : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %t = px.transpose %h {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32>
  %p = px.softmax %t {axis = -1 : i64} : tensor<2x2x4x4xf32>
  %d, %m = px.dropout %p {ratio = 5.000000e-01 : f32} : tensor<2x2x4x4xf32>
  %g = px.dropout_grad %d, %m {ratio = 5.000000e-01 : f32} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>
  %b = px.transpose %g {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32>
  %y = px.reshape %b : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %ys = shard.shard %y to %s annotate_for_users : tensor<2x4x8xf32>
  return %ys : tensor<2x4x8xf32>
}

// -----

// A split inside a group the reshape merges (T of [B, T, F] -> [B*T, F])
// is no block of the result: it is gathered first.
// CHECK-LABEL: func.func @inside(
// CHECK-NEXT: %[[A:.*]] = shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: px.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<8x8xf32>
shard.grid @g(shape = 2)
func.func @inside(%x: tensor<2x4x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x4x8xf32>
  %y = px.reshape %xs : tensor<2x4x8xf32> -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Nor is a block the result's leading dimension does not divide into
// (6 features as 3 heads of 2, over 2 ranks).
// CHECK-LABEL: func.func @uneven(
// CHECK-NEXT: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x6xf32>
// CHECK: px.reshape %{{.*}} : tensor<2x6xf32> -> tensor<2x3x2xf32>
shard.grid @g(shape = 2)
func.func @uneven(%x: tensor<2x6xf32>) -> tensor<2x3x2xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x6xf32>
  %y = px.reshape %xs : tensor<2x6xf32> -> tensor<2x3x2xf32>
  return %y : tensor<2x3x2xf32>
}

// -----

// A softmax over the split dimension needs it whole.
// CHECK-LABEL: func.func @softmax_axis(
// CHECK-NEXT: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: px.softmax %{{.*}} {axis = 1 : i64} : tensor<4x8xf32>
shard.grid @g(shape = 2)
func.func @softmax_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %y = px.softmax %xs {axis = 1 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

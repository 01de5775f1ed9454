// px.layer_norm and px.layer_norm_grad (lib/Dialect/Px/PxShardingNorm.cpp)
// under upstream's sharding-propagation and shard-partition, on a grid of
// 2 ranks: on a block of rows each rank normalizes its own rows with no
// collective, and the scale's and bias's gradients, partial sums over the
// rows, are all-reduced; a split of the normalized dimension is gathered
// first.
// RUN: parallax-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[X:.*]]: tensor<1x4x8xf32>, %[[DY:.*]]: tensor<1x4x8xf32>, %[[S:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]], %[[M:.*]], %[[I:.*]] = px.layer_norm %[[X]], %[[S]], %[[B]] : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DS:.*]], %[[DB:.*]] = px.layer_norm_grad %[[DY]], %[[X]], %[[S]], %[[M]], %[[I]] : tensor<1x4x8xf32>, tensor<8xf32>, tensor<1x4x1xf32>
// CHECK-NEXT: %[[RS:.*]] = shard.all_reduce %[[DS]] on @g grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[RB:.*]] = shard.all_reduce %[[DB]] on @g grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]], %[[RS]], %[[RB]]
shard.grid @g(shape = 2)
func.func @rows(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %rows : tensor<2x4x8xf32>
  %dys = shard.shard %dy to %rows : tensor<2x4x8xf32>
  %y, %mean, %inv = px.layer_norm %xs, %s, %b : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %dx, %ds, %db = px.layer_norm_grad %dys, %xs, %s, %mean, %inv : tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x1xf32>
  %ys = shard.shard %y to %rows annotate_for_users : tensor<2x4x8xf32>
  %dxs = shard.shard %dx to %rows annotate_for_users : tensor<2x4x8xf32>
  return %ys, %dxs, %ds, %db : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @features(
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 2 : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
// CHECK: px.layer_norm %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
shard.grid @g(shape = 2)
func.func @features(%x: tensor<2x4x8xf32>, %s: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %f = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %f : tensor<2x4x8xf32>
  %y, %mean, %inv = px.layer_norm %xs, %s : tensor<2x4x8xf32>, tensor<8xf32>
  return %y : tensor<2x4x8xf32>
}

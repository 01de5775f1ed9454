// The vocabulary-parallel cross entropy (lib/Dialect/Px/PxShardingLoss.cpp)
// under upstream's sharding-propagation and shard-partition, on a grid of 2
// ranks.
// RUN: parallax-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// Scores split by classes: the block's log-softmax with its maximum and sum
// of exponentials all-reduced ([N, 1] each), px.nll_loss on the block and
// the sum of the partial losses; the gradient is the block's, with the
// one-hot's offset from `block of` @g. No [N, C] scores are gathered.
// CHECK-LABEL: func.func @classes(
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32>, %[[L:.*]]: tensor<4xi64>, %[[DL:.*]]: tensor<f32>)
// CHECK-NOT: all_gather
// CHECK: %[[MAX:.*]] = px.reduce_max %[[X]] {axes = array<i64: 1>} : tensor<4x3xf32>
// CHECK-NEXT: %[[M:.*]] = shard.all_reduce %[[MAX]] on @g grid_axes = [0] reduction = max : tensor<4x1xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[Z:.*]] = px.sub %[[X]], %[[M]] : tensor<4x3xf32>, tensor<4x1xf32>
// CHECK-NEXT: %[[E:.*]] = px.exp %[[Z]] : tensor<4x3xf32>
// CHECK-NEXT: %[[SL:.*]] = px.reduce_sum %[[E]] {axes = array<i64: 1>} : tensor<4x3xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[SL]] on @g grid_axes = [0] : tensor<4x1xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[LS:.*]] = px.log %[[S]] : tensor<4x1xf32>
// CHECK-NEXT: %[[LP:.*]] = px.sub %[[Z]], %[[LS]] : tensor<4x3xf32>, tensor<4x1xf32>
// CHECK-NEXT: %[[P:.*]] = px.nll_loss %[[LP]], %[[L]] {grid = @g, grid_axes = array<i16: 0>, ignore_index = -100 : i64} : tensor<4x3xf32>, tensor<4xi64>
// CHECK-NEXT: %[[LOSS:.*]] = shard.all_reduce %[[P]] on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[D:.*]] = px.softmax_cross_entropy_loss_grad %[[DL]], %[[LP]], %[[L]] {grid = @g, grid_axes = array<i16: 0>, ignore_index = -100 : i64} : tensor<f32>, tensor<4x3xf32>, tensor<4xi64>
// CHECK-NEXT: return %[[LOSS]], %[[D]] : tensor<f32>, tensor<4x3xf32>
shard.grid @g(shape = 2)
func.func @classes(%x: tensor<4x6xf32>, %labels: tensor<4xi64>, %dloss: tensor<f32>)
    -> (tensor<f32>, tensor<4x6xf32>) {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x6xf32>
  %loss, %lp = px.softmax_cross_entropy_loss %xs, %labels {ignore_index = -100 : i64} : tensor<4x6xf32>, tensor<4xi64>
  %d = px.softmax_cross_entropy_loss_grad %dloss, %lp, %labels {ignore_index = -100 : i64} : tensor<f32>, tensor<4x6xf32>, tensor<4xi64>
  %ds = shard.shard %d to %s annotate_for_users : tensor<4x6xf32>
  return %loss, %ds : tensor<f32>, tensor<4x6xf32>
}

// -----

// So are classes with class weights, which a block cannot index.
// CHECK-LABEL: func.func @weighted(
// CHECK: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 1
// CHECK: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x6xf32>, tensor<4xi64>, tensor<6xf32>
shard.grid @g(shape = 2)
func.func @weighted(%x: tensor<4x6xf32>, %labels: tensor<4xi64>, %w: tensor<6xf32>) -> tensor<f32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x6xf32>
  %loss, %lp = px.softmax_cross_entropy_loss %xs, %labels, %w : tensor<4x6xf32>, tensor<4xi64>, tensor<6xf32>
  return %loss : tensor<f32>
}

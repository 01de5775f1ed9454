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

// Scores split by classes with class weights, which a block cannot index,
// are gathered.
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

// -----

// Scores split by lines (a domain-split image's rows: [N, C, H] scores,
// [N, H] labels) are taken on the block: the block's sum of losses is
// all-reduced and divided by the lines every block counts (those whose
// label is not ignore_index, all-reduced); the gradient is the block's
// gradient of the sum, its dloss divided by the same count (0 where it is
// 0, as the kernel's mean gives). No scores are gathered.
// CHECK-LABEL: func.func @lines_mean(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>, %[[L:.*]]: tensor<2x4xi64>, %[[DL:.*]]: tensor<f32>)
// CHECK-NOT: all_gather
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = px.softmax_cross_entropy_loss %[[X]], %[[L]] {ignore_index = 0 : i64, reduction = "sum"} : tensor<2x3x4xf32>, tensor<2x4xi64>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[LOSS]] on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[IGN:.*]] = px.equal %[[L]], %{{.*}} : tensor<2x4xi64>, tensor<i64>
// CHECK: %[[ONES:.*]] = px.where %[[IGN]], %{{.*}}, %{{.*}} : tensor<2x4xi1>, tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[C:.*]] = px.reduce_sum %[[ONES]] {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
// CHECK-NEXT: %[[COUNT:.*]] = shard.all_reduce %[[C]] on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = px.div %[[SUM]], %[[COUNT]] : tensor<f32>, tensor<f32>
// CHECK: %[[COUNT2:.*]] = shard.all_reduce %{{.*}} on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[NONE:.*]] = px.equal %[[COUNT2]], %[[ZERO:.*]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[Q:.*]] = px.div %[[DL]], %[[COUNT2]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[SCALE:.*]] = px.where %[[NONE]], %[[ZERO]], %[[Q]] : tensor<i1>, tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[D:.*]] = px.softmax_cross_entropy_loss_grad %[[SCALE]], %[[LP]], %[[L]] {ignore_index = 0 : i64, reduction = "sum"} : tensor<f32>, tensor<2x3x4xf32>, tensor<2x4xi64>
// CHECK-NEXT: return %[[MEAN]], %[[D]] : tensor<f32>, tensor<2x3x4xf32>
shard.grid @g(shape = 2)
func.func @lines_mean(%x: tensor<2x3x8xf32>, %labels: tensor<2x8xi64>, %dloss: tensor<f32>)
    -> (tensor<f32>, tensor<2x3x8xf32>) {
  %s = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x3x8xf32>
  %loss, %lp = px.softmax_cross_entropy_loss %xs, %labels {ignore_index = 0 : i64} : tensor<2x3x8xf32>, tensor<2x8xi64>
  %d = px.softmax_cross_entropy_loss_grad %dloss, %lp, %labels {ignore_index = 0 : i64} : tensor<f32>, tensor<2x3x8xf32>, tensor<2x8xi64>
  %ds = shard.shard %d to %s annotate_for_users : tensor<2x3x8xf32>
  return %loss, %ds : tensor<f32>, tensor<2x3x8xf32>
}

// -----

// A sum needs no count, and a mean without ignore_index divides by the
// whole tensor's lines (a constant).
// CHECK-LABEL: func.func @lines_sum(
// CHECK-NOT: all_gather
// CHECK: %[[LOSS:.*]], %{{.*}} = px.softmax_cross_entropy_loss %{{.*}}, %{{.*}} {reduction = "sum"} : tensor<4x3xf32>, tensor<4xi64>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[LOSS]] on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}} {reduction = "sum"} : tensor<4x3xf32>, tensor<4xi64>
// CHECK-NEXT: %[[SUM2:.*]] = shard.all_reduce %{{.*}} on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[N:.*]] = px.constant dense<8.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = px.div %[[SUM2]], %[[N]] : tensor<f32>, tensor<f32>
// CHECK: return %[[SUM]], %[[MEAN]]
shard.grid @g(shape = 2)
func.func @lines_sum(%x: tensor<8x3xf32>, %labels: tensor<8xi64>)
    -> (tensor<f32>, tensor<f32>, tensor<8x3xf32>, tensor<8x3xf32>) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x3xf32>
  %sum, %lp = px.softmax_cross_entropy_loss %xs, %labels {reduction = "sum"} : tensor<8x3xf32>, tensor<8xi64>
  %mean, %lp2 = px.softmax_cross_entropy_loss %xs, %labels : tensor<8x3xf32>, tensor<8xi64>
  %lps = shard.shard %lp to %s annotate_for_users : tensor<8x3xf32>
  %lp2s = shard.shard %lp2 to %s annotate_for_users : tensor<8x3xf32>
  return %sum, %mean, %lps, %lp2s : tensor<f32>, tensor<f32>, tensor<8x3xf32>, tensor<8x3xf32>
}

// -----

// A mean with class weights divides by the lines' weights: each label's
// class weight (class 0's for an ignored one, then zeroed), summed and
// all-reduced.
// CHECK-LABEL: func.func @lines_weighted(
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32>, %[[L:.*]]: tensor<4xi64>, %[[W:.*]]: tensor<3xf32>, %[[DL:.*]]: tensor<f32>)
// CHECK-NOT: all_gather
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = px.softmax_cross_entropy_loss %[[X]], %[[L]], %[[W]] {ignore_index = -100 : i64, reduction = "sum"} : tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[LOSS]] on @g grid_axes = [0]
// CHECK: %[[IGN:.*]] = px.equal %[[L]], %{{.*}} : tensor<4xi64>, tensor<i64>
// CHECK: %[[CLS:.*]] = px.where %[[IGN]], %{{.*}}, %[[L]] : tensor<4xi1>, tensor<i64>, tensor<4xi64>
// CHECK-NEXT: %[[WL:.*]] = px.gather %[[W]][%[[CLS]]] : tensor<3xf32>, tensor<4xi64>
// CHECK: %[[WS:.*]] = px.where %[[IGN]], %{{.*}}, %[[WL]] : tensor<4xi1>, tensor<f32>, tensor<4xf32>
// CHECK-NEXT: %[[C:.*]] = px.reduce_sum %[[WS]] {axes = array<i64: 0>, keepdims = false} : tensor<4xf32>
// CHECK-NEXT: %[[COUNT:.*]] = shard.all_reduce %[[C]] on @g grid_axes = [0]
// CHECK-NEXT: %[[MEAN:.*]] = px.div %[[SUM]], %[[COUNT]]
// CHECK: px.softmax_cross_entropy_loss_grad %{{.*}}, %[[LP]], %[[L]], %[[W]] {ignore_index = -100 : i64, reduction = "sum"}
shard.grid @g(shape = 2)
func.func @lines_weighted(%x: tensor<8x3xf32>, %labels: tensor<8xi64>, %w: tensor<3xf32>, %dloss: tensor<f32>)
    -> (tensor<f32>, tensor<8x3xf32>) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x3xf32>
  %loss, %lp = px.softmax_cross_entropy_loss %xs, %labels, %w {ignore_index = -100 : i64} : tensor<8x3xf32>, tensor<8xi64>, tensor<3xf32>
  %d = px.softmax_cross_entropy_loss_grad %dloss, %lp, %labels, %w {ignore_index = -100 : i64} : tensor<f32>, tensor<8x3xf32>, tensor<8xi64>, tensor<3xf32>
  %ds = shard.shard %d to %s annotate_for_users : tensor<8x3xf32>
  return %loss, %ds : tensor<f32>, tensor<8x3xf32>
}

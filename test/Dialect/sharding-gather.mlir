// px.gather's ShardingInterface model (lib/Dialect/Px/PxShardingGather.cpp)
// under upstream's SPMD passes on a grid of 2 ranks: a gather is a loop
// nest over its result and the table's rows, summed. A table split by rows
// (Megatron-LM's vocabulary-parallel embedding) leaves each rank a partial
// lookup, which is all-reduced; a table split by columns, or ids split by
// samples, stay local.
// RUN: parallax-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[T:.*]]: tensor<4x4xf32>, %[[IDS:.*]]: tensor<2x3xi64>)
// CHECK-NEXT: %[[E:.*]] = px.gather %[[T]][%[[IDS]]] block of @g grid_axes = [0] : tensor<4x4xf32>, tensor<2x3xi64>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[E]] on @g grid_axes = [0] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[S]]
shard.grid @g(shape = 2)
func.func @rows(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %rows : tensor<8x4xf32>
  %e = px.gather %ts[%ids] : tensor<8x4xf32>, tensor<2x3xi64>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %es = shard.shard %e to %none annotate_for_users : tensor<2x3x4xf32>
  return %es : tensor<2x3x4xf32>
}

// -----

// Columns: each rank looks up its half of every row; no collective.
// CHECK-LABEL: func.func @columns(
// CHECK-SAME: %[[T:.*]]: tensor<8x2xf32>, %[[IDS:.*]]: tensor<3xi64>)
// CHECK-NEXT: %[[E:.*]] = px.gather %[[T]][%[[IDS]]] : tensor<8x2xf32>, tensor<3xi64>
// CHECK-NEXT: return %[[E]] : tensor<3x2xf32>
shard.grid @g(shape = 2)
func.func @columns(%t: tensor<8x4xf32>, %ids: tensor<3xi64>) -> tensor<3x4xf32> {
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %ts = shard.shard %t to %cols : tensor<8x4xf32>
  %e = px.gather %ts[%ids] : tensor<8x4xf32>, tensor<3xi64>
  %es = shard.shard %e to %cols annotate_for_users : tensor<3x4xf32>
  return %es : tensor<3x4xf32>
}

// -----

// Samples: each rank looks up its ids in the whole table; no collective.
// CHECK-LABEL: func.func @samples(
// CHECK-SAME: %[[T:.*]]: tensor<8x4xf32>, %[[IDS:.*]]: tensor<3xi64>)
// CHECK-NEXT: %[[E:.*]] = px.gather %[[T]][%[[IDS]]] : tensor<8x4xf32>, tensor<3xi64>
// CHECK-NEXT: return %[[E]] : tensor<3x4xf32>
shard.grid @g(shape = 2)
func.func @samples(%t: tensor<8x4xf32>, %ids: tensor<6xi64>) -> tensor<6x4xf32> {
  %split = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %is = shard.shard %ids to %split : tensor<6xi64>
  %e = px.gather %t[%is] : tensor<8x4xf32>, tensor<6xi64>
  %es = shard.shard %e to %split annotate_for_users : tensor<6x4xf32>
  return %es : tensor<6x4xf32>
}

// -----

// A gather on another axis is computed whole: the split table is gathered
// first.
// CHECK-LABEL: func.func @other_axis(
// CHECK: shard.all_gather
// CHECK: px.gather %{{.*}}[%{{.*}}] {axis = 1 : i64} : tensor<8x4xf32>, tensor<3xi64>
// CHECK-NOT: block of
shard.grid @g(shape = 2)
func.func @other_axis(%t: tensor<8x4xf32>, %ids: tensor<3xi64>) -> tensor<8x3xf32> {
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %rows : tensor<8x4xf32>
  %e = px.gather %ts[%ids] {axis = 1 : i64} : tensor<8x4xf32>, tensor<3xi64>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %es = shard.shard %e to %none annotate_for_users : tensor<8x3xf32>
  return %es : tensor<8x3xf32>
}

// -----

// A training step's embedding as px-autodiff writes it: the variable
// becomes its block of rows; the row-sparse gradient, built from the whole
// ids and the whole output gradient, is of that block (no collective in
// the backward pass), and px.gradient updates the block.
// CHECK-LABEL: func.func @step(
// CHECK: %[[IDS:.*]] = px.input "ids"
// CHECK: %[[DY:.*]] = px.input "dy"
// CHECK: %[[T:.*]] = px.variable "emb" trainable = dense<5.000000e-01> : tensor<8x4xf32> -> tensor<4x4xf32> {grid = @g, split_axes = #shard<axisarray{{\[\[}}0]]>}
// CHECK-NEXT: %[[E:.*]] = px.gather %[[T]][%[[IDS]]] block of @g grid_axes = [0] : tensor<4x4xf32>, tensor<3xi64>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[E]] on @g grid_axes = [0]
// CHECK-NEXT: %[[G:.*]] = px.make_sparse_grad %[[IDS]], %[[DY]] block of @g grid_axes = [0] : tensor<3xi64>, tensor<3x4xf32> -> !px.sparse_grad<3, tensor<4x4xf32>>
// CHECK-NEXT: px.gradient %[[T]], %[[G]] : tensor<4x4xf32>, !px.sparse_grad<3, tensor<4x4xf32>>
// CHECK-NEXT: return %[[S]]
shard.grid @g(shape = 2)
func.func @step() -> tensor<3x4xf32> {
  %ids = px.input "ids" : tensor<3xi64> batched
  %dy = px.input "dy" : tensor<3x4xf32>
  %t = px.variable "emb" trainable = dense<0.5> : tensor<8x4xf32>
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %rows : tensor<8x4xf32>
  %e = px.gather %ts[%ids] : tensor<8x4xf32>, tensor<3xi64>
  %g = px.make_sparse_grad %ids, %dy : tensor<3xi64>, tensor<3x4xf32> -> !px.sparse_grad<3, tensor<8x4xf32>>
  px.gradient %ts, %g : tensor<8x4xf32>, !px.sparse_grad<3, tensor<8x4xf32>>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %es = shard.shard %e to %none annotate_for_users : tensor<3x4xf32>
  return %es : tensor<3x4xf32>
}

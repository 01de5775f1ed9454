// The px ops' ShardingInterface models under upstream's SPMD passes
// (sharding-propagation, then shard-partition), on a grid of 2 ranks.
// RUN: parallax-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// A two-layer MLP, Megatron style: the first weight split by rows (output
// features), the second by columns (input features). The first gemm and
// the relu stay local on half the hidden units; the second gemm's k is
// split, so its partial sums are all-reduced, and only then is its bias
// added (once).
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32>, %[[W1:.*]]: tensor<16x16xf32>, %[[B1:.*]]: tensor<16xf32>, %[[W2:.*]]: tensor<4x16xf32>, %[[B2:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[H:.*]] = px.gemm %[[X]], %[[W1]], %[[B1]] {trans_b} : tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[R:.*]] = px.relu %[[H]] : tensor<8x16xf32>
// CHECK-NEXT: %[[P:.*]] = px.gemm %[[R]], %[[W2]] {trans_b} : tensor<8x16xf32>, tensor<4x16xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[P]] on @g grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[Y:.*]] = px.add %[[S]], %[[B2]] : tensor<8x4xf32>, tensor<4xf32>
// CHECK-NEXT: return %[[Y]]
shard.grid @g(shape = 2)
func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<32x16xf32>, %b1: tensor<32xf32>, %w2: tensor<4x32xf32>, %b2: tensor<4xf32>) -> tensor<8x4xf32> {
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %w1s = shard.shard %w1 to %rows : tensor<32x16xf32>
  %h = px.gemm %x, %w1s, %b1 {trans_b} : tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>
  %r = px.relu %h : tensor<8x32xf32>
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %w2s = shard.shard %w2 to %cols : tensor<4x32xf32>
  %y = px.gemm %r, %w2s, %b2 {trans_b} : tensor<8x32xf32>, tensor<4x32xf32>, tensor<4xf32>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %ys = shard.shard %y to %none annotate_for_users : tensor<8x4xf32>
  return %ys : tensor<8x4xf32>
}

// -----

// Batch parallelism: the samples split, the weight replicated; no
// collective in the forward pass. The bias broadcast follows the samples.
// CHECK-LABEL: func.func @batch(
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32>, %[[W:.*]]: tensor<16x32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[M:.*]] = px.matmul %[[X]], %[[W]] : tensor<4x16xf32>, tensor<16x32xf32>
// CHECK-NEXT: %[[A:.*]] = px.add %[[M]], %[[B]] : tensor<4x32xf32>, tensor<32xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x32xf32>
shard.grid @g(shape = 2)
func.func @batch(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %samples = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %samples : tensor<8x16xf32>
  %m = px.matmul %xs, %w : tensor<8x16xf32>, tensor<16x32xf32>
  %a = px.add %m, %b : tensor<8x32xf32>, tensor<32xf32>
  %as = shard.shard %a to %samples annotate_for_users : tensor<8x32xf32>
  return %as : tensor<8x32xf32>
}

// -----

// A transformer's projection: a 3-D activation times a weight split by
// columns gives each rank half the features of every token.
// CHECK-LABEL: func.func @tokens(
// CHECK-NEXT: px.matmul %{{.*}}, %{{.*}} : tensor<2x5x8xf32>, tensor<8x6xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return %{{.*}} : tensor<2x5x6xf32>
shard.grid @g(shape = 2)
func.func @tokens(%x: tensor<2x5x8xf32>, %w: tensor<8x12xf32>) -> tensor<2x5x12xf32> {
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %cols : tensor<8x12xf32>
  %m = px.matmul %x, %ws : tensor<2x5x8xf32>, tensor<8x12xf32>
  %out = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %ms = shard.shard %m to %out annotate_for_users : tensor<2x5x12xf32>
  return %ms : tensor<2x5x12xf32>
}

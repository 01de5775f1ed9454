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

// -----

// A whole training step (forward and backward, as px-autodiff writes it,
// with the bias gradient's reduction dropping its dimension) partitioned
// from the weights' splits alone: each variable becomes this rank's block
// of its initial value, the hidden layer, its relu mask and every weight
// gradient stay local, and the step's only collective is the forward
// all-reduce of the second product.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32>, %[[DY:.*]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[W1:.*]] = px.variable "w1" trainable = dense<1.000000e+00> : tensor<32x16xf32> -> tensor<16x16xf32> {grid = @g, split_axes = #shard<axisarray{{\[\[}}0]]>}
// CHECK-NEXT: %[[B1:.*]] = px.variable "b1" trainable = dense<0.000000e+00> : tensor<32xf32> -> tensor<16xf32> {grid = @g, split_axes = #shard<axisarray{{\[\[}}0]]>}
// CHECK-NEXT: %[[W2:.*]] = px.variable "w2" trainable = dense<1.000000e+00> : tensor<4x32xf32> -> tensor<4x16xf32> {grid = @g, split_axes = #shard<axisarray{{\[\[}}], [0]]>}
// CHECK-NEXT: %[[H:.*]] = px.gemm %[[X]], %[[W1]], %[[B1]] {trans_b}
// CHECK-NEXT: %[[R:.*]] = px.relu %[[H]] : tensor<8x16xf32>
// CHECK-NEXT: %[[P:.*]] = px.gemm %[[R]], %[[W2]] {trans_b}
// CHECK-NEXT: %[[Y:.*]] = shard.all_reduce %[[P]] on @g grid_axes = [0]
// CHECK-NEXT: %[[DR:.*]] = px.gemm %[[DY]], %[[W2]] : tensor<8x4xf32>, tensor<4x16xf32>
// CHECK-NEXT: %[[DW2:.*]] = px.gemm %[[DY]], %[[R]] {trans_a} : tensor<8x4xf32>, tensor<8x16xf32>
// CHECK: %[[DH:.*]] = px.where %{{.*}}, %[[DR]], %{{.*}} : tensor<8x16xi1>, tensor<8x16xf32>, tensor<f32>
// CHECK-NEXT: %[[DW1:.*]] = px.gemm %[[DH]], %[[X]] {trans_a} : tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT: %[[DB1:.*]] = px.reduce_sum %[[DH]] {axes = array<i64: 0>, keepdims = false} : tensor<8x16xf32>
// CHECK-NEXT: px.gradient %[[W1]], %[[DW1]] : tensor<16x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: px.gradient %[[B1]], %[[DB1]] : tensor<16xf32>, tensor<16xf32>
// CHECK-NEXT: px.gradient %[[W2]], %[[DW2]] : tensor<4x16xf32>, tensor<4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4xf32>
// CHECK-NOT: shard.all_reduce
shard.grid @g(shape = 2)
func.func @step(%x: tensor<8x16xf32>, %dy: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %w1 = px.variable "w1" trainable = dense<1.0> : tensor<32x16xf32>
  %b1 = px.variable "b1" trainable = dense<0.0> : tensor<32xf32>
  %w2 = px.variable "w2" trainable = dense<1.0> : tensor<4x32xf32>
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %w1s = shard.shard %w1 to %rows : tensor<32x16xf32>
  %w2s = shard.shard %w2 to %cols : tensor<4x32xf32>
  %h = px.gemm %x, %w1s, %b1 {trans_b} : tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>
  %r = px.relu %h : tensor<8x32xf32>
  %y = px.gemm %r, %w2s {trans_b} : tensor<8x32xf32>, tensor<4x32xf32>
  %dr = px.gemm %dy, %w2s : tensor<8x4xf32>, tensor<4x32xf32>
  %dw2 = px.gemm %dy, %r {trans_a} : tensor<8x4xf32>, tensor<8x32xf32>
  %zero = px.constant dense<0.0> : tensor<f32>
  %pos = px.greater %h, %zero : tensor<8x32xf32>, tensor<f32>
  %dh = px.where %pos, %dr, %zero : tensor<8x32xi1>, tensor<8x32xf32>, tensor<f32>
  %dw1 = px.gemm %dh, %x {trans_a} : tensor<8x32xf32>, tensor<8x16xf32>
  %db1 = px.reduce_sum %dh {axes = array<i64: 0>, keepdims = false} : tensor<8x32xf32>
  px.gradient %w1s, %dw1 : tensor<32x16xf32>, tensor<32x16xf32>
  px.gradient %b1, %db1 : tensor<32xf32>, tensor<32xf32>
  px.gradient %w2s, %dw2 : tensor<4x32xf32>, tensor<4x32xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Sums and means over a split dimension: the partials are all-reduced, and
// a mean's sum of partial means is divided by the ranks it spans.
// CHECK-LABEL: func.func @reductions(
// CHECK-NEXT: %[[S:.*]] = px.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<4x3xf32>
// CHECK-NEXT: %[[SS:.*]] = shard.all_reduce %[[S]] on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = px.reduce_mean %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<4x3xf32>
// CHECK-NEXT: %[[MS:.*]] = shard.all_reduce %[[M]] on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[HALF:.*]] = px.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = px.mul %[[MS]], %[[HALF]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT: return %[[SS]], %[[MEAN]]
shard.grid @g(shape = 2)
func.func @reductions(%x: tensor<4x6xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %cols : tensor<4x6xf32>
  %s = px.reduce_sum %xs {axes = array<i64: 1>, keepdims = false} : tensor<4x6xf32>
  %m = px.reduce_mean %xs {axes = array<i64: 1>, keepdims = false} : tensor<4x6xf32>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %ss = shard.shard %s to %none annotate_for_users : tensor<4xf32>
  %ms = shard.shard %m to %none annotate_for_users : tensor<4xf32>
  return %ss, %ms : tensor<4xf32>, tensor<4xf32>
}

// -----

// What a model cannot describe is computed whole: a size-1 broadcast
// (each row scaled by its own factor) gathers its split operand first.
// CHECK-LABEL: func.func @size_one_broadcast(
// CHECK: %[[G:.*]] = shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 1 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK: px.mul %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<8x1xf32>
shard.grid @g(shape = 2)
func.func @size_one_broadcast(%x: tensor<8x16xf32>, %s: tensor<8x1xf32>) -> tensor<8x16xf32> {
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %cols : tensor<8x16xf32>
  %m = px.mul %xs, %s : tensor<8x16xf32>, tensor<8x1xf32>
  return %m : tensor<8x16xf32>
}

// -----

// A batched matmul (attention's scores) splits over its batch: each rank
// multiplies its own heads.
// CHECK-LABEL: func.func @heads(
// CHECK-NEXT: %[[S:.*]] = px.matmul %{{.*}}, %{{.*}} : tensor<2x5x8xf32>, tensor<2x8x5xf32>
// CHECK-NEXT: return %[[S]] : tensor<2x5x5xf32>
shard.grid @g(shape = 2)
func.func @heads(%q: tensor<4x5x8xf32>, %k: tensor<4x8x5xf32>) -> tensor<4x5x5xf32> {
  %heads = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %qs = shard.shard %q to %heads : tensor<4x5x8xf32>
  %ks = shard.shard %k to %heads : tensor<4x8x5xf32>
  %s = px.matmul %qs, %ks : tensor<4x5x8xf32>, tensor<4x8x5xf32>
  %ss = shard.shard %s to %heads annotate_for_users : tensor<4x5x5xf32>
  return %ss : tensor<4x5x5xf32>
}

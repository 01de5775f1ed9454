// The convolution, batch norm and pooling sharding models
// (lib/Dialect/Px/PxShardingConv.cpp) under upstream's SPMD passes
// (sharding-propagation, then shard-partition), on a grid of 2 ranks.
// RUN: parallax-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// Two convolutions paired as Megatron-LM pairs two products: the first
// split by output channels, the second by input channels. The first
// convolution, its batch norm (scale, bias and statistics on the same
// channel block), the relu and the max pool stay local on half the
// channels; the second convolution's partial sums over its input channels
// are all-reduced, and only then is its bias added (once, reshaped to
// broadcast over the channels).
// CHECK-LABEL: func.func @pair(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x8x8xf32>, %[[W1:.*]]: tensor<4x3x3x3xf32>, %[[S:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>, %[[M:.*]]: tensor<4xf32>, %[[V:.*]]: tensor<4xf32>, %[[W2:.*]]: tensor<6x4x3x3xf32>, %[[B2:.*]]: tensor<6xf32>)
// CHECK-NEXT: %[[H:.*]] = px.conv %[[X]], %[[W1]] {{.*}} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = px.batch_norm %[[H]], %[[S]], %[[B]], %[[M]], %[[V]] {training} : tensor<2x4x8x8xf32>, tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = px.relu %[[Y]] : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[P:.*]] = px.max_pool %[[R]] {{.*}} : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[C:.*]] = px.conv %[[P]], %[[W2]] {{.*}} : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[C]] on @g grid_axes = [0] : tensor<2x6x8x8xf32> -> tensor<2x6x8x8xf32>
// CHECK-NEXT: %[[BC:.*]] = px.reshape %[[B2]] : tensor<6xf32> -> tensor<6x1x1xf32>
// CHECK-NEXT: %[[OUT:.*]] = px.add %[[SUM]], %[[BC]] : tensor<2x6x8x8xf32>, tensor<6x1x1xf32>
// CHECK-NEXT: return %[[OUT]]
shard.grid @g(shape = 2)
func.func @pair(%x: tensor<2x3x8x8xf32>, %w1: tensor<8x3x3x3xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %w2: tensor<6x8x3x3xf32>, %b2: tensor<6xf32>) -> tensor<2x6x8x8xf32> {
  %out = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %w1s = shard.shard %w1 to %out : tensor<8x3x3x3xf32>
  %h = px.conv %x, %w1s {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>
  %y, %rm, %rv = px.batch_norm %h, %s, %b, %m, %v {training} : tensor<2x8x8x8xf32>, tensor<8xf32>
  %r = px.relu %y : tensor<2x8x8x8xf32>
  %p = px.max_pool %r {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>
  %in = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %w2s = shard.shard %w2 to %in : tensor<6x8x3x3xf32>
  %c = px.conv %p, %w2s, %b2 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<6x8x3x3xf32>, tensor<6xf32>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %cs = shard.shard %c to %none annotate_for_users : tensor<2x6x8x8xf32>
  return %cs : tensor<2x6x8x8xf32>
}

// -----

// The backward pass of a convolution split by output channels: its input
// gradient sums over the output channels, so each rank's is partial and
// all-reduced; its filter gradient, the batch norm gradient and the max
// pool gradient stay on the channel block.
// CHECK-LABEL: func.func @backward(
// CHECK: %[[DX:.*]], %[[DS:.*]], %[[DB:.*]] = px.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8x8xf32>, tensor<4xf32>
// CHECK-NEXT: %[[DXI:.*]] = px.conv_grad_input %[[DX]], %{{.*}} {{.*}} : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[DXI]] on @g grid_axes = [0] : tensor<2x3x8x8xf32> -> tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[DW:.*]] = px.conv_grad_filter %{{.*}}, %[[DX]] {{.*}} : tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[DP:.*]] = px.max_pool_grad %{{.*}}, %{{.*}} {{.*}} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// CHECK-NOT: shard.
// CHECK: return %[[SUM]], %[[DW]], %[[DS]], %[[DP]]
shard.grid @g(shape = 2)
func.func @backward(%x: tensor<2x3x8x8xf32>, %w: tensor<8x3x3x3xf32>, %h: tensor<2x8x8x8xf32>, %s: tensor<8xf32>, %dy: tensor<2x8x8x8xf32>, %q: tensor<2x8x8x8xf32>, %dq: tensor<2x8x8x8xf32>) -> (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>, tensor<2x8x8x8xf32>) {
  %out = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %out : tensor<8x3x3x3xf32>
  %ch = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %dys = shard.shard %dy to %ch : tensor<2x8x8x8xf32>
  %dx, %ds, %db = px.batch_norm_grad %dys, %h, %s : tensor<2x8x8x8xf32>, tensor<8xf32>
  %dxi = px.conv_grad_input %dx, %ws {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<2x3x8x8xf32>
  %dw = px.conv_grad_filter %x, %dx {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x8x8x8xf32> -> tensor<8x3x3x3xf32>
  %qs = shard.shard %q to %ch : tensor<2x8x8x8xf32>
  %dp = px.max_pool_grad %qs, %dq {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>
  %none = shard.sharding @g split_axes = [[]] : !shard.sharding
  %dxis = shard.shard %dxi to %none annotate_for_users : tensor<2x3x8x8xf32>
  %dws = shard.shard %dw to %out annotate_for_users : tensor<8x3x3x3xf32>
  %vec = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %dss = shard.shard %ds to %vec annotate_for_users : tensor<8xf32>
  %dps = shard.shard %dp to %ch annotate_for_users : tensor<2x8x8x8xf32>
  return %dxis, %dws, %dss, %dps : tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>, tensor<2x8x8x8xf32>
}

// -----

// A split of the rows (domain parallelism) of a convolution whose blocks
// of input rows map onto blocks of output rows: each block is extended by
// its neighbours' halo rows and convolved without row padding.
// CHECK-LABEL: func.func @rows(
// CHECK: %[[XE:.*]] = px.halo_exchange %{{.*}} on @g grid_axes = [0] axis = 2 lo = 1 hi = 1 : tensor<2x4x4x8xf32> -> tensor<2x4x6x8xf32>
// CHECK: px.conv %[[XE]], %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 1, 1>} : tensor<2x4x6x8xf32>, tensor<6x4x3x3xf32>
shard.grid @g(shape = 2)
func.func @rows(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<2x6x8x8xf32> {
  %rows = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %rows : tensor<2x4x8x8xf32>
  %c = px.conv %xs, %w {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>
  %cs = shard.shard %c to %rows : tensor<2x6x8x8xf32>
  return %cs : tensor<2x6x8x8xf32>
}

// -----

// A max pool whose windows overlap: its block is extended with -inf rows at
// the grid's edges (padding never wins), its gradient's halo rows summed
// back; a 2x2 pool of stride 2 tiles the rows and needs no halo.
// CHECK-LABEL: func.func @pools(
// CHECK: %[[XE:.*]] = px.halo_exchange %{{.*}} on @g grid_axes = [0] axis = 2 lo = 1 hi = 1 edge = 0xFFF0000000000000 : tensor<2x4x4x8xf32> -> tensor<2x4x6x8xf32>
// CHECK: %[[P:.*]] = px.max_pool %[[XE]] {{{.*}}pads = array<i64: 0, 1, 0, 1>{{.*}}} : tensor<2x4x6x8xf32>
// CHECK: px.avg_pool %[[P]] {{.*}} : tensor<2x4x4x8xf32>
// CHECK: %[[XE2:.*]] = px.halo_exchange %{{.*}} edge = 0xFFF0000000000000
// CHECK: %[[DXE:.*]] = px.max_pool_grad %[[XE2]], %{{.*}} {{.*}} : tensor<2x4x6x8xf32>, tensor<2x4x4x8xf32>
// CHECK: px.halo_reduce %[[DXE]] on @g grid_axes = [0] axis = 2 lo = 1 hi = 1 : tensor<2x4x6x8xf32> -> tensor<2x4x4x8xf32>
shard.grid @g(shape = 2)
func.func @pools(%x: tensor<2x4x8x8xf32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) {
  %rows = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %rows : tensor<2x4x8x8xf32>
  %p = px.max_pool %xs {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>
  %a = px.avg_pool %p {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<2x4x8x8xf32>
  %as = shard.shard %a to %rows : tensor<2x4x4x4xf32>
  %dys = shard.shard %dy to %rows : tensor<2x4x8x8xf32>
  %dx = px.max_pool_grad %xs, %dys {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
  %dxs = shard.shard %dx to %rows : tensor<2x4x8x8xf32>
  return %as, %dxs : tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>
}

// -----

// A split of the rows of an unpadded convolution (output rows fewer than
// input rows: no block maps onto a block) runs whole, its split input
// gathered first.
// CHECK-LABEL: func.func @whole(
// CHECK: %[[XG:.*]] = shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 2 : tensor<2x4x4x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[XC:.*]] = tensor.cast %[[XG]]
// CHECK: px.conv %[[XC]], %{{.*}} {{.*}} : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>
shard.grid @g(shape = 2)
func.func @whole(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<2x6x6x6xf32> {
  %rows = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %rows : tensor<2x4x8x8xf32>
  %c = px.conv %xs, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>
  return %c : tensor<2x6x6x6xf32>
}

// -----

// A pool whose window spans the rows (MaxPool2d(8): one output row, which
// no block of 2 ranks divides) runs whole, its split input gathered first,
// rather than as a window taller than the block.
// CHECK-LABEL: func.func @whole_rows_pool(
// CHECK: %[[XG:.*]] = shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 2 : tensor<2x4x4x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: px.max_pool %{{.*}} {{.*}} : tensor<2x4x8x8xf32>
shard.grid @g(shape = 2)
func.func @whole_rows_pool(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32> {
  %rows = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %rows : tensor<2x4x8x8xf32>
  %p = px.max_pool %xs {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 8, 8>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 8, 8>} : tensor<2x4x8x8xf32>
  return %p : tensor<2x4x1x1xf32>
}

// -----

// A 5x5 convolution of stride 2 on 8 rows over 4 ranks: its halos (2 rows
// above, 1 below) fit the input's blocks of 2 rows, though not the
// output's block of 1, which they need not: its rows stay split.
// CHECK-LABEL: func.func @strided_rows(
// CHECK: px.halo_exchange %{{.*}} on @g grid_axes = [0] axis = 2 lo = 2 hi = 1 : tensor<1x2x2x8xf32> -> tensor<1x2x5x8xf32>
// CHECK: px.conv %{{.*}}, %{{.*}} {{.*}} : tensor<1x2x5x8xf32>, tensor<3x2x5x5xf32>
shard.grid @g(shape = 4)
func.func @strided_rows(%x: tensor<1x2x8x8xf32>, %w: tensor<3x2x5x5xf32>) -> tensor<1x3x4x4xf32> {
  %rows = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %rows : tensor<1x2x8x8xf32>
  %c = px.conv %xs, %w {dilations = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>, strides = array<i64: 2, 2>} : tensor<1x2x8x8xf32>, tensor<3x2x5x5xf32>
  %cs = shard.shard %c to %rows : tensor<1x3x4x4xf32>
  return %cs : tensor<1x3x4x4xf32>
}

// -----

// A grouped convolution (ResNeXt's: 2 groups of 4 input and 4 output
// channels), its input gradient and its filter gradient on a block of
// channels of 2 ranks: each rank holds one whole group, so the local ops
// are ungrouped convolutions of its block, with no collective.
// CHECK-LABEL: func.func @grouped(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x8x8xf32>, %[[W:.*]]: tensor<4x4x3x3xf32>, %[[DY:.*]]: tensor<2x4x8x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = px.conv %[[X]], %[[W]] {dilations = array<i64: 1, 1>, pads = {{.*}}} : tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>
// CHECK-NEXT: %[[DX:.*]] = px.conv_grad_input %[[DY]], %[[W]] {dilations = array<i64: 1, 1>, pads = {{.*}}} : tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32> -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[DW:.*]] = px.conv_grad_filter %[[X]], %[[DY]] {dilations = array<i64: 1, 1>, pads = {{.*}}} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x4x3x3xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]], %[[DW]]
shard.grid @g(shape = 2)
func.func @grouped(%x: tensor<2x8x8x8xf32>, %w: tensor<8x4x3x3xf32>, %dy: tensor<2x8x8x8xf32>) -> (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>, tensor<8x4x3x3xf32>) {
  %ch = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %ch : tensor<2x8x8x8xf32>
  %out = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %out : tensor<8x4x3x3xf32>
  %y = px.conv %xs, %ws {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<8x4x3x3xf32>
  %ys = shard.shard %y to %ch annotate_for_users : tensor<2x8x8x8xf32>
  %dys = shard.shard %dy to %ch : tensor<2x8x8x8xf32>
  %dx = px.conv_grad_input %dys, %ws {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<8x4x3x3xf32> -> tensor<2x8x8x8xf32>
  %dxs = shard.shard %dx to %ch annotate_for_users : tensor<2x8x8x8xf32>
  %dw = px.conv_grad_filter %xs, %dys {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32> -> tensor<8x4x3x3xf32>
  %dws = shard.shard %dw to %out annotate_for_users : tensor<8x4x3x3xf32>
  return %ys, %dxs, %dws : tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>, tensor<8x4x3x3xf32>
}

// -----

// The same convolution's filters split over 4 ranks would cut each group
// in two (its output channels sum all of the group's inputs): it runs
// whole, its split weight gathered first.
// CHECK-LABEL: func.func @grouped_through(
// CHECK: %[[WG:.*]] = shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 0 : tensor<2x4x3x3xf32> -> tensor<8x4x3x3xf32>
// CHECK: %[[WC:.*]] = tensor.cast %[[WG]]
// CHECK: px.conv %{{.*}}, %[[WC]] {{.*}}group = 2 {{.*}} : tensor<2x8x8x8xf32>, tensor<8x4x3x3xf32>
shard.grid @g(shape = 4)
func.func @grouped_through(%x: tensor<2x8x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<2x8x8x8xf32> {
  %out = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %out : tensor<8x4x3x3xf32>
  %y = px.conv %x, %ws {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x8x8xf32>, tensor<8x4x3x3xf32>
  return %y : tensor<2x8x8x8xf32>
}

// -----

// A depthwise convolution (a group per channel, MobileNet's), its input
// gradient and its filter gradient on a block of channels: the local ops
// have a group per channel of the block, the weight its block of filters,
// and no collective.
// CHECK-LABEL: func.func @depthwise(
// CHECK-SAME: %[[X:.*]]: tensor<2x2x8x8xf32>, %[[W:.*]]: tensor<2x1x3x3xf32>, %[[DY:.*]]: tensor<2x2x4x4xf32>)
// CHECK-NEXT: %[[Y:.*]] = px.conv %[[X]], %[[W]] {dilations = array<i64: 1, 1>, group = 2 : i64, {{.*}}} : tensor<2x2x8x8xf32>, tensor<2x1x3x3xf32>
// CHECK-NEXT: %[[DX:.*]] = px.conv_grad_input %[[DY]], %[[W]] {dilations = array<i64: 1, 1>, group = 2 : i64, {{.*}}} : tensor<2x2x4x4xf32>, tensor<2x1x3x3xf32> -> tensor<2x2x8x8xf32>
// CHECK-NEXT: %[[DW:.*]] = px.conv_grad_filter %[[X]], %[[DY]] {dilations = array<i64: 1, 1>, group = 2 : i64, {{.*}}} : tensor<2x2x8x8xf32>, tensor<2x2x4x4xf32> -> tensor<2x1x3x3xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]], %[[DW]]
shard.grid @g(shape = 2)
func.func @depthwise(%x: tensor<2x4x8x8xf32>, %w: tensor<4x1x3x3xf32>, %dy: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>) {
  %ch = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %ch : tensor<2x4x8x8xf32>
  %y = px.conv %xs, %w {dilations = array<i64: 1, 1>, group = 4 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>
  %ys = shard.shard %y to %ch annotate_for_users : tensor<2x4x4x4xf32>
  %dys = shard.shard %dy to %ch : tensor<2x4x4x4xf32>
  %dx = px.conv_grad_input %dys, %w {dilations = array<i64: 1, 1>, group = 4 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x4x4x4xf32>, tensor<4x1x3x3xf32> -> tensor<2x4x8x8xf32>
  %dxs = shard.shard %dx to %ch annotate_for_users : tensor<2x4x8x8xf32>
  %dw = px.conv_grad_filter %xs, %dys {dilations = array<i64: 1, 1>, group = 4 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32> -> tensor<4x1x3x3xf32>
  %out = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %dws = shard.shard %dw to %out annotate_for_users : tensor<4x1x3x3xf32>
  return %ys, %dxs, %dws : tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>
}

// px-autodiff's adjoints of collectives in the forward pass (AutodiffCollectives.h).
// RUN: parallax-opt %s --split-input-file --px-autodiff --canonicalize --cse | FileCheck %s

// A sum all-reduce's adjoint is a sum all-reduce over the same group, an
// average's an average.
// CHECK-LABEL: func.func @all_reduce
// CHECK: %[[SEED:.*]] = px.expand
// CHECK: %[[DS:.*]] = px.all_reduce %[[SEED]] on @world grid_axes = [0] : tensor<2x4xf32>
// CHECK: %[[DH:.*]] = px.all_reduce %[[DS]] on @world grid_axes = [0] reduction = average : tensor<2x4xf32>
// CHECK: px.mul %[[DH]], %{{.*}}
module attributes {px.world_size = 4 : i64} {
  shard.grid @world(shape = 2x2)
  func.func @all_reduce() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    %h = px.mul %x, %w : tensor<2x4xf32>, tensor<4xf32>
    %a = px.all_reduce %h on @world grid_axes = [0] reduction = average : tensor<2x4xf32>
    %s = px.all_reduce %a on @world grid_axes = [0] : tensor<2x4xf32>
    %l = px.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// A max all-reduce's: the summed gradient to the ranks that hold the
// maximum, divided among ties.
// CHECK-LABEL: func.func @all_reduce_max
// CHECK: %[[H:.*]] = px.mul
// CHECK: %[[M:.*]] = px.all_reduce %[[H]] on @world reduction = max
// CHECK: %[[SEED:.*]] = px.expand
// CHECK: %[[HOLDS:.*]] = px.equal %[[H]], %[[M]]
// CHECK: %[[ONES:.*]] = px.cast %[[HOLDS]] : tensor<2x4xi1> -> tensor<2x4xf32>
// CHECK: %[[HOLDERS:.*]] = px.all_reduce %[[ONES]] on @world : tensor<2x4xf32>
// CHECK: %[[TOTAL:.*]] = px.all_reduce %[[SEED]] on @world : tensor<2x4xf32>
// CHECK: %[[SHARE:.*]] = px.div %[[TOTAL]], %[[HOLDERS]]
// CHECK: px.where %[[HOLDS]], %[[SHARE]], %{{.*}}
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @all_reduce_max() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    %h = px.mul %x, %w : tensor<2x4xf32>, tensor<4xf32>
    %m = px.all_reduce %h on @world reduction = max : tensor<2x4xf32>
    %l = px.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// all_gather and reduce_scatter are each other's adjoints; all_slice's is
// an all_gather of the slices' gradients, 1/G on each rank (its input is
// the group's, so the ranks' shares sum to its gradient); all_to_all's
// exchanges back.
// CHECK-LABEL: func.func @gather_slice_scatter
// CHECK-DAG: %[[HALF:.*]] = px.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[DA:.*]] = px.expand
// CHECK: %[[DRS:.*]] = px.all_to_all %[[DA]] on @world split_axis = 1 concat_axis = 0 : tensor<1x4xf32> -> tensor<2x2xf32>
// CHECK: %[[DU:.*]] = px.all_gather %[[DRS]] on @world gather_axis = 0 : tensor<2x2xf32> -> tensor<4x2xf32>
// CHECK: %[[DZS:.*]] = px.all_gather %[[DU]] on @world gather_axis = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
// CHECK: %[[DZ:.*]] = px.mul %[[DZS]], %[[HALF]]
// CHECK: %[[DH:.*]] = px.reduce_scatter %[[DZ]] on @world scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: px.mul %[[DH]], %{{.*}}
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @gather_slice_scatter() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    %h = px.mul %x, %w : tensor<2x4xf32>, tensor<4xf32>
    %g = px.all_gather %h on @world gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
    %c = px.all_slice %g on @world slice_axis = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
    %r = px.reduce_scatter %c on @world scatter_axis = 0 : tensor<4x2xf32> -> tensor<2x2xf32>
    %a = px.all_to_all %r on @world split_axis = 0 concat_axis = 1 : tensor<2x2xf32> -> tensor<1x4xf32>
    %l = px.reduce_sum %a {axes = array<i64: 0, 1>, keepdims = false} : tensor<1x4xf32>
    return %l : tensor<f32>
  }
}

// -----

// halo_exchange and halo_reduce are each other's adjoints, the exchange's
// rows past the edges zeros (not the forward's -inf: they are constants).
// CHECK-LABEL: func.func @halos
// CHECK: %[[SEED:.*]] = px.expand
// CHECK: %[[DR:.*]] = px.halo_exchange %[[SEED]] on @world axis = 0 lo = 1 hi = 2 : tensor<4x3xf32> -> tensor<7x3xf32>
// CHECK: %[[DE2:.*]] = px.mul %[[DR]], %[[E:.*]] :
// CHECK: %[[DE:.*]] = px.add %[[DE2]], %[[DE2]]
// CHECK: px.halo_reduce %[[DE]] on @world axis = 0 lo = 1 hi = 2 : tensor<7x3xf32> -> tensor<4x3xf32>
// CHECK-NOT: edge
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @halos() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<3xf32>
    %h = px.mul %x, %w : tensor<4x3xf32>, tensor<3xf32>
    %e = px.halo_exchange %h on @world axis = 0 lo = 1 hi = 2 edge = 0xFFF0000000000000 : tensor<4x3xf32> -> tensor<7x3xf32>
    %e2 = px.mul %e, %e : tensor<7x3xf32>, tensor<7x3xf32>
    %r = px.halo_reduce %e2 on @world axis = 0 lo = 1 hi = 2 : tensor<7x3xf32> -> tensor<4x3xf32>
    %l = px.reduce_sum %r {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32>
    return %l : tensor<f32>
  }
}

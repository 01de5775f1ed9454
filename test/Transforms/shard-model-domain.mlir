// px-shard-model alone with conv-split=domain (SPAA'18's domain
// parallelism), on two differentiated convolutions on a 1 x 2 grid: the
// input's rows are split over the model axis, the weights stay whole. A
// 3x3 convolution of stride 1 and padding 1 exchanges one halo row each
// way and runs on its extended block without row padding; one of stride 2
// needs only the row above; the filter gradients are partial sums over the
// blocks, all-reduced over the model axis. The loss's mean is the mean of
// the blocks' means.
// RUN: parallax-opt %s --px-shard-model=conv-split=domain | FileCheck %s
// RUN: not parallax-opt %s --px-shard-model=conv-split=tiles 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: px-shard-model: unknown conv-split 'tiles' (expected channels, domain or auto)

// CHECK-DAG: %[[X:.*]] = px.input "x" : tensor<2x2x8x4xf32> batched
// CHECK-DAG: %[[W1:.*]] = px.variable "c1.weight" trainable = dense<1.000000e-01> : tensor<3x2x3x3xf32> {px.layer_split = "rows"}{{$}}
// CHECK-DAG: %[[W2:.*]] = px.variable "c2.weight" trainable = dense<2.000000e-01> : tensor<4x3x3x3xf32> {px.layer_split = "rows"}{{$}}
// CHECK: %[[XB:.*]] = px.all_slice %[[X]] on @world grid_axes = [1] slice_axis = 2 : tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
// CHECK: %[[XE:.*]] = px.halo_exchange %[[XB]] on @world grid_axes = [1] axis = 2 lo = 1 hi = 1 : tensor<2x2x4x4xf32> -> tensor<2x2x6x4xf32>
// CHECK: %[[C1:.*]] = px.conv %[[XE]], %[[W1]] {dilations = array<i64: 1, 1>, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 1, 1>} : tensor<2x2x6x4xf32>, tensor<3x2x3x3xf32>
// CHECK: %[[R:.*]] = px.relu %[[C1]] : tensor<2x3x4x4xf32>
// CHECK: %[[RE:.*]] = px.halo_exchange %[[R]] on @world grid_axes = [1] axis = 2 lo = 1 hi = 0 : tensor<2x3x4x4xf32> -> tensor<2x3x5x4xf32>
// CHECK: %[[C2:.*]] = px.conv %[[RE]], %[[W2]] {dilations = array<i64: 1, 1>, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 2>} : tensor<2x3x5x4xf32>, tensor<4x3x3x3xf32>
// CHECK: %[[M:.*]] = px.reduce_mean %[[C2]] {{.*}} : tensor<2x4x2x2xf32>
// CHECK: px.all_reduce %[[M]] on @world grid_axes = [1] : tensor<f32>
// CHECK: %[[DW2:.*]] = px.conv_grad_filter %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 2>} : tensor<2x3x5x4xf32>, tensor<2x4x2x2xf32> -> tensor<4x3x3x3xf32>
// CHECK: %[[DW2S:.*]] = px.all_reduce %[[DW2]] on @world grid_axes = [1] : tensor<4x3x3x3xf32>
// CHECK: %[[DW1:.*]] = px.conv_grad_filter %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 1, 1>} : tensor<2x2x6x4xf32>, tensor<2x3x4x4xf32> -> tensor<3x2x3x3xf32>
// CHECK: %[[DW1S:.*]] = px.all_reduce %[[DW1]] on @world grid_axes = [1] : tensor<3x2x3x3xf32>
// CHECK: px.gradient %[[W1]], %[[DW1S]]
// CHECK: px.gradient %[[W2]], %[[DW2S]]
module attributes {px.model_ranks = 2 : i64, px.ranks_per_machine = 2 : i64, px.world_size = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %0 = px.constant dense<0.000000e+00> : tensor<f32>
    %1 = px.constant dense<1.562500e-02> : tensor<f32>
    %2 = px.constant dense<1.000000e+00> : tensor<f32>
    %3 = px.input "x" : tensor<2x2x8x4xf32> batched
    %4 = px.variable "c1.weight" trainable = dense<1.000000e-01> : tensor<3x2x3x3xf32>
    %5 = px.variable "c2.weight" trainable = dense<2.000000e-01> : tensor<4x3x3x3xf32>
    %6 = px.conv %3, %4 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x2x8x4xf32>, tensor<3x2x3x3xf32>
    %7 = px.relu %6 : tensor<2x3x8x4xf32>
    %8 = px.conv %7, %5 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x3x8x4xf32>, tensor<4x3x3x3xf32>
    %9 = px.reduce_mean %8 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x4x4x2xf32>
    %10 = px.reshape %2 : tensor<f32> -> tensor<1x1x1x1xf32>
    %11 = px.mul %10, %1 : tensor<1x1x1x1xf32>, tensor<f32>
    %12 = px.expand %11 : tensor<1x1x1x1xf32> -> tensor<2x4x4x2xf32>
    %13 = px.conv_grad_input %12, %5 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x4x4x2xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x4xf32>
    %14 = px.conv_grad_filter %7, %12 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x3x8x4xf32>, tensor<2x4x4x2xf32> -> tensor<4x3x3x3xf32>
    %15 = px.greater %6, %0 : tensor<2x3x8x4xf32>, tensor<f32>
    %16 = px.where %15, %13, %0 : tensor<2x3x8x4xi1>, tensor<2x3x8x4xf32>, tensor<f32>
    %17 = px.conv_grad_filter %3, %16 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x2x8x4xf32>, tensor<2x3x8x4xf32> -> tensor<3x2x3x3xf32>
    px.gradient %4, %17 : tensor<3x2x3x3xf32>, tensor<3x2x3x3xf32>
    px.gradient %5, %14 : tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>
    return %9 : tensor<f32>
  }
}


// px-shard-model alone with conv-split=domain on a residual block under a
// classifier on the global average pool (a ResNet's head) on a 1 x 2 grid.
// The classifier's 3 classes do not divide over the 2 model ranks; its 4
// input features do, but a split of them would be carried back through the
// pool and the residual addition into the row-split convolutions, which
// would then reshard their activations by channels (all_to_all). The head
// stays whole instead: the pool's partial sums are all-reduced, and the
// step's only other collectives are the halos and the filter gradients.
// RUN: parallax-opt %s --px-shard-model=conv-split=domain | FileCheck %s
// RUN: parallax-opt %s --px-shard-model=conv-split=domain | FileCheck %s --check-prefix=NONE

// CHECK-DAG: px.variable "c1.weight" {{.*}} {px.layer_split = "rows"}
// CHECK-DAG: px.variable "c2.weight" {{.*}} {px.layer_split = "rows"}
// CHECK-DAG: px.variable "fc.weight" {{.*}} {px.layer_split = "whole"}
// CHECK: %[[M:.*]] = px.reduce_mean %{{.*}} {axes = array<i64: 2, 3>, keepdims = false} : tensor<2x4x4x4xf32>
// CHECK: px.all_reduce %[[M]] on @world grid_axes = [1] : tensor<2x4xf32>
// CHECK: px.gemm %{{.*}}, %{{.*}}, %{{.*}} {trans_b} : tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>
// CHECK: px.halo_reduce
// NONE-NOT: px.all_to_all
// NONE-NOT: px.all_gather
module attributes {px.model_ranks = 2 : i64, px.ranks_per_machine = 2 : i64, px.world_size = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %0 = px.input "x" : tensor<2x2x8x4xf32> batched
    %1 = px.input "y" : tensor<2xi64> batched
    %2 = px.variable "c1.weight" trainable = dense<1.000000e-01> : tensor<4x2x3x3xf32>
    %3 = px.variable "c2.weight" trainable = dense<2.000000e-01> : tensor<4x4x3x3xf32>
    %4 = px.variable "fc.weight" trainable = dense<3.000000e-01> : tensor<3x4xf32>
    %5 = px.variable "fc.bias" trainable = dense<0.000000e+00> : tensor<3xf32>
    %6 = px.conv %0, %2 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x2x8x4xf32>, tensor<4x2x3x3xf32>
    %7 = px.relu %6 : tensor<2x4x8x4xf32>
    %8 = px.conv %7, %3 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x4xf32>, tensor<4x4x3x3xf32>
    %9 = px.add %7, %8 : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
    %10 = px.relu %9 : tensor<2x4x8x4xf32>
    %11 = px.reduce_mean %10 {axes = array<i64: 2, 3>} : tensor<2x4x8x4xf32>
    %12 = px.reshape %11 : tensor<2x4x1x1xf32> -> tensor<2x4xf32>
    %13 = px.gemm %12, %4, %5 {trans_b} : tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>
    %loss, %log_prob = px.softmax_cross_entropy_loss %13, %1 {ignore_index = -100 : i64} : tensor<2x3xf32>, tensor<2xi64>
    %14 = px.constant dense<1.000000e+00> : tensor<f32>
    %15 = px.softmax_cross_entropy_loss_grad %14, %log_prob, %1 {ignore_index = -100 : i64} : tensor<f32>, tensor<2x3xf32>, tensor<2xi64>
    %16 = px.gemm %15, %4 : tensor<2x3xf32>, tensor<3x4xf32>
    %17 = px.gemm %15, %12 {trans_a} : tensor<2x3xf32>, tensor<2x4xf32>
    %18 = px.reduce_sum %15 {axes = array<i64: 0>} : tensor<2x3xf32>
    %19 = px.reshape %18 : tensor<1x3xf32> -> tensor<3xf32>
    %20 = px.reshape %16 : tensor<2x4xf32> -> tensor<2x4x1x1xf32>
    %21 = px.constant dense<3.125000e-02> : tensor<f32>
    %22 = px.mul %20, %21 : tensor<2x4x1x1xf32>, tensor<f32>
    %23 = px.expand %22 : tensor<2x4x1x1xf32> -> tensor<2x4x8x4xf32>
    %24 = px.constant dense<0.000000e+00> : tensor<f32>
    %25 = px.constant dense<0.000000e+00> : tensor<f32>
    %26 = px.greater %9, %25 : tensor<2x4x8x4xf32>, tensor<f32>
    %27 = px.where %26, %23, %24 : tensor<2x4x8x4xi1>, tensor<2x4x8x4xf32>, tensor<f32>
    %28 = px.conv_grad_input %27, %3 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x4xf32>, tensor<4x4x3x3xf32> -> tensor<2x4x8x4xf32>
    %29 = px.conv_grad_filter %7, %27 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32> -> tensor<4x4x3x3xf32>
    %30 = px.add %27, %28 : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
    %31 = px.constant dense<0.000000e+00> : tensor<f32>
    %32 = px.constant dense<0.000000e+00> : tensor<f32>
    %33 = px.greater %6, %32 : tensor<2x4x8x4xf32>, tensor<f32>
    %34 = px.where %33, %30, %31 : tensor<2x4x8x4xi1>, tensor<2x4x8x4xf32>, tensor<f32>
    %35 = px.conv_grad_filter %0, %34 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x2x8x4xf32>, tensor<2x4x8x4xf32> -> tensor<4x2x3x3xf32>
    px.gradient %2, %35 : tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>
    px.gradient %3, %29 : tensor<4x4x3x3xf32>, tensor<4x4x3x3xf32>
    px.gradient %4, %17 : tensor<3x4xf32>, tensor<3x4xf32>
    px.gradient %5, %19 : tensor<3xf32>, tensor<3xf32>
    return %loss : tensor<f32>
  }
}

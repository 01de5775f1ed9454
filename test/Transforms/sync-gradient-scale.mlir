// px-autodiff seeds the backward pass with 1/N on N ranks (px-cluster's
// px.world_size) and records px.gradient_scale; px-sync then sums the
// ranks' shares. IR differentiated without a world size (no
// px.gradient_scale) is averaged as before, and a scale for another world
// size is refused. The loss rides in the (small) first bucket either way,
// scaled by 1/N like its gradient when the bucket sums shares.
// RUN: parallax-opt %s --px-cluster=np=4 --px-autodiff --px-sync=scheme=allreduce | FileCheck %s --check-prefix=SHARES
// RUN: parallax-opt %s --px-autodiff --px-cluster=np=4 --px-sync=scheme=allreduce | FileCheck %s --check-prefix=AVERAGE
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-cluster=np=4 --px-sync=scheme=allreduce 2>&1 | FileCheck %s --check-prefix=OTHER

// SHARES: module attributes {{{.*}}px.gradient_scale = 2.500000e-01 : f64
// SHARES: %[[LOSS:.*]] = px.reduce_mean
// SHARES: %[[Q:.*]] = px.constant dense<2.500000e-01> : tensor<f32>
// SHARES: %[[SHARE:.*]] = px.mul %[[LOSS]], %[[Q]] : tensor<f32>, tensor<f32>
// SHARES: %[[QUARTER:.*]] = px.constant dense<2.500000e-01> : tensor<f32>
// SHARES: px.reshape %[[QUARTER]]
// SHARES: px.all_reduce %{{.*}} on @world grid_axes = [0] bucket = 0 {px.variables = ["w"]}
// SHARES: %[[AVG:.*]] = px.all_reduce %[[SHARE]] on @world grid_axes = [0] bucket = 0 {px.variables = ["(loss)"]}
// SHARES: return %[[AVG]]

// AVERAGE-NOT: px.gradient_scale
// AVERAGE: %[[LOSS:.*]] = px.reduce_mean
// AVERAGE: px.constant dense<1.000000e+00> : tensor<f32>
// AVERAGE: px.all_reduce %{{.*}} on @world grid_axes = [0] reduction = average bucket = 0 {px.variables = ["w"]}
// AVERAGE-NEXT: px.all_reduce %[[LOSS]] on @world grid_axes = [0] reduction = average bucket = 0 {px.variables = ["(loss)"]}

// OTHER: error: px-sync: px.gradient_scale is 5.000000e-01 but 4 ranks need 2.500000e-01 (px-autodiff ran for another world size)
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<8x3xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<3xf32>
    %0 = px.mul %x, %w : tensor<8x3xf32>, tensor<3xf32>
    %1 = px.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x3xf32>
    return %1 : tensor<f32>
  }
}

// px-global-loss-mean alone (after px-cluster): on N batch ranks a mean
// cross entropy with ignore_index or class weights becomes N x its sum
// over the whole batch's count, the count (labels not ignored, weighted by
// their class) all-reduced over the batch axes (N / count taken as 0 where
// the count is 0); a loss whose lines always
// count the same (no ignore_index, no weights) is left as it is, and so is
// everything on one batch rank. The count comes right after the labels,
// so that its all-reduce can run during the forward pass.
// RUN: parallax-opt %s --split-input-file --px-cluster=np=4 --px-global-loss-mean | FileCheck %s
// RUN: parallax-opt %s --split-input-file --px-cluster="np=4 model-ranks=2" --px-global-loss-mean | FileCheck %s --check-prefix=GRID
// RUN: parallax-opt %s --split-input-file --px-cluster="np=4 model-ranks=4" --px-global-loss-mean | FileCheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @main
// CHECK: %[[L:.*]] = px.input "y"
// CHECK-NEXT: px.constant
// CHECK-NEXT: %[[IGN:.*]] = px.equal %[[L]], %{{.*}} : tensor<8xi64>, tensor<i64>
// CHECK: %[[ONES:.*]] = px.where %[[IGN]], %{{.*}}, %{{.*}} : tensor<8xi1>, tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[C:.*]] = px.reduce_sum %[[ONES]] {axes = array<i64: 0>, keepdims = false} : tensor<8xf32>
// CHECK-NEXT: %[[COUNT:.*]] = px.all_reduce %[[C]] on @world grid_axes = [0] : tensor<f32>
// CHECK: %[[LOSS:.*]], %{{.*}} = px.softmax_cross_entropy_loss %{{.*}}, %[[L]] {ignore_index = -100 : i64, reduction = "sum"} : tensor<8x5xf32>, tensor<8xi64>
// CHECK-NEXT: %[[N:.*]] = px.constant dense<4.000000e+00> : tensor<f32>
// CHECK: %[[Q:.*]] = px.div %[[N]], %[[COUNT]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[SCALE:.*]] = px.where %{{.*}}, %{{.*}}, %[[Q]] : tensor<i1>, tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = px.mul %[[LOSS]], %[[SCALE]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: return %[[MEAN]]

// GRID-LABEL: func.func @main
// GRID: px.all_reduce %{{.*}} on @world grid_axes = [0] : tensor<f32>
// GRID: px.constant dense<2.000000e+00> : tensor<f32>

// ONE-LABEL: func.func @main
// ONE-NOT: px.all_reduce
// ONE: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : tensor<8x5xf32>, tensor<8xi64>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<8x3xf32> batched
    %y = px.input "y" : tensor<8xi64> batched
    %w = px.variable "w" trainable = dense<0.1> : tensor<3x5xf32>
    %s = px.matmul %x, %w : tensor<8x3xf32>, tensor<3x5xf32>
    %loss, %lp = px.softmax_cross_entropy_loss %s, %y {ignore_index = -100 : i64} : tensor<8x5xf32>, tensor<8xi64>
    return %loss : tensor<f32>
  }
}

// -----

// A negative log likelihood with class weights and no ignore_index: the
// count is the sum of the labels' class weights.
// CHECK-LABEL: func.func @main
// CHECK: %[[WL:.*]] = px.gather %[[CW:.*]][%[[L:.*]]] : tensor<5xf32>, tensor<8xi64>
// CHECK-NEXT: %[[C:.*]] = px.reduce_sum %[[WL]] {axes = array<i64: 0>, keepdims = false} : tensor<8xf32>
// CHECK-NEXT: %[[COUNT:.*]] = px.all_reduce %[[C]] on @world grid_axes = [0] : tensor<f32>
// CHECK: %[[LOSS:.*]] = px.nll_loss %{{.*}}, %[[L]], %[[CW]] {reduction = "sum"}
// CHECK: px.div %{{.*}}, %[[COUNT]]
// CHECK: px.mul %[[LOSS]], %{{.*}} : tensor<f32>, tensor<f32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<8x5xf32> batched
    %y = px.input "y" : tensor<8xi64> batched
    %cw = px.constant dense<[1.0, 2.0, 1.0, 0.5, 1.0]> : tensor<5xf32>
    %w = px.variable "w" trainable = dense<0.1> : tensor<5xf32>
    %s = px.add %x, %w : tensor<8x5xf32>, tensor<5xf32>
    %lp = px.log_softmax %s {axis = 1 : i64} : tensor<8x5xf32>
    %loss = px.nll_loss %lp, %y, %cw : tensor<8x5xf32>, tensor<8xi64>, tensor<5xf32>
    return %loss : tensor<f32>
  }
}

// -----

// Lines that always count the same: the mean of the ranks' means is the
// whole batch's, nothing to do.
// CHECK-LABEL: func.func @main
// CHECK-NOT: px.all_reduce
// CHECK: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}} : tensor<8x5xf32>, tensor<8xi64>
// CHECK-NOT: px.all_reduce
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<8x3xf32> batched
    %y = px.input "y" : tensor<8xi64> batched
    %w = px.variable "w" trainable = dense<0.1> : tensor<3x5xf32>
    %s = px.matmul %x, %w : tensor<8x3xf32>, tensor<3x5xf32>
    %loss, %lp = px.softmax_cross_entropy_loss %s, %y : tensor<8x5xf32>, tensor<8xi64>
    return %loss : tensor<f32>
  }
}

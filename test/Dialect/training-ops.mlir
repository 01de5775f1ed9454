// Round trip of the training ops: backward kernels, the gradient marker,
// state writes and optimizer updates print and parse back unchanged.
// RUN: parallax-opt %s | parallax-opt | FileCheck %s

// CHECK-LABEL: func.func @backward
func.func @backward(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>,
                    %dy: tensor<2x4x8x8xf32>, %p: tensor<2x3x4x4xf32>,
                    %sm: tensor<4x5xf32>, %ids: tensor<4xi64>,
                    %nllin: tensor<4x5xf32>, %scale: tensor<5xf32>,
                    %stats: tensor<4x1xf32>, %mask: tensor<4x5xi1>,
                    %bnx: tensor<2x3x8x8xf32>, %c3: tensor<3xf32>) {
  // CHECK: px.conv_grad_input %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  %0 = px.conv_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  // CHECK: px.conv_grad_filter {{.*}} : tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x3x3x3xf32>
  %1 = px.conv_grad_filter %x, %dy {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x3x3x3xf32>
  // CHECK: px.max_pool_grad {{.*}} : tensor<2x3x8x8xf32>, tensor<2x3x4x4xf32>
  %2 = px.max_pool_grad %x, %p {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x3x4x4xf32>
  // CHECK: px.avg_pool_grad {{.*}}count_include_pad{{.*}} : tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  %3 = px.avg_pool_grad %p {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, count_include_pad} : tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
  // CHECK: px.softmax_grad {{.*}} {axis = 1 : i64} : tensor<4x5xf32>
  %4 = px.softmax_grad %sm, %sm {axis = 1 : i64} : tensor<4x5xf32>
  // CHECK: px.log_softmax_grad {{.*}} : tensor<4x5xf32>
  %5 = px.log_softmax_grad %sm, %sm : tensor<4x5xf32>
  %one = px.constant dense<1.0> : tensor<f32>
  // CHECK: px.softmax_cross_entropy_loss_grad {{.*}} {ignore_index = -100 : i64} : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>
  %6 = px.softmax_cross_entropy_loss_grad %one, %sm, %ids {ignore_index = -100 : i64} : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>
  // CHECK: px.nll_loss_grad {{.*}} {reduction = "sum"} : tensor<f32>, tensor<4xi64>, tensor<5xf32> -> tensor<4x5xf32>
  %7 = px.nll_loss_grad %one, %ids, %scale {reduction = "sum"} : tensor<f32>, tensor<4xi64>, tensor<5xf32> -> tensor<4x5xf32>
  // CHECK: px.layer_norm_grad {{.*}} : tensor<4x5xf32>, tensor<5xf32>, tensor<4x1xf32>
  %8:3 = px.layer_norm_grad %sm, %nllin, %scale, %stats, %stats : tensor<4x5xf32>, tensor<5xf32>, tensor<4x1xf32>
  // CHECK: px.batch_norm_grad {{.*}} : tensor<2x3x8x8xf32>, tensor<3xf32>
  %9:3 = px.batch_norm_grad %bnx, %bnx, %c3 : tensor<2x3x8x8xf32>, tensor<3xf32>
  // CHECK: px.dropout_grad {{.*}} {ratio = 1.000000e-01 : f32} : tensor<4x5xf32>, tensor<4x5xi1>
  %10 = px.dropout_grad %sm, %mask {ratio = 0.1 : f32} : tensor<4x5xf32>, tensor<4x5xi1>
  // CHECK: px.scatter_add %{{.*}} at %{{.*}} : tensor<4x5xf32>, tensor<4xi64> -> tensor<10x5xf32>
  %11 = px.scatter_add %sm at %ids : tensor<4x5xf32>, tensor<4xi64> -> tensor<10x5xf32>
  %idx2 = px.constant dense<[[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]]> : tensor<4x5xi64>
  // CHECK: px.scatter_elements_add {{.*}} {axis = 1 : i64} : tensor<4x5xf32>, tensor<4x5xi64> -> tensor<4x7xf32>
  %12 = px.scatter_elements_add %sm at %idx2 {axis = 1 : i64} : tensor<4x5xf32>, tensor<4x5xi64> -> tensor<4x7xf32>
  // CHECK: px.slice_grad %{{.*}} starts = [1, 0] steps = [2, 1] : tensor<4x5xf32> -> tensor<8x5xf32>
  %13 = px.slice_grad %sm starts = [1, 0] steps = [2, 1] : tensor<4x5xf32> -> tensor<8x5xf32>
  return
}

// CHECK-LABEL: func.func @updates
func.func @updates(%g: tensor<4x5xf32>, %rows: tensor<3x5xf32>, %ids: tensor<3xi64>) {
  %w = px.variable "w" trainable = dense<0.5> : tensor<4x5xf32>
  %m = px.variable "w:adam.m" = dense<0.0> : tensor<4x5xf32>
  %v = px.variable "w:adam.v" = dense<0.0> : tensor<4x5xf32>
  %e = px.variable "e" trainable = dense<0.5> : tensor<10x5xf32>
  %s = px.variable "e:adagrad.sum" = dense<0.0> : tensor<10x5xf32>
  %stat = px.variable "bn.running_mean" = dense<0.0> : tensor<4x5xf32>
  %sg = px.make_sparse_grad %ids, %rows : tensor<3xi64>, tensor<3x5xf32> -> !px.sparse_grad<3, tensor<10x5xf32>>
  // CHECK: px.gradient %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<4x5xf32>
  px.gradient %w, %g : tensor<4x5xf32>, tensor<4x5xf32>
  // CHECK: px.gradient %{{.*}}, %{{.*}} : tensor<10x5xf32>, !px.sparse_grad<3, tensor<10x5xf32>>
  px.gradient %e, %sg : tensor<10x5xf32>, !px.sparse_grad<3, tensor<10x5xf32>>
  // CHECK: px.sgd {{.*}} {lr = 1.000000e-01 : f64} : tensor<4x5xf32>, tensor<4x5xf32>
  px.sgd %w, %g {lr = 0.1 : f64} : tensor<4x5xf32>, tensor<4x5xf32>
  // CHECK: px.momentum {{.*}} {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov} : tensor<4x5xf32>, tensor<4x5xf32>
  px.momentum %w, %m, %g {lr = 0.1 : f64, momentum = 0.9 : f64, nesterov} : tensor<4x5xf32>, tensor<4x5xf32>
  // CHECK: px.adam {{.*}}weight_decay = 1.000000e-02 : f64} : tensor<4x5xf32>, tensor<4x5xf32>
  px.adam %w, %m, %v, %g {lr = 0.001 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4x5xf32>, tensor<4x5xf32>
  // CHECK: px.adagrad {{.*}} : tensor<10x5xf32>, !px.sparse_grad<3, tensor<10x5xf32>>
  px.adagrad %e, %s, %sg {lr = 0.01 : f64, epsilon = 1.0e-10 : f64} : tensor<10x5xf32>, !px.sparse_grad<3, tensor<10x5xf32>>
  // CHECK: px.assign {{.*}} : tensor<4x5xf32>
  px.assign %stat, %g : tensor<4x5xf32>
  return
}

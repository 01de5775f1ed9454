// Every verifier error of the training ops.
// RUN: parallax-opt %s --split-input-file --verify-diagnostics

func.func @conv_grad_input_shape(%dy: tensor<2x4x7x7xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'px.conv_grad_input' op dy must have the forward output shape 2x4x8x8, got 2x4x7x7}}
  %0 = px.conv_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x4x7x7xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @conv_grad_input_groups(%dy: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'px.conv_grad_input' op channels do not match: input has 6, w is 4x3x3x3, group 1}}
  %0 = px.conv_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x6x8x8xf32>
  return
}

// -----

func.func @conv_grad_input_rank(%dy: tensor<2x4x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'px.conv_grad_input' op dy, w and dx must have the same rank}}
  %0 = px.conv_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x4x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @conv_grad_input_elem(%dy: tensor<2x4x8x8xf64>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'px.conv_grad_input' op operands and results must share one element type}}
  %0 = px.conv_grad_input %dy, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x4x8x8xf64>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @conv_grad_filter_window(%x: tensor<2x3x8x8xf32>, %dy: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{expected 2 strides, got 1}}
  %0 = px.conv_grad_filter %x, %dy {strides = array<i64: 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x3x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_shape(%x: tensor<2x3x8x8xf32>, %dy: tensor<2x3x3x3xf32>) {
  // expected-error @+1 {{'px.max_pool_grad' op dy must have the forward output shape 2x3x4x4, got 2x3x3x3}}
  %0 = px.max_pool_grad %x, %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x3x3x3xf32>
  return
}

// -----

func.func @avg_pool_grad_rank(%dy: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.avg_pool_grad' op needs tensors [N, C, spatial...], got 2x3}}
  %0 = px.avg_pool_grad %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @softmax_grad_axis(%y: tensor<4x5xf32>) {
  // expected-error @+1 {{'px.softmax_grad' op axis 2 is out of range for rank 2}}
  %0 = px.softmax_grad %y, %y {axis = 2 : i64} : tensor<4x5xf32>
  return
}

// -----

func.func @sce_grad_labels(%lp: tensor<4x5xf32>, %labels: tensor<5xi64>) {
  %one = px.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'px.softmax_cross_entropy_loss_grad' op labels must have shape 4}}
  %0 = px.softmax_cross_entropy_loss_grad %one, %lp, %labels : tensor<f32>, tensor<4x5xf32>, tensor<5xi64>
  return
}

// -----

func.func @sce_grad_dloss(%lp: tensor<4x5xf32>, %labels: tensor<4xi64>) {
  %one = px.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'px.softmax_cross_entropy_loss_grad' op dloss must have the loss's shape 4, got scalar}}
  %0 = px.softmax_cross_entropy_loss_grad %one, %lp, %labels {reduction = "none"} : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>
  return
}

// -----

func.func @sce_grad_reduction(%lp: tensor<4x5xf32>, %labels: tensor<4xi64>) {
  %one = px.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'px.softmax_cross_entropy_loss_grad' op reduction must be none, sum or mean, got 'max'}}
  %0 = px.softmax_cross_entropy_loss_grad %one, %lp, %labels {reduction = "max"} : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>
  return
}

// -----

func.func @nll_grad_weight(%labels: tensor<4xi64>, %w: tensor<4xf32>) {
  %one = px.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'px.nll_loss_grad' op weights must have shape [5]}}
  %0 = px.nll_loss_grad %one, %labels, %w : tensor<f32>, tensor<4xi64>, tensor<4xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @layer_norm_grad_stats(%x: tensor<4x5xf32>, %s: tensor<5xf32>, %m: tensor<4x5xf32>) {
  // expected-error @+1 {{'px.layer_norm_grad' op mean and inv_std_dev must have shape 4x1}}
  %0:3 = px.layer_norm_grad %x, %x, %s, %m, %m : tensor<4x5xf32>, tensor<5xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<4x5xf32>, %s: tensor<3xf32>, %m: tensor<4x1xf32>) {
  // expected-error @+1 {{'px.layer_norm_grad' op scale of shape 3 does not broadcast to 5}}
  %0:3 = px.layer_norm_grad %x, %x, %s, %m, %m : tensor<4x5xf32>, tensor<3xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @batch_norm_grad_scale(%x: tensor<2x3x4x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'px.batch_norm_grad' op scale must have shape [3]}}
  %0:3 = px.batch_norm_grad %x, %x, %s : tensor<2x3x4x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @scatter_add_shape(%u: tensor<4x6xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'px.scatter_add' op updates must have shape 4x5}}
  %0 = px.scatter_add %u at %i : tensor<4x6xf32>, tensor<4xi64> -> tensor<10x5xf32>
  return
}

// -----

func.func @scatter_add_axis(%u: tensor<4x5xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'px.scatter_add' op axis 2 is out of range for rank 2}}
  %0 = px.scatter_add %u at %i {axis = 2 : i64} : tensor<4x5xf32>, tensor<4xi64> -> tensor<10x5xf32>
  return
}

// -----

func.func @scatter_elements_add_shape(%u: tensor<4x5xf32>, %i: tensor<4x4xi64>) {
  // expected-error @+1 {{'px.scatter_elements_add' op updates and indices must have the same shape}}
  %0 = px.scatter_elements_add %u at %i : tensor<4x5xf32>, tensor<4x4xi64> -> tensor<4x7xf32>
  return
}

// -----

func.func @slice_grad_fit(%dy: tensor<4x5xf32>) {
  // expected-error @+1 {{'px.slice_grad' op dimension 0 of dy does not fit in dx}}
  %0 = px.slice_grad %dy starts = [1, 0] steps = [2, 1] : tensor<4x5xf32> -> tensor<7x5xf32>
  return
}

// -----

func.func @slice_grad_step(%dy: tensor<4x5xf32>) {
  // expected-error @+1 {{'px.slice_grad' op steps must not be zero}}
  %0 = px.slice_grad %dy starts = [1, 0] steps = [0, 1] : tensor<4x5xf32> -> tensor<8x5xf32>
  return
}

// -----

func.func @gradient_not_variable(%w: tensor<4xf32>) {
  // expected-error @+1 {{'px.gradient' op variable must be the result of a px.variable}}
  px.gradient %w, %w : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @gradient_not_trainable(%g: tensor<4xf32>) {
  %w = px.variable "s" = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.gradient' op variable 's' must be trainable}}
  px.gradient %w, %g : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @gradient_type(%g: tensor<5xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.gradient' op gradient type 'tensor<5xf32>' does not match variable type 'tensor<4xf32>'}}
  px.gradient %w, %g : tensor<4xf32>, tensor<5xf32>
  return
}

// -----

func.func @gradient_sparse_type(%i: tensor<2xi64>, %r: tensor<2x3xf32>) {
  %w = px.variable "e" trainable = dense<0.0> : tensor<10x4xf32>
  %g = px.make_sparse_grad %i, %r : tensor<2xi64>, tensor<2x3xf32> -> !px.sparse_grad<2, tensor<10x3xf32>>
  // expected-error @+1 {{'px.gradient' op sparse gradient of dense type 'tensor<10x3xf32>' does not match variable type 'tensor<10x4xf32>'}}
  px.gradient %w, %g : tensor<10x4xf32>, !px.sparse_grad<2, tensor<10x3xf32>>
  return
}

// -----

func.func @assign_trainable(%v: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.assign' op assigned variable 'w' must be a state (non-trainable) variable}}
  px.assign %w, %v : tensor<4xf32>
  return
}

// -----

func.func @adam_state_trainable(%g: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  %m = px.variable "m" trainable = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.adam' op optimizer state 'm' must be a state (non-trainable) variable}}
  px.adam %w, %m, %m, %g {lr = 0.001 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @adam_beta(%g: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  %m = px.variable "m" = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.adam' op beta2 must be in [0, 1), got 1}}
  px.adam %w, %m, %m, %g {lr = 0.001 : f64, beta1 = 0.9 : f64, beta2 = 1.0 : f64, epsilon = 1.0e-8 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @adam_epsilon(%g: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  %m = px.variable "m" = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.adam' op epsilon must be > 0}}
  px.adam %w, %m, %m, %g {lr = 0.001 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @sgd_lr(%g: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.sgd' op lr must be >= 0}}
  px.sgd %w, %g {lr = -0.1 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @momentum_rate(%g: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  %b = px.variable "b" = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.momentum' op momentum must be in [0, 1), got 1.5}}
  px.momentum %w, %b, %g {lr = 0.1 : f64, momentum = 1.5 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @adagrad_epsilon(%g: tensor<4xf32>) {
  %w = px.variable "w" trainable = dense<0.0> : tensor<4xf32>
  %s = px.variable "s" = dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{'px.adagrad' op epsilon must be > 0}}
  px.adagrad %w, %s, %g {lr = 0.1 : f64, epsilon = -1.0 : f64} : tensor<4xf32>, tensor<4xf32>
  return
}

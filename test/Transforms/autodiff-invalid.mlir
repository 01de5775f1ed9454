// px-autodiff errors.
// RUN: parallax-opt %s --split-input-file --px-autodiff --verify-diagnostics

// expected-error @+1 {{px-autodiff: no function with a px.loss attribute (import a training graph, not an inference one)}}
module {
  func.func @main() -> tensor<4xf32> {
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    return %w : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{px-autodiff: the function is already differentiated}}
  func.func @main() -> tensor<4xf32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    px.gradient %w, %w : tensor<4xf32>, tensor<4xf32>
    return %w : tensor<4xf32>
  }
}

// -----

module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<0.5> : tensor<4x4xf32>
    %sc = px.variable "sc" trainable = dense<0.5> : tensor<4xf32>
    // expected-error @+1 {{'px.layer_norm' op px-autodiff: gradients through the mean or inverse standard deviation outputs of layer_norm are not supported}}
    %y:3 = px.layer_norm %w, %sc : tensor<4x4xf32>, tensor<4xf32>
    %s = px.reduce_sum %y#1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x1xf32>
    return %s : tensor<f32>
  }
}

// -----

// A collective over the model axis of a Pr x Pc grid: its ranks share one
// loss, which the adjoints' sum over ranks would count twice.
module attributes {px.world_size = 4 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 2x2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    // expected-error @+1 {{'px.all_gather' op px-autodiff: a collective over the model axis cannot be differentiated (its ranks share one loss): write it over the batch axes, or leave the model axis to px-shard-model}}
    %g = px.all_gather %w on @world grid_axes = [1] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
    %s = px.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : tensor<8xf32>
    return %s : tensor<f32>
  }
}

// -----

// The whole grid includes the model axis.
module attributes {px.world_size = 4 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 2x2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    // expected-error @+1 {{'px.all_reduce' op px-autodiff: a collective over the model axis cannot be differentiated}}
    %r = px.all_reduce %w on @world : tensor<4xf32>
    %s = px.reduce_sum %r {axes = array<i64: 0>, keepdims = false} : tensor<4xf32>
    return %s : tensor<f32>
  }
}

// -----

module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
    // expected-error @+1 {{'px.all_reduce' op px-autodiff: no gradient rule for an all_reduce of this reduction kind}}
    %r = px.all_reduce %w on @world reduction = product : tensor<4xf32>
    %s = px.reduce_sum %r {axes = array<i64: 0>, keepdims = false} : tensor<4xf32>
    return %s : tensor<f32>
  }
}

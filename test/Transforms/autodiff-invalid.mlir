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

// px-optimizer errors.
// RUN: parallax-opt %s --px-optimizer='kind=rmsprop' --verify-diagnostics --split-input-file
// RUN: not parallax-opt %s --px-optimizer='kind=sgd lr=-1' 2>&1 | FileCheck %s --check-prefix=LR

// LR: error: px-optimizer: lr must be >= 0

// expected-error @+1 {{px-optimizer: unknown optimizer 'rmsprop' (expected sgd, momentum, adam or adagrad)}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %c = px.constant dense<1.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

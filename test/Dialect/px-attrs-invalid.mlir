// The px.* attributes of PxBase.td's discardableAttrs: a value of another
// type, or a px.* name that is not one of them, is a verifier error naming
// the attribute.
// RUN: parallax-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'builtin.module' op unknown px attribute 'px.wrold_size'}}
module attributes {px.wrold_size = 4 : i64} {}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'px.world_size' must be an integer, got "four"}}
module attributes {px.world_size = "four"} {}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'px.gradient_scale' must be a float, got 1 : i64}}
module attributes {px.gradient_scale = 1 : i64} {}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'px.source' must be a string, got ["m.onnx"]}}
module attributes {px.source = ["m.onnx"]} {}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'px.outputs' must be an array of strings, got ["loss", 3]}}
module attributes {px.outputs = ["loss", 3 : i64]} {}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'px.cluster' must be a dictionary, got 3 : i64}}
module attributes {px.cluster = 3 : i64} {}

// -----

// expected-error @+1 {{'func.func' op attribute 'px.loss' must be an integer, got 0.000000e+00 : f64}}
func.func @main() attributes {px.loss = 0.0 : f64} {
  return
}

// -----

func.func @placement() {
  // expected-error @+1 {{'px.variable' op attribute 'px.placement' must be an array<i64>, got [0, 2]}}
  %e = px.variable "e" trainable = dense<5.000000e-01> : tensor<10x5xf32> {px.placement = [0, 2]}
  return
}

// -----

func.func @partition_cost() {
  // expected-error @+1 {{'px.variable' op attribute 'px.partition_cost' must be an array<f64>, got array<i64: 1, 2>}}
  %e = px.variable "e" trainable = dense<5.000000e-01> : tensor<10x5xf32> {px.partition_cost = array<i64: 1, 2>}
  return
}

// -----

func.func @bytes_exact() {
  // expected-error @+1 {{'px.variable' op attribute 'px.bytes_exact' must be a bool, got 1 : i64}}
  %e = px.variable "e" trainable = dense<5.000000e-01> : tensor<10x5xf32> {px.bytes_exact = 1 : i64}
  return
}

// -----

shard.grid @world(shape = 4)
func.func @unknown_on_op(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op unknown px attribute 'px.variable'}}
  %s = px.all_reduce %g on @world {px.variable = ["w"]} : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'px.ranks_per_machine' must be at least 1, got 0 : i64}}
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 0 : i64} {
}

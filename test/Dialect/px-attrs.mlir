// Every px.* attribute the importer and the passes hand to each other
// (PxBase.td's discardableAttrs) verifies with its declared type and prints
// back unchanged; test/Dialect/px-attrs-invalid.mlir has the errors.
// RUN: parallax-opt %s | parallax-opt | FileCheck %s

// Set by the importer, px-cluster, px-autodiff, px-sparsity (with
// --profile-data) and px-sync.
// CHECK: module attributes {px.batchnorm_bytes_per_step = 96 : i64,
// CHECK-SAME: px.cluster = {inter_bandwidth = 1.000000e+09 : f64, inter_latency = 1.000000e-05 : f64, intra_bandwidth = 1.000000e+10 : f64, intra_latency = 2.000000e-06 : f64, update_seconds_per_byte = 1.000000e-10 : f64},
// CHECK-SAME: px.gradient_scale = 2.500000e-01 : f64, px.graph = "g", px.opset = 17 : i64,
// CHECK-SAME: px.outputs = ["loss", "logits"], px.profile_data = "data", px.profile_steps = 3 : i64,
// CHECK-SAME: px.ranks_per_machine = 2 : i64, px.source = "m.onnx", px.world_size = 4 : i64}
module attributes {px.source = "m.onnx", px.opset = 17 : i64, px.graph = "g", px.outputs = ["loss", "logits"], px.world_size = 4 : i64, px.ranks_per_machine = 2 : i64, px.cluster = {inter_bandwidth = 1.0e9 : f64, inter_latency = 1.0e-5 : f64, intra_bandwidth = 1.0e10 : f64, intra_latency = 2.0e-6 : f64, update_seconds_per_byte = 1.0e-10 : f64}, px.gradient_scale = 0.25 : f64, px.profile_data = "data", px.profile_steps = 3 : i64, px.batchnorm_bytes_per_step = 96 : i64} {
  shard.grid @world(shape = 4)
  // CHECK: func.func @main({{.*}}) -> tensor<4x5xf32> attributes {px.loss = 0 : i64}
  func.func @main(%g: tensor<4x5xf32>) -> tensor<4x5xf32> attributes {px.loss = 0 : i64} {
    // px-sparsity, px-partition and px-sync on a variable.
    // CHECK: px.variable "e" trainable = dense<5.000000e-01> : tensor<10x5xf32> {px.access = "sparse",
    // CHECK-SAME: px.alpha = 3.000000e-01 : f64, px.alpha_source = "bound", px.bytes_exact = false,
    // CHECK-SAME: px.bytes_per_step = 104 : i64, px.bytes_profiled = array<i64: 300, 310, 290, 305>,
    // CHECK-SAME: px.bytes_source = "profile", px.partition_cost = array<f64: 1.000000e-03, 2.000000e-05>,
    // CHECK-SAME: px.partitions = 2 : i64, px.placement = array<i64: 0, 2>, px.rows_per_step = 3 : i64, px.sync = "ps"}
    %e = px.variable "e" trainable = dense<5.000000e-01> : tensor<10x5xf32> {px.access = "sparse", px.rows_per_step = 3 : i64, px.alpha = 0.3 : f64, px.alpha_source = "bound", px.partitions = 2 : i64, px.placement = array<i64: 0, 2>, px.partition_cost = array<f64: 1.0e-3, 2.0e-5>, px.sync = "ps", px.bytes_per_step = 104 : i64, px.bytes_exact = false, px.bytes_source = "profile", px.bytes_profiled = array<i64: 300, 310, 290, 305>}
    // CHECK: px.variable "e:adam.m" = dense<0.000000e+00> : tensor<10x5xf32> {px.optimizer_state_of = "e"}
    %m = px.variable "e:adam.m" = dense<0.000000e+00> : tensor<10x5xf32> {px.optimizer_state_of = "e"}
    // CHECK: px.all_reduce %{{.*}} on @world bucket = 0 {px.variables = ["w", "(loss)"]} : tensor<4x5xf32>
    %s = px.all_reduce %g on @world bucket = 0 {px.variables = ["w", "(loss)"]} : tensor<4x5xf32>
    return %s : tensor<4x5xf32>
  }
}

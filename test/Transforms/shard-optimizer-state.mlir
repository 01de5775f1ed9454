// px-shard-optimizer-state: the states of a sharded bucket's updates become
// one block each (ZeRO stage 1), named after the bucket's variable block; a
// bucket whose states start from different values keeps them whole.
// RUN: parallax-opt %s --split-input-file --px-shard-optimizer-state | FileCheck %s
// Run again on its own output, it changes nothing (the names stay).
// RUN: parallax-opt %s --split-input-file --px-shard-optimizer-state | parallax-opt --split-input-file --px-shard-optimizer-state | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = px.variable "w" trainable
// CHECK-NEXT: %[[M:.*]] = px.variable "optimizer state 0 of variable block 0 (w:adam.m...)" = dense<0.000000e+00> : tensor<32xf32> {px.optimizer_state_of = "w"}
// CHECK-NEXT: %[[V:.*]] = px.variable "optimizer state 1 of variable block 0 (w:adam.v...)" = dense<0.000000e+00> : tensor<32xf32> {px.optimizer_state_of = "w"}
// CHECK-NOT: adam.m"
// CHECK-NOT: adam.v"
// CHECK: px.adam %[[W]], %[[M]], %[[V]], %{{.*}} {{{.*}}shard_state{{.*}}} : tensor<8x8xf32>, tensor<8x8xf32> state tensor<32xf32>
// CHECK-NEXT: px.adam %{{.*}}, %[[M]], %[[V]], %{{.*}} {{{.*}}shard_state{{.*}}} : tensor<4xf32>, tensor<4xf32> state tensor<32xf32>
module attributes {px.world_size = 4 : i64} {
  shard.grid @world(shape = 4)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<1.0> : tensor<8x8xf32>
    %wm = px.variable "w:adam.m" = dense<0.0> : tensor<8x8xf32> {px.optimizer_state_of = "w"}
    %wv = px.variable "w:adam.v" = dense<0.0> : tensor<8x8xf32> {px.optimizer_state_of = "w"}
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %bm = px.variable "b:adam.m" = dense<0.0> : tensor<4xf32> {px.optimizer_state_of = "b"}
    %bv = px.variable "b:adam.v" = dense<0.0> : tensor<4xf32> {px.optimizer_state_of = "b"}
    %x = px.input "x" : tensor<8x8xf32>
    %y = px.input "y" : tensor<4xf32>
    %l = px.constant dense<0.5> : tensor<f32>
    %gw = px.mul %x, %w : tensor<8x8xf32>, tensor<8x8xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %rw = px.all_reduce %gw on @world reduction = average bucket = 0 {in_place, offset = 0 : i64, shard_bytes = 128 : i64, shard_update} : tensor<8x8xf32>
    %rb = px.all_reduce %gb on @world reduction = average bucket = 0 {in_place, offset = 256 : i64, shard_bytes = 128 : i64, shard_update} : tensor<4xf32>
    px.adam %w, %wm, %wv, %rw {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, lr = 0.001 : f64, grid = @world, shard_bytes = 128 : i64, shard_offset = 0 : i64} : tensor<8x8xf32>, tensor<8x8xf32>
    px.adam %b, %bm, %bv, %rb {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, lr = 0.001 : f64, grid = @world, shard_bytes = 128 : i64, shard_offset = 256 : i64} : tensor<4xf32>, tensor<4xf32>
    px.all_gather_variables %w, %b on @world offsets = [0, 256] shard_bytes = 128 : tensor<8x8xf32>, tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// Adagrad sums starting from different values stay whole.
// CHECK-LABEL: func.func @main
// CHECK: px.variable "w:adagrad.sum"
// CHECK: px.variable "b:adagrad.sum"
// CHECK-NOT: shard_state
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<1.0> : tensor<4xf32>
    %ws = px.variable "w:adagrad.sum" = dense<0.0> : tensor<4xf32> {px.optimizer_state_of = "w"}
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %bs = px.variable "b:adagrad.sum" = dense<0.5> : tensor<4xf32> {px.optimizer_state_of = "b"}
    %y = px.input "y" : tensor<4xf32>
    %l = px.constant dense<0.5> : tensor<f32>
    %gw = px.mul %y, %w : tensor<4xf32>, tensor<4xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %rw = px.all_reduce %gw on @world bucket = 0 {in_place, offset = 0 : i64, shard_bytes = 64 : i64, shard_update} : tensor<4xf32>
    %rb = px.all_reduce %gb on @world bucket = 0 {in_place, offset = 64 : i64, shard_bytes = 64 : i64, shard_update} : tensor<4xf32>
    px.adagrad %w, %ws, %rw {epsilon = 1.0e-10 : f64, lr = 0.1 : f64, grid = @world, shard_bytes = 64 : i64, shard_offset = 0 : i64} : tensor<4xf32>, tensor<4xf32>
    px.adagrad %b, %bs, %rb {epsilon = 1.0e-10 : f64, lr = 0.1 : f64, grid = @world, shard_bytes = 64 : i64, shard_offset = 64 : i64} : tensor<4xf32>, tensor<4xf32>
    px.all_gather_variables %w, %b on @world offsets = [0, 64] shard_bytes = 64 : tensor<4xf32>, tensor<4xf32>
    return %l : tensor<f32>
  }
}

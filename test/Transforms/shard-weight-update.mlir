// px-shard-weight-update: an in-place bucket whose every result feeds only
// a dense update that is its variable's last reader is reduce-scattered
// (`shard_update`, padded to G blocks of `shard_bytes`), each update works
// on its block (`shard_offset`: the gradient's offset in the bucket), and a
// px.all_gather_variables after the last update hands the blocks round.
// RUN: parallax-opt %s --split-input-file --px-shard-weight-update=min-ranks=2 | FileCheck %s
// Groups below min-ranks, and groups across machines, keep the all-reduce.
// RUN: parallax-opt %s --split-input-file --px-shard-weight-update=min-ranks=8 | FileCheck %s --check-prefix=WHOLE
// RUN: parallax-opt %s --split-input-file --px-shard-weight-update='min-ranks=2 across-machines=true' | FileCheck %s --check-prefix=ACROSS

// A bucket of 64 + 256 bytes over 4 ranks: blocks of 128 bytes.
// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = px.variable "w"
// CHECK: %[[B:.*]] = px.variable "b"
// CHECK: px.all_reduce %{{.*}} on @world grid_axes = [0] reduction = {{ *}}average bucket = 0 {in_place, offset = 0 : i64, px.variables = ["b"], shard_bytes = 128 : i64, shard_update}
// CHECK-NEXT: px.all_reduce %{{.*}} on @world grid_axes = [0] reduction = {{ *}}average bucket = 0 {in_place, offset = 64 : i64, px.variables = ["w"], shard_bytes = 128 : i64, shard_update}
// CHECK-NEXT: px.sgd %[[B]], %{{.*}} {grid = @world, grid_axes = array<i16: 0>, lr = 1.000000e-01 : f64, shard_bytes = 128 : i64, shard_offset = 0 : i64}
// CHECK-NEXT: px.sgd %[[W]], %{{.*}} {grid = @world, grid_axes = array<i16: 0>, lr = 1.000000e-01 : f64, shard_bytes = 128 : i64, shard_offset = 64 : i64}
// CHECK-NEXT: px.all_gather_variables %[[B]], %[[W]] on @world grid_axes = [0] offsets = [0, 64] shard_bytes = 128 {px.variables = ["b", "w"]} : tensor<4xf32>, tensor<8x8xf32>
// CHECK-NEXT: return
// WHOLE-NOT: shard_
// ACROSS-LABEL: func.func @main
// ACROSS: shard_update
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64} {
  shard.grid @world(shape = 4)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<1.0> : tensor<8x8xf32>
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %x = px.input "x" : tensor<8x8xf32>
    %y = px.input "y" : tensor<4xf32>
    %l = px.constant dense<0.5> : tensor<f32>
    %gw = px.mul %x, %w : tensor<8x8xf32>, tensor<8x8xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %rb = px.all_reduce %gb on @world grid_axes = [0] reduction = average bucket = 0 {in_place, offset = 0 : i64, px.variables = ["b"]} : tensor<4xf32>
    %rw = px.all_reduce %gw on @world grid_axes = [0] reduction = average bucket = 0 {in_place, offset = 64 : i64, px.variables = ["w"]} : tensor<8x8xf32>
    px.sgd %b, %rb {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    px.sgd %w, %rw {lr = 0.1 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    return %l : tensor<f32>
  }
}

// -----

// Two machines of two ranks: the whole-world group spans them (only
// across-machines shards it); w is read after its update, so its bucket
// cannot be sharded at all.
// CHECK-LABEL: func.func @main
// CHECK-NOT: shard_update
// CHECK: return
// ACROSS-LABEL: func.func @main
// ACROSS: px.all_reduce {{.*}} bucket = 0 {in_place, offset = 0 : i64, shard_bytes = 64 : i64, shard_update}
// ACROSS-NOT: shard_update
// ACROSS: return
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 2 : i64} {
  shard.grid @world(shape = 4)
  func.func @main() -> tensor<4xf32> attributes {px.loss = 0 : i64} {
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %w = px.variable "w" trainable = dense<1.0> : tensor<4xf32>
    %y = px.input "y" : tensor<4xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %gw = px.mul %y, %w : tensor<4xf32>, tensor<4xf32>
    %rb = px.all_reduce %gb on @world bucket = 0 {in_place, offset = 0 : i64} : tensor<4xf32>
    %rw = px.all_reduce %gw on @world bucket = 1 {in_place, offset = 0 : i64} : tensor<4xf32>
    px.sgd %b, %rb {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    px.sgd %w, %rw {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    %r = px.neg %w : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// On a 2x2 grid of two machines of two ranks, a group over axis 1 is one
// machine's ranks (sharded); a group over axis 0 takes one rank of each
// machine (not sharded), though it is no larger than a machine.
// CHECK-LABEL: func.func @main
// CHECK: px.all_reduce {{.*}} grid_axes = [1] bucket = 0 {in_place, offset = 0 : i64, shard_bytes = 64 : i64, shard_update}
// CHECK: px.all_reduce {{.*}} grid_axes = [0] bucket = 1 {in_place, offset = 0 : i64} : tensor<4xf32>
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 2 : i64} {
  shard.grid @g(shape = 2x2)
  func.func @main() -> tensor<4xf32> attributes {px.loss = 0 : i64} {
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %w = px.variable "w" trainable = dense<1.0> : tensor<4xf32>
    %y = px.input "y" : tensor<4xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %gw = px.mul %y, %w : tensor<4xf32>, tensor<4xf32>
    %rb = px.all_reduce %gb on @g grid_axes = [1] bucket = 0 {in_place, offset = 0 : i64} : tensor<4xf32>
    %rw = px.all_reduce %gw on @g grid_axes = [0] bucket = 1 {in_place, offset = 0 : i64} : tensor<4xf32>
    px.sgd %b, %rb {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    px.sgd %w, %rw {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

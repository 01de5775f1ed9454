// px-bucket-in-place: a bucket whose every input is a buffer of its own,
// read by nothing but its all-reduce (directly or through reshapes), gets
// `in_place` and each member its 64-byte aligned offset; the members that
// are read again, variables or a collective's results leave their bucket
// for a staged bucket of their own, so that the rest still lie in place; a
// bucket of one such member, or of mixed element types, keeps its staging
// copy.
// RUN: parallax-opt %s --split-input-file --px-bucket-in-place | FileCheck %s

// CHECK-LABEL: func.func @main
// Bucket 0: %a is read again by the add, so it leaves for a staged bucket
// of its own and %b's bucket lies in place; the buckets are renumbered in
// issue order.
// CHECK: px.all_reduce %{{.*}} on @world bucket = 0 : tensor<4xf32>
// CHECK-NEXT: px.all_reduce %{{.*}} on @world bucket = 1 {in_place, offset = 0 : i64} : tensor<3xf32>
// Bucket 1 (now 2): 20 bytes, then a reshaped 80-byte gradient at 64.
// CHECK: px.all_reduce %{{.*}} on @world bucket = 2 {in_place, offset = 0 : i64} : tensor<5xf32>
// CHECK-NEXT: px.all_reduce %{{.*}} on @world bucket = 2 {in_place, offset = 64 : i64} : tensor<20xf32>
// An all-reduce of its own is a bucket of one.
// CHECK-NEXT: px.all_reduce %{{.*}} on @world reduction = {{ *}}average {in_place, offset = 0 : i64} : tensor<f32>
// A variable is not the step's to lay out.
// CHECK-NEXT: px.all_reduce %{{.*}} on @world bucket = 3 : tensor<5xf32>
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @main() -> (tensor<4xf32>, tensor<3xf32>, tensor<5xf32>, tensor<20xf32>, tensor<f32>, tensor<5xf32>) {
    %x = px.input "x" : tensor<4xf32>
    %y = px.input "y" : tensor<3xf32>
    %z = px.input "z" : tensor<5xf32>
    %w = px.input "w" : tensor<4x5xf32>
    %v = px.variable "v" = dense<1.0> : tensor<5xf32>
    %a = px.neg %x : tensor<4xf32>
    %b = px.exp %y : tensor<3xf32>
    %ra = px.all_reduce %a on @world reduction = sum bucket = 0 : tensor<4xf32>
    %rb = px.all_reduce %b on @world reduction = sum bucket = 0 : tensor<3xf32>
    %d = px.neg %z : tensor<5xf32>
    %e = px.exp %w : tensor<4x5xf32>
    %f = px.reshape %e : tensor<4x5xf32> -> tensor<20xf32>
    %s = px.reduce_sum %z {axes = array<i64: 0>, keepdims = false} : tensor<5xf32>
    %rd = px.all_reduce %d on @world reduction = sum bucket = 1 : tensor<5xf32>
    %rf = px.all_reduce %f on @world reduction = sum bucket = 1 : tensor<20xf32>
    %rs = px.all_reduce %s on @world reduction = average : tensor<f32>
    %rv = px.all_reduce %v on @world bucket = 2 : tensor<5xf32>
    %c = px.add %a, %ra : tensor<4xf32>, tensor<4xf32>
    return %c, %rb, %rd, %rf, %rs, %rv : tensor<4xf32>, tensor<3xf32>, tensor<5xf32>, tensor<20xf32>, tensor<f32>, tensor<5xf32>
  }
}

// -----

// Mixed element types cannot share one buffer.
// CHECK-LABEL: func.func @main
// CHECK: px.all_reduce %{{.*}} on @world bucket = 0 : tensor<4xf32>
// CHECK-NEXT: px.all_reduce %{{.*}} on @world bucket = 0 : tensor<4xf64>
module {
  shard.grid @world(shape = 2)
  func.func @main() -> (tensor<4xf32>, tensor<4xf64>) {
    %x = px.input "x" : tensor<4xf32>
    %y = px.input "y" : tensor<4xf64>
    %a = px.neg %x : tensor<4xf32>
    %b = px.neg %y : tensor<4xf64>
    %ra = px.all_reduce %a on @world bucket = 0 : tensor<4xf32>
    %rb = px.all_reduce %b on @world bucket = 0 : tensor<4xf64>
    return %ra, %rb : tensor<4xf32>, tensor<4xf64>
  }
}

// -----

// A collective's result is read by the wait that joins it too: a bucket of
// it keeps its staging copy (the plan emitter would refuse the layout).
// CHECK-LABEL: func.func @main
// CHECK: px.all_reduce %{{.*}} on @world {in_place, offset = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: px.all_reduce %{{.*}} on @world : tensor<4xf32>
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @main() -> tensor<4xf32> {
    %x = px.input "x" : tensor<4xf32>
    %a = px.neg %x : tensor<4xf32>
    %r1 = px.all_reduce %a on @world : tensor<4xf32>
    %r2 = px.all_reduce %r1 on @world : tensor<4xf32>
    return %r2 : tensor<4xf32>
  }
}

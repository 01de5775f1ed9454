// The plan emitter lowers px-bucket-in-place's layout and checks that the
// plan still fits it: a member that is not a buffer of its own (here a
// variable, which a hand-written `in_place` claims) is refused, naming the
// bucket, instead of reducing the variable's storage in place.
// RUN: not parallax-opt %s --inference --emit=plan -o %t.pxplan 2>&1 | FileCheck %s
// CHECK: error: cannot lay out all-reduce bucket {{.*}}bucket-layout-errors.mlir:{{[0-9]+}}{{.*}} in place: tensor {{[0-9]+}} is not a buffer of its own at offset 0
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @main() -> tensor<4xf32> {
    %v = px.variable "v" = dense<1.0> : tensor<4xf32>
    %r = px.all_reduce %v on @world bucket = 0 {in_place, offset = 0 : i64} : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// px-sync's sharded-variables: the variables whose updates are to be
// sharded fill all-reduce buckets of their own, and the loss rides none of
// them: it rides the first bucket issued that holds none (b's when w is
// named, w's when b is), and goes alone when every bucket is sharded. A
// name that is no all-reduced variable is refused, with the ones that are.
// RUN: parallax-opt %s --px-cluster=np=4 --px-autodiff --px-sync="scheme=allreduce sharded-variables=w" | FileCheck %s
// RUN: parallax-opt %s --px-cluster=np=4 --px-autodiff --px-sync="scheme=allreduce sharded-variables=b" | FileCheck %s --check-prefix=FIRST
// RUN: parallax-opt %s --px-cluster=np=4 --px-autodiff --px-sync="scheme=allreduce sharded-variables=w,b" | FileCheck %s --check-prefix=BOTH
// RUN: not parallax-opt %s --px-cluster=np=4 --px-autodiff --px-sync="scheme=allreduce sharded-variables=v" 2>&1 | FileCheck %s --check-prefix=NAME

// CHECK: px.all_reduce %{{.*}} bucket = 0 {px.variables = ["b"]}
// CHECK-NEXT: px.all_reduce %{{.*}} bucket = 0 {px.variables = ["(loss)"]}
// CHECK: px.all_reduce %{{.*}} bucket = 1 {px.variables = ["w"]}
// FIRST: px.all_reduce %{{.*}} bucket = 0 {px.variables = ["b"]}
// FIRST: px.all_reduce %{{.*}} bucket = 1 {px.variables = ["w"]}
// FIRST-NEXT: px.all_reduce %{{.*}} bucket = 1 {px.variables = ["(loss)"]}
// BOTH: px.all_reduce %{{.*}} bucket = 0 {px.variables = ["b"]}
// BOTH-NEXT: px.all_reduce %{{.*}} bucket = 0 {px.variables = ["w"]}
// BOTH: px.all_reduce %{{.*}} on @world grid_axes = [0] reduction = {{ *}}average {px.variables = ["(loss)"]}
// NAME: error: px-sync: sharded-variables (--shard-weight-update-variables): 'v' is no all-reduced variable of the step (they are: {{.*}}): only an all-reduce bucket's update can be sharded
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<8x3xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<3xf32>
    %b = px.variable "b" trainable = dense<0.5> : tensor<3xf32>
    %0 = px.mul %x, %w : tensor<8x3xf32>, tensor<3xf32>
    %1 = px.add %0, %b : tensor<8x3xf32>, tensor<3xf32>
    %2 = px.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x3xf32>
    return %2 : tensor<f32>
  }
}

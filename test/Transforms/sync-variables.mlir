// px-sync's `variables` fixes one variable's scheme whatever `scheme` says:
// here w goes to the parameter servers while b stays in the all-reduce
// bucket (--sync-variable in parallax-opt). A name that is no trainable
// variable, a scheme that is none, allgatherv for a dense gradient and ps
// for a scalar are refused by name.
// RUN: parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=w=ps" | FileCheck %s
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=v=ps" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=w=gossip" 2>&1 | FileCheck %s --check-prefix=SCHEME
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=w=allgatherv" 2>&1 | FileCheck %s --check-prefix=DENSE
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=s=ps" 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=w" 2>&1 | FileCheck %s --check-prefix=FORM
// RUN: not parallax-opt %s --px-cluster=np=2 --px-autodiff --px-sync="variables=w=ps,w=allreduce" 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK: px.variable "w" {{.*}}px.sync = "ps"
// CHECK: px.ps_pull %{{.*}} on @world grid_axes = [0] partitions = 2
// CHECK: px.variable "s" {{.*}}px.sync = "allreduce"
// CHECK: px.all_reduce {{.*}}px.variables = ["s"]
// CHECK: px.ps_push {{.*}}px.variables = ["w"]

// NAME: error: px-sync: variables (--sync-variable): 'v' is no trainable variable of the step (they are: {{.*}})
// SCHEME: error: px-sync: variables (--sync-variable): unknown scheme 'gossip' for 'w' (expected allreduce, ps or allgatherv)
// DENSE: error: px-sync: variables (--sync-variable): 'w' has a dense gradient; allgatherv gathers row-sparse ones (a table read only through Gather)
// SCALAR: error: px-sync: variables (--sync-variable): 's' is a scalar; ps partitions a variable's rows
// FORM: error: px-sync: variables (--sync-variable): 'w' is not NAME=SCHEME
// TWICE: error: px-sync: variables (--sync-variable): 'w' is named twice
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<8x3xf32> batched
    %w = px.variable "w" trainable = dense<0.5> : tensor<3xf32>
    %s = px.variable "s" trainable = dense<2.0> : tensor<f32>
    %0 = px.mul %x, %w : tensor<8x3xf32>, tensor<3xf32>
    %1 = px.mul %0, %s : tensor<8x3xf32>, tensor<f32>
    %2 = px.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x3xf32>
    return %2 : tensor<f32>
  }
}

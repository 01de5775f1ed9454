// Round trip of every px op: print, re-parse, check. Functions return the
// results of ops whose result types are inferred with an explicit type, so
// a wrong shape rule fails verification of the func.return.
// RUN: parallax-opt %s | parallax-opt | FileCheck %s
// RUN: parallax-opt %s --mlir-print-op-generic | parallax-opt | FileCheck %s
// RUN: parallax-opt %s --mlir-print-op-generic | parallax-opt --mlir-print-op-generic | parallax-opt | FileCheck %s

shard.grid @world(shape = 4)
shard.grid @g(shape = 2x2)

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @leaves
func.func @leaves() -> (tensor<4x4xf32>, tensor<100x8xf32>, tensor<2xi64>,
                        tensor<8x16xf32>, tensor<3xi1>, tensor<f32>, tensor<16xbf16>) {
  // CHECK: px.variable "w" trainable = dense<1.000000e+00> : tensor<4x4xf32>
  %w = px.variable "w" trainable = dense<1.0> : tensor<4x4xf32>
  // CHECK: px.variable "emb" trainable = #px.onnx_initializer<"emb_init"> : tensor<100x8xf32>
  %emb = px.variable "emb" trainable = #px.onnx_initializer<"emb_init"> : tensor<100x8xf32>
  // A variable without `trainable` (running statistics).
  // CHECK: px.variable "steps" = dense<[0, 1]> : tensor<2xi64>
  // CHECK-NOT: trainable
  %steps = px.variable "steps" = dense<[0, 1]> : tensor<2xi64>
  // CHECK: px.variable "mean" = #px.onnx_initializer<"bn.mean"> : tensor<16xbf16> {note = "extra"}
  %mean = px.variable "mean" = #px.onnx_initializer<"bn.mean"> : tensor<16xbf16> {note = "extra"}
  // CHECK: px.input "x" : tensor<8x16xf32>
  %x = px.input "x" : tensor<8x16xf32>
  // CHECK: px.constant dense<[true, false, true]> : tensor<3xi1>
  %c = px.constant dense<[true, false, true]> : tensor<3xi1>
  // CHECK: px.constant dense<2.500000e+00> : tensor<f32>
  %s = px.constant dense<2.5> : tensor<f32>
  // CHECK: px.constant #px.onnx_initializer<"big"> : tensor<4x4xf32>
  %big = px.constant #px.onnx_initializer<"big"> : tensor<4x4xf32>
  return %w, %emb, %steps, %x, %c, %s, %mean
      : tensor<4x4xf32>, tensor<100x8xf32>, tensor<2xi64>, tensor<8x16xf32>,
        tensor<3xi1>, tensor<f32>, tensor<16xbf16>
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @arith
func.func @arith(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>, %i: tensor<4xi32>,
                 %j: tensor<2x4xi32>, %s: tensor<f32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>,
        tensor<2x3x4xf32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x1x4xf32>,
        tensor<2x1x4xf32>, tensor<2x4xi32>) {
  // CHECK: px.add %{{.*}}, %{{.*}} : tensor<2x1x4xf32>, tensor<3x1xf32>
  %0 = px.add %a, %b : tensor<2x1x4xf32>, tensor<3x1xf32>
  // CHECK: px.sub %{{.*}}, %{{.*}} : tensor<3x1xf32>, tensor<2x1x4xf32>
  %1 = px.sub %b, %a : tensor<3x1xf32>, tensor<2x1x4xf32>
  // CHECK: px.mul %{{.*}}, %{{.*}} : tensor<2x1x4xf32>, tensor<3x1xf32>
  %2 = px.mul %a, %b : tensor<2x1x4xf32>, tensor<3x1xf32>
  // CHECK: px.div %{{.*}}, %{{.*}} : tensor<2x1x4xf32>, tensor<3x1xf32>
  %3 = px.div %a, %b : tensor<2x1x4xf32>, tensor<3x1xf32>
  // CHECK: px.max %{{.*}}, %{{.*}} : tensor<4xi32>, tensor<2x4xi32>
  %4 = px.max %i, %j : tensor<4xi32>, tensor<2x4xi32>
  // CHECK: px.min %{{.*}}, %{{.*}} : tensor<2x4xi32>, tensor<4xi32>
  %5 = px.min %j, %i : tensor<2x4xi32>, tensor<4xi32>
  // Scalar broadcast.
  // CHECK: px.mul %{{.*}}, %{{.*}} : tensor<2x1x4xf32>, tensor<f32>
  %6 = px.mul %a, %s : tensor<2x1x4xf32>, tensor<f32>
  // pow: the exponent may have another element type; the base's is kept.
  // CHECK: px.pow %{{.*}}, %{{.*}} : tensor<2x1x4xf32>, tensor<4xi32>
  %7 = px.pow %a, %i : tensor<2x1x4xf32>, tensor<4xi32>
  // CHECK: px.pow %{{.*}}, %{{.*}} : tensor<2x4xi32>, tensor<4xi32>
  %8 = px.pow %j, %i : tensor<2x4xi32>, tensor<4xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8
      : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>,
        tensor<2x3x4xf32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x1x4xf32>,
        tensor<2x1x4xf32>, tensor<2x4xi32>
}

// CHECK-LABEL: func.func @compare
func.func @compare(%a: tensor<2x1xf32>, %b: tensor<3xf32>, %p: tensor<3xi1>,
                   %q: tensor<2x3xi1>, %i: tensor<2x1xi64>, %j: tensor<3xi64>)
    -> (tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>,
        tensor<2x3xi1>) {
  // CHECK: px.equal %{{.*}}, %{{.*}} : tensor<2x1xf32>, tensor<3xf32>
  %0 = px.equal %a, %b : tensor<2x1xf32>, tensor<3xf32>
  // equal accepts booleans.
  // CHECK: px.equal %{{.*}}, %{{.*}} : tensor<3xi1>, tensor<2x3xi1>
  %1 = px.equal %p, %q : tensor<3xi1>, tensor<2x3xi1>
  // CHECK: px.less %{{.*}}, %{{.*}} : tensor<2x1xf32>, tensor<3xf32>
  %2 = px.less %a, %b : tensor<2x1xf32>, tensor<3xf32>
  // CHECK: px.greater %{{.*}}, %{{.*}} : tensor<2x1xf32>, tensor<3xf32>
  %3 = px.greater %a, %b : tensor<2x1xf32>, tensor<3xf32>
  // CHECK: px.less %{{.*}}, %{{.*}} : tensor<2x1xi64>, tensor<3xi64>
  %4 = px.less %i, %j : tensor<2x1xi64>, tensor<3xi64>
  return %0, %1, %2, %3, %4
      : tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>,
        tensor<2x3xi1>
}

// CHECK-LABEL: func.func @where
func.func @where(%c: tensor<5x1x1xi1>, %x: tensor<3x1xf32>, %y: tensor<4xf32>,
                 %ci: tensor<i1>, %xi: tensor<2xi64>)
    -> (tensor<5x3x4xf32>, tensor<2xi64>) {
  // CHECK: px.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<5x1x1xi1>, tensor<3x1xf32>, tensor<4xf32>
  %0 = px.where %c, %x, %y : tensor<5x1x1xi1>, tensor<3x1xf32>, tensor<4xf32>
  // CHECK: px.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<i1>, tensor<2xi64>, tensor<2xi64>
  %1 = px.where %ci, %xi, %xi : tensor<i1>, tensor<2xi64>, tensor<2xi64>
  return %0, %1 : tensor<5x3x4xf32>, tensor<2xi64>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi32>, %b: tensor<4xi1>,
                 %h: tensor<2xf16>) {
  // CHECK: px.neg %{{.*}} : tensor<2x3xf32>
  %0 = px.neg %x : tensor<2x3xf32>
  // CHECK: px.neg %{{.*}} : tensor<4xi32>
  %1 = px.neg %i : tensor<4xi32>
  // CHECK: px.abs %{{.*}} : tensor<4xi32>
  %2 = px.abs %i : tensor<4xi32>
  // CHECK: px.sqrt %{{.*}} : tensor<2x3xf32>
  %3 = px.sqrt %x : tensor<2x3xf32>
  // CHECK: px.reciprocal %{{.*}} : tensor<2x3xf32>
  %4 = px.reciprocal %x : tensor<2x3xf32>
  // CHECK: px.exp %{{.*}} : tensor<2xf16>
  %5 = px.exp %h : tensor<2xf16>
  // CHECK: px.log %{{.*}} : tensor<2x3xf32>
  %6 = px.log %x : tensor<2x3xf32>
  // CHECK: px.relu %{{.*}} : tensor<2x3xf32>
  %7 = px.relu %x : tensor<2x3xf32>
  // CHECK: px.relu %{{.*}} : tensor<4xi32>
  %8 = px.relu %i : tensor<4xi32>
  // CHECK: px.tanh %{{.*}} : tensor<2x3xf32>
  %9 = px.tanh %x : tensor<2x3xf32>
  // CHECK: px.sigmoid %{{.*}} : tensor<2x3xf32>
  %10 = px.sigmoid %x : tensor<2x3xf32>
  // CHECK: px.erf %{{.*}} : tensor<2x3xf32>
  %11 = px.erf %x : tensor<2x3xf32>
  // CHECK: px.not %{{.*}} : tensor<4xi1>
  %12 = px.not %b : tensor<4xi1>
  // CHECK: px.leaky_relu %{{.*}} : tensor<2x3xf32>
  %13 = px.leaky_relu %x : tensor<2x3xf32>
  // CHECK: px.leaky_relu %{{.*}} {alpha = 2.000000e-01 : f32} : tensor<2x3xf32>
  %14 = px.leaky_relu %x {alpha = 0.2 : f32} : tensor<2x3xf32>
  // CHECK: px.clip %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<2x3xf32>
  %15 = px.clip %x {min = 0.0, max = 6.0} : tensor<2x3xf32>
  // CHECK: px.clip %{{.*}} {min = -1.000000e+00 : f64} : tensor<4xi32>
  %16 = px.clip %i {min = -1.0} : tensor<4xi32>
  // CHECK: px.clip %{{.*}} {max = 1.000000e+00 : f64} : tensor<2x3xf32>
  %17 = px.clip %x {max = 1.0} : tensor<2x3xf32>
  // CHECK: px.clip %{{.*}} : tensor<2x3xf32>
  %18 = px.clip %x : tensor<2x3xf32>
  // Equal bounds are allowed.
  // CHECK: px.clip %{{.*}} {max = 2.000000e+00 : f64, min = 2.000000e+00 : f64} : tensor<2x3xf32>
  %19 = px.clip %x {min = 2.0, max = 2.0} : tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @cast
func.func @cast(%x: tensor<2x3xf32>, %b: tensor<4xi1>)
    -> (tensor<2x3xi64>, tensor<4xf16>, tensor<2x3xbf16>, tensor<2x3xf32>) {
  // CHECK: px.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xi64>
  %0 = px.cast %x : tensor<2x3xf32> -> tensor<2x3xi64>
  // CHECK: px.cast %{{.*}} : tensor<4xi1> -> tensor<4xf16>
  %1 = px.cast %b : tensor<4xi1> -> tensor<4xf16>
  // CHECK: px.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xbf16>
  %2 = px.cast %x : tensor<2x3xf32> -> tensor<2x3xbf16>
  // CHECK: px.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = px.cast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3xi64>, tensor<4xf16>, tensor<2x3xbf16>, tensor<2x3xf32>
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @gather
func.func @gather(%emb: tensor<100x8xf32>, %ids: tensor<4x5xi64>,
                  %ids32: tensor<3xi32>, %d: tensor<2x3x4xf32>, %s: tensor<i64>)
    -> (tensor<4x5x8xf32>, tensor<2x3x3xf32>, tensor<2x3xf32>, tensor<2x3x4xf32>) {
  // CHECK: px.gather %{{.*}}[%{{.*}}] : tensor<100x8xf32>, tensor<4x5xi64>
  %0 = px.gather %emb[%ids] : tensor<100x8xf32>, tensor<4x5xi64>
  // CHECK: px.gather %{{.*}}[%{{.*}}] {axis = -1 : i64} : tensor<2x3x4xf32>, tensor<3xi32>
  %1 = px.gather %d[%ids32] {axis = -1 : i64} : tensor<2x3x4xf32>, tensor<3xi32>
  // A scalar index removes the dimension.
  // CHECK: px.gather %{{.*}}[%{{.*}}] {axis = 2 : i64} : tensor<2x3x4xf32>, tensor<i64>
  %2 = px.gather %d[%s] {axis = 2 : i64} : tensor<2x3x4xf32>, tensor<i64>
  // CHECK: px.gather_elements %{{.*}}[%{{.*}}] {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xi64>
  %idx = px.constant dense<0> : tensor<2x3x4xi64>
  %3 = px.gather_elements %d[%idx] {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xi64>
  return %0, %1, %2, %3 : tensor<4x5x8xf32>, tensor<2x3x3xf32>, tensor<2x3xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @gather_elements
func.func @gather_elements(%d: tensor<3x4xf32>, %i: tensor<5x4xi32>) -> tensor<5x4xf32> {
  // The indices may be larger than data off the gather axis (ONNX only
  // requires the same rank).
  // CHECK: px.gather_elements %{{.*}}[%{{.*}}] : tensor<3x4xf32>, tensor<5x4xi32>
  %0 = px.gather_elements %d[%i] : tensor<3x4xf32>, tensor<5x4xi32>
  return %0 : tensor<5x4xf32>
}

// CHECK-LABEL: func.func @slice
func.func @slice(%x: tensor<10x6xf32>) -> (tensor<3x6xf32>, tensor<4x2xf32>, tensor<0x6xf32>) {
  // CHECK: px.slice %{{.*}} starts = [2, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<3x6xf32>
  %0 = px.slice %x starts = [2, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<3x6xf32>
  // Negative steps walk backwards.
  // CHECK: px.slice %{{.*}} starts = [9, 5] steps = [-3, -4] : tensor<10x6xf32> -> tensor<4x2xf32>
  %1 = px.slice %x starts = [9, 5] steps = [-3, -4] : tensor<10x6xf32> -> tensor<4x2xf32>
  // CHECK: px.slice %{{.*}} starts = [10, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<0x6xf32>
  %2 = px.slice %x starts = [10, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<0x6xf32>
  return %0, %1, %2 : tensor<3x6xf32>, tensor<4x2xf32>, tensor<0x6xf32>
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @matmul
func.func @matmul(%m: tensor<3x4xf32>, %n: tensor<4x5xf32>, %v: tensor<4xf32>,
                  %w: tensor<5xf32>, %ba: tensor<2x1x3x4xf32>,
                  %bb: tensor<7x4x5xf32>, %ia: tensor<2x3xi32>, %ib: tensor<3x2xi32>)
    -> (tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<f32>,
        tensor<2x7x3x5xf32>, tensor<7x5xf32>, tensor<2x2xi32>) {
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x5xf32>
  %0 = px.matmul %m, %n : tensor<3x4xf32>, tensor<4x5xf32>
  // 1-D lhs: promoted to 1x4, then the 1 is dropped.
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4x5xf32>
  %1 = px.matmul %v, %n : tensor<4xf32>, tensor<4x5xf32>
  // 1-D rhs.
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4xf32>
  %2 = px.matmul %m, %v : tensor<3x4xf32>, tensor<4xf32>
  // Dot product.
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
  %3 = px.matmul %v, %v : tensor<4xf32>, tensor<4xf32>
  // Batched, with the batch dimensions broadcast.
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<2x1x3x4xf32>, tensor<7x4x5xf32>
  %4 = px.matmul %ba, %bb : tensor<2x1x3x4xf32>, tensor<7x4x5xf32>
  // Batched rhs against a vector.
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<7x4x5xf32>
  %5 = px.matmul %v, %bb : tensor<4xf32>, tensor<7x4x5xf32>
  // CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<3x2xi32>
  %6 = px.matmul %ia, %ib : tensor<2x3xi32>, tensor<3x2xi32>
  return %0, %1, %2, %3, %4, %5, %6
      : tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<f32>,
        tensor<2x7x3x5xf32>, tensor<7x5xf32>, tensor<2x2xi32>
}

// CHECK-LABEL: func.func @gemm
func.func @gemm(%a: tensor<3x4xf32>, %at: tensor<4x3xf32>, %b: tensor<4x5xf32>,
                %bt: tensor<5x4xf32>, %c: tensor<5xf32>, %c2: tensor<3x5xf32>,
                %c0: tensor<f32>)
    -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>,
        tensor<3x5xf32>) {
  // CHECK: px.gemm %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x5xf32>
  %0 = px.gemm %a, %b : tensor<3x4xf32>, tensor<4x5xf32>
  // CHECK: px.gemm %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>
  %1 = px.gemm %a, %b, %c : tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>
  // CHECK: px.gemm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, trans_a, trans_b} : tensor<4x3xf32>, tensor<5x4xf32>, tensor<3x5xf32>
  %2 = px.gemm %at, %bt, %c2 {alpha = 0.5 : f32, beta = 2.0 : f32, trans_a, trans_b}
      : tensor<4x3xf32>, tensor<5x4xf32>, tensor<3x5xf32>
  // CHECK: px.gemm %{{.*}}, %{{.*}} {trans_a} : tensor<4x3xf32>, tensor<4x5xf32>
  %3 = px.gemm %at, %b {trans_a} : tensor<4x3xf32>, tensor<4x5xf32>
  // CHECK: px.gemm %{{.*}}, %{{.*}}, %{{.*}} {trans_b} : tensor<3x4xf32>, tensor<5x4xf32>, tensor<f32>
  %4 = px.gemm %a, %bt, %c0 {trans_b} : tensor<3x4xf32>, tensor<5x4xf32>, tensor<f32>
  return %0, %1, %2, %3, %4
      : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>,
        tensor<3x5xf32>
}

//===----------------------------------------------------------------------===//
// Normalisation, activations with an axis, losses
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @softmax
func.func @softmax(%x: tensor<2x10xf32>) -> (tensor<2x10xf32>, tensor<2x10xf32>, tensor<2x10xf32>) {
  // CHECK: px.softmax %{{.*}} : tensor<2x10xf32>
  %0 = px.softmax %x : tensor<2x10xf32>
  // CHECK: px.log_softmax %{{.*}} {axis = 0 : i64} : tensor<2x10xf32>
  %1 = px.log_softmax %x {axis = 0 : i64} : tensor<2x10xf32>
  // CHECK: px.softmax %{{.*}} {axis = -2 : i64} : tensor<2x10xf32>
  %2 = px.softmax %x {axis = -2 : i64} : tensor<2x10xf32>
  return %0, %1, %2 : tensor<2x10xf32>, tensor<2x10xf32>, tensor<2x10xf32>
}

// CHECK-LABEL: func.func @losses
func.func @losses(%scores: tensor<8x10xf32>, %labels: tensor<8xi64>,
                  %w: tensor<10xf32>, %s3: tensor<8x10x5xf32>,
                  %l3: tensor<8x5xi32>)
    -> (tensor<f32>, tensor<8x10xf32>, tensor<8x5xf32>, tensor<8x10x5xf32>,
        tensor<f32>, tensor<f32>, tensor<8x5xf32>) {
  // CHECK: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}} : tensor<8x10xf32>, tensor<8xi64>
  %loss, %logp = px.softmax_cross_entropy_loss %scores, %labels : tensor<8x10xf32>, tensor<8xi64>
  // CHECK: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = "none"} : tensor<8x10x5xf32>, tensor<8x5xi32>, tensor<10xf32>
  %l2, %lp2 = px.softmax_cross_entropy_loss %s3, %l3, %w {reduction = "none", ignore_index = -100 : i64}
      : tensor<8x10x5xf32>, tensor<8x5xi32>, tensor<10xf32>
  // CHECK: px.nll_loss %{{.*}}, %{{.*}} {reduction = "sum"} : tensor<8x10xf32>, tensor<8xi64>
  %n0 = px.nll_loss %logp, %labels {reduction = "sum"} : tensor<8x10xf32>, tensor<8xi64>
  // CHECK: px.nll_loss %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : tensor<8x10xf32>, tensor<8xi64>, tensor<10xf32>
  %n1 = px.nll_loss %logp, %labels, %w {ignore_index = 0 : i64} : tensor<8x10xf32>, tensor<8xi64>, tensor<10xf32>
  // CHECK: px.nll_loss %{{.*}}, %{{.*}} {reduction = "none"} : tensor<8x10x5xf32>, tensor<8x5xi32>
  %n2 = px.nll_loss %s3, %l3 {reduction = "none"} : tensor<8x10x5xf32>, tensor<8x5xi32>
  return %loss, %logp, %l2, %lp2, %n0, %n1, %n2
      : tensor<f32>, tensor<8x10xf32>, tensor<8x5xf32>, tensor<8x10x5xf32>,
        tensor<f32>, tensor<f32>, tensor<8x5xf32>
}

// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>,
                      %s2: tensor<3x4xf32>, %s1: tensor<1x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>,
        tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>,
        tensor<2x3x4xf32>) {
  // CHECK: px.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
  %y, %mean, %isd = px.layer_norm %x, %s, %b : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
  // No bias, normalising the last two dimensions.
  // CHECK: px.layer_norm %{{.*}}, %{{.*}} {axis = 1 : i64, epsilon = 9.99999997E-7 : f32} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %y2, %m2, %i2 = px.layer_norm %x, %s2 {axis = 1 : i64, epsilon = 1.0e-6 : f32} : tensor<2x3x4xf32>, tensor<3x4xf32>
  // A scale that broadcasts to the normalised shape.
  // CHECK: px.layer_norm %{{.*}}, %{{.*}} {axis = -2 : i64} : tensor<2x3x4xf32>, tensor<1x4xf32>
  %y3, %m3, %i3 = px.layer_norm %x, %s1 {axis = -2 : i64} : tensor<2x3x4xf32>, tensor<1x4xf32>
  return %y, %mean, %isd, %y2, %m2, %i2, %y3
      : tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>,
        tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>,
        tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @batch_norm
func.func @batch_norm(%x: tensor<8x16x5x5xf32>, %c: tensor<16xf32>)
    -> (tensor<8x16x5x5xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8x16x5x5xf32>) {
  // CHECK: px.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {momentum = 8.000000e-01 : f32, training} : tensor<8x16x5x5xf32>, tensor<16xf32>
  %y, %rm, %rv = px.batch_norm %x, %c, %c, %c, %c {training, momentum = 0.8 : f32}
      : tensor<8x16x5x5xf32>, tensor<16xf32>
  // Inference mode.
  // CHECK: px.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x16x5x5xf32>, tensor<16xf32>
  %y2, %rm2, %rv2 = px.batch_norm %x, %c, %c, %c, %c : tensor<8x16x5x5xf32>, tensor<16xf32>
  return %y, %rm, %rv, %y2 : tensor<8x16x5x5xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8x16x5x5xf32>
}

// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xi1>) {
  // CHECK: px.dropout %{{.*}} {ratio = 1.000000e-01 : f32, seed = 42 : i64} : tensor<4x8xbf16>
  %y, %mask = px.dropout %x {ratio = 0.1 : f32, seed = 42 : i64} : tensor<4x8xbf16>
  // CHECK: px.dropout %{{.*}} {ratio = 0.000000e+00 : f32} : tensor<4x8xbf16>
  %y2, %mask2 = px.dropout %x {ratio = 0.0 : f32} : tensor<4x8xbf16>
  return %y, %mask : tensor<4x8xbf16>, tensor<4x8xi1>
}

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce
func.func @reduce(%x: tensor<2x3x4xf32>, %i: tensor<5x6xi64>)
    -> (tensor<2x1x1xf32>, tensor<2xf32>, tensor<f32>, tensor<5xi64>,
        tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  // CHECK: px.reduce_sum %{{.*}} {axes = array<i64: 1, 2>} : tensor<2x3x4xf32>
  %0 = px.reduce_sum %x {axes = array<i64: 1, 2>} : tensor<2x3x4xf32>
  // CHECK: px.reduce_mean %{{.*}} {axes = array<i64: -1, 1>, keepdims = false} : tensor<2x3x4xf32>
  %1 = px.reduce_mean %x {axes = array<i64: -1, 1>, keepdims = false} : tensor<2x3x4xf32>
  // CHECK: px.reduce_max %{{.*}} {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32>
  %2 = px.reduce_max %x {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32>
  // CHECK: px.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<5x6xi64>
  %3 = px.reduce_sum %i {axes = array<i64: 1>, keepdims = false} : tensor<5x6xi64>
  // No axes: nothing is reduced (px lists every reduced dimension).
  // CHECK: px.reduce_sum %{{.*}} {axes = array<i64>} : tensor<2x3x4xf32>
  %4 = px.reduce_sum %x {axes = array<i64>} : tensor<2x3x4xf32>
  // The default keepdims is not printed.
  // CHECK: px.reduce_mean %{{.*}} {axes = array<i64>} : tensor<2x3x4xf32>
  %5 = px.reduce_mean %x {axes = array<i64>, keepdims = true} : tensor<2x3x4xf32>
  return %0, %1, %2, %3, %4, %5
      : tensor<2x1x1xf32>, tensor<2xf32>, tensor<f32>, tensor<5xi64>,
        tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>,
                         %b: tensor<3x1xi1>, %s: tensor<f32>)
    -> (tensor<6x4xf32>, tensor<f32>, tensor<1xf32>, tensor<4x2x3xf32>,
        tensor<2x11x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<5xf32>) {
  // CHECK: px.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %0 = px.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: px.reshape %{{.*}} : tensor<f32> -> tensor<1xf32>
  %1 = px.reshape %s : tensor<f32> -> tensor<1xf32>
  // CHECK: px.transpose %{{.*}} {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32>
  %2 = px.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32>
  // CHECK: px.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = -2 : i64} : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>
  %3 = px.concat %x, %y, %x {axis = -2 : i64} : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>
  // CHECK: px.concat %{{.*}} {axis = 0 : i64} : tensor<2x3x4xf32>
  %4 = px.concat %x {axis = 0 : i64} : tensor<2x3x4xf32>
  // CHECK: px.expand %{{.*}} : tensor<3x1xi1> -> tensor<2x3x4xi1>
  %5 = px.expand %b : tensor<3x1xi1> -> tensor<2x3x4xi1>
  // CHECK: px.expand %{{.*}} : tensor<f32> -> tensor<5xf32>
  %6 = px.expand %s : tensor<f32> -> tensor<5xf32>
  return %0, %s, %1, %2, %3, %4, %5, %6
      : tensor<6x4xf32>, tensor<f32>, tensor<1xf32>, tensor<4x2x3xf32>,
        tensor<2x11x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<5xf32>
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>,
                %b: tensor<16xf32>, %xg: tensor<2x8x10x10xf32>,
                %wg: tensor<8x2x3x3xf32>, %x1: tensor<4x2x20xf32>,
                %w1: tensor<6x2x5xf32>)
    -> (tensor<1x16x32x32xf32>, tensor<1x16x16x16xf32>, tensor<2x8x6x6xf32>,
        tensor<4x6x8xf32>) {
  // "Same" padding.
  // CHECK: px.conv %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>
  %0 = px.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,
                           dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>
  // Stride 2, asymmetric pads: (32 + 0 + 1 - 3) / 2 + 1 = 16.
  // CHECK: px.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  %1 = px.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>,
                       dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  // Grouped (4 groups of 2 input channels) and dilated: 10 - (2*2+1) + 1 = 6.
  // CHECK: px.conv %{{.*}}, %{{.*}} {dilations = array<i64: 2, 2>, group = 4 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x8x10x10xf32>, tensor<8x2x3x3xf32>
  %2 = px.conv %xg, %wg {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
                         dilations = array<i64: 2, 2>, group = 4 : i64}
      : tensor<2x8x10x10xf32>, tensor<8x2x3x3xf32>
  // 1-D, stride 2: (20 - 5) / 2 + 1 = 8.
  // CHECK: px.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1>, pads = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<4x2x20xf32>, tensor<6x2x5xf32>
  %3 = px.conv %x1, %w1 {strides = array<i64: 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1>}
      : tensor<4x2x20xf32>, tensor<6x2x5xf32>
  return %0, %1, %2, %3
      : tensor<1x16x32x32xf32>, tensor<1x16x16x16xf32>, tensor<2x8x6x6xf32>,
        tensor<4x6x8xf32>
}

// CHECK-LABEL: func.func @pool
func.func @pool(%x: tensor<1x4x7x7xf32>)
    -> (tensor<1x4x3x3xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>,
        tensor<1x4x7x7xf32>, tensor<1x4x3x3xf32>) {
  // CHECK: px.max_pool %{{.*}} {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32>
  %0 = px.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>,
                       pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x4x7x7xf32>
  // ceil_mode: ceil((7 - 2) / 2) + 1 = 4.
  // CHECK: px.max_pool %{{.*}} {ceil_mode, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32>
  %1 = px.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>,
                       pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode}
      : tensor<1x4x7x7xf32>
  // CHECK: px.avg_pool %{{.*}} {count_include_pad, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32>
  %2 = px.avg_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>,
                       pads = array<i64: 1, 1, 1, 1>, count_include_pad}
      : tensor<1x4x7x7xf32>
  // CHECK: px.avg_pool %{{.*}} {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<1x4x7x7xf32>
  %3 = px.avg_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>,
                       pads = array<i64: 1, 1, 1, 1>}
      : tensor<1x4x7x7xf32>
  // Dilated max pool: 7 - (2*2+1) + 1 = 3.
  // CHECK: px.max_pool %{{.*}} {dilations = array<i64: 2, 2>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x4x7x7xf32>
  %4 = px.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>,
                       pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 2>}
      : tensor<1x4x7x7xf32>
  return %0, %1, %2, %3, %4
      : tensor<1x4x3x3xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>,
        tensor<1x4x7x7xf32>, tensor<1x4x3x3xf32>
}

//===----------------------------------------------------------------------===//
// Sparse gradients
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @sparse_grad
// CHECK-SAME: !px.sparse_grad<6, tensor<100x8xf32>>
func.func @sparse_grad(%i: tensor<6xi64>, %v: tensor<6x8xf32>)
    -> (!px.sparse_grad<6, tensor<100x8xf32>>, tensor<6xi64>, tensor<6x8xf32>,
        tensor<100x8xf32>) {
  // CHECK: px.make_sparse_grad %{{.*}}, %{{.*}} : tensor<6xi64>, tensor<6x8xf32> -> !px.sparse_grad<6, tensor<100x8xf32>>
  %g = px.make_sparse_grad %i, %v : tensor<6xi64>, tensor<6x8xf32> -> !px.sparse_grad<6, tensor<100x8xf32>>
  // CHECK: px.sparse_grad_indices %{{.*}} : !px.sparse_grad<6, tensor<100x8xf32>>
  %gi = px.sparse_grad_indices %g : !px.sparse_grad<6, tensor<100x8xf32>>
  // CHECK: px.sparse_grad_values %{{.*}} : !px.sparse_grad<6, tensor<100x8xf32>>
  %gv = px.sparse_grad_values %g : !px.sparse_grad<6, tensor<100x8xf32>>
  // CHECK: px.densify %{{.*}} : !px.sparse_grad<6, tensor<100x8xf32>>
  %d = px.densify %g : !px.sparse_grad<6, tensor<100x8xf32>>
  return %g, %gi, %gv, %d
      : !px.sparse_grad<6, tensor<100x8xf32>>, tensor<6xi64>, tensor<6x8xf32>,
        tensor<100x8xf32>
}

// CHECK-LABEL: func.func @sparse_grad_edge
func.func @sparse_grad_edge(%i: tensor<0xi64>, %v: tensor<0xf16>)
    -> (tensor<0xf16>, tensor<10xf16>) {
  // Zero rows of a vector.
  // CHECK: px.make_sparse_grad %{{.*}}, %{{.*}} : tensor<0xi64>, tensor<0xf16> -> !px.sparse_grad<0, tensor<10xf16>>
  %g = px.make_sparse_grad %i, %v : tensor<0xi64>, tensor<0xf16> -> !px.sparse_grad<0, tensor<10xf16>>
  %gv = px.sparse_grad_values %g : !px.sparse_grad<0, tensor<10xf16>>
  %d = px.densify %g : !px.sparse_grad<0, tensor<10xf16>>
  return %gv, %d : tensor<0xf16>, tensor<10xf16>
}

//===----------------------------------------------------------------------===//
// Synchronization
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @all_reduce
func.func @all_reduce(%x: tensor<256x256xf32>, %i: tensor<4xi64>)
    -> (tensor<256x256xf32>, tensor<256x256xf32>, tensor<256x256xf32>, tensor<4xi64>) {
  // CHECK: px.all_reduce %{{.*}} on @world : tensor<256x256xf32>
  %0 = px.all_reduce %x on @world : tensor<256x256xf32>
  // CHECK: px.all_reduce %{{.*}} on @world reduction = average bucket = 0 : tensor<256x256xf32>
  %1 = px.all_reduce %x on @world reduction = average bucket = 0 : tensor<256x256xf32>
  // CHECK: px.all_reduce %{{.*}} on @g grid_axes = [1] reduction = max bucket = 3 : tensor<256x256xf32>
  %2 = px.all_reduce %x on @g grid_axes = [1] reduction = max bucket = 3 : tensor<256x256xf32>
  // CHECK: px.all_reduce %{{.*}} on @g grid_axes = [0, 1] : tensor<4xi64>
  %3 = px.all_reduce %i on @g grid_axes = [0, 1] reduction = sum : tensor<4xi64>
  return %0, %1, %2, %3 : tensor<256x256xf32>, tensor<256x256xf32>, tensor<256x256xf32>, tensor<4xi64>
}

// CHECK-LABEL: func.func @all_gather
func.func @all_gather(%x: tensor<3x5xf32>, %b: tensor<2xi1>)
    -> (tensor<12x5xf32>, tensor<3x10xf32>, tensor<3x20xf32>, tensor<8xi1>) {
  // CHECK: px.all_gather %{{.*}} on @world gather_axis = 0 : tensor<3x5xf32> -> tensor<12x5xf32>
  %0 = px.all_gather %x on @world gather_axis = 0 : tensor<3x5xf32> -> tensor<12x5xf32>
  // A row communicator of the 2x2 grid has 2 ranks.
  // CHECK: px.all_gather %{{.*}} on @g grid_axes = [1] gather_axis = 1 : tensor<3x5xf32> -> tensor<3x10xf32>
  %1 = px.all_gather %x on @g grid_axes = [1] gather_axis = 1 : tensor<3x5xf32> -> tensor<3x10xf32>
  // No axes: the whole grid.
  // CHECK: px.all_gather %{{.*}} on @g gather_axis = 1 : tensor<3x5xf32> -> tensor<3x20xf32>
  %2 = px.all_gather %x on @g gather_axis = 1 : tensor<3x5xf32> -> tensor<3x20xf32>
  // CHECK: px.all_gather %{{.*}} on @g grid_axes = [1, 0] gather_axis = 0 : tensor<2xi1> -> tensor<8xi1>
  %3 = px.all_gather %b on @g grid_axes = [1, 0] gather_axis = 0 : tensor<2xi1> -> tensor<8xi1>
  return %0, %1, %2, %3 : tensor<12x5xf32>, tensor<3x10xf32>, tensor<3x20xf32>, tensor<8xi1>
}

// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%x: tensor<8x6xf32>) -> (tensor<2x6xf32>, tensor<8x3xf32>) {
  // CHECK: px.reduce_scatter %{{.*}} on @world scatter_axis = 0 : tensor<8x6xf32> -> tensor<2x6xf32>
  %0 = px.reduce_scatter %x on @world scatter_axis = 0 : tensor<8x6xf32> -> tensor<2x6xf32>
  // CHECK: px.reduce_scatter %{{.*}} on @g grid_axes = [0] reduction = average scatter_axis = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  %1 = px.reduce_scatter %x on @g grid_axes = [0] reduction = average scatter_axis = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  return %0, %1 : tensor<2x6xf32>, tensor<8x3xf32>
}

// CHECK-LABEL: func.func @halo
func.func @halo(%x: tensor<2x3x8x5xf32>) -> (tensor<2x3x10x5xf32>, tensor<2x3x8x5xf32>) {
  // CHECK: px.halo_exchange %{{.*}} on @g grid_axes = [1] axis = 2 lo = 1 hi = 1 : tensor<2x3x8x5xf32> -> tensor<2x3x10x5xf32>
  %0 = px.halo_exchange %x on @g grid_axes = [1] axis = 2 lo = 1 hi = 1 : tensor<2x3x8x5xf32> -> tensor<2x3x10x5xf32>
  // CHECK: px.halo_reduce %{{.*}} on @g grid_axes = [1] axis = 2 lo = 2 hi = 0 : tensor<2x3x10x5xf32> -> tensor<2x3x8x5xf32>
  %1 = px.halo_reduce %0 on @g grid_axes = [1] axis = 2 lo = 2 hi = 0 : tensor<2x3x10x5xf32> -> tensor<2x3x8x5xf32>
  return %0, %1 : tensor<2x3x10x5xf32>, tensor<2x3x8x5xf32>
}

// CHECK-LABEL: func.func @all_to_all
func.func @all_to_all(%x: tensor<8x6xf32>) -> (tensor<2x24xf32>, tensor<16x3xf32>, tensor<8x6xf32>) {
  // CHECK: px.all_to_all %{{.*}} on @world split_axis = 0 concat_axis = 1 : tensor<8x6xf32> -> tensor<2x24xf32>
  %0 = px.all_to_all %x on @world split_axis = 0 concat_axis = 1 : tensor<8x6xf32> -> tensor<2x24xf32>
  // CHECK: px.all_to_all %{{.*}} on @g grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<8x6xf32> -> tensor<16x3xf32>
  %1 = px.all_to_all %x on @g grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<8x6xf32> -> tensor<16x3xf32>
  // Same split and concat axis: the shape is unchanged.
  // CHECK: px.all_to_all %{{.*}} on @world split_axis = 0 concat_axis = 0 : tensor<8x6xf32> -> tensor<8x6xf32>
  %2 = px.all_to_all %x on @world split_axis = 0 concat_axis = 0 : tensor<8x6xf32> -> tensor<8x6xf32>
  return %0, %1, %2 : tensor<2x24xf32>, tensor<16x3xf32>, tensor<8x6xf32>
}

// CHECK-LABEL: func.func @all_gatherv
func.func @all_gatherv(%s: !px.sparse_grad<6, tensor<100x8xf32>>)
    -> (!px.sparse_grad<24, tensor<100x8xf32>>, !px.sparse_grad<12, tensor<100x8xf32>>) {
  // CHECK: px.all_gatherv %{{.*}} on @world : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf32>>
  %0 = px.all_gatherv %s on @world : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf32>>
  // CHECK: px.all_gatherv %{{.*}} on @g grid_axes = [0] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<12, tensor<100x8xf32>>
  %1 = px.all_gatherv %s on @g grid_axes = [0] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<12, tensor<100x8xf32>>
  return %0, %1 : !px.sparse_grad<24, tensor<100x8xf32>>, !px.sparse_grad<12, tensor<100x8xf32>>
}

// CHECK-LABEL: func.func @parameter_server
func.func @parameter_server(%table: tensor<100x8xf32>, %ids: tensor<4x5xi64>,
                            %ids32: tensor<7xi32>,
                            %s: !px.sparse_grad<6, tensor<100x8xf32>>)
    -> (tensor<4x5x8xf32>, tensor<7x8xf32>, !px.sparse_grad<24, tensor<100x8xf32>>,
        !px.sparse_grad<12, tensor<100x8xf32>>) {
  // CHECK: px.ps_pull %{{.*}}[%{{.*}}] on @world partitions = 2 placement = [0, 1] : tensor<100x8xf32>, tensor<4x5xi64> -> tensor<4x5x8xf32>
  %0 = px.ps_pull %table[%ids] on @world partitions = 2 placement = [0, 1]
      : tensor<100x8xf32>, tensor<4x5xi64> -> tensor<4x5x8xf32>
  // Several partitions on one server.
  // CHECK: px.ps_pull %{{.*}}[%{{.*}}] on @g grid_axes = [1] partitions = 3 placement = [1, 0, 1] : tensor<100x8xf32>, tensor<7xi32> -> tensor<7x8xf32>
  %1 = px.ps_pull %table[%ids32] on @g grid_axes = [1] partitions = 3 placement = [1, 0, 1]
      : tensor<100x8xf32>, tensor<7xi32> -> tensor<7x8xf32>
  // A block of rows of a table split over @g's axis 0, served over axis 1.
  // CHECK: px.ps_pull %{{.*}}[%{{.*}}] on @g grid_axes = [1] partitions = 2 placement = [0, 1] block of block_axes = [0] : tensor<100x8xf32>, tensor<7xi32> -> tensor<7x8xf32>
  %4 = px.ps_pull %table[%ids32] on @g grid_axes = [1] partitions = 2 placement = [0, 1] block of block_axes = [0]
      : tensor<100x8xf32>, tensor<7xi32> -> tensor<7x8xf32>
  // CHECK: px.ps_push %{{.*}} on @world partitions = 4 placement = [3, 2, 1, 0] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf32>>
  %2 = px.ps_push %s on @world partitions = 4 placement = [3, 2, 1, 0]
      : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf32>>
  // CHECK: px.ps_push %{{.*}} on @g grid_axes = [0] partitions = 1 placement = [1] local_aggregation : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<12, tensor<100x8xf32>>
  %3 = px.ps_push %s on @g grid_axes = [0] partitions = 1 placement = [1] local_aggregation
      : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<12, tensor<100x8xf32>>
  return %0, %1, %2, %3
      : tensor<4x5x8xf32>, tensor<7x8xf32>, !px.sparse_grad<24, tensor<100x8xf32>>,
        !px.sparse_grad<12, tensor<100x8xf32>>
}

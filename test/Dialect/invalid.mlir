// Every verifier and shape-rule error of the px tensor ops and types, and
// the ODS constraints they rely on. Shape rules run when the parser infers a
// result type, so their errors are reported at the op as it is parsed.
// RUN: parallax-opt %s --split-input-file --verify-diagnostics

//===----------------------------------------------------------------------===//
// !px.sparse_grad
//===----------------------------------------------------------------------===//

// expected-error @+1 {{sparse gradient row count must be >= 0, got -1}}
func.func @sparse_grad_negative_rows(%g: !px.sparse_grad<-1, tensor<10x4xf32>>)

// -----

// expected-error @+1 {{sparse gradient needs a static dense type of rank >= 1}}
func.func @sparse_grad_scalar(%g: !px.sparse_grad<2, tensor<f32>>)

// -----

// expected-error @+1 {{sparse gradient needs a static dense type of rank >= 1}}
func.func @sparse_grad_dynamic(%g: !px.sparse_grad<2, tensor<?x4xf32>>)

// -----

// expected-error @+2 {{failed to parse Px_SparseGradType parameter 'denseType'}}
// expected-error @+1 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
func.func @sparse_grad_unranked(%g: !px.sparse_grad<2, tensor<*xf32>>)

// -----

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

func.func @variable_empty_name() {
  // expected-error @+1 {{'px.variable' op variable name must not be empty}}
  %0 = px.variable "" = dense<1.0> : tensor<2xf32>
  return
}

// -----

func.func @variable_init_type() {
  // expected-error @+1 {{'px.variable' op initial value of type 'tensor<2xf32>' does not match result type 'tensor<3xf32>'}}
  %0 = "px.variable"() {name = "w", init = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @variable_initializer_type() {
  // expected-error @+1 {{'px.variable' op initial value of type 'tensor<4xf32>' does not match result type 'tensor<4xf16>'}}
  %0 = "px.variable"() {name = "w", init = #px.onnx_initializer<"w"> : tensor<4xf32>, trainable} : () -> tensor<4xf16>
  return
}

// -----

func.func @initializer_padded_smaller() {
  // expected-error @+1 {{initializer 'w': cannot be padded from [30, 16] to 'tensor<28x16xf32>'}}
  %0 = px.variable "w" trainable = #px.onnx_initializer<"w", padded from [30, 16]> : tensor<28x16xf32>
  return
}

// -----

func.func @initializer_padded_rank() {
  // expected-error @+1 {{initializer 'w': padded from a shape of rank 1 to 'tensor<28x16xf32>'}}
  %0 = px.variable "w" trainable = #px.onnx_initializer<"w", padded from [27]> : tensor<28x16xf32>
  return
}

// -----

func.func @initializer_block_outside() {
  // expected-error @+1 {{initializer 'w': 'tensor<4x4xf32>' is no block of it at [0, 10] of [4, 12]}}
  %0 = px.variable "w" trainable = #px.onnx_initializer<"w", block at [0, 10] of [4, 12]> : tensor<4x4xf32>
  return
}

// -----

func.func @initializer_block_rank() {
  // expected-error @+1 {{initializer 'w': 'tensor<4x4xf32>' is no block of it at [0] of [12]}}
  %0 = px.variable "w" trainable = #px.onnx_initializer<"w", block at [0] of [12]> : tensor<4x4xf32>
  return
}

// -----

func.func @variable_not_tensor() {
  // expected-error @+1 {{'px.variable' op result #0 must be statically shaped tensor}}
  %0 = px.variable "w" = #px.onnx_initializer<"w"> : f32
  return
}

// -----

func.func @variable_missing_equal() {
  // expected-error @+1 {{expected '='}}
  %0 = px.variable "w" trainable dense<1.0> : tensor<2xf32>
  return
}

// -----

func.func @variable_duplicate_name() {
  // expected-error @+1 {{attribute 'name' occurs more than once in the attribute list}}
  %0 = px.variable "w" = dense<1.0> : tensor<2xf32> {name = "v"}
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{'px.constant' op initial value of type 'tensor<2xi32>' does not match result type 'tensor<2xi64>'}}
  %0 = "px.constant"() {value = dense<1> : tensor<2xi32>} : () -> tensor<2xi64>
  return
}

// -----

func.func @constant_untyped() {
  // expected-error @+1 {{expected a typed initial value, such as dense<...> : T or #px.onnx_initializer<"w"> : T}}
  %0 = px.constant unit
  return
}

// -----

func.func @constant_scalar_attr() {
  // expected-error @+1 {{'px.constant' op attribute 'value' failed to satisfy constraint: constant vector/tensor attribute or Reference to an initializer tensor of the source ONNX model}}
  %0 = px.constant 1 : i32
  return
}

// -----

func.func @input_dynamic() {
  // expected-error @+1 {{'px.input' op result #0 must be statically shaped tensor}}
  %0 = px.input "x" : tensor<?x3xf32>
  return
}

// -----

func.func @input_element_type() {
  // expected-error @+1 {{'px.input' op result #0 must be statically shaped tensor}}
  %0 = px.input "x" : tensor<3xui8>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand shapes 2x3 and 4 do not broadcast}}
  %0 = px.add %a, %b : tensor<2x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @sub_element_type(%a: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error @+1 {{operands must have the same element type, got 'tensor<3xf32>' and 'tensor<3xf16>'}}
  %0 = px.sub %a, %b : tensor<3xf32>, tensor<3xf16>
  return
}

// -----

func.func @mul_dynamic(%a: tensor<?xf32>) {
  // expected-error @+2 {{lhs must be a statically shaped tensor}}
  // expected-error @+1 {{rhs must be a statically shaped tensor}}
  %0 = px.mul %a, %a : tensor<?xf32>, tensor<?xf32>
  return
}

// -----

func.func @div_bool(%a: tensor<3xi1>) {
  // expected-error @+1 {{'px.div' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 8-bit signless integer or 16-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xi1>'}}
  %0 = px.div %a, %a : tensor<3xi1>, tensor<3xi1>
  return
}

// -----

func.func @max_result_type(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'px.max' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  // expected-error @+1 {{'px.max' op failed to infer returned types}}
  %0 = "px.max"(%a, %b) : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @min_result_element_type(%a: tensor<3xi32>) {
  // expected-error @+2 {{'px.min' op inferred type(s) 'tensor<3xi32>' are incompatible with return type(s) of operation 'tensor<3xi64>'}}
  // expected-error @+1 {{'px.min' op failed to infer returned types}}
  %0 = "px.min"(%a, %a) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi64>
  return
}

// -----

func.func @pow_broadcast(%a: tensor<3xf32>, %b: tensor<2xi32>) {
  // expected-error @+1 {{operand shapes 3 and 2 do not broadcast}}
  %0 = px.pow %a, %b : tensor<3xf32>, tensor<2xi32>
  return
}

// -----

func.func @less_element_type(%a: tensor<3xf32>, %b: tensor<3xi32>) {
  // expected-error @+1 {{operands must have the same element type, got 'tensor<3xf32>' and 'tensor<3xi32>'}}
  %0 = px.less %a, %b : tensor<3xf32>, tensor<3xi32>
  return
}

// -----

func.func @greater_bool(%a: tensor<3xi1>) {
  // expected-error @+1 {{'px.greater' op operand #0 must be statically shaped tensor}}
  %0 = px.greater %a, %a : tensor<3xi1>, tensor<3xi1>
  return
}

// -----

func.func @equal_broadcast(%a: tensor<3xi1>, %b: tensor<2x2xi1>) {
  // expected-error @+1 {{operand shapes 3 and 2x2 do not broadcast}}
  %0 = px.equal %a, %b : tensor<3xi1>, tensor<2x2xi1>
  return
}

// -----

func.func @equal_result_not_bool(%a: tensor<3xf32>) {
  // expected-error @+2 {{'px.equal' op inferred type(s) 'tensor<3xi1>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'px.equal' op failed to infer returned types}}
  %0 = "px.equal"(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @where_condition_broadcast(%c: tensor<2xi1>, %x: tensor<3xf32>) {
  // expected-error @+1 {{condition shape 2 does not broadcast with 3}}
  %0 = px.where %c, %x, %x : tensor<2xi1>, tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @where_xy_element_type(%c: tensor<3xi1>, %x: tensor<3xf32>, %y: tensor<3xi64>) {
  // expected-error @+1 {{operands must have the same element type, got 'tensor<3xf32>' and 'tensor<3xi64>'}}
  %0 = px.where %c, %x, %y : tensor<3xi1>, tensor<3xf32>, tensor<3xi64>
  return
}

// -----

func.func @where_xy_broadcast(%c: tensor<3xi1>, %x: tensor<3xf32>, %y: tensor<2xf32>) {
  // expected-error @+1 {{operand shapes 3 and 2 do not broadcast}}
  %0 = px.where %c, %x, %y : tensor<3xi1>, tensor<3xf32>, tensor<2xf32>
  return
}

// -----

func.func @where_condition_dynamic(%c: tensor<?xi1>, %x: tensor<3xf32>) {
  // expected-error @+1 {{condition must be a statically shaped tensor}}
  %0 = px.where %c, %x, %x : tensor<?xi1>, tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @where_condition_not_bool(%c: tensor<3xi8>, %x: tensor<3xf32>) {
  // expected-error @+1 {{'px.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<3xi8>'}}
  %0 = px.where %c, %x, %x : tensor<3xi8>, tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @sqrt_int(%x: tensor<3xi32>) {
  // expected-error @+1 {{'px.sqrt' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<3xi32>'}}
  %0 = px.sqrt %x : tensor<3xi32>
  return
}

// -----

func.func @not_float(%x: tensor<3xf32>) {
  // expected-error @+1 {{'px.not' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = px.not %x : tensor<3xf32>
  return
}

// -----

func.func @neg_result_type(%x: tensor<3xf32>) {
  // expected-error @+1 {{'px.neg' op requires the same type for all operands and results}}
  %0 = "px.neg"(%x) : (tensor<3xf32>) -> tensor<3xf16>
  return
}

// -----

func.func @exp_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{'px.exp' op operand #0 must be statically shaped tensor}}
  %0 = px.exp %x : tensor<?xf32>
  return
}

// -----

func.func @leaky_relu_alpha(%x: tensor<3xf32>) {
  // expected-error @+1 {{'px.leaky_relu' op attribute 'alpha' failed to satisfy constraint: 32-bit float attribute}}
  %0 = px.leaky_relu %x {alpha = 1 : i64} : tensor<3xf32>
  return
}

// -----

func.func @clip_bounds(%x: tensor<3xf32>) {
  // expected-error @+1 {{'px.clip' op min 1.000000e+00 exceeds max -1.000000e+00}}
  %0 = px.clip %x {min = 1.0, max = -1.0} : tensor<3xf32>
  return
}

// -----

func.func @clip_bound_type(%x: tensor<3xf32>) {
  // expected-error @+1 {{'px.clip' op attribute 'min' failed to satisfy constraint: 64-bit float attribute}}
  %0 = px.clip %x {min = 1.0 : f32} : tensor<3xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.cast' op requires the same shape for all operands and results}}
  %0 = px.cast %x : tensor<2x3xf32> -> tensor<3x2xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

func.func @gather_axis(%d: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{gather axis 2 is out of range for data of rank 2}}
  %0 = px.gather %d[%i] {axis = 2 : i64} : tensor<10x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @gather_negative_axis(%d: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{gather axis -3 is out of range for data of rank 2}}
  %0 = px.gather %d[%i] {axis = -3 : i64} : tensor<10x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @gather_scalar_data(%d: tensor<f32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{gather axis 0 is out of range for data of rank 0}}
  %0 = px.gather %d[%i] : tensor<f32>, tensor<3xi64>
  return
}

// -----

func.func @gather_float_indices(%d: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'px.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = px.gather %d[%i] : tensor<10x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @gather_result_type(%d: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{'px.gather' op inferred type(s) 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'px.gather' op failed to infer returned types}}
  %0 = "px.gather"(%d, %i) : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_axis_attr_kind(%d: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'px.gather' op attribute 'axis' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = px.gather %d[%i] {axis = 1.0 : f32} : tensor<10x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @gather_elements_rank(%d: tensor<3x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{data and indices must have the same rank >= 1, got 2 and 1}}
  %0 = px.gather_elements %d[%i] : tensor<3x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @gather_elements_scalar(%d: tensor<f32>, %i: tensor<i64>) {
  // expected-error @+1 {{data and indices must have the same rank >= 1, got 0 and 0}}
  %0 = px.gather_elements %d[%i] : tensor<f32>, tensor<i64>
  return
}

// -----

func.func @gather_elements_axis(%d: tensor<3x4xf32>, %i: tensor<3x4xi64>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = px.gather_elements %d[%i] {axis = -3 : i64} : tensor<3x4xf32>, tensor<3x4xi64>
  return
}

// -----

func.func @gather_elements_indices_too_large(%d: tensor<3x4xf32>, %i: tensor<3x5xi32>) {
  // expected-error @+1 {{indices dimension 1 of size 5 exceeds the data's size 4}}
  %0 = px.gather_elements %d[%i] : tensor<3x4xf32>, tensor<3x5xi32>
  return
}

// -----

func.func @slice_rank(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op result must have the input's rank and element type}}
  %0 = px.slice %x starts = [0, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<60xf32>
  return
}

// -----

func.func @slice_element_type(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op result must have the input's rank and element type}}
  %0 = px.slice %x starts = [0, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<2x2xf16>
  return
}

// -----

func.func @slice_starts(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op expected one start and one step per dimension (2), got 1 and 2}}
  %0 = px.slice %x starts = [0] steps = [1, 1] : tensor<10x6xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op step of dimension 1 is zero}}
  %0 = px.slice %x starts = [0, 0] steps = [1, 0] : tensor<10x6xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_past_end(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op dimension 0: 4 elements from 8 with step 1 leave [0, 10)}}
  %0 = px.slice %x starts = [8, 0] steps = [1, 1] : tensor<10x6xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @slice_before_start(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op dimension 1: 3 elements from 3 with step -2 leave [0, 6)}}
  %0 = px.slice %x starts = [0, 3] steps = [1, -2] : tensor<10x6xf32> -> tensor<10x3xf32>
  return
}

// -----

func.func @slice_start_out_of_range(%x: tensor<10x6xf32>) {
  // expected-error @+1 {{'px.slice' op dimension 1: 1 elements from -1 with step 1 leave [0, 6)}}
  %0 = px.slice %x starts = [0, -1] steps = [1, 1] : tensor<10x6xf32> -> tensor<10x1xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

func.func @matmul_element_type(%a: tensor<3x4xf32>, %b: tensor<4x5xf16>) {
  // expected-error @+1 {{operands must have the same element type}}
  %0 = px.matmul %a, %b : tensor<3x4xf32>, tensor<4x5xf16>
  return
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{matmul operands must have rank >= 1}}
  %0 = px.matmul %a, %b : tensor<f32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) {
  // expected-error @+1 {{contraction dimensions differ: 3x4 x 5x6}}
  %0 = px.matmul %a, %b : tensor<3x4xf32>, tensor<5x6xf32>
  return
}

// -----

func.func @matmul_vector_contraction(%a: tensor<3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{contraction dimensions differ: 3 x 4}}
  %0 = px.matmul %a, %b : tensor<3xf32>, tensor<4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{batch dimensions of 2x3x4 and 3x4x5 do not broadcast}}
  %0 = px.matmul %a, %b : tensor<2x3x4xf32>, tensor<3x4x5xf32>
  return
}

// -----

func.func @matmul_bool(%a: tensor<3x4xi1>, %b: tensor<4x5xi1>) {
  // expected-error @+1 {{'px.matmul' op operand #0 must be statically shaped tensor}}
  %0 = px.matmul %a, %b : tensor<3x4xi1>, tensor<4x5xi1>
  return
}

// -----

func.func @gemm_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{gemm operands A and B must be matrices}}
  %0 = px.gemm %a, %b : tensor<2x3x4xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @gemm_contraction(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{gemm contraction dimensions differ: 4 vs 5}}
  %0 = px.gemm %a, %b {trans_b} : tensor<3x4xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @gemm_c(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x1x5xf32>) {
  // expected-error @+1 {{C of shape 3x1x5 does not broadcast to 3x5}}
  %0 = px.gemm %a, %b, %c : tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x1x5xf32>
  return
}

// -----

func.func @gemm_c_shape(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{C of shape 4 does not broadcast to 3x5}}
  %0 = px.gemm %a, %b, %c : tensor<3x4xf32>, tensor<4x5xf32>, tensor<4xf32>
  return
}

// -----

func.func @gemm_b_element_type(%a: tensor<3x4xf32>, %b: tensor<4x5xf16>) {
  // expected-error @+1 {{B must have the element type of A ('f32'), got 'f16'}}
  %0 = px.gemm %a, %b : tensor<3x4xf32>, tensor<4x5xf16>
  return
}

// -----

func.func @gemm_c_element_type(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<5xf64>) {
  // expected-error @+1 {{C must have the element type of A ('f32'), got 'f64'}}
  %0 = px.gemm %a, %b, %c : tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf64>
  return
}

// -----

func.func @gemm_int(%a: tensor<3x4xi32>, %b: tensor<4x5xi32>) {
  // expected-error @+1 {{'px.gemm' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<3x4xi32>'}}
  %0 = px.gemm %a, %b : tensor<3x4xi32>, tensor<4x5xi32>
  return
}

// -----

func.func @gemm_trans_kind(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'px.gemm' op attribute 'trans_a' failed to satisfy constraint: unit attribute}}
  %0 = px.gemm %a, %b {trans_a = 1 : i64} : tensor<3x4xf32>, tensor<4x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Normalisation, activations with an axis, losses
//===----------------------------------------------------------------------===//

func.func @softmax_axis(%x: tensor<2x10xf32>) {
  // expected-error @+1 {{'px.softmax' op axis 2 is out of range for rank 2}}
  %0 = px.softmax %x {axis = 2 : i64} : tensor<2x10xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<2x10xf32>) {
  // expected-error @+1 {{'px.log_softmax' op axis -3 is out of range for rank 2}}
  %0 = px.log_softmax %x {axis = -3 : i64} : tensor<2x10xf32>
  return
}

// -----

func.func @softmax_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'px.softmax' op axis -1 is out of range for rank 0}}
  %0 = px.softmax %x : tensor<f32>
  return
}

// -----

func.func @softmax_int(%x: tensor<2x10xi32>) {
  // expected-error @+1 {{'px.softmax' op operand #0 must be statically shaped tensor}}
  %0 = px.softmax %x : tensor<2x10xi32>
  return
}

// -----

func.func @sce_reduction(%s: tensor<8x10xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{reduction must be none, sum or mean, got 'average'}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l {reduction = "average"} : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @sce_scores_rank(%s: tensor<10xf32>, %l: tensor<i64>) {
  // expected-error @+1 {{scores must have rank >= 2 ([N, C, ...])}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l : tensor<10xf32>, tensor<i64>
  return
}

// -----

func.func @sce_labels(%s: tensor<8x10x5xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{labels must have shape 8x5 for scores of shape 8x10x5, got 8}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l : tensor<8x10x5xf32>, tensor<8xi64>
  return
}

// -----

func.func @sce_weights(%s: tensor<8x10xf32>, %l: tensor<8xi64>, %w: tensor<8xf32>) {
  // expected-error @+1 {{weights must have shape [10], got 8}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l, %w : tensor<8x10xf32>, tensor<8xi64>, tensor<8xf32>
  return
}

// -----

func.func @sce_weights_element_type(%s: tensor<8x10xf32>, %l: tensor<8xi64>, %w: tensor<10xf16>) {
  // expected-error @+1 {{weights must have the element type of scores ('f32'), got 'f16'}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l, %w : tensor<8x10xf32>, tensor<8xi64>, tensor<10xf16>
  return
}

// -----

func.func @sce_float_labels(%s: tensor<8x10xf32>, %l: tensor<8xf32>) {
  // expected-error @+1 {{'px.softmax_cross_entropy_loss' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<8xf32>'}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l : tensor<8x10xf32>, tensor<8xf32>
  return
}

// -----

func.func @sce_result_type(%s: tensor<8x10xf32>, %l: tensor<8xi64>) {
  // expected-error @+2 {{'px.softmax_cross_entropy_loss' op inferred type(s) 'tensor<f32>', 'tensor<8x10xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>', 'tensor<8x10xf32>'}}
  // expected-error @+1 {{'px.softmax_cross_entropy_loss' op failed to infer returned types}}
  %0:2 = "px.softmax_cross_entropy_loss"(%s, %l) {reduction = "sum"} : (tensor<8x10xf32>, tensor<8xi64>) -> (tensor<8xf32>, tensor<8x10xf32>)
  return
}

// -----

func.func @nll_reduction(%s: tensor<8x10xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{reduction must be none, sum or mean, got ''}}
  %0 = px.nll_loss %s, %l {reduction = ""} : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @nll_target(%s: tensor<8x10xf32>, %l: tensor<10xi32>) {
  // expected-error @+1 {{labels must have shape 8 for scores of shape 8x10, got 10}}
  %0 = px.nll_loss %s, %l : tensor<8x10xf32>, tensor<10xi32>
  return
}

// -----

func.func @nll_weight(%s: tensor<8x10xf32>, %l: tensor<8xi64>, %w: tensor<1x10xf32>) {
  // expected-error @+1 {{weights must have shape [10], got 1x10}}
  %0 = px.nll_loss %s, %l, %w : tensor<8x10xf32>, tensor<8xi64>, tensor<1x10xf32>
  return
}

// -----

func.func @nll_ignore_index_kind(%s: tensor<8x10xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{'px.nll_loss' op attribute 'ignore_index' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = px.nll_loss %s, %l {ignore_index = 1.0 : f32} : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{axis 3 is out of range for rank 3}}
  %0:3 = px.layer_norm %x, %s {axis = 3 : i64} : tensor<2x3x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{scale of shape 3 does not broadcast to the normalised shape 4}}
  %0:3 = px.layer_norm %x, %s : tensor<2x3x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @layer_norm_scale_rank(%x: tensor<2x3x4xf32>, %s: tensor<2x3x4xf32>) {
  // expected-error @+1 {{scale of shape 2x3x4 does not broadcast to the normalised shape 3x4}}
  %0:3 = px.layer_norm %x, %s {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{bias of shape 2 does not broadcast to the normalised shape 4}}
  %0:3 = px.layer_norm %x, %s, %b : tensor<2x3x4xf32>, tensor<4xf32>, tensor<2xf32>
  return
}

// -----

func.func @layer_norm_scale_element_type(%x: tensor<2x4xf32>, %s: tensor<4xbf16>) {
  // expected-error @+1 {{scale must have the element type of x ('f32'), got 'bf16'}}
  %0:3 = px.layer_norm %x, %s : tensor<2x4xf32>, tensor<4xbf16>
  return
}

// -----

func.func @layer_norm_stats_type(%x: tensor<2x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{'px.layer_norm' op inferred type(s) 'tensor<2x4xf32>', 'tensor<2x1xf32>', 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>', 'tensor<2xf32>', 'tensor<2xf32>'}}
  // expected-error @+1 {{'px.layer_norm' op failed to infer returned types}}
  %0:3 = "px.layer_norm"(%x, %s) : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @batch_norm_rank(%x: tensor<8xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{x must have rank >= 2 ([N, C, ...])}}
  %0:3 = px.batch_norm %x, %c, %c, %c, %c : tensor<8xf32>, tensor<8xf32>
  return
}

// -----

func.func @batch_norm_channels(%x: tensor<8x16x5x5xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{scale must be 'tensor<16xf32>', got 'tensor<8xf32>'}}
  %0:3 = px.batch_norm %x, %c, %c, %c, %c {training} : tensor<8x16x5x5xf32>, tensor<8xf32>
  return
}

// -----

func.func @batch_norm_channel_element_type(%x: tensor<8x16xf32>, %c: tensor<16xf16>) {
  // expected-error @+1 {{scale must be 'tensor<16xf32>', got 'tensor<16xf16>'}}
  %0:3 = px.batch_norm %x, %c, %c, %c, %c : tensor<8x16xf32>, tensor<16xf16>
  return
}

// -----

func.func @batch_norm_statistics_types(%x: tensor<8x16xf32>, %c: tensor<16xf32>, %d: tensor<8xf32>) {
  // expected-error @+1 {{'px.batch_norm' op failed to verify that all of {scale, bias, input_mean, input_var} have same type}}
  %0:3 = "px.batch_norm"(%x, %c, %c, %c, %d) : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op ratio must be in [0, 1), got 1.000000e+00}}
  %0, %1 = px.dropout %x {ratio = 1.0 : f32} : tensor<4x8xf32>
  return
}

// -----

func.func @dropout_negative_ratio(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op ratio must be in [0, 1), got -5.000000e-01}}
  %0, %1 = px.dropout %x {ratio = -0.5 : f32} : tensor<4x8xf32>
  return
}

// -----

shard.grid @g(shape = 2)
func.func @dropout_block_without_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op a block of a grid names its grid_axes and split_dim, and only a block does}}
  %0, %1 = px.dropout %x {ratio = 0.5 : f32, grid = @g, grid_axes = array<i16: 0>} : tensor<4x8xf32>
  return
}

// -----

shard.grid @g(shape = 2)
func.func @dropout_block_without_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op a block of a grid names its grid_axes and split_dim, and only a block does}}
  %0, %1 = px.dropout %x {ratio = 0.5 : f32, grid = @g, split_dim = 1 : i64} : tensor<4x8xf32>
  return
}

// -----

shard.grid @g(shape = 2)
func.func @nll_block_without_axes(%x: tensor<4x8xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'px.nll_loss' op a block of a grid names its grid_axes, and only a block does}}
  %0 = px.nll_loss %x, %t {grid = @g} : tensor<4x8xf32>, tensor<4xi64>
  return
}

// -----

shard.grid @g(shape = 2)
func.func @sce_grad_block_with_weights(%d: tensor<f32>, %lp: tensor<4x8xf32>, %t: tensor<4xi64>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'px.softmax_cross_entropy_loss_grad' op a block of the classes takes no class weights}}
  %0 = px.softmax_cross_entropy_loss_grad %d, %lp, %t, %w {grid = @g, grid_axes = array<i16: 0>} : tensor<f32>, tensor<4x8xf32>, tensor<4xi64>, tensor<8xf32>
  return
}

// -----

shard.grid @g(shape = 2)
func.func @dropout_block_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op split_dim 2 is not a dimension of the input}}
  %0, %1 = px.dropout %x {ratio = 0.5 : f32, grid = @g, grid_axes = array<i16: 0>, split_dim = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @dropout_nan_ratio(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op ratio must be in [0, 1), got nan}}
  %0, %1 = px.dropout %x {ratio = 0x7FC00000 : f32} : tensor<4x8xf32>
  return
}

// -----

func.func @dropout_no_ratio(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'px.dropout' op requires attribute 'ratio'}}
  %0, %1 = px.dropout %x : tensor<4x8xf32>
  return
}

// -----

func.func @dropout_mask_type(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{'px.dropout' op inferred type(s) 'tensor<4x8xf32>', 'tensor<4x8xi1>' are incompatible with return type(s) of operation 'tensor<8x4xf32>', 'tensor<4x8xi1>'}}
  // expected-error @+1 {{'px.dropout' op failed to infer returned types}}
  %0:2 = "px.dropout"(%x) {ratio = 0.5 : f32} : (tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xi1>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

func.func @reduce_axis(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{reduction axis 3 is out of range for rank 3}}
  %0 = px.reduce_sum %x {axes = array<i64: 3>} : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_axis_repeats(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{reduction axis -2 repeats}}
  %0 = px.reduce_mean %x {axes = array<i64: 1, -2>} : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_missing_axes(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'px.reduce_max' op requires attribute 'axes'}}
  %0 = px.reduce_max %x : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_axes_kind(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'px.reduce_sum' op attribute 'axes' failed to satisfy constraint: i64 dense array attribute}}
  %0 = px.reduce_sum %x {axes = [1]} : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_keepdims_kind(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'px.reduce_sum' op attribute 'keepdims' failed to satisfy constraint: bool attribute}}
  %0 = px.reduce_sum %x {axes = array<i64: 1>, keepdims = 0 : i64} : tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_result_type(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'px.reduce_max' op inferred type(s) 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x1x4xf32>'}}
  // expected-error @+1 {{'px.reduce_max' op failed to infer returned types}}
  %0 = "px.reduce_max"(%x) {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return
}

// -----

func.func @reduce_bool(%x: tensor<2x3xi1>) {
  // expected-error @+1 {{'px.reduce_max' op operand #0 must be statically shaped tensor}}
  %0 = px.reduce_max %x {axes = array<i64: 1>} : tensor<2x3xi1>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.reshape' op reshape must keep the element type}}
  %0 = px.reshape %x : tensor<2x3xf32> -> tensor<6xi32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.reshape' op cannot reshape 6 elements (2x3) into 8 (2x4)}}
  %0 = px.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape_dynamic(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.reshape' op result #0 must be statically shaped tensor}}
  %0 = px.reshape %x : tensor<2x3xf32> -> tensor<?xf32>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm has 2 entries for rank 3}}
  %0 = px.transpose %x {perm = array<i64: 1, 0>} : tensor<2x3x4xf32>
  return
}

// -----

func.func @transpose_perm_repeat(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm is not a permutation of [0, 3)}}
  %0 = px.transpose %x {perm = array<i64: 0, 1, 1>} : tensor<2x3x4xf32>
  return
}

// -----

func.func @transpose_perm_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm is not a permutation of [0, 3)}}
  %0 = px.transpose %x {perm = array<i64: 0, 1, -1>} : tensor<2x3x4xf32>
  return
}

// -----

func.func @transpose_missing_perm(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.transpose' op requires attribute 'perm'}}
  %0 = px.transpose %x : tensor<2x3xf32>
  return
}

// -----

func.func @transpose_result_type(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'px.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'px.transpose' op failed to infer returned types}}
  %0 = "px.transpose"(%x) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{concat needs at least one input}}
  // expected-error @+1 {{'px.concat' op failed to infer returned types}}
  %0 = "px.concat"() {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = px.concat %x, %x {axis = 2 : i64} : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @concat_negative_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = px.concat %x, %x {axis = -3 : i64} : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<6xf32>) {
  // expected-error @+1 {{concat inputs must share rank and element type}}
  %0 = px.concat %x, %y {axis = 0 : i64} : tensor<2x3xf32>, tensor<6xf32>
  return
}

// -----

func.func @concat_element_type(%x: tensor<2x3xf32>, %y: tensor<2x3xi32>) {
  // expected-error @+1 {{concat inputs must share rank and element type}}
  %0 = px.concat %x, %y {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3xi32>
  return
}

// -----

func.func @concat_dims(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{concat inputs differ in dimension 1: 2x3 vs 2x4}}
  %0 = px.concat %x, %y {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @concat_missing_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'px.concat' op requires attribute 'axis'}}
  %0 = px.concat %x, %x : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @expand_element_type(%x: tensor<3x1xf32>) {
  // expected-error @+1 {{'px.expand' op expand must keep the element type}}
  %0 = px.expand %x : tensor<3x1xf32> -> tensor<3x4xf16>
  return
}

// -----

func.func @expand_shape(%x: tensor<3x2xf32>) {
  // expected-error @+1 {{'px.expand' op input shape 3x2 does not broadcast to 3x4}}
  %0 = px.expand %x : tensor<3x2xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @expand_shrink(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'px.expand' op input shape 3x4 does not broadcast to 4}}
  %0 = px.expand %x : tensor<3x4xf32> -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

func.func @conv_rank(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3xf32>) {
  // expected-error @+1 {{conv needs x [N, C, spatial...] and w of the same rank, got 1x3x32x32 and 16x3x3}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3xf32>
  return
}

// -----

func.func @conv_no_spatial(%x: tensor<1x3xf32>, %w: tensor<16x3xf32>) {
  // expected-error @+1 {{conv needs x [N, C, spatial...] and w of the same rank, got 1x3 and 16x3}}
  %0 = px.conv %x, %w {strides = array<i64>, pads = array<i64>, dilations = array<i64>}
      : tensor<1x3xf32>, tensor<16x3xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x32x32xf32>, %w: tensor<16x4x3x3xf32>) {
  // expected-error @+1 {{channels do not match: x has 3, w is 16x4x3x3, group 1}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x4x3x3xf32>
  return
}

// -----

func.func @conv_group(%x: tensor<1x8x32x32xf32>, %w: tensor<6x2x3x3xf32>) {
  // Four groups of two input channels, but 6 filters do not divide into 4.
  // expected-error @+1 {{channels do not match: x has 8, w is 6x2x3x3, group 4}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 4 : i64}
      : tensor<1x8x32x32xf32>, tensor<6x2x3x3xf32>
  return
}

// -----

func.func @conv_group_zero(%x: tensor<1x8x32x32xf32>, %w: tensor<8x8x3x3xf32>) {
  // expected-error @+1 {{channels do not match: x has 8, w is 8x8x3x3, group 0}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 0 : i64}
      : tensor<1x8x32x32xf32>, tensor<8x8x3x3xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{bias must have shape [16]}}
  %0 = px.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @conv_w_element_type(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf16>) {
  // expected-error @+1 {{w must have the element type of x ('f32'), got 'f16'}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf16>
  return
}

// -----

func.func @conv_b_element_type(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf64>) {
  // expected-error @+1 {{b must have the element type of x ('f32'), got 'f64'}}
  %0 = px.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf64>
  return
}

// -----

func.func @conv_strides(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{expected 2 strides, got 1}}
  %0 = px.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_dilations(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{expected 2 dilations, got 3}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_pads(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{expected 4 pads (begins then ends), got 2}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_zero_stride(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{kernel sizes, strides and dilations must be >= 1}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 0>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_empty_kernel(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x0x3xf32>) {
  // expected-error @+1 {{kernel sizes, strides and dilations must be >= 1}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x0x3xf32>
  return
}

// -----

func.func @conv_negative_pad(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{pads must be >= 0}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, -1>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

// Bounded so that the output size's arithmetic cannot overflow.
func.func @conv_huge_pad(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{kernel sizes, strides, pads and dilations must be below 2^31}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 9223372036854775807>, dilations = array<i64: 1, 1>}
      : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_window(%x: tensor<1x3x4x4xf32>, %w: tensor<16x3x3x3xf32>) {
  // Dilation 2 makes the 3x3 kernel span 5 > 4.
  // expected-error @+1 {{window of size 3 does not fit spatial dimension 0 of size 4}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 2>}
      : tensor<1x3x4x4xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_missing_attrs(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{'px.conv' op requires attribute 'dilations'}}
  %0 = px.conv %x, %w : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv_result_type(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+2 {{'px.conv' op inferred type(s) 'tensor<1x16x6x6xf32>' are incompatible with return type(s) of operation 'tensor<1x16x8x8xf32>'}}
  // expected-error @+1 {{'px.conv' op failed to infer returned types}}
  %0 = "px.conv"(%x, %w) {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x8x8xf32>
  return
}

// -----

func.func @max_pool_rank(%x: tensor<1x4xf32>) {
  // expected-error @+1 {{pooling needs x [N, C, spatial...]}}
  %0 = px.max_pool %x {kernel_shape = array<i64>, strides = array<i64>, pads = array<i64>, dilations = array<i64>} : tensor<1x4xf32>
  return
}

// -----

func.func @max_pool_kernel(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{expected 2 kernel dimensions, got 1}}
  %0 = px.max_pool %x {kernel_shape = array<i64: 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @max_pool_dilation(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{kernel sizes, strides and dilations must be >= 1}}
  %0 = px.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 0, 1>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @max_pool_window(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{window of size 8 does not fit spatial dimension 1 of size 7}}
  %0 = px.max_pool %x {kernel_shape = array<i64: 2, 8>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @max_pool_missing_attrs(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{'px.max_pool' op requires attribute 'dilations'}}
  %0 = px.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @max_pool_ceil_mode_type(%x: tensor<1x4x7x7xf32>) {
  // ceil_mode: ceil(5 / 2) + 1 = 4, not 3.
  // expected-error @+2 {{'px.max_pool' op inferred type(s) 'tensor<1x4x4x4xf32>' are incompatible with return type(s) of operation 'tensor<1x4x3x3xf32>'}}
  // expected-error @+1 {{'px.max_pool' op failed to infer returned types}}
  %0 = "px.max_pool"(%x) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode}
      : (tensor<1x4x7x7xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @avg_pool_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{pooling needs x [N, C, spatial...]}}
  %0 = px.avg_pool %x {kernel_shape = array<i64>, strides = array<i64>, pads = array<i64>} : tensor<4xf32>
  return
}

// -----

func.func @avg_pool_strides(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{expected 2 strides, got 0}}
  %0 = px.avg_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64>, pads = array<i64: 1, 1, 1, 1>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @avg_pool_pads(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{pads must be >= 0}}
  %0 = px.avg_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: -1, 0, 0, 0>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @avg_pool_kernel_zero(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{kernel sizes, strides and dilations must be >= 1}}
  %0 = px.avg_pool %x {kernel_shape = array<i64: 0, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>}
      : tensor<1x4x7x7xf32>
  return
}

// -----

func.func @avg_pool_count_include_pad_kind(%x: tensor<1x4x7x7xf32>) {
  // expected-error @+1 {{'px.avg_pool' op attribute 'count_include_pad' failed to satisfy constraint: unit attribute}}
  %0 = px.avg_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = true}
      : tensor<1x4x7x7xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Sparse gradients
//===----------------------------------------------------------------------===//

func.func @make_sparse_grad_indices(%i: tensor<5xi64>, %v: tensor<6x8xf32>) {
  // expected-error @+1 {{'px.make_sparse_grad' op indices must be 'tensor<6xi64>'}}
  %0 = px.make_sparse_grad %i, %v : tensor<5xi64>, tensor<6x8xf32> -> !px.sparse_grad<6, tensor<100x8xf32>>
  return
}

// -----

func.func @make_sparse_grad_values(%i: tensor<6xi64>, %v: tensor<6x4xf32>) {
  // expected-error @+1 {{'px.make_sparse_grad' op values must be 'tensor<6x8xf32>'}}
  %0 = px.make_sparse_grad %i, %v : tensor<6xi64>, tensor<6x4xf32> -> !px.sparse_grad<6, tensor<100x8xf32>>
  return
}

// -----

func.func @make_sparse_grad_values_element_type(%i: tensor<6xi64>, %v: tensor<6x8xf16>) {
  // expected-error @+1 {{'px.make_sparse_grad' op values must be 'tensor<6x8xf32>'}}
  %0 = px.make_sparse_grad %i, %v : tensor<6xi64>, tensor<6x8xf16> -> !px.sparse_grad<6, tensor<100x8xf32>>
  return
}

// -----

func.func @make_sparse_grad_i32_indices(%i: tensor<6xi32>, %v: tensor<6x8xf32>) {
  // expected-error @+1 {{'px.make_sparse_grad' op operand #0 must be statically shaped tensor of 64-bit signless integer values, but got 'tensor<6xi32>'}}
  %0 = px.make_sparse_grad %i, %v : tensor<6xi32>, tensor<6x8xf32> -> !px.sparse_grad<6, tensor<100x8xf32>>
  return
}

// -----

func.func @matmul_unranked(%a: tensor<*xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{custom op 'px.matmul' invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %0 = px.matmul %a, %b : tensor<*xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @sparse_grad_values_of_dense(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'px.sparse_grad_values' op operand #0 must be row-sparse gradient, but got 'tensor<6x8xf32>'}}
  %0 = "px.sparse_grad_values"(%x) : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @sparse_grad_indices_type(%g: !px.sparse_grad<6, tensor<100x8xf32>>) {
  // expected-error @+2 {{'px.sparse_grad_indices' op inferred type(s) 'tensor<6xi64>' are incompatible with return type(s) of operation 'tensor<5xi64>'}}
  // expected-error @+1 {{'px.sparse_grad_indices' op failed to infer returned types}}
  %0 = "px.sparse_grad_indices"(%g) : (!px.sparse_grad<6, tensor<100x8xf32>>) -> tensor<5xi64>
  return
}

// -----

func.func @densify_type(%g: !px.sparse_grad<6, tensor<100x8xf32>>) {
  // expected-error @+2 {{'px.densify' op inferred type(s) 'tensor<100x8xf32>' are incompatible with return type(s) of operation 'tensor<6x8xf32>'}}
  // expected-error @+1 {{'px.densify' op failed to infer returned types}}
  %0 = "px.densify"(%g) : (!px.sparse_grad<6, tensor<100x8xf32>>) -> tensor<6x8xf32>
  return
}

// -----

func.func @densify_int(%g: !px.sparse_grad<6, tensor<100x8xi32>>) {
  // expected-error @+1 {{'px.densify' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<100x8xi32>'}}
  %0 = px.densify %g : !px.sparse_grad<6, tensor<100x8xi32>>
  return
}

// -----

// The custom form accepts any type where a sparse gradient is expected; the
// shape rule rejects it when the parser infers the result.
func.func @densify_dense(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{operand must be a !px.sparse_grad}}
  %0 = px.densify %x : tensor<6x8xf32>
  return
}

// -----

func.func @sparse_grad_indices_dense(%x: tensor<6xi64>) {
  // expected-error @+1 {{operand must be a !px.sparse_grad}}
  %0 = px.sparse_grad_indices %x : tensor<6xi64>
  return
}

// -----

func.func @sparse_grad_values_dense(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{operand must be a !px.sparse_grad}}
  %0 = px.sparse_grad_values %x : tensor<6x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shape rules reject operands without a static shape before ODS does.
//===----------------------------------------------------------------------===//

func.func @gather_dynamic_data(%d: tensor<?x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{data must be a statically shaped tensor}}
  %0 = px.gather %d[%i] : tensor<?x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @gather_dynamic_indices(%d: tensor<10x4xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{indices must be a statically shaped tensor}}
  %0 = px.gather %d[%i] : tensor<10x4xf32>, tensor<?xi64>
  return
}

// -----

func.func @gemm_dynamic_c(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<?xf32>) {
  // expected-error @+1 {{C must be a statically shaped tensor}}
  %0 = px.gemm %a, %b, %c : tensor<3x4xf32>, tensor<4x5xf32>, tensor<?xf32>
  return
}

// -----

func.func @conv_dynamic_w(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x?x3xf32>) {
  // expected-error @+1 {{w must be a statically shaped tensor}}
  %0 = px.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x3x8x8xf32>, tensor<16x3x?x3xf32>
  return
}

// -----

func.func @layer_norm_dynamic_bias(%x: tensor<2x4xf32>, %s: tensor<4xf32>, %b: tensor<?xf32>) {
  // expected-error @+1 {{bias must be a statically shaped tensor}}
  %0:3 = px.layer_norm %x, %s, %b : tensor<2x4xf32>, tensor<4xf32>, tensor<?xf32>
  return
}

// -----

func.func @sce_dynamic_labels(%s: tensor<8x10xf32>, %l: tensor<?xi64>) {
  // expected-error @+1 {{labels must be a statically shaped tensor}}
  %0, %1 = px.softmax_cross_entropy_loss %s, %l : tensor<8x10xf32>, tensor<?xi64>
  return
}

// -----

func.func @concat_dynamic(%x: tensor<2x3xf32>, %y: tensor<?x3xf32>) {
  // expected-error @+1 {{input must be a statically shaped tensor}}
  %0 = px.concat %x, %y {axis = 0 : i64} : tensor<2x3xf32>, tensor<?x3xf32>
  return
}

// -----

func.func @batch_norm_dynamic(%x: tensor<?x16xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{x must be a statically shaped tensor}}
  %0:3 = px.batch_norm %x, %c, %c, %c, %c : tensor<?x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @max_pool_dynamic(%x: tensor<1x4x?x7xf32>) {
  // expected-error @+1 {{x must be a statically shaped tensor}}
  %0 = px.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : tensor<1x4x?x7xf32>
  return
}

// -----

func.func @slice_dynamic(%x: tensor<?x5xf32>) {
  // Ops without a shape rule get the ODS static-shape constraint.
  // expected-error @+1 {{'px.slice' op operand #0 must be statically shaped tensor}}
  %0 = px.slice %x starts = [0, 0] steps = [1, 1] : tensor<?x5xf32> -> tensor<1x5xf32>
  return
}

#!/usr/bin/env bash
# What the lent GPU machine has for building and running Parallax's CUDA
# backend (issue 14 asks whether to build there or carry a build): one line
# per question, "probe: NAME: ANSWER". Reads only; changes nothing.
set -u
line() { printf 'probe: %s: %s\n' "$1" "$2"; }
have() { command -v "$1" >/dev/null 2>&1 && "$@" 2>&1 | head -1 || echo missing; }
hdr() { for d in "$@"; do [ -e "$d" ] && { echo "$d"; return; }; done; echo missing; }
lib() { ldconfig -p | awk -v n="$1" '$1 ~ "^"n {print $NF; exit}' | grep . || \
        find / -xdev -name "$1*.so*" -not -path '/proc/*' 2>/dev/null | head -1 | grep . || echo missing; }

line os "$(. /etc/os-release; echo "$PRETTY_NAME") $(uname -m) kernel $(uname -r)"
line cpus "$(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), disk free $(df -h --output=avail / | tail -1 | tr -d ' ')"
line gpu "$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 | head -1)"
line nvcc "$(nvcc --version 2>&1 | tail -2 | head -1)"
line g++ "$(have g++ --version)"
line cmake "$(have cmake --version)"
line ninja "$(have ninja --version)"
line ccache "$(have ccache --version)"
line mpirun "$(have mpirun --version)"
line compute-sanitizer "$(have compute-sanitizer --version | tail -1)"
for h in mpi.h cblas.h nlohmann/json.hpp cxxopts.hpp google/protobuf/message.h onnx/onnx_pb.h \
         cudnn.h nccl.h cublasLt.h cub/cub.cuh gtest/gtest.h benchmark/benchmark.h mlir/IR/MLIRContext.h; do
  line "header $h" "$(hdr /usr/include/$h /usr/local/include/$h /usr/local/cuda/include/$h /usr/local/cuda/include/cccl/$h /usr/local/cuda/targets/x86_64-linux/include/cccl/$h \
      /usr/include/x86_64-linux-gnu/$h /usr/include/openmpi/$h /usr/lib/x86_64-linux-gnu/openmpi/include/$h \
      $(ls -d /usr/lib/llvm-*/include/$h 2>/dev/null) $(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia/*/include/$h)"
done
for l in libmpi.so libopenblas.so libdnnl.so libprotobuf.so libonnx.so libnccl.so libcudnn.so libcublas.so libcublasLt.so libgtest libMLIR; do
  line "library $l" "$(lib $l)"
done
line "pip nccl/cudnn" "$(python3 -m pip show nvidia-nccl-cu13 nvidia-cudnn-cu13 2>/dev/null | awk '/^(Name|Version|Location)/{printf "%s ", $2}')"
line python "$(python3 -c 'import sys,torch,onnx;print(sys.version.split()[0],"torch",torch.__version__,"onnx",onnx.__version__,"cuda",torch.cuda.is_available())' 2>&1 | tail -1)"
# A CUDA program built and run here: the toolchain works end to end.
tmp=$(mktemp -d)
cat > "$tmp/k.cu" <<'CU'
#include <cstdio>
__global__ void axpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }
int main() { int n = 1 << 20; float *x, *y; cudaMalloc(&x, n * 4); cudaMalloc(&y, n * 4);
  cudaMemset(x, 0, n * 4); cudaMemset(y, 0, n * 4); axpy<<<(n + 255) / 256, 256>>>(n, 2.f, x, y);
  cudaError_t e = cudaDeviceSynchronize(); printf("%s\n", cudaGetErrorString(e)); return e != cudaSuccess; }
CU
line "nvcc sm_80+sm_90 build and run" "$( (cd "$tmp" && nvcc -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90] k.cu -o k && ./k) 2>&1 | tail -1)"
rm -rf "$tmp"

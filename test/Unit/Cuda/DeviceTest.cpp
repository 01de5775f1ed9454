//===- DeviceTest.cpp - the CUDA device: memory, transfers, faults -------===//

#include "CudaKernelTestUtil.h"

namespace parallax::rt::test {
namespace {

using CudaDeviceTest = CudaKernelTest;

TEST_F(CudaDeviceTest, RoundTripsBytesAndZeroesAllocations) {
  CudaDevice &dev = testCudaDevice();
  Buffer b(1000, &dev);
  std::vector<char> host(1000, 7);
  dev.download(host.data(), b.data(), 1000);
  for (char c : host)
    ASSERT_EQ(c, 0);
  std::vector<char> in(1000);
  for (int i = 0; i < 1000; ++i)
    in[i] = (char)(i * 31);
  dev.upload(b.data(), in.data(), 1000);
  Buffer c(1000, &dev);
  dev.copy(c.data(), b.data(), 1000);
  dev.download(host.data(), c.data(), 1000);
  EXPECT_EQ(host, in);
}

TEST_F(CudaDeviceTest, DescribesItself) {
  EXPECT_NE(testCudaDevice().description().find("cuda:"), std::string::npos);
  EXPECT_GT(testCudaDevice().memoryBytes(), 0);
}

} // namespace
} // namespace parallax::rt::test

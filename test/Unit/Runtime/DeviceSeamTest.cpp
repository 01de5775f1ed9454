//===- DeviceSeamTest.cpp - device names, plan targets, the CPU device ----===//

#include "parallax/Runtime/Device.h"
#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/Session.h"

#include <gtest/gtest.h>

#include <cstring>

namespace parallax::rt {
namespace {

TEST(DeviceSeam, ParsesDeviceSpecs) {
  DeviceOptions o;
  parseDeviceSpec("cuda:3", o);
  EXPECT_EQ(o.kind, DeviceKind::Cuda);
  EXPECT_EQ(o.ordinal, 3);
  parseDeviceSpec("cpu", o);
  EXPECT_EQ(o.kind, DeviceKind::Cpu);
  EXPECT_EQ(o.ordinal, -1);
  for (const char *bad : {"gpu", "cuda:", "cuda:x", "cpu:0", "cuda:-1", ""}) {
    try {
      parseDeviceSpec(bad, o);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument &e) {
      EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos);
    }
  }
}

TEST(DeviceSeam, CpuDeviceMovesBytesAndZeroes) {
  auto dev = makeCpuDevice();
  EXPECT_EQ(dev->space(), MemorySpace::Host);
  Buffer a(100, dev.get()), b(100, dev.get());
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(static_cast<char *>(a.data())[i], 0);
  char host[100];
  for (int i = 0; i < 100; ++i)
    host[i] = (char)i;
  dev->upload(a.data(), host, 100);
  dev->copy(b.data(), a.data(), 100);
  char back[100] = {};
  dev->download(back, b.data(), 100);
  EXPECT_EQ(std::memcmp(host, back, 100), 0);
}

TEST(DeviceSeam, PlansKeepTheirTargetAndRefuseUnknownOnes) {
  Plan p;
  p.mode = Plan::Mode::Inference;
  p.target = "cuda";
  Plan q = parsePlan(serializePlan(p), "p.pxplan");
  EXPECT_EQ(q.target, "cuda");
  Plan bad = p;
  bad.target = "tpu";
  try {
    parsePlan(serializePlan(bad), "bad.pxplan");
    ADD_FAILURE() << "a plan for 'tpu' was accepted";
  } catch (const PlanError &e) {
    EXPECT_NE(std::string(e.what()).find("unknown target 'tpu'"), std::string::npos) << e.what();
  }
}

TEST(DeviceSeam, SessionRefusesAPlanForAnotherTarget) {
  Plan p;
  p.mode = Plan::Mode::Inference;
  p.target = "cuda";
  try {
    Session s(p, SessionOptions{});
    ADD_FAILURE() << "a CUDA plan ran on the CPU";
  } catch (const PlanError &e) {
    EXPECT_NE(std::string(e.what()).find("compiled for --target=cuda, but this run's device is "
                                         "cpu; recompile with --target=cpu or run with "
                                         "--device=cuda"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceSeam, NamesWhyThereIsNoCudaDevice) {
  DeviceOptions o;
  o.kind = DeviceKind::Cuda;
  if (!cudaBackendBuilt()) {
    try {
      makeDevice(o);
      ADD_FAILURE() << "a CUDA device without the CUDA backend";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("built without the CUDA backend"), std::string::npos);
    }
    return;
  }
  try {
    makeDevice(o);
  } catch (const std::runtime_error &e) {
    // No GPU here: the message says so and what to do instead.
    EXPECT_NE(std::string(e.what()).find("--device=cpu"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace parallax::rt

//===- WatchProbe.cpp - the collective timeout's answers, under mpirun ----===//
//
// A small MPI program for test/Distributed/watch-answers.test: it puts the
// ranks where a collective times out and prints the line the watch ends the
// job with. Rank 0 waits 1 s (5 s in `late`), the others 60 s, so that
// rank 0 reports.
//
//   parallax-watch-probe busy       the last rank computes for 5 s before it
//                                   joins the world's all-reduce
//   parallax-watch-probe elsewhere  4 ranks on a 2x2 grid: 0, 1 and 2 in the
//                                   world's all-reduce, 3 in a barrier with 1
//   parallax-watch-probe late       the last rank joins after 0.5 s, within
//                                   the timeout: no error
//   parallax-watch-probe neighbours  a halo exchange's point-to-point
//                                   sendrecv between neighbours in a row of
//                                   ranks, the last one computing for 5 s
//                                   first
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace parallax::rt;

int main(int argc, char **argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  int worldRank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK") ? std::getenv("OMPI_COMM_WORLD_RANK")
                                                                 : "0");
  double timeout = worldRank == 0 ? (scenario == "late" ? 5.0 : 1.0) : 60.0;
  std::unique_ptr<Comm> comm = makeMpiComm(CommThread::Off, timeout);
  comm->onTimeout([&](const std::string &message) {
    std::fprintf(stderr, "parallax-watch-probe: rank %d: %s\n", comm->rank(), message.c_str());
    comm->abort(1);
  });
  int n = comm->size(), last = n - 1;
  static const JobInfo reduce{-1, "all_reduce", "the probe's all_reduce"};
  static const JobInfo barrier{-1, "barrier", "the probe's barrier"};
  double x = 1;
  auto allReduce = [&](Group &g) {
    comm->run([&] { comm->allreduce(g, &x, 1, DType::F64, ReduceOp::Sum); }, &reduce);
  };
  if (scenario == "busy" || scenario == "late") {
    Group &world = comm->group({n}, {0});
    if (comm->rank() == last)
      std::this_thread::sleep_for(std::chrono::milliseconds(scenario == "busy" ? 5000 : 500));
    allReduce(world);
  } else if (scenario == "elsewhere" && n == 4) {
    Group &world = comm->group({2, 2}, {0, 1});
    Group &column = comm->group({2, 2}, {0}); // {0, 2} and {1, 3}
    if (comm->rank() == 3)
      comm->run([&] { comm->barrier(column); }, &barrier);
    allReduce(world);
  } else if (scenario == "neighbours") {
    // Each rank sends its rank to both neighbours; rank 0 hears from 1.
    Group &world = comm->group({n}, {0});
    int r = comm->rank();
    double from[2] = {-1, -1}, mine = r;
    std::vector<PeerTransfer> transfers;
    for (int side = 0; side < 2; ++side) {
      int peer = side == 0 ? r - 1 : r + 1;
      if (peer >= 0 && peer < n)
        transfers.push_back({peer, &mine, sizeof mine, &from[side], sizeof from[side]});
    }
    if (r == last)
      std::this_thread::sleep_for(std::chrono::milliseconds(5000));
    static const JobInfo halo{-1, "halo_exchange", "the probe's sendrecv"};
    comm->run([&] { comm->sendrecv(world, transfers); }, &halo);
    x = from[1];
  } else {
    std::fprintf(stderr, "usage: parallax-watch-probe busy|elsewhere|late|neighbours "
                         "(elsewhere: 4 ranks)\n");
    return 2;
  }
  if (comm->rank() == 0)
    std::printf("parallax-watch-probe: %s: the all_reduce completed: %g\n", scenario.c_str(), x);
  return 0;
}

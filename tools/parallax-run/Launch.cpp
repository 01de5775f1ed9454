//===- Launch.cpp - the mpirun launcher -----------------------------------===//

#include "Launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace parallax::run {

namespace {

/// The signal that stopped the launcher, forwarded to mpirun.
volatile sig_atomic_t forwarded = 0;
volatile pid_t mpirunPid = 0;
/// When the last one was forwarded (CLOCK_MONOTONIC seconds).
volatile time_t forwardedAt = 0;

/// SIGINT, SIGTERM, SIGHUP: passed on to mpirun, which ends the ranks
/// (SIGTERM, then SIGKILL) and exits. A repeat within a second is dropped:
/// `timeout` signals the launcher and then its whole process group, and a
/// second signal makes mpirun exit at once without ending the ranks (they
/// follow it through their own death signal; see dieWithParent).
void forward(int sig) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (forwarded && now.tv_sec - forwardedAt < 1)
    return;
  forwarded = sig;
  forwardedAt = now.tv_sec;
  if (mpirunPid > 0)
    kill(mpirunPid, sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

} // namespace

int launchRanks(int np, const std::string &hostfile,
                const std::vector<std::string> &argv) {
  std::vector<std::string> cmd{"mpirun", "-np", std::to_string(np), "--bind-to",
                               "none"};
  if (geteuid() == 0)
    cmd.push_back("--allow-run-as-root");
  if (hostfile.empty()) {
    // One machine: ranks may outnumber cores (threads are split between
    // them), which Open MPI refuses by default.
    cmd.push_back("--oversubscribe");
  } else {
    cmd.insert(cmd.end(), {"--hostfile", hostfile});
  }
  // mpirun runs in a process group of its own (below), where reading the
  // terminal would stop it; parallax-run reads no input.
  cmd.insert(cmd.end(), {"--stdin", "none"});
  // Idle OpenMP threads of one rank must not spin on the cores the others
  // (and BLAS) need.
  if (!std::getenv("OMP_WAIT_POLICY"))
    cmd.insert(cmd.end(), {"-x", "OMP_WAIT_POLICY=PASSIVE"});
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cmd.push_back(n > 0 ? std::string(self, n) : argv[0]);
  cmd.insert(cmd.end(), argv.begin() + 1, argv.end());

  std::vector<char *> cargs;
  for (std::string &a : cmd)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);

  // Signals that arrive before mpirun's pid is known wait until it is.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kForwarded)
    sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old);
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded)
    sigaction(sig, &sa, nullptr);

  // fork and exec, not posix_spawn: the child sets its death signal first.
  int report[2]; // exec's failure, back to the launcher
  if (pipe2(report, O_CLOEXEC) != 0) {
    std::cerr << "parallax-run: error: cannot start mpirun: " << std::strerror(errno) << "\n";
    return 1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    // Its own process group: a terminal's Ctrl-C, or `timeout` signalling
    // the launcher's group, reaches mpirun once, through the launcher.
    setpgid(0, 0);
    // A launcher that dies (even by SIGKILL) takes the job with it: mpirun
    // ends the ranks on SIGTERM.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
      _exit(1);
    for (int sig : kForwarded)
      signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp("mpirun", cargs.data());
    int err = errno;
    ssize_t ignored = write(report[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    std::cerr << "parallax-run: error: cannot start mpirun: " << std::strerror(errno) << "\n";
    return 1;
  }
  mpirunPid = pid;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int err = 0;
  ssize_t got;
  while ((got = read(report[0], &err, sizeof err)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  mpirunPid = 0;
  if (got == (ssize_t)sizeof err) {
    std::cerr << "parallax-run: error: cannot start mpirun: " << std::strerror(err)
              << " (install openmpi-bin: scripts/setup.sh)\n";
    return 1;
  }
  if (int sig = forwarded) {
    // Stopped from outside: say so, and end as the signal would have.
    std::cerr << "parallax-run: SIG" << sigabbrev_np(sig) << ": ended the " << np
              << "-rank job\n";
    signal(sig, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &block, nullptr);
    raise(sig);
    return 128 + sig;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  if (WIFSIGNALED(status)) {
    std::cerr << "parallax-run: error: mpirun was killed by SIG" << sigabbrev_np(WTERMSIG(status))
              << "; its ranks end with it\n";
    return 128 + WTERMSIG(status);
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::cerr << "parallax-run: error: the " << np << "-rank job failed (mpirun "
            << "exit status " << code << "); the lines above name the failing "
            << "rank\n";
  return code ? code : 1;
}

void dieWithParent() {
  // Whoever started this rank (mpirun, an Open MPI daemon, a scheduler's
  // step daemon) is what a user stops to stop the job: a rank must not
  // train on after it, even when it was killed with SIGKILL.
  // (Not a check for parent 1: in a container mpirun may be init.)
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) // it died before the request took effect
    raise(SIGKILL);
}

} // namespace parallax::run

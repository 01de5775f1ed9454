#!/bin/bash
# Kills one rank of a running multi-rank job with SIGKILL (or sends it
# another signal: SIGSTOP stops it, as a hung machine would) and reports how
# the job ends.
#
#   kill_rank.sh [-s SIGNAL] RANK METRICS -- parallax-run PLAN --np N ... --metrics METRICS ...
#
# Starts the command (parallax-run, which re-launches itself under mpirun),
# waits until rank RANK has written 3 lines to its metrics file (so the job
# is mid-run, both ranks in their step loop), finds that rank's process
# among the launcher's descendants (by OMPI_COMM_WORLD_RANK in its
# environment), kills it, and waits for the launcher. Prints the job's
# output and exits with its status. Exits 0 with a message (which a test's
# `not` turns into a failure) if the job ends before the rank could be
# killed; gives up on a job still running 60 s after the kill (ending the
# processes it started, by id) and exits 124. A rank left behind by the job
# (a stopped one, say) is killed too, and reported.
set -u
signal=KILL
if [ "$1" = -s ]; then
  signal=$2
  shift 2
fi
rank=$1
metrics=$2
shift 3
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$@" >"$log" 2>&1 &
launcher=$!

descendants() {
  local p
  for p in $(pgrep -P "$1"); do
    echo "$p"
    descendants "$p"
  done
}

# The metrics file of RANK: M.jsonl -> M.rankR.jsonl.
file="${metrics%.jsonl}.rank$rank.jsonl"
target=
for _ in $(seq 600); do
  if ! kill -0 "$launcher" 2>/dev/null; then
    break
  fi
  if [ -f "$file" ] && [ "$(wc -l <"$file")" -ge 3 ]; then
    for p in $(descendants "$launcher"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" &&
         [ "$(cat "/proc/$p/comm" 2>/dev/null)" = parallax-run ]; then
        target=$p
        break
      fi
    done
    [ -n "$target" ] && break
  fi
  sleep 0.1
done
if [ -z "$target" ]; then
  wait "$launcher"
  cat "$log"
  echo "kill_rank.sh: error: the job ended (or rank $rank never started its steps) before rank $rank could be killed"
  exit 0
fi
kill -"$signal" "$target"
if [ "$signal" = KILL ]; then
  echo "kill_rank.sh: killed rank $rank (pid $target) mid-run"
else
  echo "kill_rank.sh: sent SIG$signal to rank $rank (pid $target) mid-run"
fi

for _ in $(seq 600); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  cat "$log"
  echo "kill_rank.sh: error: the job is still running 60 s after rank $rank was killed"
  for p in $(descendants "$launcher") "$launcher"; do
    kill -9 "$p" 2>/dev/null
  done
  exit 124
fi
wait "$launcher"
status=$?
cat "$log"
echo "kill_rank.sh: the job ended with status $status"
for _ in $(seq 50); do
  kill -0 "$target" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$target" 2>/dev/null; then
  echo "kill_rank.sh: error: rank $rank (pid $target) outlived the job by 5 s"
  kill -9 "$target"
fi
exit "$status"

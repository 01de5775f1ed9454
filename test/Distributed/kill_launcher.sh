#!/bin/bash
# Signals the launcher of a running multi-rank job (or its mpirun) and checks
# that the whole job goes with it.
#
#   kill_launcher.sh [--mpirun] SIGNAL MARKER METRICS -- parallax-run PLAN --np N ... --metrics METRICS ...
#   kill_launcher.sh --left MARKER
#
# Starts the command, waits until rank 0 has written 3 lines to its metrics
# file (the job is mid-run), sends SIGNAL (TERM, INT, HUP, KILL) to the
# launcher, or with --mpirun to the mpirun it started, and waits for the
# launcher (60 s at most). Then it waits (30 s at most) until no
# parallax-run, mpirun or orted process whose command line contains MARKER
# (a path unique to the test) is left, and prints what it found. Processes
# still there after that are killed (by id) and reported; the exit status
# is 1 then, and the launcher's status otherwise. With --left, only that
# last check (for a job ended some other way).
set -u

# The job's processes: by name, and the marker in their command line.
job() {
  local d p
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = $$ ] && continue
    case "$(cat "$d/comm" 2>/dev/null)" in
      parallax-run|mpirun|orted|prterun|prted) ;;
      *) continue ;;
    esac
    tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -qF -- "$marker" && echo "$p"
  done
}

# Waits until no process of the job is left; kills and reports those that
# stay.
no_job_left() {
  local left
  for _ in $(seq 300); do
    [ -z "$(job)" ] && break
    sleep 0.1
  done
  left=$(job)
  if [ -n "$left" ]; then
    echo "kill_launcher.sh: error: left behind 30 s after the launcher: $(for p in $left; do echo -n "$p ($(cat /proc/$p/comm 2>/dev/null)) "; done)"
    kill -9 $left 2>/dev/null
    return 1
  fi
  echo "kill_launcher.sh: no process of the job is left"
}

if [ "$1" = --left ]; then
  marker=$2
  no_job_left
  exit
fi
target=launcher
if [ "$1" = --mpirun ]; then
  target=mpirun
  shift
fi
signal=$1
marker=$2
metrics=$3
shift 4
log=$(mktemp)
trap 'rm -f "$log"' EXIT


"$@" >"$log" 2>&1 &
launcher=$!

file="${metrics%.jsonl}.rank0.jsonl"
for _ in $(seq 600); do
  kill -0 "$launcher" 2>/dev/null || break
  [ -f "$file" ] && [ "$(wc -l <"$file")" -ge 3 ] && break
  sleep 0.1
done
if ! [ -f "$file" ] || [ "$(wc -l <"$file")" -lt 3 ]; then
  kill -9 $(job) 2>/dev/null
  wait "$launcher"
  cat "$log"
  echo "kill_launcher.sh: error: the job ended (or never started its steps) before it could be signalled"
  exit 0
fi
victim=$launcher
if [ "$target" = mpirun ]; then
  victim=$(pgrep -P "$launcher" -x mpirun)
fi
echo "kill_launcher.sh: $(job | wc -l) processes in the job"
kill -"$signal" "$victim"
echo "kill_launcher.sh: sent SIG$signal to $target mid-run"

# (bash's note that its job was killed is not the job's output)
{
  for _ in $(seq 600); do
    kill -0 "$launcher" || break
    sleep 0.1
  done
  if kill -0 "$launcher"; then
    echo "kill_launcher.sh: error: the launcher is still running 60 s after SIG$signal"
    kill -9 "$launcher"
  fi
  wait "$launcher"
  status=$?
} 2>/dev/null
cat "$log"
echo "kill_launcher.sh: the launcher ended with status $status"
no_job_left || exit 1
exit "$status"

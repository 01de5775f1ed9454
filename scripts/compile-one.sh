#!/usr/bin/env bash
# Compiles one source file of the build with its exact command from
# compile_commands.json, into a scratch object: a way to check a file while
# another build (or another helper) owns the build directory.
# Usage: scripts/compile-one.sh FILE [BUILD_DIR]
set -euo pipefail
file=$(realpath "$1"); build=${2:-build}
cmd=$(/usr/bin/python3 - "$file" "$build" <<'PY'
import json, sys, shlex
f, b = sys.argv[1], sys.argv[2]
for c in json.load(open(f"{b}/compile_commands.json")):
    if c["file"] == f:
        args = shlex.split(c["command"])
        i = args.index("-o"); args[i + 1] = "/tmp/compile-one-%d.o" % abs(hash(f))
        print(shlex.join(args)); break
else:
    sys.exit(f"{f} is not in {b}/compile_commands.json")
PY
)
cd "$build" && eval "$cmd"

#!/usr/bin/env bash
# Exports the example models that are not committed (lm, dlrm, nmt and the
# torchvision models) with Debian's PyTorch; a no-op when they are current.
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 examples/make_models.py --if-stale

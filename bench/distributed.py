#!/usr/bin/python3
"""Data-parallel training of the LM and DLRM examples (and the dense-only cnn
and mlp): parallax-run versus PyTorch DistributedDataParallel, on this
machine, in one run.

    bench/distributed.py [--models lm,dlrm,cnn,mlp] [--ranks 2,4] [--steps 10]
                         [--warmup 3] [--schemes hybrid,allreduce,ps,allgatherv]
                         [--netns-rates 1gbit,100mbit] [--netns-ranks 4]
                         [--no-loopback] [--profile-data] [--batch lm=8,dlrm=128]
                         [--build DIR] [--work DIR] [--json FILE]

Same model (the nn.Module of examples/make_models.py and its ONNX export),
same global batch (the model's default unless --batch), split evenly over
the ranks, same optimizer (SGD, lr 0.01), one thread per rank, synthetic
data with the same distributions (Zipf ids, normal floats, uniform labels):

* DDP: one process per rank (torch.distributed, gloo), each with its share of
  every global batch, DistributedDataParallel(module, broadcast_buffers=False)
  (the buffers are constants), per step zero_grad, forward, backward, step.
  Two variants: "dense", the module as written (nn.Embedding's dense
  gradients: the whole tables are all-reduced), and "sparse": every
  embedding read produces a sparse gradient (gloo then all-gathers the
  coalesced rows, indices and values, and sums them): dlrm's tables get
  sparse=True; lm's `embed` gets sparse=True and, in a wrapped copy of the
  module, its output layer reads w_out and b_out (as [V, 1], same values)
  through nn.Embedding(sparse=True) modules that hold them (DDP tells sparse
  parameters by their modules; F.embedding(..., sparse=True) on a bare
  parameter makes DDP expect a dense gradient and fail), one lookup per
  step for the targets and the candidates together; the wrapped copy is
  checked to compute the same loss and gradients as the original.
* Parallax: parallax-opt MODEL --emit=plan --np N --sync=S --optimizer=sgd
  --lr=0.01 --batch-size B (the global batch), then parallax-run PLAN --np N
  --threads 1 --synthetic; S = hybrid (the cost model's choice per
  variable) and every forced scheme.
* Dense-only models (cnn, mlp): DDP as written, Parallax hybrid only (every
  scheme all-reduces a dense variable alike); cnn's plans use
  --local-batchnorm, each rank's own batch statistics, as DDP's BatchNorm.

Steps/s is 1 / the median over the timed steps of the slowest rank's step
time; bytes/step/rank is the mean over ranks of the bytes each rank sends
per step (over all ranks, what is sent is received: the mean sent equals the
mean received).  Parallax reports its bytes itself (parallax-run --metrics:
exact for its all-gathers, pulls and pushes, the ring volume 2(N-1)/N of the
buffer for all-reduce).  For DDP on loopback they are computed from the
collective sizes: the ring volume 2(N-1)/N of every dense gradient, and for
each sparse gradient gloo's all-gather of the metadata (9 int64 per rank) and
of the coalesced rows' indices (int64) and values ((N-1)/N of the sum over
ranks), the rows counted on each rank's data.

--netns-rates: the same runs with every rank in its own network namespace,
joined through veth pairs to a bridge, each veth rate-limited in both
directions by tc tbf (a full-duplex link of that rate per rank).  The script
creates the namespaces, bridge and qdiscs and removes them at the end, also
on failure or Ctrl-C.  Parallax's ranks are started by mpirun through an rsh
agent that runs `ip netns exec` (TCP between ranks); DDP's ranks by `ip
netns exec NS python3 ...`.  There bytes/step/rank come from the interface
counters for both (IP packets, headers included): DDP reads its own around
the timed steps, Parallax's are read around a run and a 0-step run's
traffic (MPI start-up) is subtracted.  Plans for namespaces are compiled
with --cluster (N machines of 1 rank, the link's rate and 100 us).  Each
namespace is one "machine" with one slot, so Open MPI would busy-poll; but
the namespaces share this machine's cores, so mpirun gets --mca
mpi_yield_when_idle 1 (--px-mca), as parallax-run --np's --oversubscribe
gives on one machine.

--profile-data: hybrid plans are compiled with --profile-data on 20 batches
drawn from the same distribution (alpha measured instead of bounded).

Needs root for the namespaces.  Prints markdown tables.
"""

import argparse
import atexit
import json
import os
import random
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402

LR = 0.01
SCHEMES = ["hybrid", "allreduce", "ps", "allgatherv"]
DEFAULT_BATCH = {"lm": 8, "dlrm": 128, "cnn": 16, "mlp": 32}
SPARSE_MODELS = ("lm", "dlrm")


def model_schemes(model, schemes):
    """Dense-only models: every scheme all-reduces a dense variable the same
    way (hybrid = allreduce = allgatherv), and ps would put dense weights on
    servers; only hybrid is run."""
    return schemes if model in SPARSE_MODELS else ["hybrid"]


def model_variants(model, variants):
    return variants if model in SPARSE_MODELS else ["dense"]


# ---------------------------------------------------------------------------
# PyTorch: the sparse variants
# ---------------------------------------------------------------------------

def sparse_variant(name, module):
    """The module with sparse gradients for every embedding read (see the
    file comment).  dlrm: the tables' own sparse flag.  lm: a wrapper that
    owns the original submodules and parameters and re-states the sampled
    softmax head of make_models.LM.forward with sparse reads: w_out and
    b_out as the weights of nn.Embedding(sparse=True) modules (DDP tells
    sparse parameters by their modules), each read once per step for the
    targets and the candidates together."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    if name == "dlrm":
        for t in module.tables:
            t.sparse = True
        return module
    assert name == "lm"
    module.embed.sparse = True

    class SparseLM(nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm
            # w_out and b_out (as [V, 1], same values) become the weights of
            # nn.Embedding(sparse=True) modules: DDP decides which
            # parameters have sparse gradients from their modules.
            V, D = lm.w_out.shape
            self.out_w = nn.Embedding(V, D, sparse=True)
            self.out_w.weight = lm.w_out
            self.out_b = nn.Embedding(V, 1, sparse=True)
            self.out_b.weight = nn.Parameter(lm.b_out.detach().clone().unsqueeze(1))
            del lm.w_out, lm.b_out

        def forward(self, tokens, targets, sampled):
            lm = self.lm
            D = self.out_w.weight.shape[1]
            x = lm.drop(lm.embed(tokens) + lm.pos)
            for block in lm.blocks:
                x = block(x, lm.mask)
            h = lm.ln_f(x).reshape(-1, D)
            t = targets.reshape(-1)
            # One read per parameter: the targets' and the candidates' rows
            # in one lookup, then split.
            ids = torch.cat([t, sampled])
            w = self.out_w(ids)
            b = self.out_b(ids).squeeze(1)
            w_t, w_s = w[:t.shape[0]], w[t.shape[0]:]
            b_t, b_s = b[:t.shape[0]], b[t.shape[0]:]
            true_logit = (h * w_t).sum(-1, keepdim=True) + b_t.unsqueeze(1)
            sampled_logits = torch.matmul(h, w_s.t()) + b_s
            logits = torch.cat([true_logit, sampled_logits], 1)
            labels = torch.zeros(h.shape[0], dtype=torch.long)
            return F.cross_entropy(logits, labels)

    return SparseLM(module)


def check_sparse_variant(name, inputs_file):
    """The sparse variant computes the same loss and gradients (dropout
    off) as the module as written."""
    import torch
    with open(inputs_file) as f:
        inputs = json.load(f)
    batch = [torch.from_numpy(a) for a in pxbench.Synthetic(inputs, seed=3).batches(1)[0]]
    dense, _ = pxbench.build_module(name)
    sparse, _ = pxbench.build_module(name)
    sparse = sparse_variant(name, sparse)
    dense.eval()
    sparse.eval()
    ld, ls = dense(*batch), sparse(*batch)
    ld.backward()
    ls.backward()
    worst = abs(float(ld) - float(ls))
    gd = dict(dense.named_parameters())
    nsparse = 0
    for n, p in sparse.named_parameters():
        g = p.grad.to_dense() if p.grad.is_sparse else p.grad
        nsparse += p.grad.is_sparse
        if n == "out_b.weight":
            ref = gd["b_out"].grad.unsqueeze(1)
        elif n == "out_w.weight":
            ref = gd["w_out"].grad
        else:
            ref = gd[n[3:] if n.startswith("lm.") else n].grad
        worst = max(worst, float((g - ref).abs().max()))
    if worst > 1e-5:
        sys.exit("the sparse %s variant differs from the module (%g)" % (name, worst))
    return nsparse, worst


def sparse_rows(name, batch):
    """Per sparse parameter of the DDP sparse variant: (rows this rank's
    gradient has after coalescing, bytes per row)."""
    import numpy as np
    if name == "lm":
        tokens, targets, sampled = batch
        out_rows = len(np.unique(np.concatenate([targets.reshape(-1), sampled])))
        return [(len(np.unique(tokens)), 256 * 4), (out_rows, 256 * 4), (out_rows, 4)]
    cats = batch[1:5]
    return [(len(np.unique(c)), 16 * 4) for c in cats]


def iface_counters(iface):
    """(tx_bytes, rx_bytes) of an interface in this network namespace."""
    with open("/proc/net/dev") as f:
        for line in f:
            if ":" in line and line.split(":")[0].strip() == iface:
                v = line.split(":")[1].split()
                return int(v[8]), int(v[0])
    raise RuntimeError("no interface " + iface)


def ddp_worker(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    rank, world = args.rank, args.world
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (args.master, args.port),
                            rank=rank, world_size=world)
    with open(args.inputs) as f:
        inputs = json.load(f)  # the single-process plan's: dim 0 = the global batch
    module, _ = pxbench.build_module(args.model)
    if args.variant == "sparse":
        module = sparse_variant(args.model, module)
    total = args.warmup + args.steps
    glob = pxbench.Synthetic(inputs, seed=1).batches(total)
    batches = []
    for step in glob:
        local = []
        for inp, a in zip(inputs, step):
            if inp["batch_axis"] == 0:
                n = a.shape[0] // world
                a = a[rank * n:(rank + 1) * n]
            local.append(np.ascontiguousarray(a))
        batches.append(local)
    ddp = DDP(module, broadcast_buffers=False)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    dense_bytes = sum(p.numel() * p.element_size() for n, p in module.named_parameters()
                      if not (args.variant == "sparse" and is_sparse_param(args.model, n)))
    tensors = [[torch.from_numpy(a) for a in b] for b in batches]

    def step(i):
        opt.zero_grad()
        loss = ddp(*tensors[i])
        loss.backward()
        opt.step()
        return float(loss)

    warm = []
    for i in range(args.warmup):
        t0 = time.perf_counter()
        step(i)
        warm.append(time.perf_counter() - t0)
    # As many timed steps as fit --budget seconds (rank 0 decides), at least
    # --min-steps but never more than the --steps whose batches exist.
    n = torch.tensor([args.steps])
    if rank == 0 and warm and args.budget > 0:
        n[0] = max(min(args.min_steps, args.steps),
                   min(args.steps, int(args.budget / max(warm[-1], 1e-6))))
    dist.broadcast(n, 0)
    steps = int(n[0])
    dist.barrier()
    c0 = iface_counters(args.iface) if args.iface else None
    times, losses, sparse = [], [], []
    for i in range(args.warmup, args.warmup + steps):
        t0 = time.perf_counter()
        losses.append(step(i))
        times.append(time.perf_counter() - t0)
        if args.variant == "sparse":
            sparse.append(sparse_rows(args.model, batches[i]))
    dist.barrier()
    c1 = iface_counters(args.iface) if args.iface else None
    out = {"rank": rank, "times": times, "losses": losses, "warmup_times": warm,
           "dense_bytes": dense_bytes, "sparse_rows": sparse,
           "iface_tx": (c1[0] - c0[0]) if c0 else None,
           "iface_rx": (c1[1] - c0[1]) if c0 else None}
    with open(args.out, "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


def is_sparse_param(model, name):
    if model == "lm":
        return name in ("lm.embed.weight", "out_w.weight", "out_b.weight")
    return name.startswith("tables.")


# ---------------------------------------------------------------------------
# Network namespaces
# ---------------------------------------------------------------------------

class Netns:
    """N namespaces pxbNNNN-k, each with a veth `pxeth` (10.213.S.k+1/24)
    whose host end is on a bridge (10.213.S.254), both directions limited to
    `rate` by tbf.  close() removes everything; it is also registered with
    atexit and the signal handlers."""

    def __init__(self, n, rate, work):
        self.n, self.rate, self.work = n, rate, Path(work)
        tag = "%04d" % (os.getpid() % 10000)
        self.ns = ["pxb%s-%d" % (tag, k) for k in range(n)]
        self.host_if = ["pxh%s%d" % (tag, k) for k in range(n)]
        self.bridge = "pxbr" + tag
        self.subnet = 10 + os.getpid() % 200
        self.ips = ["10.213.%d.%d" % (self.subnet, k + 1) for k in range(n)]
        self.bridge_ip = "10.213.%d.254" % self.subnet
        self.created = []
        _cleanups.append(self.close)

    def sh(self, *cmd):
        p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd), p.stdout.strip()))
        return p.stdout

    def tbf(self, prefix, dev):
        bits = parse_rate(self.rate)
        burst = max(32 * 1024, int(bits / 8 / 250))  # >= one 4 ms tick of tokens
        self.sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                "burst", str(burst), "latency", "50ms")

    def create(self):
        self.sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.created.append(("link", self.bridge))
        self.sh("ip", "addr", "add", self.bridge_ip + "/24", "dev", self.bridge)
        self.sh("ip", "link", "set", self.bridge, "up")
        for k in range(self.n):
            ns, hif = self.ns[k], self.host_if[k]
            self.sh("ip", "netns", "add", ns)
            self.created.append(("netns", ns))
            self.sh("ip", "link", "add", hif, "type", "veth", "peer", "name", "pxeth", "netns", ns)
            self.created.append(("link", hif))
            self.sh("ip", "link", "set", hif, "master", self.bridge)
            self.sh("ip", "link", "set", hif, "up")
            inns = ["ip", "netns", "exec", ns]
            self.sh(*inns, "ip", "addr", "add", self.ips[k] + "/24", "dev", "pxeth")
            self.sh(*inns, "ip", "link", "set", "pxeth", "up")
            self.sh(*inns, "ip", "link", "set", "lo", "up")
            if self.rate:
                self.tbf(inns, "pxeth")  # what the rank sends
                self.tbf([], hif)        # what it receives
        # The rsh agent for mpirun: `agent HOST cmd...` runs cmd in HOST's
        # namespace.
        self.agent = self.work / ("agent-%s.sh" % self.bridge)
        cases = "\n".join('  %s) ns=%s ;;' % (ip, ns) for ip, ns in zip(self.ips, self.ns))
        self.agent.write_text(
            "#!/bin/sh\n# Open MPI rsh agent: agent.sh [options] HOST command...\n"
            "while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n"
            "host=$1; shift\ncase \"$host\" in\n%s\n  *) echo \"unknown host $host\" >&2; exit 1;;\n"
            "esac\nexec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n" % cases)
        self.agent.chmod(0o755)
        self.hostfile = self.work / ("hosts-%s" % self.bridge)
        self.hostfile.write_text("".join("%s slots=1\n" % ip for ip in self.ips))

    def counters(self, k):
        out = self.sh("ip", "netns", "exec", self.ns[k], "cat", "/proc/net/dev")
        for line in out.splitlines():
            if ":" in line and line.split(":")[0].strip() == "pxeth":
                v = line.split(":")[1].split()
                return int(v[8]), int(v[0])
        raise RuntimeError("no pxeth in " + self.ns[k])

    def close(self):
        for kind, name in reversed(self.created):
            # Processes left in a namespace (a failed run) are ours: end them.
            if kind == "netns":
                pids = subprocess.run(["ip", "netns", "pids", name], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True).stdout.split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL)
            else:
                subprocess.run(["ip", "link", "del", name], stderr=subprocess.DEVNULL)
        self.created = []


def parse_rate(rate):
    r = rate.lower()
    for suffix, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if r.endswith(suffix):
            return float(r[:-len(suffix)]) * mult
    raise ValueError("rate must end in gbit, mbit or kbit: " + rate)


_cleanups = []
_children = []


def _cleanup(*_):
    for p in _children:
        if p.poll() is None:
            p.kill()
    while _cleanups:
        _cleanups.pop()()


def _on_signal(signum, frame):
    _cleanup()
    sys.exit(128 + signum)


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(model, variant, n, args, inputs_file, netns=None, tag=""):
    """One DDP job; returns steps/s, bytes/step/rank and the losses."""
    work = Path(args.work)
    port = free_port() if netns is None else 29500 + random.randrange(1000)
    master = "127.0.0.1" if netns is None else netns.ips[0]
    procs, outs = [], []
    for r in range(n):
        out = work / ("ddp-%s-%s-n%d%s.rank%d.json" % (model, variant, n, tag, r))
        out.unlink(missing_ok=True)
        outs.append(out)
        cmd = [pxbench.PYTHON, __file__, "--ddp-worker", "--model", model, "--variant", variant,
               "--rank", str(r), "--world", str(n), "--master", master, "--port", str(port),
               "--steps", str(args.steps if netns is None else args.netns_steps),
               "--warmup", str(args.warmup if netns is None else 1),
               "--inputs", str(inputs_file), "--out", str(out),
               "--budget", str(args.budget), "--min-steps", "3"]
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        if netns is None:
            env["GLOO_SOCKET_IFNAME"] = "lo"
        else:
            cmd = ["ip", "netns", "exec", netns.ns[r]] + cmd + ["--iface", "pxeth"]
            env["GLOO_SOCKET_IFNAME"] = "pxeth"
        log = open(work / ("ddp-%s-%s-n%d%s.rank%d.log" % (model, variant, n, tag, r)), "w")
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _children.append(p)
        procs.append((p, log))
    # Wait for all; once one rank fails, end the others (they would wait in
    # a collective forever).  A job that makes no progress for --timeout
    # seconds is ended too.
    failed, t0 = [], time.monotonic()
    while any(p.poll() is None for p, _ in procs):
        if any(p.poll() not in (None, 0) for p, _ in procs) or \
                time.monotonic() - t0 > args.timeout:
            for p, _ in procs:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.2)
    for r, (p, log) in enumerate(procs):
        if p.wait() != 0:
            failed.append(r)
        log.close()
    if failed:
        log = work / ("ddp-%s-%s-n%d%s.rank%d.log" % (model, variant, n, tag, failed[0]))
        sys.stdout.write(log.read_text()[-3000:])
        raise RuntimeError("DDP %s %s n=%d: rank(s) %s failed" % (model, variant, n, failed))
    res = [json.loads(o.read_text()) for o in outs]
    steps = len(res[0]["times"])
    step = [max(r["times"][i] for r in res) for i in range(steps)]
    if netns is None:
        ring = 2 * (n - 1) / n * res[0]["dense_bytes"]
        sparse = 0.0
        if variant == "sparse":
            per_step = []
            for i in range(steps):
                b = 0.0
                for p in range(len(res[0]["sparse_rows"][i])):
                    chunks = [72 + r["sparse_rows"][i][p][0] * (8 + r["sparse_rows"][i][p][1])
                              for r in res]
                    b += (n - 1) / n * sum(chunks)
                per_step.append(b)
            sparse = pxbench.median(per_step)
        sent = ring + sparse
        how = "collective sizes"
    else:
        sent = statistics.mean(r["iface_tx"] for r in res) / steps
        how = "interface counters"
    return {"system": "DDP " + variant, "steps_per_s": 1 / pxbench.median(step),
            "step_s": pxbench.median(step), "bytes": sent, "bytes_how": how, "steps": steps,
            "loss_first": res[0]["losses"][0], "loss_last": res[0]["losses"][-1]}


def compile_parallax(build, model, scheme, n, batch, work, cluster=None, profile_dir=None):
    flags = ["--sync=" + scheme, "--optimizer=sgd", "--lr=%g" % LR, "--batch-size=%d" % batch]
    if model == "cnn":
        # Each rank's own batch statistics, as DDP's BatchNorm (not
        # SyncBatchNorm).
        flags.append("--local-batchnorm")
    flags += ["--cluster=%s" % cluster] if cluster else ["--np=%d" % n]
    if profile_dir and scheme == "hybrid":
        flags.append("--profile-data=%s" % profile_dir)
    name = "%s-%s-n%d%s%s.pxplan" % (model, scheme, n, "-cluster" if cluster else "",
                                     "-prof" if profile_dir and scheme == "hybrid" else "")
    return pxbench.compile_plan(build, model, Path(work) / name, flags)


def run_parallax(build, plan, model, scheme, n, args, netns=None, tag=""):
    work = Path(args.work)
    metrics = work / ("px-%s-%s-n%d%s.jsonl" % (model, scheme, n, tag))
    steps = (args.warmup + args.steps) if netns is None else (1 + args.netns_px_steps)
    warmup = args.warmup if netns is None else 1
    def run_args(k):
        return [str(plan), "--threads", "1", "--synthetic", "--seed", "0", "--steps", str(k),
                "--metrics", str(metrics), "-q"]
    exe = str(build / "bin" / "parallax-run")
    if netns is None:
        pxbench.run([exe] + run_args(steps) + ["--np", str(n)], "parallax-run %s" % plan)
        base = None
    else:
        mpirun = ["mpirun", "--allow-run-as-root", "-np", str(n), "--hostfile", str(netns.hostfile),
                  "--bind-to", "none", "--mca", "plm_rsh_agent", str(netns.agent),
                  "--mca", "oob_tcp_if_include", "10.213.%d.0/24" % netns.subnet,
                  "--mca", "btl_tcp_if_include", "10.213.%d.0/24" % netns.subnet,
                  "--mca", "btl", "tcp,self", "-x", "OMP_WAIT_POLICY=PASSIVE"]
        for kv in filter(None, args.px_mca.split(",")):
            k, v = kv.split("=", 1)
            mpirun += ["--mca", k, v]
        mpirun.append(exe)
        # Traffic of the start-up alone (a 0-step run), then of the real one.
        # (Open MPI's daemons, one per namespace but all on one machine,
        # now and then fail to start: "ORTE does not know how to route a
        # message", a session directory another daemon just made, or an
        # orted that crashes (exit status 139) in hwloc_shmem_topology_write
        # while another writes the same shared topology. None of it reaches
        # parallax-run, so a failed launch is retried.)
        def launch(k):
            for attempt in range(3):
                before = [netns.counters(r) for r in range(n)]
                p = subprocess.run(mpirun + run_args(k), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
                if p.returncode == 0:
                    return before, [netns.counters(r) for r in range(n)]
                print("  (mpirun failed, exit status %d; retrying)" % p.returncode, flush=True)
            sys.stdout.write(p.stdout[-3000:])
            raise RuntimeError("parallax-run %s failed 3 times" % plan)
        c0, c1 = launch(0)
        c1b, c2 = launch(steps)
        base = statistics.mean(((c2[k][0] - c1b[k][0]) - (c1[k][0] - c0[k][0])) for k in range(n))
    ranks = [pxbench.read_metrics(str(metrics).replace(".jsonl", ".rank%d.jsonl" % r))
             for r in range(n)]
    step = [max(ranks[r][i]["step_time_s"] for r in range(n)) for i in range(warmup, steps)]
    sent = [statistics.mean(ranks[r][i]["bytes_sent"] for r in range(n)) for i in range(warmup, steps)]
    out = {"system": "Parallax " + scheme, "steps_per_s": 1 / pxbench.median(step),
           "step_s": pxbench.median(step), "bytes": pxbench.median(sent),
           "bytes_how": "parallax-run metrics", "steps": steps - warmup,
           "loss_first": ranks[0][warmup]["loss"], "loss_last": ranks[0][-1]["loss"]}
    if base is not None:
        out["bytes_metrics"] = out["bytes"]
        out["bytes"] = base / steps
        out["bytes_how"] = "interface counters"
    return out


def write_profile_data(inputs, batch_steps, out_dir):
    """Batches for --profile-data: the global batch, Zipf ids as --synthetic."""
    import numpy as np
    out_dir.mkdir(parents=True, exist_ok=True)
    batches = pxbench.Synthetic(inputs, seed=7).batches(batch_steps)
    for k, inp in enumerate(inputs):
        a = np.stack([b[k] for b in batches]) if inp["batch_axis"] != 0 else \
            np.concatenate([b[k] for b in batches])
        np.save(out_dir / (inp["name"] + ".npy"), a)
    return out_dir


# ---------------------------------------------------------------------------

def fmt_bytes(b):
    if b is None:
        return "-"
    for unit, div in (("MB", 1e6), ("kB", 1e3)):
        if b >= div:
            return "%.2f %s" % (b / div, unit)
    return "%d B" % b


def table(title, rows, ref_names):
    print("\n### " + title + "\n")
    print("| model | ranks | system | steps/s | ms/step (min of runs) | bytes/step/rank | "
          + " | ".join("x %s" % r for r in ref_names) + " | bytes from |")
    print("| --- | ---: | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in ref_names)
          + " | --- |")
    for r in rows:
        ratios = []
        for ref in ref_names:
            base = r["refs"].get(ref)
            ratios.append("%.2f" % (r["steps_per_s"] / base) if base else "-")
        print("| %s | %d | %s | %.2f | %.1f (%.1f) | %s | %s | %s |" % (
            r["model"], r["n"], r["system"], r["steps_per_s"], 1e3 * r["step_s"],
            1e3 * r["min_step_s"], fmt_bytes(r["bytes"]), " | ".join(ratios), r["bytes_how"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="lm,dlrm,cnn,mlp")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=60,
                    help="DDP: at most this many seconds of timed steps (at least 3 steps)")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--ddp", default="sparse,dense")
    ap.add_argument("--batch", default="", help="global batches, e.g. lm=32,dlrm=256")
    ap.add_argument("--netns-rates", default="1gbit,100mbit",
                    help="rate limits of the namespace runs ('' for none)")
    ap.add_argument("--netns-ranks", default="4")
    ap.add_argument("--netns-steps", type=int, default=5)
    ap.add_argument("--netns-px-steps", type=int, default=10)
    ap.add_argument("--no-loopback", action="store_true")
    ap.add_argument("--px-mca", default="mpi_yield_when_idle=1",
                    help="Open MPI parameters (k=v,...) for Parallax's namespace runs; the "
                         "default makes idle ranks yield their core, as parallax-run --np's "
                         "--oversubscribe does on one machine")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of every loopback configuration (median of their medians)")
    ap.add_argument("--netns-repeats", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1200,
                    help="seconds after which a DDP job is ended as hung")
    ap.add_argument("--profile-data", action="store_true")
    ap.add_argument("--build")
    ap.add_argument("--work", default="/tmp/parallax-bench-dist")
    ap.add_argument("--json")
    # internal: one DDP rank
    ap.add_argument("--ddp-worker", action="store_true")
    ap.add_argument("--model")
    ap.add_argument("--variant")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--master")
    ap.add_argument("--port", type=int)
    ap.add_argument("--inputs")
    ap.add_argument("--out")
    ap.add_argument("--iface")
    ap.add_argument("--min-steps", type=int, default=3)
    args = ap.parse_args()
    if args.ddp_worker:
        # A rank that fails must exit at once: gloo's threads would keep the
        # interpreter (and the other ranks, in a collective) alive.
        try:
            ddp_worker(args)
        except BaseException:
            import traceback
            traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        sys.stdout.flush()
        os._exit(0)

    atexit.register(_cleanup)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    build, work = pxbench.setup(args)
    models = args.models.split(",")
    ranks = [int(n) for n in args.ranks.split(",")]
    schemes = args.schemes.split(",")
    variants = [v for v in args.ddp.split(",") if v]
    batch = dict(DEFAULT_BATCH)
    for kv in filter(None, args.batch.split(",")):
        k, v = kv.split("=")
        batch[k] = int(v)
    load0 = pxbench.loadavg()
    print("# build %s; %d timed steps after %d warm-up; load average %.2f %.2f %.2f"
          % (build, args.steps, args.warmup, *load0), flush=True)

    inputs_files, profile_dirs = {}, {}
    for model in models:
        # The single-process plan's inputs: dim 0 is the global batch.
        plan1 = pxbench.compile_plan(build, model, work / ("%s-b%d.pxplan" % (model, batch[model])),
                                     ["--optimizer=sgd", "--lr=%g" % LR,
                                      "--batch-size=%d" % batch[model]])
        inputs = pxbench.plan_json(build, plan1)["inputs"]
        f = work / ("%s-b%d.inputs.json" % (model, batch[model]))
        f.write_text(json.dumps(inputs))
        inputs_files[model] = f
        if "sparse" in variants and model in SPARSE_MODELS:
            nsp, worst = check_sparse_variant(model, f)
            print("# %s sparse variant: %d sparse parameters, same loss and gradients "
                  "(max difference %.1e)" % (model, nsp, worst), flush=True)
        if args.profile_data and model in SPARSE_MODELS:
            profile_dirs[model] = write_profile_data(inputs, 20, work / ("profile-%s" % model))

    results = []

    def show(model, n, res, where):
        print("  %-8s %-5s n=%d %-20s %8.2f steps/s  %9.1f ms  %12s/step/rank  (%s, %d steps, "
              "loss %.4f -> %.4f, load %.2f)" % (
                  where, model, n, res["system"], res["steps_per_s"], 1e3 * res["step_s"],
                  fmt_bytes(res["bytes"]), res["bytes_how"], res["steps"], res["loss_first"],
                  res["loss_last"], res["load"][0]), flush=True)

    def run_jobs(jobs, repeats, where):
        """Runs every job `repeats` times, alternating the order, and records
        the median over the runs of each job's median step time and bytes."""
        runs = {k: [] for k, _, _, _ in jobs}
        for rep in range(repeats):
            for key, model, n, fn in (jobs if rep % 2 == 0 else jobs[::-1]):
                res = fn()
                res["load"] = pxbench.loadavg()
                runs[key].append(res)
                show(model, n, res, where)
        for key, model, n, _ in jobs:
            rs = runs[key]
            out = dict(rs[-1])
            out["step_s"] = pxbench.median([r["step_s"] for r in rs])
            out["steps_per_s"] = 1 / out["step_s"]
            out["bytes"] = pxbench.median([r["bytes"] for r in rs])
            out["run_step_s"] = [r["step_s"] for r in rs]
            out["min_step_s"] = min(out["run_step_s"])
            out.update(model=model, n=n, where=where, repeats=len(rs))
            results.append(out)

    def job(model, n, fn):
        return (len(jobs), model, n, fn)

    if not args.no_loopback:
        jobs = []
        for model in models:
            for n in ranks:
                if batch[model] % n:
                    sys.exit("the global batch %d of %s does not split over %d ranks"
                             % (batch[model], model, n))
                for scheme in model_schemes(model, schemes):
                    plan = compile_parallax(build, model, scheme, n, batch[model], work,
                                            profile_dir=profile_dirs.get(model))
                    jobs.append(job(model, n, lambda plan=plan, model=model, scheme=scheme, n=n:
                                    run_parallax(build, plan, model, scheme, n, args)))
                for v in model_variants(model, variants):
                    jobs.append(job(model, n, lambda model=model, v=v, n=n:
                                    run_ddp(model, v, n, args, inputs_files[model])))
        run_jobs(jobs, args.repeats, "loopback")

    rates = [r for r in args.netns_rates.split(",") if r]
    netns_ranks = [int(n) for n in args.netns_ranks.split(",") if n]
    for rate in rates:
        for n in netns_ranks:
            ns = Netns(n, rate, work)
            try:
                ns.create()
                cluster = work / ("cluster-n%d-%s.json" % (n, rate))
                cluster.write_text(json.dumps({
                    "machines": [{"host": ip, "ranks": 1} for ip in ns.ips],
                    "inter_machine": {"bandwidth_gbps": parse_rate(rate) / 1e9,
                                      "latency_us": 100}}))
                jobs = []
                for model in models:
                    for scheme in model_schemes(model, schemes):
                        plan = compile_parallax(build, model, scheme, n, batch[model], work,
                                                cluster=str(cluster),
                                                profile_dir=profile_dirs.get(model))
                        jobs.append(job(model, n, lambda plan=plan, model=model, scheme=scheme:
                                        run_parallax(build, plan, model, scheme, n, args,
                                                     netns=ns, tag="-" + rate)))
                    for v in model_variants(model, variants):
                        jobs.append(job(model, n, lambda model=model, v=v:
                                        run_ddp(model, v, n, args, inputs_files[model],
                                                netns=ns, tag="-" + rate)))
                run_jobs(jobs, args.netns_repeats, rate)
            finally:
                ns.close()
                _cleanups.remove(ns.close)

    # Tables: every row against DDP sparse and DDP dense of the same place,
    # model and rank count.
    for r in results:
        r["refs"] = {}
        for v in variants:
            ref = [x for x in results if x["where"] == r["where"] and x["model"] == r["model"]
                   and x["n"] == r["n"] and x["system"] == "DDP " + v]
            if ref:
                r["refs"]["DDP " + v] = ref[0]["steps_per_s"]
    refs = ["DDP " + v for v in variants]
    wheres = []
    for r in results:
        if r["where"] not in wheres:
            wheres.append(r["where"])
    for w in wheres:
        title = ("loopback (one machine: Parallax over MPI shared memory, gloo over TCP on lo)"
                 if w == "loopback" else
                 "%s per rank (network namespaces, veth + bridge, tbf both ways)" % w)
        table(title, [r for r in results if r["where"] == w], refs)
    load1 = pxbench.loadavg()
    print("\nload average before %.2f %.2f %.2f, after %.2f %.2f %.2f" % (*load0, *load1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": load0, "load_after": load1, "batch": batch,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()

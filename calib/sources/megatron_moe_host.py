"""The host's pace of an eager MoE layer on an x86 host, measured on a lent GPU machine.

mrep's moe_launch_us is the host's time per kernel it issues in an eager Megatron MoE layer
(Python, PyTorch's dispatcher and the CUDA launch). The lanes fit it on published runs, where
x86 hosts (HGX H100/B200) and Grace (NVL72) were pooled because no x86 row was clean enough to
fit alone. This script measures it on the lent machine's x86 CPU:

1. launch: the eager launch cost of one tiny GEMM from PyTorch (NVIDIA's cpu_overhead
   microbenchmark times the same thing), and a tiny linear's forward and backward through
   autograd, per kernel.
2. megatron: Megatron-core's own MoELayer (the local spec: router, alltoall token dispatcher,
   SequentialMLP experts; Transformer Engine is not installable there) forward and backward on
   few tokens, so the GPU idles and the wall time is the host's. Kernels per step are counted
   with PyTorch's profiler, so the result is host time per issued kernel; varying the local
   expert count splits it into a fixed part and a per-expert part.
3. ddp: the layer's fixed part on 2-8 experts, and the same layers wrapped in Megatron's
   DistributedDataParallel, whose gradient hooks (one per parameter) run on the host too.
4. torch_moe: the same layer written with bare PyTorch ops (router, sort-based permutation, the
   tokens-per-expert copy to the host, one GEMM pair per expert, the combine), the floor under
   any framework's Python.

Run on the device machine:  PYTHONPATH=.mcore python3 calib/sources/megatron_moe_host.py
(SECTIONS=launch,torch_moe,megatron,ddp picks sections; each writes its own key.)
(.mcore holds megatron/core from NVIDIA/Megatron-LM; the commit is recorded in the output.)
Writes $OUT/moe_host.json.
"""

import json
import os
import platform
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

OUT = os.environ.get("OUT", "/tmp")
RES = {"about": __doc__.strip().split("\n\n")[0]}


def save():
    with open(os.path.join(OUT, "moe_host.json"), "w") as f:
        json.dump(RES, f, indent=1)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cuda_kernels(prof):
    """Kernels, copies and memsets the GPU ran under the profiler, with their GPU time (us)."""
    n, us, names = 0, 0.0, {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n += 1
            us += e.time_range.elapsed_us()
            names[e.name[:60]] = names.get(e.name[:60], 0) + 1
    return n, us, names


def timed(step, iters, warm=5):
    """Median wall time of step (us) over iters, each ended by a device synchronisation."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts), min(ts)


def profiled(step, iters=3):
    from torch.profiler import ProfilerActivity, profile

    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    n, us, names = cuda_kernels(prof)
    return n / iters, us / iters, names


def launch_section():
    rows = []
    for size in (4, 16, 64, 256, 512):
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        n = 2000
        for _ in range(50):
            torch.mm(a, b)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            torch.mm(a, b)
        torch.cuda.synchronize()
        rows.append({"what": "torch.mm eager", "size": size, "us_per_call": (time.perf_counter() - t0) / n * 1e6})
    # a linear's forward and backward through autograd: per kernel issued
    lin = torch.nn.Linear(64, 64, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def step():
        for _ in range(20):
            y = lin(x)
            y.sum().backward()

    wall, best = timed(step, 20)
    k, gpu, _ = profiled(step)
    rows.append({"what": "20x nn.Linear fwd+bwd (bf16, 32x64x64)", "wall_us": wall, "kernels": k,
                 "gpu_us": gpu, "us_per_kernel": wall / k})
    RES["launch"] = rows
    save()


_MEGATRON_READY = []


def init_megatron():
    """One rank of Megatron's model-parallel state (TP = PP = EP = 1), once."""
    if _MEGATRON_READY:
        return
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29531"), ("RANK", "0"),
                 ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(k, v)
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(123)
    _MEGATRON_READY.append(True)


def moe_layer(experts):
    """Qwen3-30B-A3B's MoE layer (hidden 2048, expert FFN 768, top-8) with this many local
    experts, as Megatron-core's local spec builds it, on the GPU in BF16."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_submodules
    from megatron.core.transformer.moe.moe_layer import MoELayer
    from megatron.core.transformer.spec_utils import get_submodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = TransformerConfig(
        num_layers=1, hidden_size=2048, num_attention_heads=32, num_moe_experts=experts,
        moe_router_topk=min(8, experts), moe_ffn_hidden_size=768, ffn_hidden_size=768,
        gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False,
        moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
        moe_token_dispatcher_type="alltoall", bf16=True, params_dtype=torch.bfloat16,
        moe_grouped_gemm=False)
    sub = get_submodules(get_gpt_layer_local_submodules(num_experts=experts, moe_grouped_gemm=False).mlp)
    return cfg, MoELayer(cfg, sub).cuda()


def ddp_section():
    """The layer's fixed part on few experts, and what Megatron's DistributedDataParallel adds:
    it registers a hook on every parameter's gradient accumulation (overlap_grad_reduce), so each
    expert's weights cost the host a hook per backward beside the layer's own kernels."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig

    init_megatron()
    rows = []
    RES["megatron_ddp"] = rows
    for experts in (2, 4, 8, 16, 64):
        for wrapped in (False, True):
            cfg, layer = moe_layer(experts)
            model = layer
            if wrapped:
                model = DistributedDataParallel(
                    cfg, DistributedDataParallelConfig(overlap_grad_reduce=True, use_distributed_optimizer=True,
                                                       grad_reduce_in_fp32=True), layer)
            x = torch.randn(64, 1, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def step():
                if wrapped:
                    model.zero_grad_buffer()
                out = model(x)
                (out[0] if isinstance(out, tuple) else out).float().sum().backward()
                if wrapped:
                    model.finish_grad_sync()

            wall, best = timed(step, 50)
            k, gpu, _ = profiled(step)
            rows.append({"experts": experts, "tokens": 64, "topk": min(8, experts), "ddp": wrapped,
                         "params": sum(1 for _ in layer.parameters()),
                         "step_wall_us": wall, "step_best_us": best, "step_kernels": k, "step_gpu_us": gpu})
            save()
            del model, layer, x
            torch.cuda.empty_cache()


def megatron_section():
    init_megatron()
    rows = []
    RES["megatron"] = rows
    # Qwen3-30B-A3B's MoE layer (hidden 2048, expert FFN 768, top-8 of the local experts), as
    # one EP rank would hold 1/EP of its 128 experts.
    for experts in (8, 16, 32, 64, 128):
        for tokens in (64, 4096):
            cfg, layer = moe_layer(experts)
            x = torch.randn(tokens, 1, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def fwd():
                out = layer(x)
                return out[0] if isinstance(out, tuple) else out

            def step():
                fwd().float().sum().backward()

            iters = 30 if tokens <= 64 else 10
            wall, best = timed(step, iters)
            fwall, fbest = timed(fwd, iters)
            k, gpu, names = profiled(step)
            fk, fgpu, _ = profiled(fwd)
            rows.append({"experts": experts, "tokens": tokens, "topk": 8, "kind": type(getattr(layer, "experts", None)).__name__,
                         "step_wall_us": wall, "step_best_us": best, "step_kernels": k, "step_gpu_us": gpu,
                         "fwd_wall_us": fwall, "fwd_best_us": fbest, "fwd_kernels": fk, "fwd_gpu_us": fgpu,
                         "us_per_kernel": wall / k,
                         "top_kernels": sorted(names.items(), key=lambda kv: -kv[1])[:12] if experts == 8 and tokens == 64 else None})
            save()
            del layer, x
            torch.cuda.empty_cache()


def torch_moe_section():
    rows = []
    RES["torch_moe"] = rows
    h, f, topk = 2048, 768, 8
    for experts in (8, 16, 32, 64, 128):
        gate = torch.randn(experts, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w1 = [torch.randn(2 * f, h, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(experts)]
        w2 = [torch.randn(h, f, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(experts)]
        for tokens in (64, 4096):
            x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def fwd():
                logits = F.linear(x, gate).float()
                probs = torch.softmax(logits, dim=-1)
                top, idx = torch.topk(probs, topk, dim=-1)
                top = top / top.sum(-1, keepdim=True)
                aux = (probs.mean(0) * torch.bincount(idx.flatten(), minlength=experts).float()).sum()
                flat = idx.flatten()
                order = torch.argsort(flat, stable=True)
                src = order // topk
                counts = torch.bincount(flat, minlength=experts).tolist()  # the host copy
                xin = x.index_select(0, src)
                outs = []
                for e, part in enumerate(torch.split(xin, counts)):
                    a, g = F.linear(part, w1[e]).chunk(2, dim=-1)
                    outs.append(F.linear(F.silu(a) * g, w2[e]))
                y = torch.cat(outs) * top.flatten()[order].unsqueeze(-1).to(xin.dtype)
                out = torch.zeros_like(x).index_add(0, src, y)
                return out, aux

            def step():
                out, aux = fwd()
                (out.float().sum() + aux).backward()

            iters = 30 if tokens <= 64 else 10
            wall, best = timed(step, iters)
            k, gpu, _ = profiled(step)
            rows.append({"experts": experts, "tokens": tokens, "step_wall_us": wall, "step_best_us": best,
                         "step_kernels": k, "step_gpu_us": gpu, "us_per_kernel": wall / k})
            save()


def main():
    RES.update({"cpu": cpu_model(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                "torch": torch.__version__, "cuda": torch.version.cuda,
                "gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"),
                "torch_threads": torch.get_num_threads()})
    try:
        import megatron.core

        RES["megatron_core"] = getattr(megatron.core, "__version__", "?")
        RES["megatron_commit"] = os.environ.get("MCORE_COMMIT", "")
    except Exception as e:  # recorded, the other sections still run
        RES["megatron_import_error"] = repr(e)
    save()
    want = os.environ.get("SECTIONS", "launch,torch_moe,megatron,ddp").split(",")
    for name, fn in (("launch", launch_section), ("torch_moe", torch_moe_section), ("megatron", megatron_section),
                     ("ddp", ddp_section)):
        if name not in want:
            continue
        t0 = time.time()
        try:
            fn()
        except Exception:
            RES[name + "_error"] = traceback.format_exc()[-3000:]
        RES[name + "_seconds"] = time.time() - t0
        save()
        print(name, "done in %.1f s" % (time.time() - t0), flush=True)
    print(json.dumps(RES, indent=1)[-6000:])


if __name__ == "__main__":
    main()

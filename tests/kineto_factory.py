"""Kineto traces written at test time, with numbers known by construction.

`two_steps(vocab)` is one small training trace in each category vocabulary in the wild: "2021"
(`Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset`, lowercase `external id`), "today"
(`cpu_op`, `user_annotation`, `cuda_runtime`, `cuda_driver`, `kernel`, `gpu_memcpy`,
`gpu_memset`, `python_function`) and "rocm" (today's categories with HIP's API names). EXPECTED
holds what each step must split into, worked out by hand in the comments.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
SGEMM = "ampere_sgemm_128x64_nn"  # float32, no Tensor Cores
H884 = "volta_h884cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1"  # 16-bit, Tensor Cores
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
ADD16 = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half> >"

CATS = {
    "2021": {
        "op": "Operator",
        "ann": "Operator",
        "rt": "Runtime",
        "drv": "Runtime",
        "k": "Kernel",
        "cp": "Memcpy",
        "set": "Memset",
    },
    "today": {
        "op": "cpu_op",
        "ann": "user_annotation",
        "rt": "cuda_runtime",
        "drv": "cuda_driver",
        "k": "kernel",
        "cp": "gpu_memcpy",
        "set": "gpu_memset",
    },
}
CATS["rocm"] = CATS["today"]
API = {
    "launch": {"2021": "cudaLaunchKernel", "today": "cudaLaunchKernel", "rocm": "hipLaunchKernel"},
    "copy": {"2021": "cudaMemcpyAsync", "today": "cudaMemcpyAsync", "rocm": "hipMemcpyWithStream"},
    "set": {"2021": "cudaMemsetAsync", "today": "cudaMemsetAsync", "rocm": "hipMemsetAsync"},
    "sync": {
        "2021": "cudaStreamSynchronize",
        "today": "cudaStreamSynchronize",
        "rocm": "hipStreamSynchronize",
    },
    "driver": {
        "2021": "cuLaunchKernel",
        "today": "cuLaunchKernel",
        "rocm": "hipModuleLaunchKernel",
    },
}


@dataclass
class Trace:
    """A Kineto trace being written: events in µs, CPU pid 100 / tid 1, GPU pid 0 stream 7."""

    vocab: str = "today"
    events: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    _corr: int = 0
    _ext: int = 0

    def cat(self, role: str) -> str:
        return CATS[self.vocab][role]

    def _args(self, ext: int | None = None, corr: int | None = None) -> dict[str, Any]:
        a: dict[str, Any] = {}
        if ext is not None:
            a["external id" if self.vocab == "2021" else "External id"] = ext
        if corr is not None:
            a["correlation"] = corr
        return a

    def x(
        self, cat: str, name: str, ts: float, dur: float, pid: Any, tid: Any, **args: Any
    ) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    def op(self, name: str, ts: float, dur: float, input_type: list[str] | None = None) -> int:
        self._ext += 1
        args = self._args(ext=self._ext)
        if input_type is not None:
            args["Input type"] = input_type
        self.x(self.cat("op"), name, ts, dur, 100, 1, **args)
        return self._ext

    def annotation(self, name: str, ts: float, dur: float) -> int:
        self._ext += 1
        self.x(self.cat("ann"), name, ts, dur, 100, 1, **self._args(ext=self._ext))
        return self._ext

    def step(self, n: int, ts: float, dur: float) -> None:
        self.annotation(f"ProfilerStep#{n}", ts, dur)

    def runtime(self, api: str, ts: float, dur: float, ext: int = 0, role: str = "rt") -> int:
        self._corr += 1
        name = API[api][self.vocab]
        self.x(self.cat(role), name, ts, dur, 100, 1, **self._args(ext=ext, corr=self._corr))
        return self._corr

    def device(self, role: str, name: str, ts: float, dur: float, corr: int, ext: int = 0) -> None:
        args = self._args(ext=ext, corr=corr)
        args.update(device=0, stream=7)
        self.x(self.cat(role), name, ts, dur, 0, "stream 7" if self.vocab == "2021" else 7, **args)

    def write(self, path: Path, *, one_line: bool = False) -> Path:
        doc = {"schemaVersion": 1, **self.meta, "traceEvents": self.events}
        text = json.dumps(doc, separators=(",", ":")) if one_line else json.dumps(doc, indent=2)
        data = text.encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
        return path


def two_steps(vocab: str = "today") -> Trace:
    """Two 10 ms steps and a third the profiler cut short (see EXPECTED)."""
    t = Trace(vocab)
    t.meta["deviceProperties"] = [{"id": 0, "name": "Test GPU", "computeMajor": 8}]
    # Step 1 [0, 10000]
    t.step(1, 0, 10000)
    linear = t.op("aten::linear", 100, 2000)  # host 100-2100
    c = t.runtime("launch", 1000, 100, ext=linear)  # launch 1000-1100
    t.device("k", SGEMM, 1200, 3000, c, ext=linear)  # kernel 1200-4200
    t.annotation(DATALOADER, 5000, 1000)  # input 5000-6000
    copy = t.op("aten::copy_", 6100, 200)  # host 6100-6300
    c = t.runtime("copy", 6150, 50, ext=copy)  # a copy call: waits (6150-6200)
    t.device("cp", "Memcpy HtoD (Pageable -> Device)", 6300, 500, c, ext=copy)  # 6300-6800
    allreduce = t.annotation("nccl:all_reduce", 6880, 80)  # collective 6880-6960
    c = t.runtime("launch", 6900, 50, ext=allreduce)  # inside the collective span
    t.device("k", NCCL, 7000, 1000, c, ext=allreduce)  # 7000-8000
    t.runtime("sync", 8500, 1000)  # waits for the GPU 8500-9500
    # Step 2 [10000, 20000]
    t.step(2, 10000, 10000)
    conv = t.op("aten::conv2d", 10100, 2000, input_type=["c10::Half", "c10::Half", ""])
    c = t.runtime("launch", 11000, 50, ext=conv)
    t.device("k", H884, 11100, 5000, c, ext=conv)  # 11100-16100
    c = t.runtime("launch", 11060, 20, ext=conv)
    t.device("k", ADD16, 16100, 200, c, ext=conv)  # 16100-16300
    c = t.runtime("set", 12000, 10, ext=conv)  # inside the op (10100-12100)
    t.device("set", "Memset (Device)", 16500, 100, c, ext=conv)  # 16500-16600
    t.runtime("driver", 13000, 20, role="drv")  # a driver API call outside any op
    # Step 3 [20000, 20100]: the profiler stopped; no device work
    t.step(3, 20000, 100)
    t.op("aten::empty", 20010, 20)
    if vocab != "2021":
        # GPU-side copy of a step marker (the plugin counts it as a step) and a Python frame
        t.x("gpu_user_annotation", "ProfilerStep#1", 1200, 3000, 0, 7)
        t.x("python_function", "train.py(10): step", 0, 9000, 100, 1)
    return t


# Per step, by hand (µs → ms). Each instant of a step goes to the first role covering it, in the
# plugin's order: kernel, memcpy, memset, communication, runtime, DataLoader, CPU exec; the rest
# is other. Step 1 [0, 10000]:
#   kernel: sgemm 1200-4200 = 3000 (the collective kernel 7000-8000 is communication: its
#     external id is nccl:all_reduce's)
#   memcpy 6300-6800 = 500
#   communication: kernel 7000-8000 + host span 6880-6960 = 1080
#   runtime: launch 1000-1100 = 100; copy call 6150-6200 = 50; launch 6900-6950 is inside the
#     collective span (taken); sync 8500-9500 = 1000 → 1150
#   DataLoader 5000-6000 = 1000
#   CPU exec: linear 100-2100 less the launch and the kernel from 1200 → 100-1000, 1100-1200 =
#     1000; copy_ 6100-6300 less the copy call = 150 → 1150
#   other: 10000 - 3000 - 500 - 1080 - 1150 - 1000 - 1150 = 2120
# Step 2 [10000, 20000]:
#   kernels h884 11100-16100 + add 16100-16300 = 5200; memset 16500-16600 = 100
#   runtime: launches 11000-11050, 11060-11080 = 70 (the memset call at 12000 and the driver call
#     at 13000 run while a kernel does: kernel time)
#   CPU exec: conv2d 10100-12100 less those launches and the kernel from 11100 = 930
#   other: 10000 - 5200 - 100 - 70 - 930 = 3700
# Step 3 launched nothing: dropped (the plugin's tail rule; step 2's 5 device events ≥ 80% of 3).
EXPECTED_NATIVE = {
    1: {
        "kernel": 3.0,
        "memcpy": 0.5,
        "memset": 0.0,
        "communication": 1.08,
        "runtime": 1.15,
        "dataloader": 1.0,
        "cpu_exec": 1.15,
        "other": 2.12,
    },
    2: {
        "kernel": 5.2,
        "memcpy": 0.0,
        "memset": 0.1,
        "communication": 0.0,
        "runtime": 0.07,
        "dataloader": 0.0,
        "cpu_exec": 0.93,
        "other": 3.7,
    },
}
# tuiprof's categories: the same split, but runtime calls that wait (the copy call and the sync:
# 1.05 ms in step 1) go to "other"; memcpy and memset are device to device.
EXPECTED_OURS = {
    1: {
        "device_compute": 3.0,
        "device_to_device": 0.5,
        "device_collectives": 1.08,
        "kernel_launch": 0.1,
        "input": 1.0,
        "host_compute": 1.15,
        "other": 2.12 + 1.05,
    },
    2: {
        "device_compute": 5.2,
        "device_to_device": 0.1,
        "device_collectives": 0.0,
        "kernel_launch": 0.07,
        "input": 0.0,
        "host_compute": 0.93,
        "other": 3.7,
    },
}
# Kernel time 3000 + 1000 + 5000 + 200; compute (not collective) 8200, of it 16-bit 5200 (h884 by
# name, add by its Half template argument); Tensor Cores: h884 only.
SIXTEEN_BIT_PERCENT = 100 * 5200 / 8200
TENSOR_CORE_PERCENT_OF_KERNELS = 100 * 5000 / 9200
# Of the Tensor-Core-eligible ops' kernels (linear's sgemm 3000, conv2d's 5200), on TC: 5000.
TENSOR_CORE_PERCENT_OF_ELIGIBLE = 100 * 5000 / 8200


def write_rank(path: Path, rank: int, scale: float) -> None:
    """One rank's trace of a two-rank NCCL job: `two_steps`, its times scaled by `scale`."""
    t = two_steps("today")
    for e in t.events:
        e["ts"] *= scale
        e["dur"] *= scale
    t.meta["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    t.write(path)

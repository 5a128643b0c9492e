#!/usr/bin/env python3
"""Configure and build the fetched ggml tree with CMake (run by meson).

Always builds optimised (Release), whatever meson's buildtype is, and copies
the libraries to the paths meson expects: static libraries, or for
cpu_target=dispatch ggml's shared base, its registry and the backend modules
(one per CPU variant, one per GPU backend).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# CMake switches per meson value of the cpu_target option.
CPU_TARGETS = {
    "native": ["-DGGML_NATIVE=ON"],
    # x86-64-v3: AVX2, FMA, F16C (ggml's default when not native)
    "avx2": ["-DGGML_NATIVE=OFF"],
    # The baseline every x86-64 machine of the last 15 years has (SSE4.2),
    # or plain armv8-a: what wheels ship.
    "portable": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=OFF", "-DGGML_AVX2=OFF",
                 "-DGGML_FMA=OFF", "-DGGML_F16C=OFF", "-DGGML_BMI2=OFF",
                 "-DGGML_AVX512=OFF", "-DGGML_SSE42=ON"],
    # several CPU variants (--cpu-variants), each a module chosen at import
    "dispatch": ["-DGGML_NATIVE=OFF", "-DPYGGML_DL=ON"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, type=Path)
    ap.add_argument("--build-dir", required=True, type=Path)
    ap.add_argument("--cpu-target", choices=sorted(CPU_TARGETS), default="native")
    ap.add_argument("--cpu-variants", default="",
                    help="for dispatch: ggml's CPU variant tags, comma-separated")
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--cuda-arch", default="")
    ap.add_argument("--vulkan", action="store_true")
    ap.add_argument("--metal", action="store_true")
    ap.add_argument("--blas", action="store_true")
    ap.add_argument("--rpc", action="store_true")
    ap.add_argument("--sanitize", default="none")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("outputs", nargs="+", type=Path,
                    help="the static libraries to produce, by file name")
    a = ap.parse_args()

    cmake = shutil.which("cmake")
    if not cmake:
        raise SystemExit("build_ggml: cmake not found on PATH")
    bdir = a.build_dir.resolve()
    cfg = [cmake, "-S", str(HERE / "cmake"), "-B", str(bdir),
           f"-DGGML_SOURCE_DIR={a.src.resolve()}",
           "-DCMAKE_BUILD_TYPE=Release",
           "-DGGML_OPENMP=OFF",        # a persistent ggml threadpool instead
           "-DGGML_LLAMAFILE=ON",      # tinyBLAS f32 kernels for mul_mat
           "-DGGML_CCACHE=OFF",
           "-DGGML_CPU_REPACK=OFF",
           f"-DGGML_CUDA={'ON' if a.cuda else 'OFF'}",
           f"-DGGML_VULKAN={'ON' if a.vulkan else 'OFF'}",
           f"-DGGML_METAL={'ON' if a.metal else 'OFF'}",
           f"-DGGML_BLAS={'ON' if a.blas else 'OFF'}",
           # dispatch: ggml-rpc is a shared library of ours (cmake/CMakeLists.txt), not a module
           f"-DGGML_RPC={'ON' if a.rpc and a.cpu_target != 'dispatch' else 'OFF'}",
           f"-DPYGGML_RPC={'ON' if a.rpc and a.cpu_target == 'dispatch' else 'OFF'}",
           "-DGGML_RPC_RDMA=OFF"]       # TCP only: no libibverbs to link
    cfg += CPU_TARGETS[a.cpu_target]
    if a.cpu_target == "dispatch":
        variants = [v for v in a.cpu_variants.split(",") if v]
        if not variants:
            raise SystemExit("build_ggml: cpu_target=dispatch needs --cpu-variants")
        cfg.append("-DGGML_CPU_VARIANTS=" + ";".join(variants))
    else:
        cfg.append("-DPYGGML_DL=OFF")
    if shutil.which("ninja"):
        cfg += ["-G", "Ninja"]
    if a.cuda:
        if a.cuda_arch:
            cfg.append(f"-DCMAKE_CUDA_ARCHITECTURES={a.cuda_arch}")
        cfg.append("-DGGML_CUDA_NCCL=OFF")
        # pyggml uses no flash attention: its kernels are most of the CUDA compile time
        cfg.append("-DGGML_CUDA_FA=OFF")
    if a.metal:
        cfg.append("-DGGML_METAL_EMBED_LIBRARY=ON")
    if a.blas:
        cfg.append("-DGGML_BLAS_VENDOR=OpenBLAS")
    if "address" in a.sanitize:
        cfg.append("-DGGML_SANITIZE_ADDRESS=ON")
    if "undefined" in a.sanitize:
        cfg.append("-DGGML_SANITIZE_UNDEFINED=ON")
    # packagers' extra CMake switches, e.g. -DGGML_CUDA_NO_VMM=ON where no CUDA driver library exists
    cfg += shlex.split(os.environ.get("PYGGML_CMAKE_ARGS", ""))
    subprocess.run(cfg, check=True, stdout=sys.stderr)
    build = [cmake, "--build", str(bdir), "--config", "Release"]
    jobs = a.jobs or os.cpu_count() or 2
    build += ["--parallel", str(jobs)]
    subprocess.run(build, check=True, stdout=sys.stderr)

    found = {}
    for pattern in ("*.a", "*.lib", "*.so", "*.dylib"):
        found.update({p.name: p for p in bdir.rglob(pattern) if p.is_file() and not p.is_symlink()})
    for out in a.outputs:
        if out.name not in found:
            raise SystemExit(f"build_ggml: {out.name} was not built; have {sorted(found)}")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(found[out.name], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

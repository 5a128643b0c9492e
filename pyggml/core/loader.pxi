# Loading ggml's backends at import (dispatch builds) and binding ggml-cpu's
# functions (every build).
#
# A dispatch build (what wheels ship) holds ggml's CPU backend once per
# instruction-set level, each a module `libggml-cpu-<variant>.so` next to this
# extension, and each GPU backend as a module `libggml-<name>.so`.  At import:
# ggml's own check of each CPU variant against this CPU (its
# `ggml_backend_score`, compiled without the variant's instruction flags) picks
# the best one, unless PYGGML_CPU_VARIANT names one (refused when this CPU
# cannot run it); every GPU module whose libraries and driver load is
# registered, the others are skipped and the reason kept for show_config().

cdef extern from "ggml-backend.h" nogil:
    ggml_backend_reg_t ggml_backend_load(const char * path)
    size_t ggml_backend_reg_count()
    size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg)

# what an x86 / ARM variant of ggml's CPU backend needs from the CPU, for messages
_VARIANT_NEEDS = {
    "x64": "x86-64",
    "sse42": "SSE4.2",
    "sandybridge": "AVX",
    "ivybridge": "AVX and F16C",
    "piledriver": "AVX, F16C and FMA",
    "haswell": "AVX2, FMA, F16C and BMI2",
    "skylakex": "AVX-512 F, CD, VL, DQ and BW",
    "cannonlake": "AVX-512 with VBMI",
    "cascadelake": "AVX-512 with VNNI",
    "icelake": "AVX-512 with VBMI and VNNI",
    "cooperlake": "AVX-512 with VNNI and BF16",
    "zen4": "AVX-512 with VBMI, VNNI and BF16",
    "alderlake": "AVX2 with AVX-VNNI",
    "sapphirerapids": "AVX-512 with AMX",
    "armv8.0_1": "armv8.0-a",
    "armv8.2_1": "armv8.2-a with dot products",
    "armv8.2_2": "armv8.2-a with dot products and fp16 arithmetic",
    "apple_m1": "Apple M1 (dot products)",
    "apple_m2_m3": "Apple M2 (int8 matrix multiply)",
}

_load_info = None            # filled once by _init_backends()
cdef list _load_log = []


cdef void _capture_log(ggml_log_level level, const char * text, void * user_data) noexcept with gil:
    try:
        _load_log.append(text.decode("utf-8", "replace"))
    except BaseException:
        pass


cdef tuple _load_module(str path):
    """ggml_backend_load(path) with ggml's messages captured: (reg or NULL as int, messages)."""
    cdef bytes p = os.fsencode(path)
    cdef const char * cp = p
    cdef ggml_backend_reg_t reg
    _load_log.clear()
    ggml_log_set(_capture_log, NULL)
    try:
        with nogil:
            reg = ggml_backend_load(cp)
    finally:
        ggml_log_set(_log_callback, NULL)
    msgs = "".join(_load_log).strip()
    _load_log.clear()
    return <uintptr_t>reg, msgs


cdef str _c_err(char * buf):
    return (<bytes>buf).decode("utf-8", "replace")


def _variant_needs(v):
    return _VARIANT_NEEDS.get(v, f"the instructions of ggml's {v!r} variant")


def _init_backends(str folder, list cpu_variants, list gpu_modules, str cpu_target):
    """Load the backend modules of a dispatch build from `folder` and bind
    ggml-cpu's functions; returns what was found (pyggml.show_config prints it).
    Raises ImportError when no CPU backend can run here or the one forced by
    PYGGML_CPU_VARIANT cannot."""
    global _load_info
    if _load_info is not None:
        return _load_info
    cdef char err[1024]
    cdef int score
    cdef uintptr_t reg
    forced = os.environ.get("PYGGML_CPU_VARIANT", "").strip()
    info = {"dispatch": bool(PYGGML_BACKEND_DL), "cpu_variants": list(cpu_variants), "cpu_scores": {},
            "gpu": {}, "forced": forced}
    if not PYGGML_BACKEND_DL:
        info["cpu_variant"] = cpu_target
        info["cpu_variant_reason"] = "this build has one CPU target"
        if forced:
            info["cpu_variant_reason"] += f"; PYGGML_CPU_VARIANT={forced} is ignored"
    else:
        scores = {}
        unusable = {}
        for v in cpu_variants:
            path = os.path.join(folder, f"libggml-cpu-{v}.so")
            if not os.path.isfile(path):
                unusable[v] = "its module is missing from the package"
                continue
            err[0] = 0
            score = pyggml_module_score(os.fsencode(path), err, sizeof(err))
            if score < 0:
                unusable[v] = _c_err(err)
            elif score == 0:
                unusable[v] = f"this CPU lacks {_variant_needs(v)}"
            scores[v] = score
        info["cpu_scores"] = scores
        usable = [v for v in cpu_variants if scores.get(v, 0) > 0]
        if forced:
            if forced not in cpu_variants:
                raise ImportError(f"PYGGML_CPU_VARIANT={forced!r}: this build of pyggml has the CPU variants "
                                  f"{', '.join(cpu_variants)}")
            if forced not in usable:
                raise ImportError(f"PYGGML_CPU_VARIANT={forced!r}: this CPU cannot run that variant "
                                  f"({unusable.get(forced)}); the variants it can run: "
                                  f"{', '.join(usable) or 'none'}")
            chosen = forced
            why = "forced by PYGGML_CPU_VARIANT"
        else:
            if not usable:
                detail = "; ".join(f"{v}: {r}" for v, r in unusable.items())
                raise ImportError(f"none of pyggml's CPU variants runs on this CPU ({detail})")
            chosen = max(usable, key=lambda v: scores[v])
            why = f"the best for this CPU of {', '.join(cpu_variants)}"
        skip = {s.strip().lower() for s in os.environ.get("PYGGML_SKIP_BACKENDS", "").split(",") if s.strip()}
        # GPU backends first: ggml's registry lists devices in load order, CPU last
        for name in gpu_modules:
            path = os.path.join(folder, f"libggml-{name}.so")
            if name in skip:
                info["gpu"][name] = "skipped: named in PYGGML_SKIP_BACKENDS"
                continue
            if not os.path.isfile(path):
                info["gpu"][name] = "skipped: its module is missing from the package"
                continue
            err[0] = 0
            if pyggml_module_check(os.fsencode(path), err, sizeof(err)) != 0:
                info["gpu"][name] = f"skipped: {_c_err(err)}"
                continue
            reg, msgs = _load_module(path)
            if reg == 0:
                info["gpu"][name] = (f"skipped: {name} found no driver or device"
                                     + (f" (ggml: {msgs.replace(chr(10), '; ')})" if msgs else ""))
                continue
            n_dev = ggml_backend_reg_dev_count(<ggml_backend_reg_t>reg)
            if n_dev == 0:
                hint = (": ggml leaves out CPU-type Vulkan drivers such as lavapipe unless "
                        "GGML_VK_VISIBLE_DEVICES names them" if name == "vulkan" else "")
                info["gpu"][name] = f"loaded, but it found no device{hint}"
            else:
                info["gpu"][name] = f"loaded, {n_dev} device(s)"
        path = os.path.join(folder, f"libggml-cpu-{chosen}.so")
        reg, msgs = _load_module(path)
        if reg == 0:
            raise ImportError(f"could not load pyggml's CPU backend {path}: {msgs or 'no reason given'}")
        info["cpu_variant"] = chosen
        info["cpu_variant_reason"] = why
        info["unusable"] = unusable
    missing = pyggml_cpu_api_bind()
    if missing != NULL:
        raise ImportError(f"ggml's CPU backend does not provide {(<bytes>missing).decode()}")
    _load_info = info
    return info


def load_info():
    """What the import loaded: the CPU variant and why, each variant's score,
    each GPU module's state (a dict; None before pyggml.core is imported)."""
    return _load_info

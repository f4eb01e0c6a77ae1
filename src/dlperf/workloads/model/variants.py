"""The model workload's compiler variants: their names, what each runs, and which frameworks and devices run it.

Nothing here imports a framework (the names are checked where a command parses its options). `eager` is the
reference every other variant is compared with and gated against; the torch compiler variants are built by
`torch_compiled`. The runtimes' variants are their own settings: ONNX Runtime's graph optimisation level
(`ort:none|basic|all`; its `eager` is dlperf's default session, every optimisation on, so `ort:all` against it is
an A/A check) and OpenVINO's performance hint (`ov:latency|throughput`; its `eager` is dlperf's default, LATENCY with
one stream). Each runs on its own framework only (`RUN_BY`); `eager` runs everywhere.
"""

from __future__ import annotations

#: Every variant's name and what it runs (the order `dlperf bench --help` and the errors list them).
VARIANTS: dict[str, str] = {
    "eager": "the module as written, op by op (the reference)",
    "compile": "torch.compile, inductor, default mode",
    "compile:max-autotune-no-cudagraphs": "torch.compile, inductor, mode max-autotune-no-cudagraphs",
    "compile:reduce-overhead": "torch.compile, inductor, mode reduce-overhead (CUDA graphs: CUDA only)",
    "export": "torch.export, compiled ahead of time by AOTInductor into a package and loaded back",
    "ort:none": "onnxruntime with graph optimisations off (ORT_DISABLE_ALL): the exported graph as it is",
    "ort:basic": "onnxruntime with basic graph optimisations (ORT_ENABLE_BASIC: constant folding, redundant nodes)",
    "ort:all": "onnxruntime with every graph optimisation (ORT_ENABLE_ALL: dlperf's default session, as eager)",
    "ov:latency": "openvino, performance hint LATENCY with one stream (dlperf's default, as eager)",
    "ov:throughput": "openvino, performance hint THROUGHPUT (the plugin picks its streams; still one request at a "
                     "time, as every case)",
}
#: The framework family that runs each variant but eager (which every framework runs).
RUN_BY: dict[str, str] = {name: ("onnxruntime" if name.startswith("ort:") else "openvino" if name.startswith("ov:")
                                 else "torch") for name in VARIANTS if name != "eager"}
#: The reference variant.
EAGER = "eager"
#: Frameworks that run variants other than `eager`.
COMPILER_FAMILIES = tuple(dict.fromkeys(RUN_BY.values()))


def check_variant(name: str) -> str:
    """`name` when it is a known variant, else ValueError naming the known ones."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})")
    return name


def inductor_mode(name: str) -> str | None:
    """The `torch.compile` mode of a `compile...` variant (None: the default mode)."""
    _, _, mode = name.partition(":")
    return mode or None


def runs(family: str, name: str) -> bool:
    """Whether a framework of `family` runs variant `name`."""
    return name == EAGER or RUN_BY.get(name) == family


def not_run_by(framework: str, name: str) -> str:
    """Why `framework` does not run variant `name` (a case's unsupported reason)."""
    owner = RUN_BY.get(name, "another framework")
    what = "a torch compiler" if owner == "torch" else f"an {owner} setting" if owner[0] in "aeiou" else \
        f"a {owner} setting"
    several = ", " in framework  # bench names every framework it was given at once
    return (f"variant {name} is {what}; {framework} {'run' if several else 'runs'} eager and "
            f"{'their' if several else 'its'} own variants only")


def ort_level(name: str) -> str:
    """The onnxruntime graph optimisation level (frameworks.onnxruntime_fw.OPTIMIZATION_LEVELS) of a variant."""
    return name.partition(":")[2] if name.startswith("ort:") else "all"


def ov_hint(name: str) -> str:
    """The openvino performance hint of a variant."""
    return "THROUGHPUT" if name == "ov:throughput" else "LATENCY"

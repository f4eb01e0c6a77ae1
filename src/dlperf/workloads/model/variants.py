"""The model workload's compiler variants: their names, what each runs, and which frameworks and devices run it.

Nothing here imports a framework (the names are checked where a command parses its options). `eager` is the
reference every other variant is compared with and gated against; the torch compiler variants are built by
`torch_compiled`. The runtimes' variants are their own settings: ONNX Runtime's graph optimisation level
(`ort:none|basic|all`; its `eager` is dlperf's default session, every optimisation on, so `ort:all` against it is
an A/A check) and OpenVINO's performance hint (`ov:latency|throughput`; its `eager` is dlperf's default, LATENCY with
one stream). TensorFlow's and JAX's are their modes (dlperf's own models only, `twin`): `graph` (tf.function) and
`xla` (tf.function with jit_compile) against TensorFlow's op-by-op eager, `jit` against JAX's eager, which runs
the step inside `jax.disable_jit()` (JAX's no-jit: `no-jit` is accepted as its name, `ALIASES`). Each runs on its
own framework only (`RUN_BY`); `eager` runs everywhere, and every framework's is its reference for speed.
"""

from __future__ import annotations

#: Every variant's name and what it runs (the order `dlperf bench --help` and the errors list them).
VARIANTS: dict[str, str] = {
    "eager": "the model as written, op by op (each framework's reference; jax: jax.disable_jit, alias no-jit)",
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
    "graph": "tensorflow: the step as a tf.function graph (no XLA); tensorflow's eager runs it op by op",
    "xla": "tensorflow: the step as a tf.function XLA compiles whole (jit_compile=True)",
    "jit": "jax: the step jitted (jax.jit, XLA); jax's eager (also named no-jit) runs it inside jax.disable_jit(), "
           "op by op",
}
#: Other names a variant is given by, and the variant each one is (`check_variant` answers the variant).
ALIASES: dict[str, str] = {"no-jit": "eager"}
#: Each variant's framework family, where a prefix does not say it.
_FAMILY = {"graph": "tensorflow", "xla": "tensorflow", "jit": "jax"}
#: The framework family that runs each variant but eager (which every framework runs).
RUN_BY: dict[str, str] = {name: _FAMILY.get(name) or ("onnxruntime" if name.startswith("ort:") else "openvino"
                                                       if name.startswith("ov:") else "torch")
                          for name in VARIANTS if name != "eager"}
#: The reference variant.
EAGER = "eager"
#: Frameworks that run variants other than `eager`.
COMPILER_FAMILIES = tuple(dict.fromkeys(RUN_BY.values()))


#: The adapter that runs each (family, variant) of the families whose modes are adapters of their own
#: (`frameworks.tensorflow_fw`, `frameworks.jax_fw`): the worker builds a case with it (`adapter_name`).
MODE_ADAPTERS: dict[tuple[str, str], str] = {
    ("tensorflow", "eager"): "tensorflow-eager", ("tensorflow", "graph"): "tensorflow",
    ("tensorflow", "xla"): "tensorflow-xla", ("jax", "eager"): "jax-nojit", ("jax", "jit"): "jax"}
#: The mode adapters: a model case names its family's framework (tensorflow, jax) and a variant instead.
MODE_ONLY = frozenset(MODE_ADAPTERS.values()) - {"tensorflow", "jax"}


def check_variant(name: str) -> str:
    """The variant `name` is (an alias, `ALIASES`, gives its variant), else ValueError naming the known ones."""
    name = ALIASES.get(name, name)
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)}; "
                         + ", ".join(f"{a} is {v}" for a, v in ALIASES.items()) + ")")
    return name


def adapter_name(framework: str, family: str, name: str) -> str:
    """The adapter that runs variant `name` of a case on `framework` (of `family`): its family's mode adapter
    where it has one (tensorflow + xla: tensorflow-xla), else `framework` itself."""
    return MODE_ADAPTERS.get((family, ALIASES.get(name, name)), framework)


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
    what = "a torch compiler" if owner == "torch" else f"a {owner} mode" if owner in ("tensorflow", "jax") else \
        f"an {owner} setting" if owner[0] in "aeiou" else f"a {owner} setting"
    several = ", " in framework  # bench names every framework it was given at once
    return (f"variant {name} is {what}; {framework} {'run' if several else 'runs'} eager and "
            f"{'their' if several else 'its'} own variants only")


def ort_level(name: str) -> str:
    """The onnxruntime graph optimisation level (frameworks.onnxruntime_fw.OPTIMIZATION_LEVELS) of a variant."""
    return name.partition(":")[2] if name.startswith("ort:") else "all"


def ov_hint(name: str) -> str:
    """The openvino performance hint of a variant."""
    return "THROUGHPUT" if name == "ov:throughput" else "LATENCY"

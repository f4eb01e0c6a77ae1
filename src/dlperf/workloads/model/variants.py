"""The model workload's compiler variants: their names, what each runs, and which frameworks and devices run it.

Nothing here imports a framework (the names are checked where a command parses its options). `eager` is the
reference every other variant is compared with and gated against; the torch compiler variants are built by
`torch_compiled`. ONNX Runtime and OpenVINO run only `eager` for now: their graph optimisation levels and
performance hints are later variants.
"""

from __future__ import annotations

#: Every variant's name and what it runs (the order `dlperf bench --help` and the errors list them).
VARIANTS: dict[str, str] = {
    "eager": "the module as written, op by op (the reference)",
    "compile": "torch.compile, inductor, default mode",
    "compile:max-autotune-no-cudagraphs": "torch.compile, inductor, mode max-autotune-no-cudagraphs",
    "compile:reduce-overhead": "torch.compile, inductor, mode reduce-overhead (CUDA graphs: CUDA only)",
    "export": "torch.export, compiled ahead of time by AOTInductor into a package and loaded back",
}
#: The reference variant.
EAGER = "eager"
#: Frameworks that run variants other than `eager` (their builder is `torch_compiled`).
COMPILER_FAMILIES = ("torch",)


def check_variant(name: str) -> str:
    """`name` when it is a known variant, else ValueError naming the known ones."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})")
    return name


def inductor_mode(name: str) -> str | None:
    """The `torch.compile` mode of a `compile...` variant (None: the default mode)."""
    _, _, mode = name.partition(":")
    return mode or None


def not_run_by(framework: str, name: str) -> str:
    """Why `framework` does not run variant `name` (a case's unsupported reason)."""
    return (f"variant {name} is a torch compiler; {framework} runs only the eager variant "
            f"(its own optimisation levels are not variants yet)")

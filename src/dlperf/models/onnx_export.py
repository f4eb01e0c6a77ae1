"""The CNNs and the transformer exported from PyTorch to ONNX once, cached on disk, for the inference runtimes.

What is exported: the torch model dlperf builds elsewhere, with the same weights -- a CNN from
`models.torch_models.build` with torch's own initialisation after `torch.manual_seed(seed)`; a transformer from
`models.transformer.torch_model.build` with `init_weights(cfg, seed)`, its logits forward (decoder: (B, T, vocab),
encoder: (B, num_labels)). The batch axis (and the transformer's sequence axis) is dynamic, so one file serves
every batch size (a runtime may fix them before compiling).

Exporter: torch's default, the dynamo exporter (`torch.onnx.export(..., dynamo=True)`, onnxscript); where it
cannot export a model, the TorchScript exporter (opset 17, dynamic_axes). The one used, its opset and why the
first was not used are stored beside the file.

Weights of `EXTERNAL_DATA_BYTES` or more are written beside the graph (`model.onnx.data`, ONNX external data):
a single protobuf file cannot pass 2 GB. Only the dynamo exporter is asked to do that; a model that large which
dynamo cannot export is refused (UnsupportedError) rather than handed to the TorchScript exporter.

Cache: `$DLPERF_CACHE_DIR/onnx` (default `~/.cache/dlperf/onnx`), one directory per export named by a hash of
(what, its shape arguments, the seed, the versions of torch, onnx and onnxscript, the source bytes of the modules
that define the model (`MODEL_SOURCES`, and this one), `EXPORTER_VERSION`), holding `model.onnx` (and its
external data, if any) and `export.json` (what was exported, by which exporter and opset, the versions and the
source digest, the sha256 and size of each file). A directory is made under a temporary name and renamed into
place whole (directory 0755, files 0644), under a lock, so two workers exporting at once never read half a file;
the temporary directories a killed export left behind for the same key are removed under that lock. An entry
whose files do not match its `export.json` (truncated, edited, or without one) is not used but exported again.
Exporting never downloads anything (the weights are made here).

`isolated=True` exports in a child process: a runtime's worker then never imports torch (its peak memory is the
runtime's own, and no second OpenMP runtime is loaded beside the runtime's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from dlperf.frameworks.base import UnsupportedError
from dlperf.models.onnx_entry import CnnRequest, ExportIdentity, ExportMeta, ExportRequest, TransformerRequest
from dlperf.models.transformer.config import TransformerConfig, get_config

#: Bumped whenever what an export writes changes, so older cache entries are not reused.
EXPORTER_VERSION = 2
#: The modules (relative to dlperf/models) whose code defines an export of each kind; their bytes, and this
#: module's, are hashed into the cache key, so an edited model is exported again.
MODEL_SOURCES = {"cnn": ("torch_models.py", "spec.py", "zoo.py"),
                 "transformer": ("transformer/torch_model.py", "transformer/config.py")}
_MODELS_DIR = Path(__file__).resolve().parent
#: The packages whose versions change what is exported (torch first: without it nothing is).
EXPORT_PACKAGES = ("torch", "onnx", "onnxscript")
#: Weights of this many bytes or more go to an external data file (protobuf's limit is 2 GiB for the whole
#: file; the margin is for the graph itself).
EXTERNAL_DATA_BYTES = 1 << 30
#: The TorchScript exporter's opset (the fallback).
TORCHSCRIPT_OPSET = 17
MODEL_FILE = "model.onnx"
SIDECAR = "export.json"
#: Exit status of the child process when torch cannot export the model (UnsupportedError in the parent).
_UNSUPPORTED_EXIT = 3


def cache_dir() -> Path:
    """Where exports live: `$DLPERF_CACHE_DIR/onnx`, or `~/.cache/dlperf/onnx`."""
    root = os.environ.get("DLPERF_CACHE_DIR") or str(Path.home() / ".cache" / "dlperf")
    return Path(root).expanduser() / "onnx"


def cnn_request(model: str, image_size: int | None = None, num_classes: int | None = None,
                seed: int = 0) -> CnnRequest:
    """What identifies a CNN export (defaults resolved, so `None` and the model's own size are one file)."""
    from dlperf.models import get_spec

    spec = get_spec(model, num_classes)
    return {"kind": "cnn", "model": model, "image_size": image_size or spec.image_size,
            "num_classes": spec.num_classes, "in_channels": spec.in_channels, "seed": seed}


def transformer_request(cfg: TransformerConfig | str, seed: int = 0) -> TransformerRequest:
    """What identifies a transformer export: the whole configuration (presets resolved) and the seed."""
    config = get_config(cfg) if isinstance(cfg, str) else cfg
    return {"kind": "transformer", "config": config.model_dump(), "seed": seed}


def export_cnn(model: str, image_size: int | None = None, num_classes: int | None = None, seed: int = 0, *,
               isolated: bool = False) -> Path:
    """The ONNX file of CNN `model` (input (batch, C, image_size, image_size) float32, output the logits)."""
    return export(cnn_request(model, image_size, num_classes, seed), isolated=isolated)


def export_transformer(cfg: TransformerConfig | str, seed: int = 0, *, isolated: bool = False) -> Path:
    """The ONNX file of the transformer `cfg` (a preset name or a config): tokens (batch, seq) int64 -> logits."""
    return export(transformer_request(cfg, seed), isolated=isolated)


def versions() -> dict[str, str]:
    """The installed versions of `EXPORT_PACKAGES` (read from the package metadata: nothing is imported)."""
    out = {}
    for name in EXPORT_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            how = "torch.onnx" if name == "torch" else f"torch.onnx, which needs {name}"
            raise UnsupportedError(f"the models reach ONNX through {how}, and {name} is not installed "
                                   "(pip install 'dlperf[torch,runtimes]')") from None
    return out


def source_digest(kind: str) -> str:
    """sha256 of the source bytes of the modules that define an export of `kind` (`MODEL_SOURCES`) and of this
    module."""
    h = hashlib.sha256()
    for rel in (*MODEL_SOURCES[kind], "onnx_export.py"):
        h.update(rel.encode() + b"\0" + (_MODELS_DIR / rel).read_bytes() + b"\0")
    return h.hexdigest()


def identity(request: ExportRequest) -> ExportIdentity:
    """Everything the cache key hashes: the request, the package versions, the model sources' digest and
    `EXPORTER_VERSION` (also stored in the sidecar)."""
    return {"request": request, "versions": versions(), "sources_sha256": source_digest(request["kind"]),
            "exporter_version": EXPORTER_VERSION}


def key(request: ExportRequest) -> str:
    """The cache key: a hash of `identity(request)` (torch is not imported)."""
    return _key_of(identity(request))


def _key_of(ident: ExportIdentity) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def export(request: ExportRequest, *, isolated: bool = False) -> Path:
    """The cached file for `request`, exported first if the cache has no valid entry."""
    ident = identity(request)
    entry = cache_dir() / _key_of(ident)
    if valid(entry):
        return entry / MODEL_FILE
    if isolated:
        _export_in_child(request)
        if not valid(entry):
            raise RuntimeError(f"the export process left no valid entry at {entry}")
        return entry / MODEL_FILE
    with entry_lock(entry):  # makes the cache folder where it is missing
        if valid(entry):  # another process exported it while this one waited
            return entry / MODEL_FILE
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
        try:
            meta = _export_into(tmp, request) | ident
            meta["files"] = {p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)}
                             for p in sorted(tmp.iterdir())}
            _write_json(tmp / SIDECAR, meta)
            for p in tmp.iterdir():
                p.chmod(0o644)
            tmp.chmod(0o755)  # mkdtemp's 0700 would hide the entry from other users of a shared cache
            if entry.exists():
                shutil.rmtree(entry)  # an invalid entry: never used, replaced
            os.replace(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry / MODEL_FILE


def valid(entry: Path) -> bool:
    """True when `entry` holds its sidecar and every file it lists, of the listed size and sha256."""
    try:
        meta = json.loads((entry / SIDECAR).read_text())
        files = meta["files"]
        if MODEL_FILE not in files:
            return False
        for name, want in files.items():
            path = entry / name
            if path.stat().st_size != want["bytes"] or _sha256(path) != want["sha256"]:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def sidecar(model_path: Path) -> ExportMeta:
    """What was exported into `model_path` and how (its `export.json`, as `export` wrote it)."""
    return cast(ExportMeta, dict(json.loads((Path(model_path).parent / SIDECAR).read_text())))


# -- the torch side --------------------------------------------------------------
def cnn_module(model: str, image_size: int | None = None, num_classes: int | None = None, seed: int = 0) -> Any:
    """The torch CNN that `export_cnn` exports (eval mode): torch's init after `torch.manual_seed(seed)`."""
    import torch

    from dlperf.models import get_spec, torch_models

    torch.manual_seed(seed)
    return torch_models.build(get_spec(model, num_classes), image_size).eval()


def transformer_module(cfg: TransformerConfig | str, seed: int = 0) -> Any:
    """The torch transformer that `export_transformer` exports: `forward(tokens)` -> logits, eval mode."""
    import torch

    from dlperf.models.transformer import init_weights
    from dlperf.models.transformer import torch_model as tm

    config = get_config(cfg) if isinstance(cfg, str) else cfg

    class Logits(torch.nn.Module):
        """Transformer.forward with tokens only (its other arguments are keyword-only, for generation)."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, tokens: Any) -> Any:
            return self.model(tokens)

    return Logits(tm.build(config, init_weights(config, seed))).eval()


def _module_and_example(torch: Any, request: ExportRequest) -> tuple[Any, Any, str, dict[int, str]]:
    """(module, example input, input name, {axis: name} of the dynamic axes)."""
    if request["kind"] == "cnn":
        net = cnn_module(request["model"], request["image_size"], request["num_classes"], request["seed"])
        side = request["image_size"]
        x = torch.randn(2, request["in_channels"], side, side, generator=torch.Generator().manual_seed(0))
        return net, x, "input", {0: "batch"}  # nn.Sequential.forward(input)
    cfg = TransformerConfig.model_validate(request["config"])
    from dlperf.models.transformer import make_tokens

    net = transformer_module(cfg, request["seed"])
    x = torch.as_tensor(make_tokens(cfg, 2, min(8, cfg.max_positions)))
    return net, x, "tokens", {0: "batch", 1: "seq"}


def _export_into(directory: Path, request: ExportRequest) -> ExportMeta:
    """Export `request` into `directory/model.onnx`; the sidecar's fields (less the file hashes)."""
    import torch

    net, x, name, axes = _module_and_example(torch, request)
    path = directory / MODEL_FILE
    weight_bytes = sum(t.numel() * t.element_size() for t in (*net.parameters(), *net.buffers()))
    external = external_data(weight_bytes)
    meta: ExportMeta = {"request": request, "torch": torch.__version__, "exporter_version": EXPORTER_VERSION,
                            "input": name, "dynamic_axes": {str(a): n for a, n in axes.items()},
                            "weight_bytes": weight_bytes, "external_data": external, "created_unix_s": time.time()}
    try:
        seq_max = TransformerConfig.model_validate(request["config"]).max_positions \
            if request["kind"] == "transformer" else None  # "seq" is a transformer's axis only
        dims = {a: torch.export.Dim(n, max=seq_max if n == "seq" else None) for a, n in axes.items()}
        with contextlib.redirect_stdout(sys.stderr):  # the exporter reports progress on stdout
            torch.onnx.export(net, (x,), str(path), dynamo=True, dynamic_shapes={name: dims},
                              external_data=external, verbose=False)
        meta["exporter"] = "dynamo"
    except Exception as exc:  # the dynamo exporter could not export it: the TorchScript one may
        meta["dynamo_failure"] = _one_line(exc)
        for p in directory.iterdir():
            p.unlink()
        if external:
            raise UnsupportedError(f"torch.onnx could not export {_what(request)}: dynamo exporter: "
                                   f"{meta['dynamo_failure']}; the TorchScript exporter is not tried: the weights "
                                   f"({weight_bytes / 2**30:.2f} GiB) need external data (protobuf's 2 GiB "
                                   "limit), which dlperf writes through the dynamo exporter only") from exc
        try:
            torch.onnx.export(net, (x,), str(path), dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                              input_names=[name], output_names=["logits"],
                              dynamic_axes={name: axes, "logits": {0: "batch"}})
        except Exception as exc2:
            raise UnsupportedError(f"torch.onnx could not export {_what(request)}: dynamo exporter: "
                                   f"{meta['dynamo_failure']}; TorchScript exporter: {_one_line(exc2)}") from exc2
        meta["exporter"] = "torchscript"
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    meta["opset"] = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    meta["outputs"] = [o.name for o in proto.graph.output]
    return meta


def external_data(weight_bytes: int) -> bool:
    """Whether weights of `weight_bytes` go to an external data file (`EXTERNAL_DATA_BYTES` or more)."""
    return weight_bytes >= EXTERNAL_DATA_BYTES


def _what(request: ExportRequest) -> str:
    if request["kind"] == "cnn":
        return request["model"]
    return f"transformer {request['config']['kind']} d{request['config']['d_model']}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


# -- files ------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _write_json(path: Path, data: ExportMeta) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


@contextlib.contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """An exclusive advisory lock (fcntl, on `ENTRY.lock` beside it) on one cache entry: one exporter per entry at
    a time, so two processes sharing a cache (two users' runs, the suite's test processes) never replace an entry
    the other is writing or reading. Once it is held, the temporary folders (`.ENTRY.*`) a killed exporter left
    are removed: exporters make them only under this lock, so their holder is gone."""
    import fcntl

    entry.parent.mkdir(parents=True, exist_ok=True)
    with entry.with_suffix(".lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            for left in entry.parent.glob(f".{entry.name}.*"):
                shutil.rmtree(left, ignore_errors=True)
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _export_in_child(request: ExportRequest) -> None:
    """Run `export(request)` in a fresh Python process (torch is imported there, not here)."""
    done = subprocess.run([sys.executable, "-m", "dlperf.models.onnx_export", json.dumps(request)],
                          capture_output=True, text=True, timeout=1800, env=os.environ.copy())
    if done.returncode == _UNSUPPORTED_EXIT:
        raise UnsupportedError(done.stderr.strip().splitlines()[-1])
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"exporting {_what(request)} to ONNX failed (exit {done.returncode}): {tail}")


def main(argv: list[str] | None = None) -> int:
    """`python -m dlperf.models.onnx_export REQUEST_JSON`: export one request (what `isolated=True` runs)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        print(export(json.loads(args[0])))
    except UnsupportedError as exc:
        print(str(exc), file=sys.stderr)
        return _UNSUPPORTED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())

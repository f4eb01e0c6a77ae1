"""`FILE.onnx`: an ONNX graph, run by ONNX Runtime and OpenVINO (not by torch: there is no module to load).

Its inputs are the graph's declared inputs, symbolic dimensions bound by --batch (the first) and --seq (any
other); `check_text` reads the file with `onnx.load` (protobuf, no pickle) and runs onnx's checker, so a corrupt
file is refused before any worker starts.
"""

from __future__ import annotations

from pathlib import Path

from dlperf.sources.base import Loaded, SourceError, SourceKind, canonical_path


class OnnxSource(SourceKind):
    name = "onnx"
    form = "FILE.onnx"

    def matches(self, text: str) -> bool:
        return text.endswith(".onnx")

    def canonical(self, text: str) -> str:
        return canonical_path(text)

    def check_text(self, text: str) -> None:
        path = Path(text)
        if not path.is_file():
            raise SourceError(f"{text}: no such file")
        try:
            import onnx
        except ImportError:
            raise SourceError(f"{text}: reading an ONNX file needs onnx (pip install 'dlperf[runtimes]')") from None
        try:
            onnx.checker.check_model(onnx.load(str(path), load_external_data=False))
        except Exception as exc:
            raise SourceError(f"{text}: not a valid ONNX model ({type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''})") from None

    def load(self, text: str, seed: int) -> Loaded:
        raise SourceError(f"{text}: an ONNX file runs on onnxruntime and openvino, not in torch")

"""What an entry of the ONNX export cache holds (`onnx_export`): the request that names an export, the identity
its key hashes, and its sidecar `export.json`. Types only, so that the exporter stays one job."""

from __future__ import annotations

from typing import Literal, TypedDict


class CnnRequest(TypedDict):
    """What identifies a CNN export (`cnn_request`)."""

    kind: Literal["cnn"]
    model: str
    image_size: int
    num_classes: int
    in_channels: int
    seed: int


class TransformerRequest(TypedDict):
    """What identifies a transformer export (`transformer_request`): the config's `model_dump()` and the seed."""

    kind: Literal["transformer"]
    config: dict[str, int | float | str | None]
    seed: int


ExportRequest = CnnRequest | TransformerRequest


class ExportIdentity(TypedDict):
    """Everything the cache key hashes (`identity`); stored in the sidecar too."""

    request: ExportRequest
    versions: dict[str, str]
    sources_sha256: str
    exporter_version: int


class ExportedFile(TypedDict):
    """One file of an entry as the sidecar lists it."""

    bytes: int
    sha256: str


class ExportMeta(TypedDict, total=False):
    """An entry's `export.json`: what `_export_into` writes, the identity, and the files' sizes and hashes.

    `exporter` is "dynamo" or "torchscript"; `dynamo_failure` is there only where the dynamo exporter failed.
    """

    request: ExportRequest
    torch: str
    exporter_version: int
    input: str
    dynamic_axes: dict[str, str]
    weight_bytes: int
    external_data: bool
    created_unix_s: float
    exporter: str
    dynamo_failure: str
    opset: int | None
    outputs: list[str]
    versions: dict[str, str]
    sources_sha256: str
    files: dict[str, ExportedFile]

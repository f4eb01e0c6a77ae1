"""`serve`: a model served under load, in one of MLPerf Inference's scenarios, driven by MLPerf's own LoadGen.

A case serves one inference step (the `cnn` or `transformer` workload with `task: infer`, built by that workload's
builder for the case's framework or runtime, with `max_batch` samples) to LoadGen's SingleStream, MultiStream,
Server or Offline scenario. The system under test calls the step's `predict(n)` (`workloads.base.Step`) on
batches of at most `max_batch` samples. The case is not timed by dlperf's timer: `drive` runs LoadGen (the
`dlperf.serving` package) and stores LoadGen's own summary (its percentiles, achieved rate, VALID/INVALID and
why) with the case. A Server case without `target_qps` searches for the highest rate that still meets the
latency bound, every probe stored. Durations and query counts below MLPerf's rules are allowed (`--quick`) and
labelled as shortened in every output.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dlperf.core.settings import RunSettings
from dlperf.frameworks import Framework, UnsupportedError
from dlperf.serving.settings import MAX_DURATION_S, MAX_LATENCY_MS
from dlperf.workloads.base import Cost, InnerParams, Step, Workload, WorkloadParams

SCENARIOS = ("single-stream", "multi-stream", "server", "offline")
#: The workloads whose inference step can be served, and the frameworks that build it.
SERVED_WORKLOADS = ("cnn", "transformer")


class ServeParams(WorkloadParams):
    workload: Literal["cnn", "transformer"] = Field(description="what is served: its `task: infer` step")
    model: str = Field(description="a cnn model (alexnet, ...) or a transformer preset (gpt2-tiny, bert-base, ...)")
    scenario: Literal["single-stream", "multi-stream", "server", "offline"]
    max_batch: int = Field(default=1, gt=0, description="most samples one predict call takes (the SUT's batches)")
    seq_len: int | None = Field(default=None, gt=0, description="transformer: tokens per sample (default 128)")
    image_size: int | None = Field(default=None, gt=0, description="cnn: square input side (default: the model's)")
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    target_latency_ms: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_MS, description="server: the latency bound at its percentile "
        "(required); multi-stream: an expected latency per query (LoadGen plans with the lower of it and the "
        "measured one)")
    target_qps: float | None = Field(
        default=None, gt=0, description="server: the offered rate (none: search for the highest valid rate); "
        "offline: the expected rate (none: measured first)")
    samples_per_query: int = Field(default=8, gt=0, description="multi-stream: samples per query")
    min_duration_s: float = Field(default=600.0, gt=0, le=MAX_DURATION_S,
                                  description="LoadGen's minimum duration (MLPerf: 600 s)")
    min_query_count: int | None = Field(default=None, gt=0, description="none: MLPerf's minimum for the scenario")
    sample_pool: int = Field(default=64, gt=0, description="distinct samples LoadGen draws from (its performance "
                                                           "sample count)")
    search_probes: int = Field(default=8, gt=0, description="server search: most LoadGen runs")

    @model_validator(mode="after")
    def _consistent(self) -> ServeParams:
        if self.scenario == "server" and self.target_latency_ms is None:
            raise ValueError("the server scenario needs target_latency_ms (its p99 latency bound)")
        if self.workload == "cnn" and self.seq_len is not None:
            raise ValueError("seq_len applies to the transformer, not to a cnn")
        if self.workload == "transformer" and self.image_size is not None:
            raise ValueError("image_size applies to a cnn, not to the transformer")
        self.inner_params()  # the served step's own checks (an unknown model, an encoder's shape, ...)
        return self

    def inner_params(self) -> InnerParams:
        """The served workload's parameters: its inference step with `max_batch` samples."""
        raw: InnerParams = {"model": self.model, "task": "infer", "batch": self.max_batch}
        if self.workload == "transformer":
            raw |= {"seq_len": self.seq_len or 128, "precision": self.precision}
        else:
            if self.image_size is not None:
                raw["image_size"] = self.image_size
            if self.precision != "fp32":
                raise ValueError("a served cnn runs in fp32 here")
        from dlperf.workloads.registry import get_workload

        get_workload(self.workload).parse(raw)  # ValueError naming the bad field
        return raw


class Serve(Workload[ServeParams]):
    name = "serve"
    description = "MLPerf Inference scenarios (LoadGen) over the cnn and transformer inference steps"
    Params = ServeParams
    sample_unit = "query sample"

    def frameworks(self) -> list[str]:
        """Every framework that builds an inference step of a served workload."""
        from dlperf.workloads.registry import get_workload

        return sorted({fw for w in SERVED_WORKLOADS for fw in get_workload(w).frameworks()})

    def cost(self, params: ServeParams) -> Cost:
        """The served step's cost per sample (one query sample)."""
        from dlperf.workloads.registry import get_workload

        inner = get_workload(params.workload)
        batch = inner.cost(inner.parse(params.inner_params()))
        per = params.max_batch
        return Cost(flops=None if batch.flops is None else batch.flops / per,
                    bytes_moved=None if batch.bytes_moved is None else batch.bytes_moved / per, samples=1)

    def build(self, fw: Framework, device: str, params: ServeParams) -> Step:
        """The served workload's inference step, built by its own builder for `fw` (it must offer `predict`)."""
        from dlperf.workloads.registry import get_workload

        inner = get_workload(params.workload)
        step = inner.build(fw, device, inner.parse(params.inner_params()))
        if step.predict is None:
            raise UnsupportedError(f"{fw.name}'s {params.workload} inference step cannot be served (no predict)")
        return step

    def drive(self, fw: Framework, device: str, params: ServeParams, step: Step,
              settings: RunSettings) -> dict[str, Any]:
        """Run the case's scenario under LoadGen (`dlperf.serving`) and return its metrics."""
        from dlperf.serving.driver import drive

        return drive(fw, device, params, step, settings)


__all__ = ["SCENARIOS", "Serve", "ServeParams"]

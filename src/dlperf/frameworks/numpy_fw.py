"""NumPy: CPU only; BLAS threads limited through threadpoolctl."""

from __future__ import annotations

from dlperf.frameworks.base import Framework, FrameworkInfo, no_sync


class NumpyFramework(Framework):
    name = "numpy"
    family = "numpy"
    module = "numpy"
    distributions = ("numpy",)
    extra = "numpy"

    @property
    def install_hint(self) -> str:
        return "pip install numpy"

    def devices(self) -> list[str]:
        return ["cpu"]

    def sync(self, device: str) -> None:
        return None  # NumPy calls return when their work is done.

    def sync_fn(self, device: str):  # type: ignore[override]
        return no_sync

    def seed(self, n: int) -> None:
        np = self.import_module()
        np.random.seed(n)

    def set_threads(self, n: int) -> None:
        # Kept alive on the instance: the limit lasts as long as the controller does.
        from threadpoolctl import threadpool_limits

        self._limits = threadpool_limits(limits=n)

    def threads(self) -> int | None:
        from threadpoolctl import threadpool_info

        blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        return int(blas[0]["num_threads"]) if blas else None

    def info(self) -> FrameworkInfo:
        np = self.import_module()
        out: FrameworkInfo = {"version": np.__version__}
        try:
            from threadpoolctl import threadpool_info

            blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
            if blas:
                out["blas"] = f"{blas[0].get('internal_api')} {blas[0].get('version')}"
                out["blas_threads"] = blas[0].get("num_threads")
        except Exception as exc:  # threadpoolctl cannot always introspect a BLAS
            out["blas"] = f"unknown ({type(exc).__name__})"
        return out

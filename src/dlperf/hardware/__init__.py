"""This machine and the devices it is set against, one module per job; each imports only modules
listed before it, and none imports `store`, `report`, `runner` or `cli`:

- `cpu_limits`: the CPUs this process may use (its affinity, its cgroup's CPU quota);
- `probe`: raw facts read from the host (CPU model and flags, cores, the default threads, OS, git, NVML's
  GPUs);
- `noise`: what makes timings noisy (governor, turbo, ASLR, SMT, quota, VM), read from /proc and /sys;
- `caches`: the cache levels the host reports, and the memory level a working set fits in;
- `fma_peak`: the FP32 peak, the clock under vector load and the FMA units derived from the probe's rates
  (pure: tested with other machines' recorded rates);
- `clock_probe`: those rates, measured by a small C probe compiled at run time;
- `peak_cache`: the probe's result measured once per machine, at a quiet moment, stored and reused;
- `catalog`: the vendors' figures for 30+ devices, lookup by name;
- `peaks`: theoretical peaks, derived from the probed facts and read from the catalog;
- `identity`: the fingerprint, and the fields of it that identify an environment (`identity_hash`);
- `detect`: this machine's devices mapped onto the catalog;
- `roofline`, `measured`, `recommend`: analyses over stored rows (they never open the store).
"""

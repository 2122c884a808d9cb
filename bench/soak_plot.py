"""The soak's plot: a panel per group of gauges, each judged gauge's band drawn, the warm-up shaded, the kills
and reshards marked. Who calls it: ``bench.soak`` (needs matplotlib). Not a benchmark itself (run_all skips it).
"""

from __future__ import annotations

from pathlib import Path

JVM = ("jvm_heap_after_gc_mb", "jvm_metaspace_mb", "jvm_code_cache_mb")
RSS = (
    "jvm_rss_mb",
    "runner_rss_mb",
    "worker_mean_rss_mb",
    "worker_max_rss_mb",
    "broker_rss_mb",
    "driver_python_rss_mb",
    "harness_rss_mb",
)
FDS = ("jvm_fds", "jvm_sockets", "runner_fds", "runner_sockets", "broker_fds", "broker_sockets")
PANELS = (
    ("JVM after full GC: heap, metaspace, code cache (MiB)", JVM),
    ("RSS (MiB)", RSS),
    ("threads", ("jvm_threads", "runner_threads")),
    ("file descriptors / sockets", FDS),
    ("metadata store (entries) / checkpoint (files)", ("store_entries", "checkpoint_files")),
    ("lag (records)", ("lag_records",)),
)


def plot(samples, warm_up, restarts, reshards, found, path: Path, title: str) -> bool:
    """A panel per group of gauges, each judged gauge's band drawn, warm-up shaded, restarts marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    minutes = [s.t_s / 60 for s in samples]
    figure, axes = plt.subplots(len(PANELS), 1, sharex=True, figsize=(10, 3 * len(PANELS)))
    for axis, (label, names) in zip(axes, PANELS, strict=True):
        for name in names:
            # no driver process between a kill and the new driver's start: a gap, not a zero
            gap = name not in ("store_entries", "checkpoint_files", "lag_records", "harness_rss_mb")
            values = [float("nan") if gap and not s.jvm_rss_mb else getattr(s, name) for s in samples]
            if not any(value == value and value for value in values):  # all NaN or zero: not in this run
                continue
            line = axis.plot(
                minutes, values, label=name.replace("_", " ") + (" (not judged)" if name == "harness_rss_mb" else "")
            )[0]
            if name in found:
                baseline, bound = found[name].baseline, found[name].bound
                for edge in (baseline + bound,) if found[name].rises_only else (baseline - bound, baseline + bound):
                    axis.axhline(edge, color=line.get_color(), linestyle=":", linewidth=0.8)
        axis.axvspan(0, min(warm_up, samples[-1].t_s) / 60, color="grey", alpha=0.15)
        for at in restarts:
            axis.axvline(at / 60, color="tab:red", linestyle="--", linewidth=0.8)
        for at in reshards:
            axis.axvline(at / 60, color="tab:green", linestyle="-.", linewidth=0.8)
        axis.set_ylabel(label, fontsize="small")
        axis.legend(loc="upper left", fontsize="x-small")
        axis.grid(alpha=0.3)
    axes[0].set_title(
        f"{title}\n(grey: warm-up, red dashes: driver SIGKILLed, green: split / merge, dotted: the bound)",
        fontsize="small",
    )
    axes[-1].set_xlabel("minutes")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True

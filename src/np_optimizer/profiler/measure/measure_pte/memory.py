"""Memory figures of the measuring process from /proc: VmRSS and the high-water mark VmHWM, which writing 5 to
/proc/self/clear_refs resets, so each phase (load, execute) gets its own peak above one baseline."""

from __future__ import annotations

from typing import Dict, Optional

from .protocol import Json

Status = Dict[str, int]  # memory lines of /proc/self/status, in kB

DEFINITIONS = {
    "baseline_rss_bytes": "VmRSS of the measuring process just before the program is loaded (after "
                          "Python, torch and the runtime are imported and the inputs are built); the "
                          "high-water mark is reset here by writing 5 to /proc/self/clear_refs",
    "load_peak_delta_bytes": "VmHWM after loading the program and the method, minus the baseline",
    "after_load_rss_delta_bytes": "VmRSS after loading, minus the baseline (what the load keeps)",
    "execute_peak_delta_bytes": "VmHWM after all warm-up and timed runs, minus the baseline; the mark is "
                                "reset again right after the load, so this covers executions only",
    "execute_peak_above_loaded_bytes": "VmHWM after the runs minus VmRSS after the load: what executing "
                                       "adds on top of the loaded program",
    "after_execute_rss_delta_bytes": "VmRSS after the runs, minus the baseline",
    "peak_delta_bytes": "max(load_peak_delta_bytes, execute_peak_delta_bytes): the resident high-water "
                        "mark of loading plus running the model above the process baseline",
    "after_execute_anon_delta_bytes": "RssAnon after the runs minus RssAnon at the baseline: heap and "
                                      "anonymous mappings (activations, XNNPACK workspace, packed weights)",
    "after_execute_file_delta_bytes": "RssFile after the runs minus RssFile at the baseline: file pages, i.e. "
                                      "the mmapped .pte and code pages of the runtime libraries touched for "
                                      "the first time (about 2 MB even for a trivial model on x86 here)",
}
_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def read_status() -> Status:
    """Memory lines of /proc/self/status, in kB. Empty dict where there is no procfs."""
    out: Status = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in _KEYS:
                    out[key] = int(line.split()[1])
    except OSError:
        pass
    return out


def reset_hwm() -> Optional[str]:
    """Reset VmHWM to the current RSS. Returns None on success or the reason it failed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return None
    except OSError as e:
        return "cannot write /proc/self/clear_refs: %s" % e


def memory_section(base: Status, after_load: Status, before_execute: Status, after_execute: Status,
                   hwm_problem: Optional[str]) -> Json:
    """The document's "memory" section from the four /proc readings of one measurement."""
    memory: Json = {"source": "/proc/self/status VmRSS/VmHWM after writing 5 to /proc/self/clear_refs"}
    if base and not hwm_problem:
        kb = 1024
        rss = base["VmRSS"]
        memory.update({
            "baseline_rss_bytes": rss * kb,
            "load_peak_delta_bytes": (after_load["VmHWM"] - rss) * kb,
            "after_load_rss_delta_bytes": (after_load["VmRSS"] - rss) * kb,
            "execute_peak_delta_bytes": (after_execute["VmHWM"] - rss) * kb,
            "execute_peak_above_loaded_bytes": (after_execute["VmHWM"] - after_load["VmRSS"]) * kb,
            "after_execute_rss_delta_bytes": (after_execute["VmRSS"] - rss) * kb,
        })
        memory["peak_delta_bytes"] = max(memory["load_peak_delta_bytes"], memory["execute_peak_delta_bytes"])
        if "RssAnon" in base and "RssAnon" in after_execute:
            memory["after_execute_anon_delta_bytes"] = (after_execute["RssAnon"] - base["RssAnon"]) * kb
            memory["after_execute_file_delta_bytes"] = (after_execute["RssFile"] - base["RssFile"]) * kb
        memory["definitions"] = DEFINITIONS
    else:
        memory["available"] = False
    memory["status_kb"] = {"baseline": base, "after_load": after_load, "before_execute": before_execute,
                           "after_execute": after_execute}
    return memory

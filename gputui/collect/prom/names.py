"""Which series to read, under which names, and what their labels mean.

Two exporters are understood: NVIDIA's dcgm-exporter (its default counters, plus the
profiling and power-limit fields where a cluster enabled them) and gputui's own exporter
(gputui.exporter.metrics). Each reading is mapped to a field of gputui's GPU sample with a
scale: dcgm-exporter gives percent and MiB, gputui's exporter ratios and bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """A metric read into column `field`, multiplied by `scale`."""

    metric: str
    field: str
    scale: float = 1.0


@dataclass(frozen=True)
class Family:
    """One exporter's names: its readings, and the labels naming the node and the GPU."""

    name: str
    readings: tuple[Reading, ...]
    host_labels: tuple[str, ...]
    uuid_label: str
    util_metric: str  # the series every GPU has: its presence tells the family is there


DCGM = Family(
    "dcgm-exporter",
    (
        Reading("DCGM_FI_DEV_GPU_UTIL", "util"),
        Reading("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_util"),
        Reading("DCGM_FI_PROF_DRAM_ACTIVE", "dram", 100.0),  # 0..1: in percent like mem_util
        Reading("DCGM_FI_PROF_SM_ACTIVE", "sm_active", 100.0),
        Reading("DCGM_FI_DEV_POWER_USAGE", "power_w"),
        Reading("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w"),
        Reading("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "enforced_limit_w"),
        Reading("DCGM_FI_DEV_FB_USED", "mem_used_mb"),
        Reading("DCGM_FI_DEV_FB_FREE", "mem_free_mb"),
        Reading("DCGM_FI_DEV_SM_CLOCK", "sm_mhz"),
        Reading("DCGM_FI_DEV_MEM_CLOCK", "mem_mhz"),
        Reading("DCGM_FI_DEV_GPU_TEMP", "temp_c"),
        Reading("DCGM_FI_DEV_XID_ERRORS", "xid"),
        Reading("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe"),
        Reading("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "ecc_dbe_agg"),
        Reading("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "remapped_uncorrectable"),
        Reading("DCGM_FI_DEV_ROW_REMAP_FAILURE", "remap_failure"),
        Reading("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "nvlink_crc_flit"),
        Reading("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "nvlink_crc_data"),
        Reading("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "nvlink_replay"),
        Reading("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "nvlink_recovery"),
    ),
    host_labels=("Hostname", "hostname", "instance"),
    uuid_label="UUID",
    util_metric="DCGM_FI_DEV_GPU_UTIL",
)

GPUTUI = Family(
    "gputui exporter",
    (
        Reading("gputui_gpu_utilization_ratio", "util", 100.0),
        Reading("gputui_gpu_memory_utilization_ratio", "mem_util", 100.0),
        Reading("gputui_gpu_power_watts", "power_w"),
        Reading("gputui_gpu_power_limit_watts", "power_limit_w"),
        Reading("gputui_gpu_memory_used_bytes", "mem_used_mb", 1.0 / (1 << 20)),
        Reading("gputui_gpu_processes", "processes"),
        Reading("gputui_gpu_owner", "owner"),
    ),
    host_labels=("host", "Hostname", "instance"),
    uuid_label="uuid",
    util_metric="gputui_gpu_utilization_ratio",
)

FAMILIES = (DCGM, GPUTUI)

# Counters: only their increases inside the window mean something (a reset is a restart).
COUNTERS = (
    "ecc_dbe",
    "ecc_dbe_agg",
    "remapped_uncorrectable",
    "nvlink_crc_flit",
    "nvlink_crc_data",
    "nvlink_replay",
    "nvlink_recovery",
)

# A pod's labels: dcgm-exporter's own, or the exported_ form Prometheus gives them when the
# scrape config has labels of the same name (the exporter's own pod, say).
POD_LABELS = ("exported_pod", "pod")
NAMESPACE_LABELS = ("exported_namespace", "namespace")
CONTAINER_LABELS = ("exported_container", "container")

# Board power limits by model, for a cluster that does not export one (watts; the SXM
# parts' defaults). A model not here is judged without power, and the verdict says so.
DEFAULT_LIMITS = (
    ("H200", 700.0),
    ("H100 PCIe", 350.0),
    ("H100 NVL", 400.0),
    ("H100", 700.0),
    ("H800", 700.0),
    ("GH200", 900.0),
    ("B200", 1000.0),
    ("B100", 700.0),
    ("A100-PCIE", 250.0),
    ("A100 PCIe", 250.0),
    ("A100", 400.0),
    ("A800", 400.0),
    ("L40S", 350.0),
    ("L40", 300.0),
    ("L4", 72.0),
    ("A10G", 300.0),
    ("A10", 150.0),
    ("V100", 300.0),
)


def default_limit(model: str | None) -> float | None:
    """The model's usual power limit, or None.

    Args:
        model: a GPU model's name, as the exporter labels it; None when unknown.

    Returns:
        Its usual power limit in watts, or None when the model is not known.
    """
    if not model:
        return None
    for key, watts in DEFAULT_LIMITS:
        if key.lower() in model.lower():
            return watts
    return None


def first_label(labels: dict[str, str], names: tuple[str, ...]) -> str | None:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*$')


def check_match(text: str) -> str:
    """--match: label matchers as inside a selector's braces (`namespace="ml",pod=~"a.*"`);
    ValueError with what is wrong. No braces, no functions: it goes inside ours.

    Args:
        text: the `--match` value.

    Returns:
        The matchers, ready to go inside a selector's braces.

    Raises:
        ValueError: braces, functions or a malformed matcher (what is wrong).
    """
    parts = _split_matchers(text)
    if not parts:
        raise ValueError("no label matcher")
    for p in parts:
        if not _MATCHER.match(p):
            raise ValueError(f'{p.strip()[:60]!r} is not a label matcher such as namespace="ml"')
    return ",".join(p.strip() for p in parts)


def _split_matchers(text: str) -> list[str]:
    """Split on the commas outside quotes."""
    out: list[str] = []
    cur: list[str] = []
    quoted = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if cur and "".join(cur).strip():
        out.append("".join(cur))
    return out


def selector(metric: str, family: Family, match: str | None, nodes: tuple[str, ...]) -> str:
    """`metric{match, Hostname=~"a|b"}`: the user's matchers and the node list."""
    inner = [match] if match else []
    if nodes:
        alt = "|".join(re.escape(n).replace("\\", "\\\\").replace('"', '\\"') for n in nodes)
        inner.append(f'{family.host_labels[0]}=~"{alt}"')
    return metric + ("{" + ",".join(inner) + "}" if inner else "")

"""What the hardware promises per GPU pair, from NVML: NVLink count, else the PCIe path.

Why: a pair at 50 GB/s is fine over PCIe and broken over NV18, so each matrix cell carries
its label. Labels follow `nvidia-smi topo -m`: NV<n> (n active NVLinks between the two, direct
or through NVSwitches), else PIX / PXB / PHB / NODE / SYS. Every NVML error gives an unknown
(None -> "N/A") instead of an exception: the probe itself does not need topology.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputui.probe.result import Pair, Topology

_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def gpu_count() -> tuple[int, str | None]:
    """(number of GPUs NVML sees, why none when 0).

    Returns:
        (count, None), or (0, why no GPU can be seen).
    """
    try:
        import pynvml
    except ImportError:
        return 0, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as e:
        return 0, f"NVML did not start ({e})"
    try:
        n = int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError as e:
        return 0, f"NVML: {e}"
    finally:
        _shutdown(pynvml)
    return n, None if n else "the NVIDIA driver reports no GPUs"


def _shutdown(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: S110 - best effort; a failed shutdown changes nothing here
        pass


def _links(nv: Any, h: Any) -> list[tuple[str, bool]]:
    """(remote PCI bus id, remote is an NVSwitch) for each active NVLink of a GPU."""
    out = []
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                continue
            bus = nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId
        except nv.NVMLError:
            continue
        bus = bus.decode() if isinstance(bus, bytes) else str(bus)
        try:
            kind = nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
            switch = kind == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
        except (nv.NVMLError, AttributeError):
            switch = False
        out.append((bus.lower(), switch))
    return out


def _bus(nv: Any, h: Any) -> str:
    bus = nv.nvmlDeviceGetPciInfo(h).busId
    return (bus.decode() if isinstance(bus, bytes) else str(bus)).lower()


def _same_bus(x: str, y: str) -> bool:
    """NVML bus ids come with 4 or 8 domain digits: compare the tail."""
    return x[-12:] == y[-12:]


def pair_topology(devices: Sequence[int]) -> dict[Pair, Topology]:
    """Topology per unordered pair (earlier device first); {} when NVML is unavailable."""
    try:
        import pynvml as nv
    except ImportError:
        return {}
    try:
        nv.nvmlInit()
    except (nv.NVMLError, OSError):
        return {}
    try:
        handles, links, buses = {}, {}, {}
        for d in devices:
            try:
                handles[d] = nv.nvmlDeviceGetHandleByIndex(d)
                buses[d] = _bus(nv, handles[d])
            except nv.NVMLError:
                continue
            links[d] = _links(nv, handles[d])
        out: dict[Pair, Topology] = {}
        for i, a in enumerate(devices):
            for b in devices[i + 1 :]:
                out[(a, b)] = _one(nv, a, b, handles, links, buses)
        return out
    finally:
        _shutdown(nv)


def _one(
    nv: Any, a: int, b: int, handles: dict[int, Any], links: dict[int, Any], buses: dict[int, str]
) -> Topology:
    if a not in handles or b not in handles:
        return Topology((a, b))
    direct = sum(1 for bus, sw in links[a] if not sw and _same_bus(bus, buses[b]))
    sw_a = sum(1 for _, sw in links[a] if sw)
    sw_b = sum(1 for _, sw in links[b] if sw)
    nvlinks = direct + min(sw_a, sw_b)
    try:
        level = nv.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b])
        pcie = _LEVELS.get(int(level))
    except nv.NVMLError:
        pcie = None
    return Topology((a, b), nvlinks=nvlinks if a in links else None, pcie=pcie)

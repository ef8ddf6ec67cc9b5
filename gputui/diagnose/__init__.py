"""The hang detector: pure functions over a window of Snapshots, no UI imports (ever).

`classify` names what each GPU is doing at one sample, `runs` follows how long a GPU has been
spinning, `groups` remembers which GPUs belong to which job (a dead rank included), and
`detector` turns all that into a `Verdict` per sample. The dashboard, `gputui check` and the
incident bundle all call `Detector.update`, so they can never disagree.
"""

from gputui.diagnose.classify import GpuState, classify_gpu
from gputui.diagnose.detector import Detector, diagnose_trace
from gputui.diagnose.verdict import Verdict

__all__ = ["Detector", "GpuState", "Verdict", "classify_gpu", "diagnose_trace"]

"""TensorBoard event files, read with TensorBoard's own ``EventAccumulator``: the scalars of a run
directory (:mod:`isosim.analysis.logs.tensorboard`) and its text entries, where the Hugging Face
TensorBoard callback writes the trainer's config as JSON under ``args`` (read by
:mod:`isosim.analysis.logs.tensorboard` and :mod:`isosim.analysis.logs.trl`)."""
from __future__ import annotations

from pathlib import Path

from ._common import fail


def accumulator(path: Path):
    """A loaded ``EventAccumulator`` of an event file or directory (every scalar and tensor kept);
    one :class:`IsosimInputError` line where tensorboard is missing or the events cannot be read."""
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
    except ImportError:
        fail(path, "reading TensorBoard events needs the tensorboard package (pip install 'isosim[logs]')")
    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    try:
        acc.Reload()
    except Exception as exc:  # a truncated or foreign file
        fail(path, f"cannot read its TensorBoard events ({type(exc).__name__})")
    return acc


def text_entries(path: Path) -> dict[str, str]:
    """The text summaries of an event file or directory, tag -> the last text written."""
    acc = accumulator(path)
    from tensorboard.util import tensor_util

    out = {}
    for tag in acc.Tags().get("tensors", []):
        events = acc.Tensors(tag)
        meta = acc.SummaryMetadata(tag)
        if not events or meta.plugin_data.plugin_name != "text":
            continue
        value = tensor_util.make_ndarray(events[-1].tensor_proto)
        item = value.flat[0] if value.size else b""
        name = tag[: -len("/text_summary")] if tag.endswith("/text_summary") else tag  # torch's writer adds it
        out[name] = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
    return out

"""mrep_export: dump any PyTorch model to an mrep module dump (schemas/dump.schema.json)."""

__version__ = "0.1.0"

from .dump import SCHEMA_VERSION, DumpSummary, TensorRow, build_dump, dump_model, tensor_stats  # noqa: E402
from .errors import ExportError  # noqa: E402
from .hf import build_hf_model, load_hf_config  # noqa: E402
from .hooks import CheckpointDumper, lightning_callback, trainer_callback  # noqa: E402
from .trace import trace_flops  # noqa: E402

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointDumper",
    "DumpSummary",
    "ExportError",
    "TensorRow",
    "build_dump",
    "build_hf_model",
    "dump_model",
    "lightning_callback",
    "load_hf_config",
    "tensor_stats",
    "trace_flops",
    "trainer_callback",
]

import os
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# lerobot copies parquet files into the HF datasets cache on every load: keep test runs from growing ~/.cache
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="vla_test_hf_cache_"))

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

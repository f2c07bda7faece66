"""Read-only access to lerobot v3 metadata files with pyarrow (no HF datasets cache, no hub)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

EPISODES_DIR = "meta/episodes"  # lerobot.datasets.utils.EPISODES_DIR (importing lerobot costs ~3 s)

_CHUNK_FILE = re.compile(r"chunk-(\d+)/file-(\d+)\.\w+$")


def chunk_file_of(path: Path) -> tuple[int, int]:
    """(chunk_index, file_index) parsed from ``.../chunk-XXX/file-YYY.ext``."""
    m = _CHUNK_FILE.search(path.as_posix())
    if m is None:
        raise ValueError(f"not a lerobot chunk/file path: {path}")
    return int(m.group(1)), int(m.group(2))


def episode_meta_files(root: Path) -> list[Path]:
    """The lerobot episode-metadata parquet files, in chunk/file order."""
    return sorted((root / EPISODES_DIR).glob("chunk-*/file-*.parquet"), key=chunk_file_of)


def data_files(root: Path) -> list[Path]:
    """The lerobot frame-data parquet files, in chunk/file order."""
    return sorted((root / "data").glob("chunk-*/file-*.parquet"), key=chunk_file_of)


def read_episode_rows(root: Path, *, with_stats: bool = False) -> list[dict[str, Any]]:
    """All rows of lerobot's episode table, sorted by episode index.

    Args:
        root: Dataset root.
        with_stats: Keep the per-episode ``stats/...`` columns (large); dropped by default.

    Raises:
        pyarrow.ArrowInvalid: A metadata file is unreadable (e.g. a writer was killed before closing it).
    """
    rows: list[dict[str, Any]] = []
    for path in episode_meta_files(root):
        table = pq.read_table(path)
        if not with_stats:
            table = table.select([c for c in table.column_names if not c.startswith("stats/")])
        rows.extend(table.to_pylist())
    rows.sort(key=lambda r: int(r["episode_index"]))
    return rows


def data_file_path(root: Path, data_path_template: str, row: dict[str, Any]) -> Path:
    """The data parquet file holding an episode row's frames."""
    return root / data_path_template.format(
        chunk_index=int(row["data/chunk_index"]), file_index=int(row["data/file_index"])
    )


def fixed_list_to_numpy(column: pa.ChunkedArray | pa.Array, width: int) -> Any:
    """A fixed-size-list (or list) arrow column of numbers as a [N, width] numpy array."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if (
        pa.types.is_list(arr.type)
        or pa.types.is_fixed_size_list(arr.type)
        or pa.types.is_large_list(arr.type)
    ):
        values = arr.flatten().to_numpy(zero_copy_only=False)
        return values.reshape(len(arr), -1) if len(arr) else values.reshape(0, width)
    return arr.to_numpy(zero_copy_only=False).reshape(len(arr), 1)

"""Crash-safe episode writer on top of lerobot's ``LeRobotDataset`` (v3).

Crash-safety design (SIGKILL at any moment loses at most the episode in progress):

1. Every episode gets its own files. The dataset is created with tiny ``data_files_size_in_mb`` /
   ``video_files_size_in_mb`` limits, so lerobot rotates to a new ``file-NNN`` for each episode instead
   of re-opening (and overwriting) or concatenating into the previous one.
2. After ``save_episode`` the writer closes lerobot's data ParquetWriter and flushes/closes its episode
   metadata writer, so every file of the episode has its footer; then fsyncs them.
3. The sidecar line (``meta/vla_episodes.jsonl``) is appended and fsynced last: it is the commit record.
4. ``EpisodeWriter(resume=True)`` first runs :func:`vla.data.recovery.repair_dataset`, which deletes
   whatever belongs to uncommitted episodes and rebuilds info/stats/tasks from the committed rows, then
   re-opens the dataset with ``LeRobotDataset.resume``, which appends from the next episode index.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.utils import DEFAULT_EPISODES_PATH, DEFAULT_TASKS_PATH, INFO_PATH, STATS_PATH

from vla.data._fs import atomic_write_bytes, fsync_dir, fsync_file
from vla.data.errors import DatasetError
from vla.data.recovery import backup_info, repair_dataset
from vla.data.schema import BOOL_KEYS, FLOAT_KEYS, SOURCES, SPEC_FILE, TASK, EpisodeMeta, EpisodeSpec
from vla.data.sidecar import append_sidecar, read_sidecar
from vla.lock import acquire, release

logger = logging.getLogger(__name__)

# Any non-empty file exceeds this, so lerobot starts a new data/metadata/video file for every episode.
ROTATE_EVERY_EPISODE_MB = 1e-6


def load_spec(root: str | Path) -> EpisodeSpec:
    """Reads the :class:`EpisodeSpec` stored with a dataset.

    Raises:
        FileNotFoundError: The dataset has no ``meta/vla_spec.json``.
    """
    return EpisodeSpec.from_json((Path(root) / SPEC_FILE).read_text())


class EpisodeWriter:
    """Appends validated episodes to a LeRobotDataset, committing each one durably.

    Example:
        >>> with EpisodeWriter(root, spec) as w:
        ...     for frame in frames:
        ...         w.add_frame(frame)  # keys: spec.features() + "task"
        ...     w.end_episode(success=True, source="scripted", extra={"seed": 3})
    """

    def __init__(
        self,
        root: str | Path,
        spec: EpisodeSpec,
        *,
        repo_id: str | None = None,
        resume: bool = False,
        durable: bool = True,
    ) -> None:
        """Creates a new dataset, or re-opens one for appending.

        Args:
            root: Dataset directory. Must not exist unless ``resume`` is true.
            spec: The episode schema; on resume it must equal the stored one.
            repo_id: lerobot repo id (only used as a name); defaults to ``local/<dirname>``.
            resume: Append to an existing dataset, first repairing what a crash left behind. If the
                directory does not exist a new dataset is created.
            durable: fsync each episode's files before committing it (survives power loss, not only
                process death). Turn off only for throwaway data.

        Raises:
            FileExistsError: ``root`` exists and ``resume`` is false.
            ValueError: On resume, the stored spec differs from ``spec`` (the message lists the fields).
            DatasetError: On resume, the dataset is damaged beyond crash recovery.
            FolderBusyError: Another live process is writing to ``root`` (one writer per dataset; the lock
                is held until :meth:`close` and dropped by the kernel if the process dies).
        """
        self.root = Path(root)
        self.spec = spec
        self.repo_id = repo_id or f"local/{self.root.name}"
        self.durable = durable
        self.recovery_report: list[str] = []
        self._features = spec.features()
        self._frame_index = 0
        self._task: str | None = None
        self._closed = False
        self._lock = acquire(self.root, "writing episodes")  # one writer per dataset
        try:
            self._open(resume)
        except BaseException:
            release(self._lock)
            raise

    def _open(self, resume: bool) -> None:
        if resume and (self.root / INFO_PATH).exists():
            self._check_stored_spec()
            self.recovery_report = repair_dataset(self.root)
            self._num_episodes = len(read_sidecar(self.root))
            self._ds = LeRobotDataset.resume(self.repo_id, root=self.root)
        else:
            if self.root.exists() and any(self.root.iterdir()):
                raise FileExistsError(f"{self.root} exists and is not empty; pass resume=True to append")
            if self.root.exists():
                self.root.rmdir()  # lerobot insists on creating the directory itself
            self._ds = LeRobotDataset.create(
                self.repo_id,
                fps=self.spec.fps,
                features=self._features,
                root=self.root,
                robot_type=self.spec.robot_type,
                use_videos=self.spec.use_videos,
                data_files_size_in_mb=ROTATE_EVERY_EPISODE_MB,
                video_files_size_in_mb=ROTATE_EVERY_EPISODE_MB,
            )
            atomic_write_bytes(self.root / SPEC_FILE, self.spec.to_json().encode())
            backup_info(self.root)
            self._num_episodes = 0
        if self._ds.meta.total_episodes != self._num_episodes:
            raise DatasetError(
                f"{self.root / INFO_PATH}: lerobot counts {self._ds.meta.total_episodes} episodes, "
                f"sidecar {self._num_episodes}"
            )

    def _check_stored_spec(self) -> None:
        spec_path = self.root / SPEC_FILE
        if not spec_path.exists():
            # Killed between lerobot's create and our spec write: accept if the features agree.
            info = json.loads((self.root / INFO_PATH).read_text())
            stored = {k: v for k, v in info["features"].items() if k in self._features}
            wanted = json.loads(json.dumps(self._features))
            if stored != wanted or set(info["features"]) - set(self._features) - _LEROBOT_COLUMNS:
                raise ValueError(f"resume: {self.root} has no {SPEC_FILE} and its features differ from spec")
            atomic_write_bytes(spec_path, self.spec.to_json().encode())
            return
        stored_spec = load_spec(self.root)
        mismatch = stored_spec.diff(self.spec)
        if mismatch:
            raise ValueError(
                f"resume: spec of {self.root} differs from the given spec: " + "; ".join(mismatch)
            )

    # --- properties ---------------------------------------------------------------------------

    @property
    def num_episodes(self) -> int:
        """Number of committed episodes (the index the next episode will get)."""
        return self._num_episodes

    @property
    def num_pending_frames(self) -> int:
        """Frames buffered for the episode in progress."""
        return self._frame_index

    @property
    def dataset(self) -> LeRobotDataset:
        """The underlying lerobot dataset (write mode)."""
        return self._ds

    # --- frames ------------------------------------------------------------------------------

    def add_frame(self, frame: dict[str, Any]) -> None:
        """Validates one frame and buffers it into the current episode.

        Args:
            frame: The keys of ``spec.features()`` plus ``"task"`` (str). Images are uint8 [H, W, 3];
                float features may be any float dtype (cast to float32); bool features accept bool
                or 0/1; (1,)-shaped features accept scalars.

        Raises:
            ValueError: A key is missing or unknown, or a value has the wrong shape/dtype or is not
                finite; the message names the field, the episode index and the frame index. Nothing is
                buffered in that case.
        """
        self._require_open()
        where = f"episode {self._num_episodes}, frame {self._frame_index}"
        missing = set(self._features) - set(frame)
        extra = set(frame) - set(self._features) - {TASK}
        if TASK not in frame:
            missing.add(TASK)
        if missing or extra:
            raise ValueError(
                f"add_frame ({where}): missing fields {sorted(missing)}, unknown fields {sorted(extra)}"
            )
        out: dict[str, Any] = {key: self._check_value(key, frame[key], where) for key in self._features}
        task = frame[TASK]
        if not isinstance(task, str) or not task:
            raise ValueError(f"add_frame ({where}): field 'task' must be a non-empty str, got {task!r}")
        out[TASK] = task
        self._ds.add_frame(out)
        if self._task is None:
            self._task = task
        self._frame_index += 1

    def _check_value(self, key: str, value: Any, where: str) -> np.ndarray:
        ft = self._features[key]
        shape = tuple(ft["shape"])
        if hasattr(value, "detach"):  # torch tensor
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
        if ft["dtype"] in ("image", "video"):
            if arr.dtype != np.uint8 or arr.shape != shape:
                raise ValueError(
                    f"add_frame ({where}): field '{key}' must be uint8 {shape}, got {arr.dtype} {arr.shape}"
                )
            return arr
        if shape == (1,) and arr.shape == ():
            arr = arr.reshape(1)
        if arr.shape != shape:
            raise ValueError(f"add_frame ({where}): field '{key}' must have shape {shape}, got {arr.shape}")
        if key in BOOL_KEYS:
            if arr.dtype != np.bool_ and not (
                np.issubdtype(arr.dtype, np.number) and np.isin(arr, (0, 1)).all()
            ):
                raise ValueError(f"add_frame ({where}): field '{key}' must be bool, got {arr.dtype} {arr}")
            return arr.astype(np.bool_)
        assert key in FLOAT_KEYS, key
        if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(f"add_frame ({where}): field '{key}' must be numeric, got dtype {arr.dtype}")
        out = arr.astype(np.float32)
        if not np.isfinite(out).all():
            bad = np.flatnonzero(~np.isfinite(out)).tolist()
            raise ValueError(
                f"add_frame ({where}): field '{key}' has non-finite values at positions {bad}: {arr.tolist()}"
            )
        return out

    # --- episodes ----------------------------------------------------------------------------

    def end_episode(self, success: bool, source: str, extra: dict[str, Any] | None = None) -> int:
        """Writes the buffered frames as one episode and commits it.

        When this returns, the episode survives any later crash of this process.

        Args:
            success: Whether the episode achieved its task.
            source: One of :data:`vla.data.schema.SOURCES`.
            extra: JSON-serialisable episode data (seed, task name, env kwargs, init state, ...).

        Returns:
            The episode index.

        Raises:
            ValueError: No frames were added, ``source`` is invalid or ``extra`` is not
                JSON-serialisable (the buffered frames are kept, so the caller may retry).
        """
        self._require_open()
        index = self._num_episodes
        if self._frame_index == 0:
            raise ValueError(f"end_episode: episode {index} has no frames")
        if source not in SOURCES:
            raise ValueError(f"end_episode: episode {index}: source {source!r} not in {SOURCES}")
        meta = EpisodeMeta(
            episode_index=index,
            length=self._frame_index,
            success=bool(success),
            source=source,
            task=self._task or "",
            extra=dict(extra or {}),
        )
        try:
            meta.to_json()
        except (TypeError, ValueError) as e:
            raise ValueError(f"end_episode: episode {index}: extra is not JSON-serialisable: {e}") from e

        self._ds.save_episode(parallel_encoding=False)
        self._close_lerobot_files()
        if self.durable:
            self._fsync_episode_files()
        backup_info(self.root)
        append_sidecar(self.root, meta)  # the commit point
        self._num_episodes += 1
        self._frame_index = 0
        self._task = None
        return index

    def _close_lerobot_files(self) -> None:
        # Give the data parquet its footer now instead of at the next rotation / finalize.
        self._ds.writer.close_writer()
        # lerobot buffers episode metadata rows and keeps their ParquetWriter open; there is no public
        # per-episode flush, so use the same private call its finalize() uses (keeps the meta usable).
        self._ds.meta._close_writer()

    def _fsync_episode_files(self) -> None:
        latest = self._ds.meta.latest_episode or {}

        def first(v: Any) -> int:
            return int(v[0] if isinstance(v, list) else v)

        paths = [self.root / p for p in (INFO_PATH, STATS_PATH, DEFAULT_TASKS_PATH)]
        if latest:
            paths.append(
                self.root
                / self._ds.meta.data_path.format(
                    chunk_index=first(latest["data/chunk_index"]), file_index=first(latest["data/file_index"])
                )
            )
            paths.append(
                self.root
                / DEFAULT_EPISODES_PATH.format(
                    chunk_index=first(latest["meta/episodes/chunk_index"]),
                    file_index=first(latest["meta/episodes/file_index"]),
                )
            )
            for key in self._ds.meta.video_keys:
                paths.append(
                    self.root
                    / self._ds.meta.video_path.format(
                        video_key=key,
                        chunk_index=first(latest[f"videos/{key}/chunk_index"]),
                        file_index=first(latest[f"videos/{key}/file_index"]),
                    )
                )
        for p in paths:
            fsync_file(p)
        for d in {p.parent for p in paths if p.exists()}:
            fsync_dir(d)

    def discard_episode(self) -> None:
        """Drops the frames buffered for the current episode (nothing was committed)."""
        self._require_open()
        self._ds.clear_episode_buffer(delete_images=True)
        self._frame_index = 0
        self._task = None

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Discards an unfinished episode and finalizes the lerobot dataset. Idempotent."""
        if self._closed:
            return
        if self._frame_index:
            logger.warning(
                "EpisodeWriter.close: discarding unfinished episode %d (%d frames)",
                self._num_episodes,
                self._frame_index,
            )
            self.discard_episode()
        try:
            self._ds.finalize()
            staging = self.root / "images"
            if staging.is_dir() and not any(p.is_file() for p in staging.rglob("*")):
                shutil.rmtree(staging)  # lerobot leaves empty per-camera staging dirs behind
        finally:
            release(self._lock)
        self._closed = True

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"EpisodeWriter for {self.root} is closed")

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_LEROBOT_COLUMNS = {"timestamp", "frame_index", "episode_index", "index", "task_index"}

__all__ = ["EpisodeWriter", "load_spec"]

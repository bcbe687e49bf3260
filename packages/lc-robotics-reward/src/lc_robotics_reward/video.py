"""Encoding and decoding camera videos of LeRobot datasets (needs the ``video`` extra: PyAV).

LeRobot stores a ``video`` feature as mp4 files: one per episode in the v2.1 layout, and
several episodes back to back in one file in the v3.0 layout, where each episode's
``from_timestamp``/``to_timestamp`` (seconds) locate it. Frames are looked up by
presentation time: frame ``i`` of an episode is the decoded frame nearest to
``from_timestamp + timestamp_i`` and must lie within ``tolerance_s`` of it.

The default codec here is H.264 (``libx264``) in 4:4:4 chroma at quantiser 0, which is
near lossless and accepts any frame size; LeRobot's own default is AV1 (``libsvtav1``,
4:2:0), which PyAV's wheels also encode (pass ``codec="libsvtav1", pix_fmt="yuv420p"``;
4:2:0 needs even frame sizes). The reader decodes whatever FFmpeg decodes.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> frames = np.zeros((3, 6, 5, 3), np.uint8)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "cam.mp4"
    >>> info = encode_video(path, [frames], fps=10)
    >>> decode_video(path, np.arange(3) / 10).shape
    (3, 6, 5, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from lc_robotics_reward.errors import DatasetFormatError

DEFAULT_CODEC = "libx264"
DEFAULT_PIX_FMT = "yuv444p"


def _av() -> Any:
    try:
        import av
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "reading or writing LeRobot video features needs PyAV: "
            "pip install 'lc-robotics-reward[video]'"
        ) from exc
    return av


def encode_video(
    path: str | Path,
    episodes: Sequence[np.ndarray],
    fps: float,
    codec: str = DEFAULT_CODEC,
    pix_fmt: str = DEFAULT_PIX_FMT,
) -> dict[str, Any]:
    """Write one or more episodes' frames back to back into one mp4 file.

    Args:
        path: the mp4 file (parent folders are created).
        episodes: per episode ``[T_e, H, W, 3]`` uint8 RGB frames (same ``H``, ``W``).
        fps: frames per second; frame ``j`` of the file is shown at ``j / fps`` s.
        codec: FFmpeg encoder name.
        pix_fmt: FFmpeg pixel format of the encoded stream.

    Returns:
        LeRobot's ``info`` entry of a video feature (codec, pixel format, size, fps).
    """
    av = _av()
    if not episodes:
        raise ValueError("no episode to encode")
    shapes = {tuple(e.shape[1:]) for e in episodes}
    if len(shapes) != 1 or len(next(iter(shapes))) != 3 or next(iter(shapes))[2] != 3:
        raise ValueError(f"frames must be [T, H, W, 3] of one size; got sizes {sorted(shapes)}")
    height, width, _ = next(iter(shapes))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = Fraction(fps).limit_denominator(1001)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.time_base = 1 / rate
        if codec == "libx264":
            stream.options = {"qp": "0", "preset": "veryfast"}
        pts = 0
        for frames in episodes:
            for image in np.asarray(frames, dtype=np.uint8):
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
                frame.pts = pts
                pts += 1
                for packet in stream.encode(frame):
                    container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return {
        "video.height": int(height),
        "video.width": int(width),
        "video.codec": codec,
        "video.pix_fmt": pix_fmt,
        "video.is_depth_map": False,
        "video.fps": float(fps),
        "video.channels": 3,
        "has_audio": False,
    }


def decode_video(
    path: str | Path,
    timestamps: np.ndarray,
    tolerance_s: float | None = None,
) -> np.ndarray:
    """Frames ``[N, H, W, 3]`` uint8 RGB of ``path`` nearest to ``timestamps`` (seconds).

    Decoding starts at the keyframe before the first timestamp and stops after the last.

    Raises:
        DatasetFormatError: the file cannot be decoded, or a timestamp has no frame
            within ``tolerance_s`` (default: half a frame interval of the stream).
    """
    av = _av()
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    if ts.size == 0:
        raise ValueError("no timestamp to decode")
    path = Path(path)
    if not path.exists():
        raise DatasetFormatError(f"video file {path} is missing")
    times: list[float] = []
    images: list[np.ndarray] = []
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            rate = float(stream.average_rate or stream.guessed_rate or 0) or None
            tol = tolerance_s if tolerance_s is not None else (0.5 / rate if rate else 1e-3)
            if stream.time_base is not None and ts.min() > 0:
                container.seek(int(ts.min() / stream.time_base), stream=stream, backward=True)
            for frame in container.decode(stream):
                if frame.time is None:
                    continue
                if frame.time < ts.min() - tol:
                    continue
                if frame.time > ts.max() + tol:
                    break
                times.append(float(frame.time))
                images.append(frame.to_ndarray(format="rgb24"))
    except av.error.FFmpegError as exc:
        raise DatasetFormatError(f"video file {path} cannot be decoded: {exc}") from exc
    if not images:
        raise DatasetFormatError(
            f"video file {path} has no frame between {ts.min():.3f} s and {ts.max():.3f} s"
        )
    found = np.asarray(times)
    nearest = np.abs(found[None, :] - ts[:, None]).argmin(1)
    miss = np.abs(found[nearest] - ts) > tol
    if miss.any():
        bad = ts[miss][:3].round(4).tolist()
        raise DatasetFormatError(
            f"video file {path}: no frame within {tol:.4f} s of timestamps {bad} "
            f"({int(miss.sum())} of {ts.size} missing)"
        )
    return np.stack([images[i] for i in nearest])

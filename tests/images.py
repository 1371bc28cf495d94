"""Checking that a written plot is a picture, not an empty canvas: a PNG whose pixels are not all the background."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.image import imread

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Our plots have 12-50% of their pixels off the background; a figure of empty titled axes has ~3%.
MIN_DRAWN_SHARE = 0.05


def drawn_share(path: Path) -> float:
    """The share of pixels whose colour differs from the image's most common colour (its background)."""
    pixels = np.atleast_3d(imread(path))
    channels = (pixels * 255).round().astype(np.uint32) if pixels.dtype.kind == "f" else pixels.astype(np.uint32)
    packed = np.zeros(channels.shape[:2], dtype=np.uint32)
    for channel in range(channels.shape[2]):
        packed |= channels[..., channel] << (8 * channel)
    _, counts = np.unique(packed, return_counts=True)
    return 1.0 - counts.max() / packed.size


def assert_not_blank(path: Path, min_share: float = MIN_DRAWN_SHARE) -> None:
    """`path` is a PNG with more than `min_share` of its pixels off the background."""
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path} is not a PNG"
    share = drawn_share(path)
    assert share > min_share, f"{path} is nearly blank: {share:.1%} of its pixels differ from the background"

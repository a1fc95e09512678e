"""A tiny PNG line chart (no plotting library): panels of series drawn as dots over light grid lines.

Enough to see a sawtooth or a cache share per turn; the exact numbers are in
the JSON beside it.  Text is not drawn: each panel's name and range go to the
caller's table.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189)]


def _png(width: int, height: int, pixels: bytearray) -> bytes:
    rows = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def write_chart(path: Path, panels: list[list[list[float]]], width: int = 1200, panel_height: int = 260) -> None:
    """``panels``: one list of series per panel, each series one value per x (turn)."""
    height = panel_height * len(panels)
    pixels = bytearray([255]) * (width * height * 3)

    def dot(x: int, y: int, colour: tuple[int, int, int]) -> None:
        if 0 <= x < width and 0 <= y < height:
            at = (y * width + x) * 3
            pixels[at:at + 3] = bytes(colour)

    for p, series in enumerate(panels):
        top = p * panel_height + 10
        bottom = (p + 1) * panel_height - 10
        values = [v for s in series for v in s]
        if not values:
            continue
        low, high = min(0.0, min(values)), max(values) or 1.0
        for k in range(5):  # grid at 0, 25, 50, 75, 100 % of the panel's range
            y = bottom - (bottom - top) * k // 4
            for x in range(0, width, 4):
                dot(x, y, (220, 220, 220))
        for s, values_of in enumerate(series):
            colour = COLOURS[s % len(COLOURS)]
            n = max(1, len(values_of) - 1)
            for i, v in enumerate(values_of):
                x = 10 + (width - 20) * i // n
                y = bottom - int((bottom - top) * (v - low) / (high - low or 1.0))
                for dx in (0, 1):
                    for dy in (0, 1):
                        dot(x + dx, y + dy, colour)
    path.write_bytes(_png(width, height, pixels))

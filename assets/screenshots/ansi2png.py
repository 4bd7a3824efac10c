#!/usr/bin/env python3
"""Render a terminal capture with colours (`tmux capture-pane -p -e`) to a PNG.

Writes an ImageMagick draw script (one glyph per cell, so the grid stays exact whatever the
font's advance) and runs ImageMagick's `convert` on it.

    python3 ansi2png.py main.ans main.png
"""
import re
import subprocess
import sys
import tempfile

CELL_W, CELL_H, POINT = 9, 18, 15
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
DEFAULT_FG, DEFAULT_BG = "#d0d0d0", "#1c1c1c"
BASE = ["#1c1c1c", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
        "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]


def xterm256(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


def parse(text):
    rows = []
    for line in text.split("\n"):
        fg, bg, bold, rev = None, None, False, False
        cells = []
        for tok in re.split(r"(\x1b\[[0-9;]*m)", line):
            if tok.startswith("\x1b["):
                codes = [int(c) if c else 0 for c in tok[2:-1].split(";")]
                i = 0
                while i < len(codes):
                    c = codes[i]
                    if c == 0:
                        fg, bg, bold, rev = None, None, False, False
                    elif c == 1:
                        bold = True
                    elif c == 22:
                        bold = False
                    elif c == 7:
                        rev = True
                    elif c == 27:
                        rev = False
                    elif c in (39, 49):
                        fg, bg = (None, bg) if c == 39 else (fg, None)
                    elif c // 10 in (3, 4, 9, 10) and c % 10 <= 7:
                        # 30-37/40-47: the 8 colours; 90-97/100-107: their bright twins.
                        col = BASE[c % 10 + (8 if c >= 90 else 0)]
                        fg, bg = (col, bg) if c // 10 in (3, 9) else (fg, col)
                    elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                        col = xterm256(codes[i + 2])
                        fg, bg = (col, bg) if c == 38 else (fg, col)
                        i += 2
                    elif c in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
                        col = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                        fg, bg = (col, bg) if c == 38 else (fg, col)
                        i += 4
                    i += 1
            else:
                for ch in tok:
                    f, b = fg or DEFAULT_FG, bg or DEFAULT_BG
                    if rev:
                        f, b = b, f
                    cells.append((ch, f, b, bold))
        rows.append(cells)
    while rows and not rows[-1]:
        rows.pop()
    return rows


def main(src, dst):
    rows = parse(open(src, encoding="utf-8").read())
    width = max(len(r) for r in rows)
    mvg = []
    for y, row in enumerate(rows):
        for x, (ch, f, b, bold) in enumerate(row):
            if b != DEFAULT_BG:
                mvg.append("fill '%s' rectangle %d,%d %d,%d" % (
                    b, x * CELL_W, y * CELL_H, (x + 1) * CELL_W - 1, (y + 1) * CELL_H - 1))
            if ch != " ":
                esc = ch.replace("\\", "\\\\").replace('"', '\\"')
                mvg.append('font "%s" fill "%s" text %d,%d "%s"' % (
                    BOLD if bold else FONT, f, x * CELL_W, y * CELL_H + CELL_H - 4, esc))
    with tempfile.NamedTemporaryFile("w", suffix=".mvg", delete=False, encoding="utf-8") as t:
        t.write("\n".join(mvg))
    subprocess.run(["/usr/bin/convert", "-size", "%dx%d" % (width * CELL_W, len(rows) * CELL_H),
                    "xc:" + DEFAULT_BG, "-pointsize", str(POINT), "-draw", "@" + t.name, dst],
                   check=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""Lists Rust functions longer than N lines (default 120) under src/ (brace counting, skips strings roughly)."""
import re, sys, pathlib
limit = int(sys.argv[1]) if len(sys.argv) > 1 else 120
root = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else 'src')
out = []
for p in root.rglob('*.rs'):
    lines = p.read_text().split('\n')
    i = 0
    while i < len(lines):
        m = re.match(r'\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)', lines[i])
        if m:
            depth = 0; started = False; j = i
            while j < len(lines):
                s = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j])
                s = re.sub(r"'(\\.|[^'\\])'", "''", s)
                s = s.split('//')[0]
                for ch in s:
                    if ch == '{': depth += 1; started = True
                    elif ch == '}': depth -= 1
                if started and depth <= 0: break
                if not started and s.rstrip().endswith(';'): break
                j += 1
            n = j - i + 1
            if n > limit: out.append((n, f'{p}:{i+1}', m.group(6)))
            i = j + 1 if started else i + 1
        else:
            i += 1
for n, loc, name in sorted(out, reverse=True): print(n, loc, name)

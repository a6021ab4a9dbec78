"""The suite is self-contained: nothing under ``tests/`` or ``bench/`` reads outside the checkout.

A fresh clone has nothing beside it, so a test or benchmark that names ``../shared`` (or climbs
above the repository with ``Path.parents``) fails there, or worse, skips and hides it. The real
captures live in ``tests/fixtures/`` (their data files are not scanned: they hold the paths the
recorded programs saw, which are data, not places this suite reads).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPTURE_DATA = (ROOT / "tests" / "fixtures" / "harness", ROOT / "tests" / "fixtures" / "otlp")
OUTSIDE = re.compile(r"\.\./shared|shared/fixtures|[\"']shared[\"']\s*/")
PARENTS = re.compile(r"parents\[(\d+)\]")


def scanned() -> list[Path]:
    files = []
    for top in ("tests", "bench"):
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if any(path.is_relative_to(data) for data in CAPTURE_DATA):
                continue
            files.append(path)
    return files


def test_the_scan_covers_the_suite() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in scanned()}
    assert "tests/conftest.py" in names and "bench/hook.py" in names
    assert "tests/fixtures/README.md" in names


def test_no_file_names_a_place_outside_the_checkout() -> None:
    here = str(ROOT)  # the checkout's own absolute path: never committed into a file
    problems = []
    for path in scanned():
        if path == Path(__file__).resolve():
            continue  # names the patterns it looks for
        text = path.read_text(encoding="utf-8", errors="replace")
        where = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) or here in line:
                problems.append(f"{where}:{number}: {line.strip()}")
            for match in PARENTS.finditer(line):
                # Path(__file__).resolve().parents[k] of a file at depth d (counted from the
                # repository root) is the root itself at k = d - 1; beyond is outside.
                depth = len(path.relative_to(ROOT).parts)
                if int(match.group(1)) > depth - 1:
                    problems.append(
                        f"{where}:{number}: climbs above the repository: {line.strip()}"
                    )
    assert not problems, "\n".join(problems)


def test_the_real_captures_are_in_the_repository() -> None:
    harness = ROOT / "tests" / "fixtures" / "harness"
    for folder in ("claude-code/plain", "claude-code/subagent", "codex/plain", "gemini-cli/otel"):
        assert (harness / folder / "hooks.jsonl").is_file(), folder
    assert any((ROOT / "tests" / "fixtures" / "otlp").glob("*.pb"))

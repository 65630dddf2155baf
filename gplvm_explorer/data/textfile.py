"""CSV / TSV / TXT parsing with the csv module (no pandas).

Delimiter and header are detected; a chosen label column is split off;
non-numeric columns are reported and excluded; empty cells and common
missing-value markers (NA, NaN, null, ?, ...) become NaN for `finish`.
"""

from __future__ import annotations

import codecs
import csv
import io
import re

import numpy as np

from ..text import plain, quote
from .errors import DataError
from .validation import Limits, RawTable

MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "-", "--"})
_DECIMAL_COMMA = re.compile(r"^[-+]?\d+,\d+$")
_SNIFF_LINES = 50


# Byte-order marks, longest first (the UTF-32 LE mark starts with UTF-16 LE's).
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16 BE"),
)


def detect_encoding(data: bytes) -> tuple[str | None, int, str]:
    """(codec, bytes to skip, display name) from a byte-order mark.

    Without a mark, text that is plainly UTF-16 or UTF-32 (ASCII-range
    characters, so every second or every 2nd-4th byte is NUL) is recognised
    from the first 4 kB; otherwise the codec is None (UTF-8, else Latin-1).
    """
    for bom, codec, label in BOMS:
        if data.startswith(bom):
            return codec, len(bom), label
    head = data[:4096]
    n = len(head)
    if n >= 8 and b"\x00" in head:
        for width, order in ((4, "le"), (4, "be"), (2, "le"), (2, "be")):
            m = n - n % width
            if m < 8:
                continue
            cells = [head[i:i + width] for i in range(0, m, width)]
            if order == "le":
                ok = sum(c[0] != 0 and not any(c[1:]) for c in cells)
            else:
                ok = sum(c[-1] != 0 and not any(c[:-1]) for c in cells)
            if ok >= 0.9 * len(cells):
                label = f"UTF-{8 * width} {order.upper()}"
                return f"utf-{8 * width}-{order}", 0, label
    return None, 0, "UTF-8"


def decode_text(data: bytes, *, partial: bool = False) -> tuple[str, list[str]]:
    """Bytes -> text, refusing binary content. Returns (text, warnings).

    The encoding comes from a byte-order mark (UTF-8, UTF-16 LE/BE,
    UTF-32 LE/BE; see `detect_encoding`); without one, UTF-8 is tried and
    Latin-1 is the fallback. ``partial``: ``data`` is the head of a longer
    file, so an incomplete character at its end is dropped.
    """
    warnings: list[str] = []
    codec, skip, label = detect_encoding(data)
    body = data[skip:]
    if codec is not None:
        try:
            text = codecs.getincrementaldecoder(codec)(errors="strict").decode(body, final=not partial)
        except UnicodeDecodeError as exc:
            raise DataError(
                f"The file starts like {label} text but is not valid {label} "
                f"(bad bytes at offset {exc.start + skip}). Save it again as UTF-8 CSV."
            ) from None
        if not skip:
            warnings.append(f"The file has no byte-order mark; it was read as {label}")
    else:
        if b"\x00" in data[:65536]:
            raise DataError(
                "This looks like a binary file, not text (it contains NUL bytes). "
                "Upload a CSV/TSV text file, or an NPY/NPZ file with the matching extension."
            )
        try:
            text = codecs.getincrementaldecoder("utf-8")(errors="strict").decode(body, final=not partial)
        except UnicodeDecodeError:
            text = body.decode("latin-1")
            warnings.append("The file is not valid UTF-8; it was read as Latin-1")
    if "\x00" in text[:65536]:
        raise DataError(
            "This looks like a binary file, not text (it contains NUL characters). "
            "Upload a CSV/TSV text file, or an NPY/NPZ file with the matching extension."
        )
    sample = text[:65536]
    if sample:
        controls = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\t\r\n\f\v") or 0x7F <= ord(ch) < 0xA0)
        if controls > max(2, len(sample) // 100):
            raise DataError(
                "This looks like a binary file, not text (it contains many control characters). "
                "Upload a CSV/TSV text file, or an NPY/NPZ file with the matching extension."
            )
    return text, warnings


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _is_missing(cell: str) -> bool:
    return cell.strip().lower() in MISSING_TOKENS


def _content_lines(text: str, limit: int) -> list[str]:
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(line)
            if len(out) >= limit:
                break
    return out


def _split(lines: list[str], delimiter: str | None) -> list[list[str]]:
    if delimiter is None:
        return [line.split() for line in lines]
    try:
        return list(csv.reader(lines, delimiter=delimiter))
    except csv.Error:
        return [line.split(delimiter) for line in lines]


def detect_delimiter(lines: list[str], ext: str) -> str | None:
    """The delimiter of these lines; None means runs of whitespace."""
    if ext == "tsv":
        return "\t"
    candidates: list[str | None] = [",", ";", "\t", "|"]
    if ext == "txt":
        candidates.append(None)
    if not lines:
        return "," if ext != "txt" else None
    for cand in candidates:
        counts = {len(r) for r in _split(lines, cand)}
        if len(counts) == 1 and counts.pop() > 1:
            return cand
    # Nothing consistent: take the candidate that splits the most lines, so
    # the ragged-row check reports the problem in terms of that delimiter.
    best, best_score = ("," if ext != "txt" else None), 0
    for cand in candidates:
        score = sum(len(r) > 1 for r in _split(lines, cand))
        if score > best_score:
            best, best_score = cand, score
    return best


def _looks_like_header(first: list[str], rest: list[list[str]]) -> bool:
    """A first row is a header when it names columns whose values are numbers."""
    texty = [j for j, c in enumerate(first) if not _is_number(c) and not _is_missing(c)]
    if not texty:
        return False
    if not rest:  # a lone row of names
        return len(texty) == len(first)
    for j in texty:
        col = [r[j] for r in rest if j < len(r) and not _is_missing(r[j])]
        if col and all(_is_number(c) for c in col):
            return True
    # Every cell of the first row is text and no other row is like that: a header.
    if len(texty) == len(first) and rest:
        return all(any(_is_number(c) or _is_missing(c) for c in r) for r in rest)
    return False


def _unique_names(raw: list[str]) -> list[str]:
    names, seen = [], set()
    for j, s in enumerate(raw):
        base = s.strip() or f"col{j + 1}"
        name, k = base, 2
        while name in seen:
            name, k = f"{base}_{k}", k + 1
        seen.add(name)
        names.append(name)
    return names


def delimiter_label(delimiter: str | None) -> str:
    return {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe", None: "whitespace"}[delimiter]


def read_header(text: str, ext: str, header: bool | None) -> list[str]:
    """Column names from the first lines only (for a label-column picker)."""
    lines = _content_lines(text, _SNIFF_LINES)
    if not lines:
        raise DataError("The file is empty: it has no rows of data. Choose a file with a header and numbers.")
    delim = detect_delimiter(lines, ext)
    rows = _split(lines, delim)
    first = rows[0]
    has_header = _looks_like_header(first, rows[1:]) if header is None else header
    if has_header:
        return _unique_names(first)
    return [f"col{j + 1}" for j in range(len(first))]


def _iter_rows(text: str, delimiter: str | None):
    """Yield (line_number, fields) for content rows."""
    if delimiter is None:
        for i, line in enumerate(text.splitlines(), start=1):
            s = line.strip()
            if s and not s.startswith("#"):
                yield i, s.split()
        return
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        for row in reader:
            if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
                continue
            yield reader.line_num, row
    except csv.Error as exc:
        raise DataError(
            f"Could not parse the file near line {reader.line_num}: {plain(exc, 120)}. "
            "Check for an unclosed quote (\") or a stray delimiter."
        ) from None


def _parse_labels(cells: list[str]) -> tuple[np.ndarray, list[str]]:
    """Label strings -> int64 / float64 / str array (missing -> '(missing)')."""
    stripped = [c.strip() for c in cells]
    missing = [_is_missing(c) for c in stripped]
    warnings = []
    if not any(missing):
        try:
            nums = np.array([float(c) for c in stripped])
        except ValueError:
            nums = None
        if nums is not None and np.all(np.isfinite(nums)):
            if np.all(nums == np.round(nums)) and np.all(np.abs(nums) < 2**53):
                return nums.astype(np.int64), warnings
            return nums, warnings
    out = np.array(["(missing)" if m else c for c, m in zip(stripped, missing)], dtype=str)
    if any(missing):
        warnings.append(f"{sum(missing)} row(s) have no label; shown as '(missing)'")
    return out, warnings


def _to_float(cells: list[str]) -> tuple[np.ndarray, list[int]]:
    """Cells -> float array (NaN = missing) and indices of non-numeric cells."""
    try:
        return np.array([float(c) for c in cells], dtype=np.float64), []
    except ValueError:
        pass
    out = np.empty(len(cells), dtype=np.float64)
    bad = []
    for i, c in enumerate(cells):
        try:
            out[i] = float(c)
        except ValueError:
            if _is_missing(c):
                out[i] = np.nan
            else:
                out[i] = np.nan
                bad.append(i)
    return out, bad


def _resolve_label(label_column, names: list[str]) -> int:
    if isinstance(label_column, (int, np.integer)) and not isinstance(label_column, bool):
        j = int(label_column)
        if -len(names) <= j < len(names):
            return j % len(names)
        raise DataError(
            f"Label column index {j} is out of range; the file has {len(names)} columns "
            f"(0 to {len(names) - 1})."
        )
    if isinstance(label_column, str):
        if label_column in names:
            return names.index(label_column)
        folded = [s.strip().lower() for s in names]
        key = label_column.strip().lower()
        if key in folded:
            return folded.index(key)
        raise DataError(
            f"Label column {quote(label_column)} not found. Columns in the file: "
            + ", ".join(quote(s, 40) for s in names[:30]) + (", ..." if len(names) > 30 else "")
        )
    raise DataError(
        f"Expected a column name or index as label_column, got {plain(repr(label_column), 60)} instead."
    )


def parse_text(
    data: bytes,
    ext: str,
    *,
    label_column=None,
    header: bool | None = None,
    limits: Limits,
) -> RawTable:
    """Parse CSV/TSV/TXT bytes into a `RawTable`."""
    text, warnings = decode_text(data)
    lines = _content_lines(text, _SNIFF_LINES)
    if not lines:
        raise DataError("The file is empty: it has no rows of data. Choose a file with a header and numbers.")
    delim = detect_delimiter(lines, ext)

    # The csv module's field-size limit (128 kB) turns absurd cells into csv.Error.
    rows_iter = _iter_rows(text, delim)
    head = next(rows_iter, None)
    if head is None:
        raise DataError("The file is empty: it has no rows of data. Choose a file with a header and numbers.")
    first_line, first = head
    ncols = len(first)
    if ncols > limits.max_cols:
        limits.check_shape(1, ncols)
    rows: list[list[str]] = []
    for line_no, row in rows_iter:
        if len(row) != ncols:
            if len(row) > ncols and not any(c.strip() for c in row[ncols:]):
                row = row[:ncols]  # trailing delimiters
            else:
                raise DataError(
                    f"Ragged rows: line {line_no} has {len(row)} field(s) but line {first_line} "
                    f"has {ncols} (delimiter: {delimiter_label(delim)}). Every row needs the "
                    "same number of values; check for missing or extra delimiters or quotes."
                )
        rows.append(row)
        if len(rows) > limits.max_rows:
            raise DataError(
                f"The file has more than {limits.max_rows:,} data rows (the limit). "
                "Use a random subset of the rows, or raise Limits.max_rows."
            )

    has_header = _looks_like_header(first, rows[:_SNIFF_LINES]) if header is None else bool(header)
    if has_header:
        names = _unique_names(first)
    else:
        names = [f"col{j + 1}" for j in range(ncols)]
        rows.insert(0, first)
    if not rows:
        raise DataError(
            "The file has a header but no data rows. Add rows of numbers below the header."
        )
    limits.check_shape(len(rows), ncols)

    columns = list(zip(*rows))
    label_idx = None if label_column is None else _resolve_label(label_column, names)
    labels = None
    if label_idx is not None:
        labels, label_warnings = _parse_labels(list(columns[label_idx]))
        warnings.extend(label_warnings)

    keep_values, keep_names = [], []
    decimal_comma = False
    for j, (name, cells) in enumerate(zip(names, columns)):
        if j == label_idx:
            continue
        col, bad = _to_float(list(cells))
        if bad:
            example = quote(cells[bad[0]], 40)
            decimal_comma |= any(_DECIMAL_COMMA.match(cells[i].strip()) for i in bad[:20])
            n_num = len(cells) - int(np.isnan(col).sum())
            if n_num == 0 or len(bad) > n_num:
                hint = " (use it as the label column?)" if label_idx is None else ""
                warnings.append(f"Excluded non-numeric column {quote(name, 40)}{hint}")
            else:
                warnings.append(
                    f"Excluded column {quote(name, 40)}: {len(bad)} of {len(cells)} values are not numbers "
                    f"(e.g. {example}); fix them or leave the cells empty to mark them missing"
                )
            continue
        keep_values.append(col)
        keep_names.append(name)

    if not keep_values:
        hint = (
            " The values look like decimal commas (1,5): save the file with decimal points."
            if decimal_comma
            else " Check that the file holds numbers and that the delimiter is right"
            f" (detected: {delimiter_label(delim)})."
        )
        raise DataError("No numeric columns found." + hint)
    if len(keep_values) == 1:
        excluded = [w for w in warnings if w.startswith("Excluded")]
        extra = (" " + "; ".join(excluded) + ".") if excluded else ""
        raise DataError(
            f"Only one numeric column ({quote(keep_names[0], 40)}) was found; a latent variable model "
            "needs at least 2 features. Add feature columns, or check the delimiter "
            f"(detected: {delimiter_label(delim)}).{extra}"
        )
    values = np.column_stack(keep_values)
    return RawTable(
        values=values,
        feature_names=keep_names,
        labels=labels,
        label_name=None if label_idx is None else names[label_idx],
        warnings=warnings,
    )

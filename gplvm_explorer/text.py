"""User text is text: helpers for every place that shows a user's string.

Strings that come from a user's file -- its name, column headers, labels,
cell values, and error messages quoting them -- must never be interpreted as
markup. The data layer produces *plain* text (see `plain` and `quote`); each
rendering site picks the helper for its context:

=====================================  ========================================
where the string goes                  helper
=====================================  ========================================
Markdown pane, Alert, HTML pane/Div    ``escape(s)`` (or ``markdown_list``)
MultiChoice option *labels*            ``escape(s)`` -- Choices.js renders them
                                       as HTML (keep the raw string as value)
Bokeh title / axis / tick label,       ``plain(s)`` -- these are drawn as text,
widget label, option, TextInput value  an HTML entity would show literally
Bokeh hover tooltip ``@field``         the field value as ``plain(s)``; never
                                       the ``{safe}`` formatter
message text built in Python           ``quote(s)`` around each user string
CSV written for spreadsheets           ``spreadsheet_safe(s)``
=====================================  ========================================

``escape`` writes every character that means something in HTML or in
Markdown as a numeric character reference (``<`` -> ``&#60;``), so the result
is inert in both languages: Markdown renders the references back as the
original characters, and an HTML parser does the same.
"""

from __future__ import annotations

import string
import unicodedata

__all__ = [
    "ELLIPSIS",
    "escape",
    "markdown_list",
    "plain",
    "quote",
    "spreadsheet_safe",
]

ELLIPSIS = "\u2026"

# Format characters that are legitimately part of words in some scripts.
_KEEP_FORMAT = frozenset({"\u200c", "\u200d"})  # zero-width non-joiner / joiner
# ASCII punctuation that is inert in HTML and in (GFM-like) Markdown text.
_INERT = frozenset(",;?%/= ")
_ESCAPED = {c: f"&#{ord(c)};" for c in string.punctuation if c not in _INERT}


def _as_str(value) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _fix_surrogates(s: str) -> str:
    """Lone surrogates cannot be sent as UTF-8 (JSON) -> U+FFFD; pairs are joined."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def plain(value, max_len: int | None = 200, *, multiline: bool = False) -> str:
    """A user string made safe to *show as text*: one line, printable, bounded.

    - bytes are decoded as UTF-8 (invalid bytes -> U+FFFD); other objects
      go through ``str``; None gives "";
    - Unicode is NFC-normalised; lone surrogates become U+FFFD;
    - control characters and invisible format characters (bidirectional
      overrides, zero-width spaces, BOM) are removed -- they can disguise a
      name (``evil\\u202egnp.csv``); tabs and line breaks become spaces,
      or, with ``multiline``, line breaks are kept as ``\\n``;
    - runs of whitespace collapse to one space; the ends are stripped;
    - longer than ``max_len`` characters: cut and ended with an ellipsis
      (None: no limit).

    The result is plain text, NOT markup-safe: pass it through `escape`
    before putting it into Markdown or HTML.
    """
    s = unicodedata.normalize("NFC", _fix_surrogates(_as_str(value)))
    out = []
    for ch in s:
        if ch in "\r\n\u2028\u2029\x85":
            out.append("\n" if multiline else " ")
            continue
        cat = unicodedata.category(ch)
        if cat == "Cc" or cat.startswith("Z"):
            out.append(" ")
        elif cat == "Cf" and ch not in _KEEP_FORMAT:
            continue
        elif cat in ("Cs", "Co", "Cn"):
            out.append("\ufffd")
        else:
            out.append(ch)
    s = "".join(out)
    if multiline:
        lines = [" ".join(line.split()) for line in s.replace("\r", "\n").split("\n")]
        # at most one blank line in a row
        kept: list[str] = []
        for line in lines:
            if line or (kept and kept[-1]):
                kept.append(line)
        s = "\n".join(kept).strip("\n")
    else:
        s = " ".join(s.split())
    if max_len is not None and len(s) > max_len:
        s = s[: max(0, max_len - 1)].rstrip() + ELLIPSIS
    return s


def escape(value, max_len: int | None = 200, *, multiline: bool = False) -> str:
    """``plain(value)`` made inert in Markdown and HTML (for panes and Divs).

    Every ASCII punctuation character that HTML or Markdown gives a meaning
    to (``< > & " ' * _ ` [ ] ( ) # ! | ~ $ : + - . { } \\ ^ @``) becomes a
    numeric character reference, so no tag, attribute, link, emphasis,
    list, table, heading, emoji shortcode or maths can start inside it.
    With ``multiline``, line breaks are kept (Markdown renders each as a
    soft break; use ``markdown_list`` for one item per line).
    """
    s = plain(value, max_len, multiline=multiline)
    return "".join(_ESCAPED.get(ch, ch) for ch in s)


def quote(value, max_len: int | None = 60) -> str:
    """A user string inside a plain-text message: ``'name'``, bounded.

    The data layer uses it for file names, headers and cell values it
    mentions in warnings and `DataError` messages; the message as a whole is
    escaped where it is rendered.
    """
    return f"'{plain(value, max_len)}'"


def markdown_list(items, max_len: int | None = 400) -> str:
    """A Markdown bullet list of plain-text items, each escaped."""
    return "\n".join(f"- {escape(item, max_len)}" for item in items)


def spreadsheet_safe(value) -> str:
    """A text cell for CSV that a spreadsheet will not run as a formula.

    Cells starting with ``= + - @``, a tab or a carriage return are prefixed
    with an apostrophe (the usual defence against CSV formula injection);
    numbers such as ``-1.5`` are left alone.
    """
    s = _as_str(value)
    if s and s[0] in "=+-@\t\r":
        try:
            float(s)
            return s
        except ValueError:
            return "'" + s
    return s

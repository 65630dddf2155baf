"""gplvm_explorer.text: user strings rendered as text, never as markup."""

from __future__ import annotations

import html.parser
import re

import pytest

from gplvm_explorer.text import ELLIPSIS, escape, markdown_list, plain, quote, spreadsheet_safe

HOSTILE = [
    "<img src=x onerror=window.__xss=1>",
    "<script>window.__xss=1</script>",
    '"><svg onload=alert(1)>',
    "[click](javascript:alert(1))",
    "![x](x onerror=alert(1))",
    "<a href='javascript:alert(1)'>a</a>",
    "**bold** _em_ `code` ~~del~~ # head",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "1. item\n- item\n> quote",
    ":smile: $x^2$ $$y$$ \\(z\\)",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;img src=x onerror=alert(1)&#62;",
    "<<script>script>alert(1)<</script>/script>",
    "a\u202egnp.exe",
    "tab\there\r\nnew\x00line\x1b[31m",
    "\ud800 lone surrogate",
    "<!-- comment --> <![CDATA[x]]> <style>*{}</style>",
    "www.example.com http://example.com <http://example.com>",
    "[^1] footnote\n\n[^1]: <b>x</b>",
    "term\n: definition",
    "- [x] task",
]


class _Collector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def _parse(html_text: str) -> _Collector:
    c = _Collector()
    c.feed(html_text)
    c.close()
    return c


def _markdown_parser():
    pn = pytest.importorskip("panel")
    return pn.pane.Markdown._get_parser("markdown-it", ())


# --------------------------------------------------------------------- plain


def test_plain_keeps_ordinary_text():
    assert plain("Hello, world") == "Hello, world"
    assert plain("Température (°C) — 5 µm") == "Température (°C) — 5 µm"
    assert plain("数据 données بيانات") == "数据 données بيانات"


def test_plain_collapses_whitespace_and_controls():
    assert plain("  a\t\tb\r\nc\x00d\x1be  ") == "a b c d e"
    assert plain("x\u00a0\u2003y") == "x y"
    assert plain("a\u2028b\u2029c") == "a b c"


def test_plain_removes_invisible_format_characters():
    # a right-to-left override disguises "exe.png" as "png.exe"
    assert plain("evil\u202egnp.exe") == "evilgnp.exe"
    assert plain("a\u200bb\ufeffc\u2066d\u2069") == "abcd"
    # joiners are part of words in some scripts and of emoji sequences
    assert plain("\u0645\u200c\u06cc") == "\u0645\u200c\u06cc"


def test_plain_bytes_none_objects_surrogates():
    assert plain(b"caf\xc3\xa9 \xff") == "café \ufffd"
    assert plain(None) == ""
    assert plain(3.5) == "3.5"
    out = plain("a\ud800b")
    assert out == "a\ufffdb"
    out.encode("utf-8")  # sendable as JSON
    assert plain("\ud83d\ude00") == "\U0001f600"  # a surrogate pair is joined


def test_plain_normalises_to_nfc():
    assert plain("e\u0301") == "\u00e9"


def test_plain_truncates_with_ellipsis():
    s = plain("x" * 500, 20)
    assert len(s) == 20 and s.endswith(ELLIPSIS)
    assert plain("short", 20) == "short"
    assert len(plain("y" * 10_000, None)) == 10_000


def test_plain_multiline_keeps_line_breaks():
    assert plain("a  b\r\n\r\n\r\nc\n", multiline=True) == "a b\n\nc"
    assert plain("a\nb") == "a b"


# -------------------------------------------------------------------- escape


@pytest.mark.parametrize("payload", HOSTILE)
def test_escape_has_no_markup_characters(payload):
    out = re.sub(r"&#[0-9]+;", "", escape(payload, None))
    for ch in "<>\"'`*_[]()#!|~$:\\{}&":
        assert ch not in out, (ch, out)


@pytest.mark.parametrize("payload", HOSTILE)
def test_escape_is_inert_html(payload):
    out = escape(payload, None)
    parsed = _parse(out)
    assert parsed.tags == [] and parsed.attrs == [] and parsed.comments == []
    assert "".join(parsed.text) == plain(payload, None)


@pytest.mark.parametrize("payload", HOSTILE)
def test_escape_is_inert_markdown(payload):
    """Rendered by the Markdown parser the app's panes use: one paragraph of the same text."""
    md = _markdown_parser()
    rendered = md.render(escape(payload, None))
    parsed = _parse(rendered)
    assert parsed.tags == ["p"], rendered
    assert parsed.attrs == []
    assert "".join(parsed.text).strip() == plain(payload, None)


def test_escape_inside_a_markdown_document():
    md = _markdown_parser()
    name = "<img src=x onerror=window.__xss=1>.csv"
    doc = f"**{escape(name)}**\n\n- labels: *{escape('<b>lab</b>')}*"
    parsed = _parse(md.render(doc))
    assert "img" not in parsed.tags and "b" not in parsed.tags
    assert parsed.attrs == []
    text = "".join(parsed.text)
    assert name in text and "<b>lab</b>" in text


def test_escape_multiline_and_markdown_list():
    md = _markdown_parser()
    items = ["Excluded column '<script>x</script>'", "1. not a list", "plain"]
    parsed = _parse(md.render(markdown_list(items)))
    assert parsed.tags == ["ul", "li", "li", "li"]
    assert "<script>x</script>" in "".join(parsed.text)
    out = escape("line <1>\nline 2", multiline=True)
    assert out.count("\n") == 1 and "<" not in out


def test_escape_bounds_length():
    out = escape("<" * 1000, 10)
    assert out.count("&#60;") == 9 and out.endswith(ELLIPSIS)


# --------------------------------------------------------------------- quote


def test_quote_is_plain_and_bounded():
    assert quote("col a") == "'col a'"
    q = quote("<b>\n" + "z" * 200)
    assert q.startswith("'<b> z") and q.endswith(ELLIPSIS + "'") and len(q) == 62
    assert "\n" not in q


# ---------------------------------------------------------- spreadsheet_safe


@pytest.mark.parametrize(
    "cell, expected",
    [
        ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
        ("+1+1", "'+1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("-2+3", "'-2+3"),
        ("\tx", "'\tx"),
        ("-1.5", "-1.5"),
        ("+3", "+3"),
        ("class A", "class A"),
        ("", ""),
    ],
)
def test_spreadsheet_safe(cell, expected):
    assert spreadsheet_safe(cell) == expected

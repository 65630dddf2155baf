"""The page loads nothing from outside its own server (offline rooms, firewalls, privacy)."""
from __future__ import annotations

from urllib.parse import urlparse

import pytest
from browserkit import open_page

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_the_page_requests_nothing_from_other_hosts(page, served_app):
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    open_page(page, served_app)
    page.wait_for_timeout(1500)
    hosts = {urlparse(u).hostname for u in requests if urlparse(u).scheme in ("http", "https", "ws", "wss")}
    assert requests and hosts == {"127.0.0.1"}, sorted(u for u in requests if "127.0.0.1" not in u)
    assert errors == []

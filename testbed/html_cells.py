"""The status page's HTML read back as text, for its tests: an independent reader of what
`archiver/commands/status_page.py` renders (the stdlib's HTML parser, none of our code)."""

from __future__ import annotations

from html.parser import HTMLParser


class Cells(HTMLParser):
    """The text of every element by its ``id`` or ``data-cell`` name; every tag met; the
    refresh meta tag's content."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.cells: dict[str, str] = {}
        self.refresh: str | None = None
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        named = dict(attrs)
        if tag == "meta" and named.get("http-equiv") == "refresh":
            self.refresh = named.get("content")
        if tag in ("meta", "br", "link"):
            return
        name = named.get("data-cell") or named.get("id")
        self._open.append(name)
        if name is not None:
            self.cells.setdefault(name, "")

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for name in self._open:
            if name is not None:
                self.cells[name] += data


def cells(html: str) -> Cells:
    """The cells, tags and refresh of `html`."""
    parser = Cells()
    parser.feed(html)
    parser.close()
    return parser

"""The explorer site's files: the app shell and its assets, and every data file as one `TV.put(path, json);` call.

The site is written into a fresh folder beside the target and renamed into place by `finish`, so a build that fails
half-way leaves the last good site as it was. A data path is made by our code from indices (`pool0/p12`), never from
an id read from input: `put` refuses any other shape, so nothing from input can name a file.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from tracevote.core.errors import ConfigError

DATA_PATH = re.compile(r"[a-z0-9_]+(/[a-z0-9_]+)*")
ASSETS = files("tracevote.explorer") / "assets"
SHELL = "index.html"
CORE_SCRIPT = "tv.js"
VIEWS_MARK = "<!-- views -->"  # where index.html lists the view scripts found among the assets
# Escaped inside JSON strings (the only place they can occur), so no text from input can end the script element
# (`</script>`), open a comment or CDATA, or end a JavaScript line (U+2028, U+2029 before ES2019).
_SCRIPT_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
                   ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def script_json(value: Any) -> bytes:
    """JSON safe inside a <script> element: script_json("</script>") -> b'"\\u003c/script\\u003e"'.
    NaN and infinities become null (orjson's rule)."""
    data = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    for raw, escaped in _SCRIPT_ESCAPES:
        data = data.replace(raw, escaped)
    return data


def data_file(path: str) -> str:
    """The site-relative file of a data path: data_file("pool0/p12") -> "data/pool0/p12.js"."""
    if not isinstance(path, str) or not DATA_PATH.fullmatch(path):
        raise ValueError(f"explorer data path {path!r}: not of the form {DATA_PATH.pattern}")
    return f"data/{path}.js"


def read_data(site: Path, path: str) -> Any:
    """The value data/<path>.js of a built `site` puts, as the page's TV.put receives it (SiteWriter.put's reader,
    for the tests and the benchmarks that check a site)."""
    body = (site / data_file(path)).read_bytes()
    head, tail = b'TV.put("' + path.encode() + b'", ', b");\n"
    if not (body.startswith(head) and body.endswith(tail)):
        raise ValueError(f"{site / data_file(path)}: not one TV.put of {path!r}")
    return orjson.loads(body[len(head):-len(tail)])


class SiteWriter:
    """Writes one site into a temporary folder beside `target`; `finish` puts it in place.

    Use it as a context manager: leaving the block by an exception removes the half-written folder.
    """

    def __init__(self, target: Path) -> None:
        self.target = Path(target)
        parent = self.target.parent
        if self.target.exists() and not self.target.is_dir():
            raise ConfigError(f"{self.target}: exists and is not a folder, so the explorer cannot be written there")
        parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".tmp", dir=parent))
        self.files = 0
        self.bytes = 0
        self._paths: set[str] = set()

    def __enter__(self) -> SiteWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is not None:
            self.abort()

    def put(self, path: str, value: Any) -> int:
        """Write data/<path>.js holding `TV.put("<path>", <value as JSON>);`; returns its size in bytes."""
        name = data_file(path)
        if path in self._paths:
            raise ValueError(f"explorer data path {path!r} written twice")
        self._paths.add(path)
        body = b'TV.put("' + path.encode() + b'", ' + script_json(value) + b");\n"
        return self._write(name, body)

    def copy_assets(self) -> None:
        """index.html (listing every view script of assets/ after tv.js) and assets/*.js, *.css."""
        scripts = sorted(entry.name for entry in ASSETS.iterdir()
                         if entry.name.endswith(".js") and entry.name != CORE_SCRIPT)
        for entry in ASSETS.iterdir():
            if entry.name.endswith((".js", ".css")):
                self._write(f"assets/{entry.name}", entry.read_bytes())
        tags = "\n".join(f'<script src="assets/{name}"></script>' for name in scripts)
        shell = ASSETS.joinpath(SHELL).read_text(encoding="utf-8")
        if VIEWS_MARK not in shell:
            raise AssertionError(f"assets/{SHELL} lacks the mark {VIEWS_MARK!r} where the view scripts go")
        self._write(SHELL, shell.replace(VIEWS_MARK, tags).encode())

    def finish(self) -> Path:
        """Replace the target folder by the written site; returns the target."""
        old = None
        if self.target.exists():
            old = self.target.with_name(f"{self.root.name}.old")
            self.target.rename(old)
        self.root.rename(self.target)
        if old is not None:
            shutil.rmtree(old)
        return self.target

    def abort(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _write(self, name: str, body: bytes) -> int:
        file = self.root / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(body)
        self.files += 1
        self.bytes += len(body)
        return len(body)

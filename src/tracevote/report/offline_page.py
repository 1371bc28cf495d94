"""The HTML page `dvc plots show` fills, with vega, vega-lite and vega-embed inlined so that it draws offline.

DVC's own page loads the three libraries from a CDN, so without a network it shows titles over empty boxes.
vl-convert-python ships them bundled (the build it renders with itself); this page puts that bundle in a
<script> ahead of DVC's `{plot_divs}`, whose inline scripts call `vegaEmbed` while the page is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version

from tracevote.core.errors import DataError

# dvc-render fills the page by str.replace of these three; a page without {scripts} keeps out its CDN <script> tags.
DVC_PLACEHOLDERS = ("{plot_divs}", "{refresh_tag}", "{scripts}")
VEGA_LITE_MAJOR = "5"  # DVC's plot templates, and ours (report/templates/), are Vega-Lite v5 specs

_HEAD = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
{refresh_tag}
<title>DVC plots</title>
"""
_STYLE = """<style>
body { font-family: sans-serif; margin: 16px; }
body > div { margin-bottom: 28px; }
img { max-width: 100%; }
</style>
</head>
<body>
{plot_divs}
</body>
</html>
"""


@dataclass(frozen=True)
class Bundle:
    """The three libraries as one classic script, and the versions it holds."""

    script: str
    versions: str  # "vega 6.2.0, vega-lite 5.21 and vega-embed 7.0.2 from vl-convert-python 1.9.0"


def newest_vega_lite(available: list[str], major: str = VEGA_LITE_MAJOR) -> str:
    """The newest `major`.x of vl-convert's Vega-Lite versions: (["5.8", "5.21", "6.1"], "5") -> "5.21"."""
    matching = [v for v in available if v.split(".")[0] == major]
    if not matching:
        raise DataError(f"vl-convert-python {version('vl-convert-python')} bundles no Vega-Lite {major}.x "
                        f"(it has {', '.join(available)}); DVC's plots are Vega-Lite {major} specs")
    return max(matching, key=lambda v: tuple(int(part) for part in v.split(".")))


def vega_bundle() -> Bundle:
    """vl-convert-python's bundle of vega, vega-lite and vega-embed (about 0.9 MB; takes a few seconds)."""
    import vl_convert  # imported here: its native module is large, and only this command needs it

    vega_lite = newest_vega_lite(vl_convert.get_vegalite_versions())
    script = vl_convert.javascript_bundle(vl_version=vega_lite)
    versions = (f"vega {vl_convert.get_vega_version()}, vega-lite {vega_lite} and vega-embed "
                f"{vl_convert.get_vega_embed_version()} from vl-convert-python {version('vl-convert-python')}")
    return Bundle(script, versions)


def offline_page(bundle: Bundle) -> str:
    """A DVC plots template holding `bundle`, with {plot_divs} and {refresh_tag} and without {scripts}."""
    for placeholder in DVC_PLACEHOLDERS:
        if placeholder in bundle.script:  # DVC would replace it inside the library code and break it
            raise DataError(f"the vega bundle of {bundle.versions} contains DVC's placeholder {placeholder}")
    # The bundle declares its names with top-level const: a function keeps them out of the page's globals (DVC's
    # plot scripts declare their own); it publishes vegaEmbed, vega and vegaLite on window.
    script = "(() => {\n" + bundle.script.replace("</script", "<\\/script") + "\n})();"
    return (_HEAD + f"<!-- {bundle.versions}, inlined: this page needs no network -->\n"
            + "<script>\n" + script + "\n</script>\n" + _STYLE)

"""``asv publish``'s page with the network off: the libraries its ``index.html`` loads from CDNs
(jQuery, Flot and its plugins, Bootstrap 3, stupidtable, blueimp-md5) are copied at publish time
from the packages installed on the machine into the site's ``vendor/`` folder, and the tags
rewritten to point there. Nothing is kept in this repository: ASV's wheel ships only its own
scripts, so the libraries come from Debian's packages of them (``apt-get install libjs-jquery
libjs-jquery-flot libjs-bootstrap libjs-jquery-stupidtable node-blueimp-md5``; ``.ci/run`` installs
them), found under ``/usr/share/javascript`` or ``$SPYRE_BENCH_JS_DIR``.

A library found nowhere keeps its CDN address (the page then needs the network) and is named in
what :func:`localize` returns, so the caller can say so. The Flot orderBars plugin has no package:
its tag is dropped (grouped bar charts overlap; every line graph is unchanged), since an offline
page whose script fails to load is sent to ASV's error page. Debian's Flot is version 4, whose
bundle draws axis labels itself (ASV's own 0.8 axis-label plugin would draw them twice: dropped
with it) and a legend in SVG whose box needs a fill (a one-line style).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

#: Where packaged JavaScript libraries live (Debian's libjs-* packages).
JS_ROOTS = (Path("/usr/share/javascript"),)
JS_DIR_ENV = "SPYRE_BENCH_JS_DIR"


@dataclass(frozen=True)
class Asset:
    pattern: str        # regex on the CDN address
    local: str          # path under a JS root, kept as the site's vendor/ path
    package: str        # what to install when it is missing


ASSETS = (
    Asset(r"/jquery-[0-9.]+(\.min)?\.js$", "jquery/jquery.min.js", "libjs-jquery"),
    Asset(r"/jquery\.flot\.min\.js$", "jquery-flot/jquery.flot.min.js", "libjs-jquery-flot"),
    Asset(r"/jquery\.flot\.time\.min\.js$", "jquery-flot/jquery.flot.time.min.js",
          "libjs-jquery-flot"),
    Asset(r"/jquery\.flot\.selection\.min\.js$", "jquery-flot/jquery.flot.selection.min.js",
          "libjs-jquery-flot"),
    Asset(r"/jquery\.flot\.categories\.min\.js$", "jquery-flot/jquery.flot.categories.min.js",
          "libjs-jquery-flot"),
    Asset(r"/stupidtable(\.min)?\.js$", "jquery-stupidtable/stupidtable.min.js",
          "libjs-jquery-stupidtable"),
    Asset(r"/md5(\.min)?\.js$", "blueimp-md5/md5.min.js", "node-blueimp-md5"),
    Asset(r"/bootstrap(\.min)?\.js$", "bootstrap/js/bootstrap.min.js", "libjs-bootstrap"),
    Asset(r"/bootstrap(\.min)?\.css$", "bootstrap/css/bootstrap.min.css", "libjs-bootstrap"),
)
#: Optional plugins without a package: their tags are dropped.
DROPPED = (r"/jquery\.flot\.orderBars\.js$",)
#: With Flot 4: ASV's axis-label plugin for Flot 0.8 (the bundle has its own), and the legend fill.
FLOT4_DROPPED = re.compile(r'<script[^>]*src="jquery\.flot\.axislabels\.js"[^>]*>\s*</script>')
FLOT4_STYLE = "<style>.legendLayer rect.background { fill: #fff; }</style>"
#: Files a stylesheet refers to relatively (Bootstrap's icon font), copied when present.
COMPANIONS = {"bootstrap/css/bootstrap.min.css": "bootstrap/fonts"}

TAG = re.compile(r"<(script|link)\b[^>]*?\b(src|href)=\"(https?://[^\"]+)\"[^>]*>(</script>)?")


def _roots() -> list[Path]:
    extra = os.environ.get(JS_DIR_ENV)
    return ([Path(extra)] if extra else []) + list(JS_ROOTS)


def find(local: str) -> Path | None:
    for root in _roots():
        path = root / local
        if path.is_file():
            return path
    return None


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)     # follows Debian's symlinks (fonts-glyphicons)


def _local_tag(kind: str, href: str) -> str:
    if kind == "link":
        return f'<link rel="stylesheet" href="{href}">'
    return f'<script src="{href}" onerror="js_load_failure()"></script>'


def localize(site: Path) -> list[str]:
    """Rewrite ``site/index.html`` to load its libraries from ``site/vendor``; returns the
    packages still missing (their tags keep the CDN address)."""
    index = site / "index.html"
    page = index.read_text()
    missing: list[str] = []

    def replace(m: re.Match) -> str:
        kind, url = m.group(1), m.group(3)
        if kind == "link" and "stylesheet" not in m.group(0):
            return m.group(0)
        if any(re.search(p, url) for p in DROPPED):
            return f"<!-- offline: {os.path.basename(url)} has no installed package -->"
        asset = next((a for a in ASSETS if re.search(a.pattern, url)), None)
        src = find(asset.local) if asset else None
        if src is None:
            missing.append(asset.package if asset else url)
            return m.group(0)
        _copy(src, site / "vendor" / asset.local)
        fonts = COMPANIONS.get(asset.local)
        if fonts and src.parent.parent.joinpath("fonts").is_dir():
            for font in src.parent.parent.joinpath("fonts").iterdir():
                if font.is_file():
                    _copy(font, site / "vendor" / fonts / font.name)
        return _local_tag(kind, f"vendor/{asset.local}")

    page = TAG.sub(replace, page)
    if (site / "vendor" / "jquery-flot").is_dir():
        page = FLOT4_DROPPED.sub("<!-- offline: Flot 4 draws axis labels itself -->", page)
        page = page.replace("</head>", f"{FLOT4_STYLE}\n</head>", 1)
    index.write_text(page)
    return sorted(set(missing))

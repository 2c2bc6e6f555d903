#!/usr/bin/env python3
"""Fetch the book's third-party JavaScript from the npm registry into book/_vendor/ (git-ignored).

The rendered book loads nothing from the network. MathJax comes from the sphinx-mathjax-offline
package (PyPI); the two scripts that render ipywidgets in a static page come from here:

* ``requirejs``: the AMD loader that the widget bundle needs;
* ``@jupyter-widgets/html-manager``: ``embed-amd.js``, which carries ipywidgets' own widget
  models and views, their CSS, and the Font Awesome files that CSS points at.

Versions and integrity hashes are pinned below; ``npm pack`` fetches each tarball (the ordinary
npm client, no node_modules, no install scripts) and this script checks the hash before it
extracts anything. The result lands in ``book/_vendor/widgets/``, which ``_config.yml`` lists in
``html_static_path`` so Sphinx copies it to ``_build/html/_static/widgets/``.

Run it with no arguments; it does nothing when the pinned versions are already in place.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEST = os.path.join(ROOT, "book", "_vendor", "widgets")
STAMP = os.path.join(DEST, "VERSIONS.json")

# ipywidgets 8.1 pairs with html-manager 1.0.x (see ipywidgets._version.__html_manager_version__).
PACKAGES = {
    "requirejs": {
        "version": "2.3.8",
        "integrity": "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
        # (path inside the tarball, name in DEST); a trailing "*" copies every file of a folder
        "files": [("package/require.js", "require.js")],
        "license": "package/LICENSE",
    },
    "@jupyter-widgets/html-manager": {
        "version": "1.0.15",
        "integrity": "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "files": [("package/dist/*", "")],
        "skip": (".map", "embed.js", "libembed-amd.js"),  # only embed-amd.js and its fonts are served
        "license": "package/LICENSE",
    },
}


# Loaded between require.js and embed-amd.js. The widget CSS inside embed-amd.js finds its Font
# Awesome files through webpack public paths taken from the AMD modules' URLs, which RequireJS
# would otherwise resolve against the page's own folder; map those modules to this folder.
ASSETS_PATH_JS = """\
// gemm-course (scripts/vendor_web_assets.py): @jupyter-widgets/html-manager's fonts lie next to this file.
(function () {
  var here = new URL(".", document.currentScript.src).href;
  window.__jupyter_widgets_assets_path__ = here;
  window.requirejs.config({paths: {
    "@jupyter-widgets/html-manager": here + "html-manager",
    "@jupyter-widgets/html-manager/dist": here.replace(/\\/$/, "")
  }});
})();
"""


def _integrity(path: str) -> str:
    with open(path, "rb") as f:
        return "sha512-" + base64.b64encode(hashlib.sha512(f.read()).digest()).decode()


def _npm_pack(spec: str, workdir: str) -> str:
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("vendor_web_assets: npm is needed (Debian: apt-get install -y npm); it fetches the "
                 "book's pinned JavaScript from the npm registry")
    out = subprocess.run(
        [npm, "pack", spec, "--json", "--ignore-scripts", "--pack-destination", workdir],
        cwd=workdir, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"vendor_web_assets: `npm pack {spec}` failed:\n{out.stderr.strip()}")
    info = json.loads(out.stdout)[0]
    return os.path.join(workdir, info["filename"])


def _wanted() -> dict:
    return {**{name: p["version"] for name, p in PACKAGES.items()},
            "assets-path.js": hashlib.sha256(ASSETS_PATH_JS.encode()).hexdigest()[:16]}


def main() -> int:
    if os.path.exists(STAMP):
        with open(STAMP) as f:
            if json.load(f) == _wanted():
                return 0
    staging = DEST + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    with tempfile.TemporaryDirectory() as tmp:
        for name, p in PACKAGES.items():
            tarball = _npm_pack(f"{name}@{p['version']}", tmp)
            got = _integrity(tarball)
            if got != p["integrity"]:
                sys.exit(f"vendor_web_assets: {name}@{p['version']} has integrity {got}, expected {p['integrity']}")
            with tarfile.open(tarball) as tar:
                members = {m.name: m for m in tar.getmembers() if m.isfile()}
                picks = []
                for src, dst in p["files"]:
                    if src.endswith("/*"):
                        folder = src[:-1]
                        for m in members:
                            base = m[len(folder):]
                            if m.startswith(folder) and "/" not in base and not base.endswith(p.get("skip", ())):
                                picks.append((m, os.path.join(dst, base)))
                    else:
                        picks.append((src, dst))
                lic = p.get("license")
                if lic in members:
                    picks.append((lic, f"LICENSE.{name.replace('/', '_').lstrip('@')}"))
                for src, dst in picks:
                    data = tar.extractfile(members[src]).read()
                    with open(os.path.join(staging, dst), "wb") as f:
                        f.write(data)
    with open(os.path.join(staging, "assets-path.js"), "w") as f:
        f.write(ASSETS_PATH_JS)
    with open(os.path.join(staging, "VERSIONS.json"), "w") as f:
        json.dump(_wanted(), f, indent=1, sort_keys=True)
        f.write("\n")
    shutil.rmtree(DEST, ignore_errors=True)
    os.replace(staging, DEST)
    done = ", ".join(f"{name}@{p['version']}" for name, p in PACKAGES.items())
    print(f"vendor_web_assets: {done} -> {os.path.relpath(DEST, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

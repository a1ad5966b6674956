"""The runners' site build: fingerprinted assets, references rewritten to them, page
weights under budget, and a minifier that never changes what the JavaScript means."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"
BUDGET = 30_000
FINGERPRINT = re.compile(r"^(?P<stem>[\w-]+)\.(?P<hash>[0-9a-f]{8})\.(?P<ext>js|css)$")
# Any quoted or url()-wrapped reference to a .js/.css file in built HTML, JS or CSS.
ASSET_REF = re.compile(r"""["'(]\s*(?:\./)?(?P<path>[\w./-]+\.(?:m?js|css))(?:[?#][^"')]*)?\s*["')]""")


def _load_build_module() -> ModuleType:
    # Not importable as `site.build`: `site` is a standard-library module.
    spec = importlib.util.spec_from_file_location("racecap_site_build", SITE / "build.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


sitebuild = _load_build_module()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Given the site sources, when `python site/build.py --out DIR` runs."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, str(SITE / "build.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def _assets(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.suffix in {".js", ".css"})


def test_every_asset_is_fingerprinted_with_its_content_hash(built: tuple[Path, str]) -> None:
    out, _ = built
    assets = _assets(out)
    assert {p.name.split(".")[0] for p in assets} >= {
        "app",
        "api",
        "ui",
        "races",
        "hold",
        "wait",
        "validate",
        "styles",
    }
    for path in assets:
        m = FINGERPRINT.match(path.name)
        assert m, f"{path.name} is not fingerprinted"
        assert m["hash"] == hashlib.sha256(path.read_bytes()).hexdigest()[:8], path.name


def test_index_references_the_fingerprinted_stylesheet_and_module(built: tuple[Path, str]) -> None:
    out, _ = built
    html = (out / "index.html").read_text()
    css = re.search(r'<link rel="stylesheet" href="([^"]+)"', html)
    js = re.search(r'<script type="module" src="([^"]+)"></script>', html)
    assert css
    assert js
    for ref in (css[1], js[1], *re.findall(r'<link rel="modulepreload" href="([^"]+)"', html)):
        assert FINGERPRINT.match(ref), ref
        assert (out / ref).is_file(), ref
    assert js[1].startswith("app.")


def test_no_built_file_references_an_unfingerprinted_or_missing_asset(built: tuple[Path, str]) -> None:
    out, _ = built
    sources = {p.name for p in SITE.iterdir() if p.suffix in {".js", ".css"}}
    checked = 0
    for path in [out / "index.html", *_assets(out)]:
        for m in ASSET_REF.finditer(path.read_text()):
            ref = m["path"]
            checked += 1
            assert ref not in sources, f"{path.name} still references the source name {ref}"
            assert FINGERPRINT.match(Path(ref).name), f"{path.name} references unfingerprinted {ref}"
            assert (out / ref).is_file(), f"{path.name} references missing {ref}"
    assert checked >= 10  # the HTML's links plus every module's imports were seen


def test_modules_import_each_other_by_fingerprinted_relative_names(built: tuple[Path, str]) -> None:
    out, _ = built
    app = next(out.glob("app.*.js")).read_text()
    # The router loads one module per route on demand.
    for route_module in ("races", "hold", "wait"):
        assert re.search(rf"import\(\s*['\"]\./{route_module}\.[0-9a-f]{{8}}\.js['\"]\s*\)", app)
    hold = next(out.glob("hold.*.js")).read_text()
    assert re.search(r"from\s*['\"]\./validate\.[0-9a-f]{8}\.js['\"]", hold)


def test_weights_are_printed_written_and_under_budget(built: tuple[Path, str]) -> None:
    out, stdout = built
    weights = json.loads((out / "weights.json").read_text())
    assert weights["budgetBytes"] == BUDGET
    pages = weights["pages"]
    assert set(pages) >= {
        "index.html",
        "index.html + races.js",
        "index.html + hold.js",
        "index.html + wait.js",
    }
    for label, page in pages.items():
        files = page["files"]
        actual = sum((out / f).stat().st_size for f in files if f.endswith((".html", ".js", ".css")))
        assert page["total"] == actual == page["html"] + page["js"] + page["css"], label
        assert page["total"] < BUDGET, f"{label}: {page['total']} B"
        assert page["withinBudget"]
        assert "index.html" in files
        assert any(f.startswith("styles.") for f in files)
        assert f"page weight {label}" in stdout
    # The race page, the hot one at opening time, does not carry the form's code.
    assert not any(f.startswith(("hold.", "validate.")) for f in pages["index.html + races.js"]["files"])
    assert weights["maxPageBytes"] == max(p["total"] for p in pages.values())


def test_manifest_caches_assets_forever_and_the_page_briefly(built: tuple[Path, str]) -> None:
    out, _ = built
    manifest = json.loads((out / "asset-manifest.json").read_text())
    assert manifest["assets"]["app.js"] == next(out.glob("app.*.js")).name
    cache = manifest["cacheControl"]
    assert "max-age=60" in cache["index.html"]
    for path in _assets(out):
        assert "immutable" in cache[path.name]


def test_contract_test_ids_exist_for_browser_tests() -> None:
    text = "".join(p.read_text() for p in SITE.glob("*.js")) + (SITE / "index.html").read_text()
    for testid in (
        "race-link",
        "hold-button",
        "spots-left",
        "event-status",
        "race-status",
        "hold-status",
        "continue-button",
        "submit-registration",
        "release-hold",
        "hold-countdown",
        "registration-status",
        "poll-countdown",
        "poll-progress",
        "bib",
        "confirmation-event",
        "confirmation-runner",
        "registration-failed",
        "error-summary",
        "form-status",
        "retry",
        "noscript",
        "loading",
        "card-form",
        "error-card",
        "test-cards",
    ):
        assert re.search(rf"""['"`]{re.escape(testid)}['"`]""", text), testid
    # Form fields and their inline errors: data-testid="field-<name>" / "error-<name>".
    assert "testid: `field-${name}`" in text
    assert "testid: `error-${name}`" in text
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        assert f"field('{name}'" in text, name


def test_changing_a_shared_module_busts_every_importer_but_nothing_else(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(SITE, src, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    first = json.loads(json.dumps(sitebuild.build(src, out)))
    (out / "keep-me.txt").write_text("not ours")
    with (src / "ui.js").open("a") as fh:
        fh.write("export const CHANGED = 1;\n")
    sitebuild.build(src, out)
    names = {p.name.split(".")[0]: p.name for p in _assets(out)}
    old = {f.split(".")[0]: f for f in first["pages"]["index.html + hold.js"]["files"] if f != "index.html"}
    for importer in ("ui", "app", "hold"):  # app imports ui directly, hold imports ui
        assert names[importer] != old[importer], importer
    for untouched in ("api", "validate", "styles"):
        assert names[untouched] == old[untouched], untouched
    # Stale fingerprinted files are removed, anything else in the directory is left alone.
    assert not (out / old["ui"]).exists()
    assert (out / "keep-me.txt").exists()


def test_missing_reference_and_import_cycle_fail_the_build(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text('<script type="module" src="a.js"></script>')
    (tmp_path / "a.js").write_text("import './b.js';\n")
    with pytest.raises(sitebuild.BuildError, match=r"missing file: b\.js"):
        sitebuild.build(tmp_path, tmp_path / "out")
    (tmp_path / "b.js").write_text("import './a.js';\n")
    with pytest.raises(sitebuild.BuildError, match="cycle"):
        sitebuild.build(tmp_path, tmp_path / "out")


def test_over_budget_fails_the_cli(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SITE / "build.py"), "--out", str(tmp_path), "--budget", "1000"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "over the 1,000 B page budget" in proc.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Line breaks that automatic semicolon insertion depends on survive.
        ("let a = b\n++c\n", "let a=b\n++c\n"),
        ("function f() {\n  return\n  x;\n}\n", "function f(){return\nx;}\n"),
        ("const x = y\n(z)\n", "const x=y\n(z)\n"),
        # Operators that would fuse keep a space; words keep a space.
        ("a - -b; c + +d; typeof x\n", "a- -b;c+ +d;typeof x\n"),
        # Literals are copied verbatim, including comment-like and quote-like content.
        ("const s = 'a  // b';  // gone\n", "const s='a  // b';\n"),
        ("const r = /[\"'`]\\/  x/g.test(v);\n", "const r=/[\"'`]\\/  x/g.test(v);\n"),
        ("const t = `a  ${ {k: '}'}.k }  b`;\n", "const t=`a  ${ {k: '}'}.k }  b`;\n"),
        ("/* block\n comment */ x = 1 / 2 / 3;\n", "x=1/2/3;\n"),
        ("if (a) {\n  b();\n}\nelse c();\n", "if(a){b();}\nelse c();\n"),
    ],
)
def test_minify_js_removes_only_insignificant_whitespace(source: str, expected: str) -> None:
    assert sitebuild.minify_js(source) == expected


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_every_built_module_parses(built: tuple[Path, str]) -> None:
    out, _ = built
    for path in out.glob("*.js"):
        # Written as .mjs so node parses it as a module (import/export syntax).
        probe = out.parent / f"probe-{path.stem}.mjs"
        probe.write_bytes(path.read_bytes())
        proc = subprocess.run(["node", "--check", str(probe)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{path.name}: {proc.stderr}"

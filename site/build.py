"""Build the runners' static site into a deployable directory (stdlib only).

Every asset reachable from ``index.html`` is written under a content-fingerprinted name
(``app.<sha256-8>.js``, ``styles.<sha256-8>.css``) and every reference to it -- HTML
``src``/``href``, JS ``import``/``from``/``import()``, CSS ``url()``/``@import`` -- is
rewritten to match, so assets can be cached forever while ``index.html`` stays
short-cached (RunSignUp paper, section 1.9.1). A module's fingerprint covers the
fingerprints of what it imports, so changing a leaf busts every file that points at it.

Also written: ``weights.json`` (bytes per file and per page against the budget) and
``asset-manifest.json`` (source name -> built name, plus the Cache-Control each file should be
served with). New files land before ``index.html`` is replaced and stale fingerprinted
files are removed last, so a server reading the directory mid-build never serves a page
whose assets are missing.

The race director's console (``admin/``) is a separate bundle with its own entry page,
``admin/index.html``: esbuild (``admin/package.json``, installed by ``local/install.sh
console``) bundles ``admin/src/main.js`` and its packages into one ``admin/console.js``,
which is then fingerprinted like the site's assets. It is not part of the runner site's
pages or weights (``weights.json`` stays the runner site's).

Usage: ``python site/build.py [--out DIR] [--budget BYTES] [--no-minify]``
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = SITE_DIR.parent / ".build" / "site"
ENTRY = "index.html"
BUDGET_BYTES = 30_000  # per page, HTML + JS + CSS, uncompressed
HASH_LEN = 8
TEXT_SUFFIXES = {".html", ".js", ".mjs", ".css", ".svg"}
WEIGHED = {".html": "html", ".js": "js", ".mjs": "js", ".css": "css"}
FINGERPRINTED = re.compile(rf"^.+\.[0-9a-f]{{{HASH_LEN}}}\.[A-Za-z0-9]+$")
CACHE_FOREVER = "public, max-age=31536000, immutable"
CACHE_SHORT = "public, max-age=60, must-revalidate"

_HTML_REF = re.compile(r"""(?P<pre>\b(?:src|href)\s*=\s*)(?P<q>["'])(?P<url>[^"']*)(?P=q)""", re.I)
# Browsers resolve only relative (or absolute) module specifiers without an import map, so
# "./x.js" and "../x.js" are the references to rewrite; other strings are left alone.
_JS_REF = re.compile(r"""(?P<pre>\bimport\s*\(\s*|\bimport\s*|\bfrom\s*)(?P<q>["'])(?P<url>\.{1,2}/[^"'\n]+)(?P=q)""")
_CSS_REF = re.compile(
    r"""(?P<pre>url\(\s*|@import\s+)(?P<q>["']?)(?P<url>[^"')\s]+)(?P=q)""",
)
_PATTERNS = {".html": _HTML_REF, ".js": _JS_REF, ".mjs": _JS_REF, ".css": _CSS_REF, ".svg": _HTML_REF}


CONSOLE = "admin"  # the console's folder under the site, and its path on the origin
CONSOLE_ENTRY = f"{CONSOLE}/index.html"


class BuildError(Exception):
    """The site cannot be built as written (missing file, import cycle, bad reference)."""


# ---------------------------------------------------------------------------
# Minification: whitespace and comments only (no renaming), conservative by design.
# JS keeps every line break that automatic semicolon insertion could depend on; strings,
# template literals and regex literals are copied verbatim. `--no-minify` turns it off.
# ---------------------------------------------------------------------------
_WORD_CHAR = re.compile(r"[\w$\\\u0080-\uffff]")
_JS_TOKEN = re.compile(r"[\w$\\\u0080-\uffff]+|.", re.S)
_REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^")
_REGEX_KEYWORDS = {
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "yield",
    "await",
    "instanceof",
}
_JOIN_AFTER = set("{([,;:=&|?*%<>!~^")  # a line break after these can never end a statement
_JOIN_BEFORE = set(")]},")


def _skip_quoted(src: str, i: int) -> int:
    quote, i = src[i], i + 1
    while i < len(src) and src[i] != quote:
        if src[i] == "\\":
            i += 1
        elif src[i] == "\n" and quote != "`":
            raise BuildError("unterminated string literal")
        elif quote == "`" and src.startswith("${", i):
            i = _skip_braces(src, i + 2) - 1
        i += 1
    if i >= len(src):
        raise BuildError("unterminated literal")
    return i + 1


def _skip_braces(src: str, i: int) -> int:
    depth = 1
    while i < len(src):
        c = src[i]
        if c in "'\"`":
            i = _skip_quoted(src, i)
            continue
        depth += (c == "{") - (c == "}")
        i += 1
        if depth == 0:
            return i
    raise BuildError("unterminated template expression")


def _skip_regex(src: str, i: int) -> int:
    in_class, i = False, i + 1
    while i < len(src) and (in_class or src[i] != "/"):
        if src[i] == "\n":
            raise BuildError("unterminated regex literal")
        if src[i] == "\\":
            i += 1
        elif src[i] in "[]":
            in_class = src[i] == "["
        i += 1
    if i >= len(src):
        raise BuildError("unterminated regex literal")
    i += 1
    while i < len(src) and src[i].isalpha():
        i += 1
    return i


def minify_js(src: str) -> str:
    out: list[str] = []
    last = ""  # the previous token
    gap = ""  # whitespace seen since it: "", " " or "\n"
    i = 0
    while i < len(src):
        c = src[i]
        if c in " \t\r\n\f\v\ufeff":
            gap = "\n" if c == "\n" or gap == "\n" else " "
            i += 1
            continue
        if src.startswith("//", i):
            i = src.find("\n", i) if "\n" in src[i:] else len(src)
            continue
        if src.startswith("/*", i):
            end = src.find("*/", i + 2)
            if end < 0:
                raise BuildError("unterminated comment")
            gap = "\n" if "\n" in src[i:end] or gap == "\n" else (gap or " ")
            i = end + 2
            continue
        if c in "'\"`":
            j = _skip_quoted(src, i)
        elif c == "/" and (not last or last[-1] in _REGEX_AFTER or last in _REGEX_KEYWORDS):
            j = _skip_regex(src, i)
        else:
            j = _JS_TOKEN.match(src, i).end()  # type: ignore[union-attr]
        tok = src[i:j]
        if gap and last:
            word = _WORD_CHAR.match(last[-1]) and _WORD_CHAR.match(tok[0])
            merge = (last[-1] in "+-/" and tok[0] == last[-1]) or (last[-1] == "/" and tok[0] == "*")
            num_dot = last.isdigit() and tok[0] == "."
            if gap == "\n" and not (last[-1] in _JOIN_AFTER or tok[0] in _JOIN_BEFORE):
                out.append("\n")
            elif word or merge or num_dot:
                out.append(" ")
        out.append(tok)
        last, gap, i = tok, "", j
    return "".join(out) + "\n"


def minify_css(src: str) -> str:
    parts = re.split(r"""("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|/\*.*?\*/)""", src, flags=re.S)
    out = []
    for k, part in enumerate(parts):
        if k % 2:  # a string (kept) or a comment (dropped)
            out.append("" if part.startswith("/*") else part)
            continue
        squeezed = re.sub(r" ?([{};,>]) ?", r"\1", re.sub(r"\s+", " ", part))
        out.append(squeezed.replace(": ", ":"))
    return re.sub(r";}", "}", "".join(out)).strip() + "\n"


def minify_html(src: str) -> str:
    # Indentation and blank lines only; text inside elements keeps its spacing.
    return "".join(line.strip() + "\n" for line in src.splitlines() if line.strip())


_MINIFIERS: dict[str, Callable[[str], str]] = {
    ".js": minify_js,
    ".mjs": minify_js,
    ".css": minify_css,
    ".html": minify_html,
}


@dataclass
class Build:
    """Emits files bottom-up: a file's name is known only once everything it references is."""

    src: Path
    minify: bool = True
    files: dict[str, bytes] = field(default_factory=dict)  # output path -> content
    names: dict[str, str] = field(default_factory=dict)  # source path -> output path
    refs: dict[str, set[tuple[str, bool]]] = field(default_factory=dict)  # source -> {(source, dynamic)}

    def asset(self, rel: str, chain: tuple[str, ...] = ()) -> str:
        """Emit `rel` (and what it references) under its fingerprinted name; return that name."""
        if rel in self.names:
            return self.names[rel]
        if rel in chain:
            raise BuildError("reference cycle, cannot fingerprint: " + " -> ".join((*chain, rel)))
        data = self._rewritten(rel, chain)
        stem, suffix = posixpath.splitext(rel)
        out = f"{stem}.{hashlib.sha256(data).hexdigest()[:HASH_LEN]}{suffix}"
        self.files[out] = data
        self.names[rel] = out
        return out

    def page(self, rel: str) -> None:
        """Emit an entry page under its own name (it is the short-cached one)."""
        self.files[rel] = self._rewritten(rel, ())
        self.names[rel] = rel

    def closure(self, rel: str, seen: set[str] | None = None) -> set[str]:
        """`rel` and everything it loads up front (dynamic imports excluded), as sources."""
        seen = set() if seen is None else seen
        if rel not in seen:
            seen.add(rel)
            for target, dynamic in self.refs.get(rel, ()):
                if not dynamic:
                    self.closure(target, seen)
        return seen

    def _rewritten(self, rel: str, chain: tuple[str, ...]) -> bytes:
        path = self.src / rel
        if not path.is_file():
            via = f" (referenced from {chain[-1]})" if chain else ""
            raise BuildError(f"missing file: {rel}{via}")
        data = path.read_bytes()
        suffix = path.suffix.lower()
        if suffix not in TEXT_SUFFIXES:
            return data
        text = data.decode("utf-8")
        if self.minify and suffix in _MINIFIERS:
            try:
                text = _MINIFIERS[suffix](text)
            except BuildError as exc:
                raise BuildError(f"{rel}: cannot minify: {exc}") from exc
        refs = self.refs.setdefault(rel, set())

        def emit(target: str, dynamic: bool) -> str:
            refs.add((target, dynamic))
            return self.asset(target, (*chain, rel))

        pattern = _PATTERNS.get(suffix)
        return (pattern.sub(_replacer(rel, emit), text) if pattern else text).encode("utf-8")


def _is_local(url: str) -> bool:
    # Absolute paths (/api/...), other origins, data: URIs and in-page anchors are not ours.
    return bool(url) and not re.match(r"^(?:[a-z][a-z0-9+.-]*:|//|/|#|\?)", url, re.I)


def _replacer(rel: str, emit: Callable[[str, bool], str]) -> Callable[[re.Match[str]], str]:
    base = posixpath.dirname(rel)

    def sub(m: re.Match[str]) -> str:
        url = m.group("url")
        if not _is_local(url):
            return m.group(0)
        path, sep, tail = re.fullmatch(r"([^?#]*)([?#]?)(.*)", url, re.S).groups()  # type: ignore[union-attr]
        target = posixpath.normpath(posixpath.join(base, path))
        if target.startswith("../"):
            raise BuildError(f"{rel} references {url}, outside the site directory")
        built = posixpath.relpath(emit(target, "(" in m.group("pre")), base or ".")
        if url.startswith("./") and not built.startswith("../"):
            built = "./" + built
        return f"{m.group('pre')}{m.group('q')}{built}{sep}{tail}{m.group('q')}"

    return sub


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def weigh(b: Build, budget: int) -> dict[str, object]:
    """Bytes per file and per page. A page is what one route downloads before it can show
    anything: the entry page's up-front closure plus, for each module the app imports
    on demand (one per route), that module's own up-front closure."""
    per_file = {
        name: {"bytes": len(data), "gzipBytes": len(gzip.compress(data, 9, mtime=0))}
        for name, data in sorted(b.files.items())
    }
    base = b.closure(ENTRY)
    lazy = sorted({t for refs in b.refs.values() for t, dynamic in refs if dynamic} - base)
    pages: dict[str, dict[str, object]] = {}
    for label, sources in [(ENTRY, base), *((f"{ENTRY} + {t}", base | b.closure(t)) for t in lazy)]:
        built = sorted(b.names[s] for s in sources)
        kinds = {"html": 0, "js": 0, "css": 0}
        for name in built:
            kind = WEIGHED.get(posixpath.splitext(name)[1].lower())
            if kind:
                kinds[kind] += per_file[name]["bytes"]
        total = sum(kinds.values())
        gz = sum(per_file[n]["gzipBytes"] for n in built if posixpath.splitext(n)[1].lower() in WEIGHED)
        pages[label] = {
            **kinds,
            "total": total,
            "gzipTotal": gz,
            "withinBudget": total <= budget,
            "files": built,
        }
    return {
        "budgetBytes": budget,
        "maxPageBytes": max(int(p["total"]) for p in pages.values()),  # type: ignore[call-overload]
        "pages": pages,
        "files": per_file,
    }


def _node() -> str:
    """The Node 22 the installer puts in .cache/node22 (local/env.sh's RACECAP_NODE), else PATH's."""
    candidates = [os.environ.get("RACECAP_NODE", ""), str(SITE_DIR.parent / ".cache/node22/node_modules/node/bin/node")]
    found = next((c for c in candidates if c and Path(c).is_file()), None) or shutil.which("node")
    if not found:
        raise BuildError("the console needs Node 22 to bundle: run `local/install.sh node`")
    return found


def build_console(src: Path, minify: bool = True) -> Build:
    """The console's files (entry page, bundled script, style), fingerprinted like the site's."""
    folder = src / CONSOLE
    if not (folder / "node_modules" / "esbuild" / "package.json").is_file():
        raise BuildError("the console's packages are not installed: run `local/install.sh console`")
    with tempfile.TemporaryDirectory(prefix="console-") as tmp:
        stage = Path(tmp)
        (stage / CONSOLE).mkdir()
        shutil.copy2(folder / "index.html", stage / CONSOLE / "index.html")
        # esbuild's JavaScript API (it finds its own platform binary), one bundle per entry.
        options = {
            "entryPoints": {"console": "src/main.js"},
            "bundle": True, "format": "esm", "target": "es2022", "charset": "utf8",
            "legalComments": "none", "logLevel": "error", "minify": minify,
            "outdir": str(stage / CONSOLE), "absWorkingDir": str(folder),
        }  # fmt: skip
        style = {**options, "entryPoints": {"console": "console.css"}}
        script = f"const e = require('esbuild'); e.buildSync({json.dumps(options)}); e.buildSync({json.dumps(style)});"
        proc = subprocess.run([_node(), "-e", script], cwd=folder, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise BuildError(f"{CONSOLE}: esbuild failed: {proc.stderr.strip()}")
        # esbuild has minified the script and style; the page is short either way.
        b = Build(stage, minify=False)
        b.page(CONSOLE_ENTRY)
        # Read everything now: the staging folder goes when this returns.
        return b


def build(
    src: Path = SITE_DIR, out: Path = DEFAULT_OUT, budget: int = BUDGET_BYTES, minify: bool = True
) -> dict[str, object]:
    """Build `src` into `out`; return the weights report (also written to weights.json)."""
    b = Build(src, minify)
    b.page(ENTRY)
    weights = weigh(b, budget)
    if (src / CONSOLE / "index.html").is_file():
        console = build_console(src, minify)
        b.files.update(console.files)
        b.names.update(console.names)
    manifest = {
        "entry": ENTRY,
        "assets": {k: v for k, v in sorted(b.names.items()) if k != v},
        "cacheControl": {
            name: CACHE_FOREVER if FINGERPRINTED.match(posixpath.basename(name)) else CACHE_SHORT
            for name in sorted([*b.files, "weights.json", "asset-manifest.json"])
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, data in b.files.items():  # assets first, the pages that point at them last
        if name not in (ENTRY, CONSOLE_ENTRY):
            _write_atomic(out / name, data)
    _write_atomic(out / "weights.json", (json.dumps(weights, indent=2) + "\n").encode())
    _write_atomic(out / "asset-manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
    if CONSOLE_ENTRY in b.files:
        _write_atomic(out / CONSOLE_ENTRY, b.files[CONSOLE_ENTRY])
    _write_atomic(out / ENTRY, b.files[ENTRY])
    for folder in {(out / name).parent for name in b.files}:  # stale fingerprints, only ours
        for old in folder.iterdir():
            if old.is_file() and FINGERPRINTED.match(old.name) and old.relative_to(out).as_posix() not in b.files:
                old.unlink()
    return weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    parser.add_argument("--budget", type=int, default=BUDGET_BYTES, help="max bytes of HTML+JS+CSS per page")
    parser.add_argument("--no-minify", action="store_true", help="keep whitespace and comments (debugging)")
    args = parser.parse_args(argv)
    try:
        weights = build(SITE_DIR, args.out.resolve(), args.budget, minify=not args.no_minify)
    except BuildError as exc:
        print(f"site build failed: {exc}", file=sys.stderr)
        return 1
    files: dict = weights["files"]  # type: ignore[assignment]
    pages: dict = weights["pages"]  # type: ignore[assignment]
    print(f"site built into {args.out}")
    for name, info in files.items():
        print(f"  {name:<28} {info['bytes']:>7,} B  {info['gzipBytes']:>6,} B gzip")
    for label, page in pages.items():
        print(f"page weight {label:<28} {page['total']:>7,} B  {page['gzipTotal']:>6,} B gzip (HTML+JS+CSS)")
    over = [label for label, page in pages.items() if not page["withinBudget"]]
    if over:
        print(f"site build failed: over the {args.budget:,} B page budget: {', '.join(over)}", file=sys.stderr)
        return 1
    print(f"every page is within the {args.budget:,} B budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The README stays a newcomer's first screen, and its tree and links stay true.

* README.md is at most 200 lines; the rest lives in docs/, every page of which it links.
* Every package of the layer (a directory with ``__init__.py``) is named in the README's tree, so
  the tree cannot go stale when a capability is added or moved.
* Every relative link in README.md and docs/*.md points at a file that exists and, with an
  ``#anchor``, at a heading of that file (GitHub's slugs).
* No commit hash or date in the README: dated runs live in docs/measurements-log.md.

Files only: no sockets, no subprocess.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LAYER = ROOT / "layers" / "racecap" / "python" / "racecap"
MAX_LINES = 200
TREE_HEADING = "## Where things live"

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
# A hash has a digit and a letter: words like "defaced" and numbers like 4242424 are not hashes.
_HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
_ISO_DATE = re.compile(r"\b\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b")


def _prose(markdown: str) -> str:
    """The text outside fenced code blocks and inline code, where links and headings are."""
    return _INLINE_CODE.sub("", _FENCE.sub("", markdown))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lower-cased, punctuation dropped
    (letters, digits, ``_`` and ``-`` kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFC", text).lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor, duplicates numbered ``-1``, ``-2`` as GitHub does."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for match in _HEADING.finditer(_FENCE.sub("", markdown)):
        slug = _slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(markdown: str) -> list[str]:
    """Link targets that are not URLs: a path, a path#anchor or an #anchor."""
    return [t for t in _LINK.findall(_prose(markdown)) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def layer_packages(layer: Path = LAYER) -> list[str]:
    """Every package under the layer's ``racecap/``, as a path relative to it (``api/admin``)."""
    return sorted(
        init.parent.relative_to(layer).as_posix() for init in layer.rglob("__init__.py") if init.parent != layer
    )


def tree_section(readme: str) -> str:
    """The README's tree: the first code block under its "Where things live" heading."""
    start = readme.index(TREE_HEADING)
    block = _FENCE.search(readme, start)
    assert block is not None, "the tree section has no code block"
    return block.group(0)


def _docs() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_the_readme_fits_a_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move the detail to docs/"


def test_every_package_of_the_layer_is_in_the_readme_tree() -> None:
    tree = tree_section(README.read_text(encoding="utf-8"))
    missing = [p for p in layer_packages() if not re.search(rf"(?<![\w/]){re.escape(p)}/", tree)]
    assert not missing, f"packages missing from the README's tree ({TREE_HEADING!r}): {missing}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in relative_links(README.read_text("utf-8"))}
    unlinked = [p.name for p in _docs() if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README's index does not link: {unlinked}"


def test_every_relative_link_resolves() -> None:
    broken: list[str] = []
    for page in [README, *_docs()]:
        for target in relative_links(page.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not file.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_no_commit_hash_or_date_in_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    found = _HASH.findall(readme) + _ISO_DATE.findall(readme)
    assert not found, f"dated runs and commits belong in docs/measurements-log.md: {found}"


def test_the_checks_themselves() -> None:
    """The helpers catch what they are for, on planted text."""
    assert _slug("The race director's console (`/admin/`)") == "the-race-directors-console-admin"
    assert _slug("Issue 30, before and after") == "issue-30-before-and-after"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
    assert relative_links("[x](a.md#b) [y](https://e.org) `[z](c.md)` ![i](p.png)") == ["a.md#b", "p.png"]
    assert _HASH.findall("at 1c4bc97, not 4242424 nor deadbeef") == ["1c4bc97"]
    assert _ISO_DATE.findall("on 2026-11-27, not 2026-13-01") == ["2026-11-27"]
    tree = "## Where things live\n\n```\n  api/admin/  routers\n  codes/\n```\n"
    assert re.search(r"(?<![\w/])api/admin/", tree_section(tree))
    assert not re.search(r"(?<![\w/])admin/", tree_section(tree))

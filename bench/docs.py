"""One writer for the benchmarks' blocks in docs/benchmarks.md.

Each benchmark owns a block between its own ``<!-- name:begin -->`` / ``<!-- name:end -->``
markers under its section heading; ``--write-docs`` replaces that block and nothing else.
"""

from __future__ import annotations

from pathlib import Path


def write_block(
    path: Path,
    body: str,
    *,
    begin: str,
    end: str,
    heading: str,
    before: str | None = None,
    keep: tuple[str, str] | None = None,
) -> None:
    """Put ``body`` between ``begin`` and ``end`` in ``path``, read right before writing (the
    rest unchanged). ``keep``: the (start, end) markers of a hand-written part of the old block,
    carried into the new one, before ``end``. Without the markers, the body of the ``heading``
    section is replaced by the block; without the section, it is added before the ``before``
    heading, or at the end."""
    text = path.read_text()
    block = f"{begin}\n{body.strip()}\n{end}"
    i = text.find(begin)
    j = text.find(end, i) if i >= 0 else -1
    if i >= 0 and j >= 0:
        old = text[i : j + len(end)]
        if keep is not None and keep[0] in old and keep[1] in old:
            kept = old[old.index(keep[0]) : old.index(keep[1]) + len(keep[1])]
            block = f"{begin}\n{body.strip()}\n{kept}\n{end}"
        text = text[:i] + block + text[j + len(end) :]
    elif (h := text.find(heading)) >= 0:
        start = h + len(heading)
        nxt = text.find("\n## ", start)
        stop = len(text) if nxt < 0 else nxt + 1
        text = text[:start] + "\n\n" + block + "\n\n" + text[stop:]
    elif before is not None and (at := text.find(before)) >= 0:
        text = text[:at] + f"{heading}\n\n{block}\n\n" + text[at:]
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    path.write_text(text)

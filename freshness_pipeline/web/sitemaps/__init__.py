"""Sitemaps and feeds as a source of URLs and of change hints (``lastmod``).

Sitemaps are written by strangers and are often large, gzipped, malformed or hostile. They are
read as the web writes them, and each file says what was wrong with it, because a parser that
stops at the first error and says nothing costs every URL listed after it, cycle after cycle.

- XML sitemaps go through lxml in recover mode, so a broken file gives every record it still
  holds. The commonest breakage, a bare ``&`` in a query string, is escaped before parsing:
  libxml2's own recovery drops the characters after it, and its push parser waits for a ``;``
  that never comes. A file whose bytes are not what its XML declaration claims is read as what
  the bytes are.
- Feeds (RSS 2.0, RSS 1.0/RDF, Atom) go through feedparser, which knows their dialects and
  dates; it is handed bytes only (a string would make it fetch a URL or open a file).
- A file cut short (truncated gzip, size cap, a server that stopped) keeps the records that
  ended before the cut; the record the cut went through is dropped rather than guessed at.
- Nothing expands entities or loads a DTD: a file declaring entities (billion laughs, external
  entities) is refused whole, and both parsers run with entities, DTDs and network off.
- Everything is bounded: decompressed size, feed size, URLs per file, files per walk. Bad input
  never raises; one broken sitemap must not fail a host's cycle.

The walk over sitemap indexes is breadth-first so the top-level files, usually the most useful,
are read before the budget runs out. :attr:`SitemapWalk.complete` says whether every file was
read to its end with nothing failed or cut: only then does a URL missing from a walk mean the
host stopped listing it.

The modules: :mod:`.entries` (what a file yields and how its dates read), :mod:`.read` (bytes
to entries: decompression, encodings, repairs, lxml), :mod:`.feeds` (RSS, RDF and Atom through
feedparser), :mod:`.records` (the records both of those turn into entries) and :mod:`.walk`
(fetching a host's sitemaps over HTTP, the only part that touches the network).
"""

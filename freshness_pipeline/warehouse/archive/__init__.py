"""The crawled copy as a standard web archive: WARC 1.1 files and a CDXJ index pywb replays.

The pipeline decides freshness from fingerprints, but the pages themselves are kept as a web
archive that archivists and replay tools read. Everything lives in ``<home>/archive/``
(:func:`archive_dir_for`):

- ``*.warc.gz``: complete WARC 1.1 files, gzip per record, each opening with a ``warcinfo``
  record (software, format, the cycle, the writer). A file being written is
  ``*.warc.gz.open`` and is renamed only once whole and fsynced, so a listing of
  ``*.warc.gz`` never shows a partial file. Names: ``<prefix>-<cycle>-<serial>-<writer>-
  <token>.warc.gz`` (cycle as 14 UTC digits, so they sort by cycle).
- ``*.cdxj``: one sorted CDXJ index per WARC, beside it (see :mod:`.index` for why, and for
  the one way its lines differ from pywb's own indexer). pywb replays the folder with a
  collection whose ``index_paths`` and ``archive_paths`` both point at it::

      collections:
        crawl:
          index_paths: /path/to/home/archive/
          archive_paths: /path/to/home/archive/

What is recorded, per HTTP request that went on the wire (:meth:`ArchiveWriter.write_exchange`):

- a ``request`` record (request line and headers as sent) and, first, a ``response`` record
  (status line, headers as received, the body as read); when the body was cut by a size cap
  the record says ``WARC-Truncated: length``. The client always undoes Transfer-Encoding and
  the caller may undo Content-Encoding; a stored header that no longer describes the stored
  body is kept renamed ``X-Freshness-Orig-<name>`` and ``Content-Length`` gives the stored
  length, so the stored headers and body agree;
- or, instead of the response, a ``revisit`` record (HTTP headers only, no body): profile
  ``http://netpreserve.org/warc/1.1/revisit/server-not-modified`` for a 304, and
  ``http://netpreserve.org/warc/1.1/revisit/identical-payload-digest`` for a complete 200
  whose payload digest equals the URL's last archived original. Both carry
  ``WARC-Refers-To-Target-URI``, ``WARC-Refers-To-Date`` and ``WARC-Refers-To`` (the
  original's record id) and the original's ``WARC-Payload-Digest``, so an unchanged page
  costs its headers, not its body (a 304 with no known original, e.g. to validators from
  before archiving began, names only its own URI);
- for a request that got no answer to store (a timeout or a reset before the response's
  head, a head the client refused as unreadable), the ``request`` record alone
  (:meth:`ArchiveWriter.write_unanswered_request`): what was asked and when, not indexed, as
  nothing can be replayed from it; a connection that was never made sent nothing and has no
  record;
- robots.txt, sitemap and feed fetches the same way, every record of a fetch marked in the
  WARC field ``WARC-Freshness-Fetch-Kind`` (``page``, ``robots``, ``sitemap``, ``feed``;
  non-page CDXJ lines say ``"kind"``), so they can be counted apart.

Each call returns an :class:`ArchivedRecord`: ``warc_filename`` (relative to the archive
folder), ``warc_offset`` and ``warc_length`` (of the gzip member as stored) and
``payload_digest`` (``sha1:BASE32``, as WARC-Payload-Digest), plus ``original``, the
:class:`ArchivedOriginal` to keep for the URL and pass back as ``previous`` next time.

How the fetch stage uses it, so that no table row ever points into a record that does not
exist::

    with ArchiveWriter(archive_dir_for(home), now, writer="p0") as writer:  # one per cycle+process
        ...  # in the event loop, per fetch:
        record = writer.write_exchange(exchange, previous=last_original.get(url))
    # leaving the block closed the writer: fsync, rename, folder fsync, index; an exception
    # inside the block aborted it instead (temporary file deleted, nothing renamed)
    ...  # only now write the rows that carry record.warc_filename / warc_offset / warc_length

``write_exchange`` is synchronous and short (it builds and gzips two records and appends
them with one write; it never fsyncs), so the fetch stage calls it straight from the event
loop; it is thread-safe and compresses outside its lock, so large bodies can go through
``asyncio.to_thread`` instead. ``close()`` fsyncs and reads the file back to index it: call
it after the loop or in a thread. A write the file system refuses raises
:class:`ArchiveWriteError` after completing the file with the exchanges before it; the
writer then takes no more records and the fetch stage goes on without archiving.

Reading back (:class:`ArchiveReader`, :func:`read_response`) gives a record's HTTP response for
re-extraction without fetching, following a revisit to its original; :func:`iter_records`
walks a file. Retention (:mod:`.prune`) removes whole expired files and carries any original
that a kept revisit refers to into a kept file. :func:`remove_abandoned` and
:func:`ensure_indexes` repair what a crash can leave (a dead writer's temporary file, a
complete WARC whose index was not written yet).
"""

from freshness_pipeline.warehouse.archive.encoding import ORIG_HEADER_PREFIX, payload_digest
from freshness_pipeline.warehouse.archive.files import (
    ARCHIVE_DIRNAME,
    archive_dir_for,
    index_name_for,
    list_warcs,
    remove_abandoned,
)
from freshness_pipeline.warehouse.archive.index import (
    ArchiveIndex,
    IndexEntry,
    ensure_indexes,
    url_key,
)
from freshness_pipeline.warehouse.archive.prune import (
    PrunePlan,
    commit_prune,
    file_cycle,
    prepare_prune,
    prune_archive,
)
from freshness_pipeline.warehouse.archive.reader import (
    ArchivedResponse,
    ArchiveReader,
    StoredRecord,
    iter_records,
    read_record,
    read_response,
)
from freshness_pipeline.warehouse.archive.records import (
    FETCH_KIND_FIELD,
    FETCH_KINDS,
    PROFILE_IDENTICAL_PAYLOAD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchiveClosedError,
    ArchivedOriginal,
    ArchivedRecord,
    ArchiveError,
    ArchiveFormatError,
    ArchiveWriteError,
    CompletedWarc,
    FetchKind,
    HttpExchange,
    OriginalNotFound,
    RecordLocation,
    TruncatedReason,
)
from freshness_pipeline.warehouse.archive.writer import (
    DEFAULT_MAX_FILE_BYTES,
    ArchiveWriter,
    recover_archive,
)

__all__ = [
    "ARCHIVE_DIRNAME",
    "DEFAULT_MAX_FILE_BYTES",
    "FETCH_KINDS",
    "FETCH_KIND_FIELD",
    "ORIG_HEADER_PREFIX",
    "PROFILE_IDENTICAL_PAYLOAD",
    "PROFILE_SERVER_NOT_MODIFIED",
    "ArchiveClosedError",
    "ArchiveError",
    "ArchiveFormatError",
    "ArchiveIndex",
    "ArchiveReader",
    "ArchiveWriteError",
    "ArchiveWriter",
    "ArchivedOriginal",
    "ArchivedRecord",
    "ArchivedResponse",
    "CompletedWarc",
    "FetchKind",
    "HttpExchange",
    "IndexEntry",
    "OriginalNotFound",
    "PrunePlan",
    "RecordLocation",
    "StoredRecord",
    "TruncatedReason",
    "archive_dir_for",
    "commit_prune",
    "ensure_indexes",
    "file_cycle",
    "index_name_for",
    "iter_records",
    "list_warcs",
    "payload_digest",
    "prepare_prune",
    "prune_archive",
    "read_record",
    "read_response",
    "recover_archive",
    "remove_abandoned",
    "url_key",
]

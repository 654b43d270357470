"""BM25 over chunks in tantivy. One writer (ingest); readers reload before each search.

Document ACLs: every chunk and page has its document's groups as `group` terms (a public one the
`PUBLIC` term), so a caller's ACL is one more clause of the query: `PUBLIC` or any of its groups.
An index written before ACLs is read as all public, and rewritten with the field by the writer.

Candidates: each chunk's and page's `key` and `document_key` (ragstack.domain.chunk_key) are fast
fields, so a hybrid search fuses fifty lexical candidates without reading their stored fields, and
reads only the few it returns (reading a hit's stored fields cost more than finding it). An index
written before keys is searched by its stored fields, and rewritten with them by the writer.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstack.domain import (
    Candidate,
    Chunk,
    PageText,
    SearchFilter,
    chunk_key,
    document_key,
    heading_key,
    read_chunks,
)
from ragstack.errors import RagstackError
from ragstack.stores.lexical_snapshots import SnapshotPublisher, SnapshotReader
from ragstack.text import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
_WRITER_HEAP = 64_000_000
# Less free than this on the index's disk after a writer thread died: that disk is what stopped it.
_ROOM_FOR_A_SEGMENT = 1 << 20
# In the index folder: a new token each time a restore replaces the folder, so readers reopen.
REPLACED = "ragstack.replaced"
# The `group` term of a public document (no ACL groups): `~` is never in a group's name, so the ACL
# filter is one term set: this term or any of the caller's groups.
PUBLIC = "~public"


def _schema(keys: bool = True) -> Any:
    """The index's fields; `keys`: with the candidate keys (False: the schema of the generation
    before them)."""
    import tantivy

    b = tantivy.SchemaBuilder()
    b.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    b.add_text_field("document_id", stored=True, tokenizer_name="raw")
    b.add_text_field("doc_key", stored=False, tokenizer_name="raw")  # library + document id, for deletes
    b.add_text_field("library", stored=True, tokenizer_name="raw")
    b.add_text_field("title", stored=True, tokenizer_name="en_stem")
    b.add_text_field("heading", stored=False, tokenizer_name="en_stem")
    b.add_text_field("text", stored=True, tokenizer_name="en_stem")
    b.add_text_field("kind", stored=False, tokenizer_name="raw")  # chunk | page
    b.add_text_field("media_type", stored=False, tokenizer_name="raw")
    b.add_text_field("heading_key", stored=False, tokenizer_name="raw")
    b.add_text_field("meta", stored=True, index_option="basic", tokenizer_name="raw")
    b.add_text_field("group", stored=True, tokenizer_name="raw")  # ACL groups, or PUBLIC
    if keys:
        b.add_integer_field("key", fast=True)
        b.add_integer_field("document_key", fast=True)
    return b.build()


@dataclass(frozen=True)
class _Layout:
    """Which generation of the schema an index was written in."""

    groups: bool = True  # document ACLs
    keys: bool = True  # candidate keys

    @property
    def current(self) -> bool:
        return self.groups and self.keys


def _open_index(path: Path) -> tuple[Any, _Layout]:
    """The index in `path` and its schema's generation: an index written before keys, or before
    document ACLs (all its documents public), opens with its own schema."""
    import tantivy

    for keys in (True, False):
        try:
            return tantivy.Index(_schema(keys), path=str(path), reuse=True), _Layout(True, keys)
        except ValueError as err:
            if "schema does not match" not in str(err):
                raise
    return tantivy.Index.open(str(path)), _Layout(False, False)


def _acl_terms(groups: Sequence[str]) -> list[str]:
    return list(groups) or [PUBLIC]


class StoreBusy(RagstackError):
    code = "FAILED_PRECONDITION"


_REGEX_META = set('\\.+*?()|[]{}^$#&-~"')


def _regex_literal(text: str) -> str:
    """`text` as a literal in tantivy's regex syntax."""
    return "".join("\\" + ch if ch in _REGEX_META else ch for ch in text)


def doc_key(library: str, document_id: str) -> str:
    return f"{library}\x1f{document_id}"


def query_terms(text: str) -> list[str]:
    """The words of a free-text query; query syntax in user text is never interpreted."""
    return [w.lower() for w in _WORD.findall(text)]


def _text_analyzer() -> Any:
    """tantivy's `en_stem` chain, so that feedback terms are the terms the `text` field holds."""
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


class LexicalStore:
    def __init__(
        self,
        path: Path,
        writer: bool = False,
        heading_boost: float = 0.5,
        publisher: SnapshotPublisher | None = None,
        snapshots: SnapshotReader | None = None,
        shared: bool = False,
        proximity: float = 0.0,
        proximity_slop: int = 4,
    ) -> None:
        """`heading_boost` weighs matches in the heading path (which starts with the title) against
        matches in the text (1.0). Measured on SciFact and HotpotQA: 0.5 beats 0 and 1; above 1,
        titles drown the text (README, retrieval results). Beyond one machine: the writer publishes
        every commit with `publisher`; a reader with `snapshots` searches the newest published
        generation instead of `path` (storage.lexical_snapshots). A `shared` writer holds tantivy's
        writer lock only inside `writing()`, so ingest workers in other processes take turns (under
        the commit lock of services/ingest/unit_of_work.py)."""

        path.mkdir(parents=True, exist_ok=True)
        self._schema = _schema()
        self._boosts = {"heading": heading_boost, "text": 1.0}
        self._proximity = proximity
        self._slop = proximity_slop
        self._stopterms: frozenset[str] | None = None
        self._publisher = publisher
        self._snapshots = snapshots
        self._generation = 0
        self._path = path
        self._replaced = _replaced_token(path)
        self._seen: tuple[tuple[int, int, int], ...] = ()  # the folder as the last reload saw it
        self._index, self._layout = _open_index(path)
        self._writer = None
        self._analyzer: Any = None
        self._shared = writer and shared
        if writer and not shared:
            self._open_writer()

    def _open_writer(self) -> None:
        try:
            self._writer = self._index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        except ValueError as err:
            if "LockBusy" not in str(err):
                raise
            raise StoreBusy(
                f"another process is writing the lexical index in {self._path} (a running `ragstack "
                "serve` or ingest): stop it, or let commands reach it at its configured addresses"
            ) from None
        if not self._layout.current:
            self._upgrade()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """A shared writer's turn: the index as the last writer (in any process) left it, and the
        writer open until the block ends. A no-op for a writer of its own."""
        if not self._shared:
            yield
            return
        if self._publisher is not None:  # workers with folders of their own: continue from the newest
            newest = self._publisher.catch_up(self._path.with_name(f".{self._path.name}.catch-up"))
            if newest is not None:
                self._install(newest)
        self._reopen()
        self._open_writer()
        try:
            yield
        finally:
            self.close()

    def replace_documents(
        self,
        library: str,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        pages: Sequence[PageText] = (),
    ) -> None:
        """Replaces every chunk and page of `document_ids` in `library`, in one commit."""
        assert self._writer is not None, "read-only LexicalStore"
        with self._disk_named():
            self._replace(library, document_ids, chunks, pages)

    @contextlib.contextmanager
    def _disk_named(self) -> Iterator[None]:
        """tantivy's writer threads stop on an I/O error, and what reaches us then is only "an index
        writer was killed": when the index's disk has no room left, that is said as ENOSPC."""
        try:
            yield
        except ValueError as err:
            if "writer was killed" not in str(err):
                raise
            free = shutil.disk_usage(self._path).free
            if free >= _ROOM_FOR_A_SEGMENT:
                raise
            raise OSError(
                errno.ENOSPC,
                f"No space left on device: the lexical index's writer stopped on an I/O error, and its "
                f"disk ({self._path}) has {free / 2**20:.1f} MiB free",
            ) from err

    def _replace(
        self,
        library: str,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        pages: Sequence[PageText],
    ) -> None:
        import tantivy

        assert self._writer is not None
        for document_id in document_ids:
            self._writer.delete_documents_by_term("doc_key", doc_key(library, document_id))
        for c in chunks:
            meta = json.dumps(
                {
                    "heading_path": list(c.heading_path),
                    "pages": list(c.pages),
                    "position": c.position,
                    "source": c.source,
                    "media_type": c.media_type,
                }
            )
            self._writer.add_document(
                tantivy.Document(
                    chunk_id=c.chunk_id,
                    document_id=c.document_id,
                    doc_key=doc_key(c.library, c.document_id),
                    kind="chunk",
                    media_type=c.media_type,
                    heading_key=heading_key(c.heading_path),
                    library=c.library,
                    title=c.title,
                    heading=" ".join(c.heading_path),
                    text=c.text,
                    meta=meta,
                    group=_acl_terms(c.groups),
                    key=chunk_key(c.chunk_id),
                    document_key=document_key(c.document_id),
                )
            )
        for p in pages:
            page_id = f"{p.document_id}#page{p.page}"
            self._writer.add_document(
                tantivy.Document(
                    chunk_id=page_id,
                    document_id=p.document_id,
                    doc_key=doc_key(p.library, p.document_id),
                    kind="page",
                    media_type=p.media_type,
                    library=p.library,
                    title=p.title,
                    heading=p.title,
                    text=p.text,
                    meta=json.dumps({"page": p.page}),
                    group=_acl_terms(p.groups),
                    key=chunk_key(page_id),
                    document_key=document_key(p.document_id),
                )
            )
        self._commit()

    def close(self) -> None:
        """Releases the writer and its lock (after background merges), so another writer may open."""
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None

    def opstamp(self) -> int:
        """The last commit's stamp (from meta.json): it changes with every commit."""
        meta = self._path / "meta.json"
        return int(json.loads(meta.read_text()).get("opstamp", 0)) if meta.exists() else 0

    def rollback(self) -> None:
        """Drops what was added or deleted since the last commit."""
        if self._writer is not None:
            self._writer.rollback()

    def _commit(self) -> None:
        assert self._writer is not None
        self._writer.commit()
        if self._publisher is not None:
            self._publisher.publish()

    def refresh(self) -> int:
        """A reader's check for the newest commit, now: the version it then serves (the snapshot
        generation, or the shared folder's commit stamp; 0 before the first commit)."""
        if self._snapshots is None:
            stamp = self.opstamp()  # before the reload, so what is served is at least this commit
            self._reload()
            return stamp
        self._refresh(force=True)
        return self._generation

    def _refresh(self, force: bool = False) -> bool:
        """Sees the latest commit: reloads, or opens the newest published generation (`force`:
        asks the object store now rather than within the snapshot poll). False when there is
        nothing to search yet."""

        if self._snapshots is None:
            self._reload()
            return True
        generation, folder = self._snapshots.latest(force)
        if folder is None:
            return False
        if generation != self._generation:
            self._index, self._layout = _open_index(folder)
            self._generation = generation
        return True

    def search(
        self,
        query: str,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        expansion: Mapping[str, float] | None = None,
    ) -> list[tuple[Chunk, float]]:
        """BM25 over chunks; `expansion` adds weighted `text` terms (analysed, as from `analyze`)
        as optional clauses: pseudo-relevance feedback."""
        found = self.search_candidates(query, library, k, where, expansion)
        return list(zip(read_chunks([c for c, _ in found]), [s for _, s in found], strict=True))

    def search_candidates(
        self,
        query: str,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        expansion: Mapping[str, float] | None = None,
    ) -> list[tuple[Candidate, float]]:
        """`search`'s hits as candidates: their keys read from the fast fields, their stored fields
        left for `read_chunks` (from an index written before keys: read now)."""
        found, searcher, layout = self._search("chunk", query, library, k, where or SearchFilter(), expansion)
        if not found:
            return []
        addresses = [a for _, a in found]
        if layout.keys:
            keys = searcher.fast_field_values("key", addresses)
            documents = searcher.fast_field_values("document_key", addresses)
            if None not in keys and None not in documents:

                def read(at: list[Any]) -> list[Chunk]:  # from this searcher: a reload moves nothing
                    return [_chunk(searcher.doc(a)) for a in at]

                return [
                    (Candidate(key, document, at=(read, address)), score)
                    for (score, address), key, document in zip(found, keys, documents, strict=True)
                ]
        chunks = [_chunk(searcher.doc(a)) for a in addresses]
        return [(Candidate.of(c), score) for c, (score, _) in zip(chunks, found, strict=True)]

    def search_pages(
        self, query: str, library: str, k: int, where: SearchFilter | None = None
    ) -> list[tuple[str, int, float]]:
        """BM25 over whole pages: (document id, page, score); page 0 is a whole page-less document.
        A heading-prefix filter does not apply to pages, so none are returned under one."""
        where = where or SearchFilter()
        if where.heading_prefix:
            return []
        found, searcher, _ = self._search("page", query, library, k, where)
        out = []
        for score, address in found:
            doc = searcher.doc(address)
            out.append((doc["document_id"][0], int(json.loads(doc["meta"][0])["page"]), score))
        return out

    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms as the `text` field indexes them (stemmed, lower-cased)."""
        if self._analyzer is None:
            self._analyzer = _text_analyzer()
        return [self._analyzer.analyze(t) for t in texts]

    def document_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many indexed entries (chunks and pages, all libraries) hold each `text` term, and
        how many entries there are: the statistics BM25's idf uses."""
        if not self._refresh():
            return {}, 0
        searcher = self._index.searcher()
        return {t: int(searcher.doc_freq("text", t)) for t in terms}, int(searcher.num_docs)

    def _search(
        self,
        kind: str,
        query: str,
        library: str,
        k: int,
        where: SearchFilter,
        expansion: Mapping[str, float] | None = None,
    ) -> tuple[list[tuple[float, Any]], Any, _Layout]:
        """(score, address) of the best `k` entries of `kind`, the searcher the addresses belong
        to, and its index's layout."""
        import tantivy

        terms = query_terms(query)
        if not terms or not self._refresh():
            return [], None, self._layout
        index, layout = self._index, self._layout
        has_groups = layout.groups
        schema = index.schema
        text_query = index.parse_query(" ".join(terms), list(self._boosts), field_boosts=self._boosts)
        extra = [
            tantivy.Query.boost_query(tantivy.Query.term_query(schema, "text", t), w)
            for t, w in sorted((expansion or {}).items())
            if w > 0
        ]
        extra += self._proximity_queries(query)
        if extra:
            text_query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, text_query)] + [(tantivy.Occur.Should, q) for q in extra]
            )
        clauses = [
            (tantivy.Occur.Must, text_query),
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "library", library)),
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "kind", kind)),
        ]
        for field, values in (("document_id", where.document_ids), ("media_type", where.media_types)):
            if values:
                clauses.append(
                    (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, field, list(values)))
                )
        if where.heading_prefix:
            pattern = _regex_literal(heading_key(where.heading_prefix)) + ".*"
            clauses.append((tantivy.Occur.Must, tantivy.Query.regex_query(schema, "heading_key", pattern)))
        if where.acl is not None and has_groups:  # an index from before ACLs holds public documents only
            visible = tantivy.Query.term_set_query(schema, "group", [PUBLIC, *where.acl])
            clauses.append((tantivy.Occur.Must, visible))
        q = tantivy.Query.boolean_query(clauses)
        searcher = index.searcher()
        return (
            [(float(score), address) for score, address in searcher.search(q, k, count=False).hits],
            searcher,
            layout,
        )

    def _proximity_queries(self, query: str) -> list[Any]:
        """Term proximity (the sequential dependence model's ordered windows): each pair of the
        query's neighbouring content words found within `proximity_slop` words of each other, in
        order, adds `proximity` times its phrase score."""
        import tantivy

        if self._proximity <= 0:
            return []
        if self._stopterms is None:
            self._stopterms = frozenset(t for ws in self.analyze(sorted(STOPWORDS)) for t in ws)
        words = [t for t in self.analyze([query])[0] if t not in self._stopterms]
        pairs = sorted({(a, b) for a, b in itertools.pairwise(words) if a != b})
        return [
            tantivy.Query.boost_query(
                tantivy.Query.phrase_query(self._index.schema, "text", [a, b], self._slop), self._proximity
            )
            for a, b in pairs
        ]

    # lifecycle (ragstack/stores/snapshots.py): counts, copies, restore, garbage collection

    def count(self, library: str, kind: str = "chunk") -> int:
        """Chunks (`chunk`) or whole pages (`page`) of `library` in the index."""
        import tantivy

        if not self._refresh():
            return 0
        index = self._index
        q = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.term_query(index.schema, "library", library)),
                (tantivy.Occur.Must, tantivy.Query.term_query(index.schema, "kind", kind)),
            ]
        )
        return int(index.searcher().search(q, 1, count=True).count)

    def copy_to(self, target: Path) -> None:
        """Copies the last commit into the new folder `target`. The writer's merges are finished
        first and none runs during the copy, so the copy is one whole commit."""
        with self._paused():
            _copy_index(self._path, target)

    def replace_with(self, source: Path) -> None:
        """Replaces the index by a copy of `source` (a `copy_to` folder): copied beside the index,
        then swapped in by rename, so readers open the old index or the new one, never a mix; they
        reopen it at their next search (the new folder holds a new `REPLACED` token)."""
        with self._paused():
            self._install(source)
        if self._publisher is not None:
            self._publisher.publish()

    def _install(self, source: Path) -> None:
        """A copy of `source`'s index made beside ours, then swapped in by rename (the writer closed)."""
        staging = self._path.with_name(f".{self._path.name}.restore")
        shutil.rmtree(staging, ignore_errors=True)
        _copy_index(source, staging)
        (staging / REPLACED).write_text(uuid.uuid4().hex)
        _swap(staging, self._path)
        shutil.rmtree(staging, ignore_errors=True)

    def garbage_collect(self) -> None:
        """Deletes the files no commit uses any more (merged segments, old deletes)."""
        if self._writer is not None:
            self._writer.garbage_collect_files()

    @contextlib.contextmanager
    def _paused(self) -> Iterator[None]:
        """The writer closed (its merges finished) for the block; then index and writer reopened."""
        writing = self._writer is not None
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None
        try:
            yield
        finally:
            self._reopen()
            if writing:
                self._writer = self._index.writer(heap_size=_WRITER_HEAP, num_threads=1)
                if not self._layout.current:  # a snapshot from before keys or ACLs
                    self._upgrade()

    def _reopen(self) -> None:
        self._path.mkdir(parents=True, exist_ok=True)
        self._replaced = _replaced_token(self._path)
        self._seen = ()
        self._index, self._layout = _open_index(self._path)

    def _upgrade(self) -> None:
        """Rewrites an index in an older schema in the current one (from before document ACLs:
        every document public; from before keys: with them), from its stored fields, beside the
        index; swapped in by rename like a restore, so readers see the old index or the new one.
        Runs in the writer, which holds the old index's lock until the copy is made."""
        import tantivy

        from ragstack.stores.lexical_upgrade import copy_into_current

        assert self._writer is not None
        old = self._index
        old.reload()
        searcher = old.searcher()
        staging = self._path.with_name(f".{self._path.name}.upgrade")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        new = tantivy.Index(self._schema, path=str(staging), reuse=False)
        writer = new.writer(heap_size=_WRITER_HEAP, num_threads=1)
        copy_into_current(searcher, writer, self._layout.groups)
        writer.commit()
        writer.wait_merging_threads()
        (staging / REPLACED).write_text(uuid.uuid4().hex)
        self._writer.wait_merging_threads()
        self._writer = None
        _swap(staging, self._path)
        shutil.rmtree(staging, ignore_errors=True)
        self._reopen()
        self._writer = self._index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        if self._publisher is not None:
            self._publisher.publish()

    def _reload(self) -> None:
        """Sees the last commit; reopens the index first when a restore replaced its folder. Only
        when the folder changed (two stats): a reload builds a new searcher, whose document store
        cache starts cold, and reading the hits' stored fields is most of a search."""
        seen = _folder_stamp(self._path)
        if seen == self._seen:
            return
        if self._writer is None and _replaced_token(self._path) != self._replaced:
            self._reopen()
        try:
            self._index.reload()
        except ValueError:  # replaced between the check and the reload
            self._reopen()
            self._index.reload()
        self._seen = seen


def _chunk(doc: Any) -> Chunk:
    """A chunk from its stored fields."""
    meta = json.loads(doc["meta"][0])
    return Chunk(
        chunk_id=doc["chunk_id"][0],
        document_id=doc["document_id"][0],
        library=doc["library"][0],
        text=doc["text"][0],
        heading_path=tuple(meta["heading_path"]),
        pages=tuple(meta["pages"]),
        position=int(meta["position"]),
        title=doc["title"][0],
        source=meta["source"],
        media_type=meta.get("media_type", ""),
        groups=tuple(g for g in doc.get_all("group") if g != PUBLIC),
    )


def _folder_stamp(path: Path) -> tuple[tuple[int, int, int], ...]:
    """What changes when a commit (meta.json written anew) or a restore (the folder swapped in,
    a new REPLACED token) lands: inode, size and modification time of both files."""
    out = []
    for name in ("meta.json", REPLACED):
        try:
            st = os.stat(path / name)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((0, 0, 0))
    return tuple(out)


def _replaced_token(path: Path) -> str:
    try:
        return (path / REPLACED).read_text()
    except OSError:
        return ""


def _copy_index(source: Path, target: Path) -> None:
    """The index files of `source` into the new folder `target` (locks and the token left out)."""
    target.mkdir(parents=True)
    for f in source.iterdir():
        if f.is_file() and not f.name.endswith(".lock") and f.name != REPLACED:
            shutil.copy2(f, target / f.name)


def _swap(new: Path, live: Path) -> None:
    """`new` takes the name `live`, and the old `live` the name `new`: in one step where the system
    has renameat2(RENAME_EXCHANGE) (Linux), else in three renames."""
    if not live.exists():
        os.rename(new, live)
        return
    if _exchange(new, live):
        return
    aside = live.with_name(f".{live.name}.old")
    shutil.rmtree(aside, ignore_errors=True)
    os.rename(live, aside)
    os.rename(new, live)
    os.rename(aside, new)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchanges two paths; False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(a))

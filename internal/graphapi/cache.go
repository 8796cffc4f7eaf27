package graphapi

import (
	"container/list"
	"context"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"
)

// astBytesPerQueryByte estimates the memory of a parsed and validated document from the
// length of its text: gqlparser's AST of a query measured about 20 bytes per byte of text
// (runtime.MemStats around ParseQuery of 3-12 KB documents); 24 leaves room for what
// validation adds, and the text itself is kept as the key.
const astBytesPerQueryByte = 24 + 1

// docCache keeps parsed and validated documents by their text, bounded by the memory
// they are estimated to hold (an LRU by bytes, not by count: a thousand distinct large
// documents must not exhaust the replica). The executor's Add is called once a document
// parsed and validated, but before the bounds extension judged it; Add therefore only
// stages the document in the request (see stage), and Handler commits it once the whole
// operation context was made without error. A document refused by the bounds is never
// kept, so refused queries cost their parse every time rather than memory for good.
type docCache struct {
	maxBytes int

	mu    sync.Mutex
	bytes int
	order *list.List // of *docEntry, most recently used first
	byKey map[string]*list.Element
}

type docEntry struct {
	key string
	doc *ast.QueryDocument
}

func newDocCache(maxBytes int) *docCache {
	return &docCache{maxBytes: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get implements graphql.Cache.
func (c *docCache) Get(_ context.Context, key string) (*ast.QueryDocument, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*docEntry).doc, true
}

// Add implements graphql.Cache: it stages doc in the request's context (see stage).
func (c *docCache) Add(ctx context.Context, key string, doc *ast.QueryDocument) {
	if s, ok := ctx.Value(stagedKey{}).(*staged); ok {
		s.key, s.doc = key, doc
	}
}

// commit keeps the document a request staged, evicting the least recently used ones
// past maxBytes. A document larger than the whole cache is not kept.
func (c *docCache) commit(s *staged) {
	if s.doc == nil {
		return
	}
	cost := len(s.key) * astBytesPerQueryByte
	if cost > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[s.key]; ok {
		return
	}
	c.byKey[s.key] = c.order.PushFront(&docEntry{key: s.key, doc: s.doc})
	c.bytes += cost
	for c.bytes > c.maxBytes {
		last := c.order.Back()
		e := last.Value.(*docEntry)
		c.order.Remove(last)
		delete(c.byKey, e.key)
		c.bytes -= len(e.key) * astBytesPerQueryByte
	}
}

// size returns the documents kept and their estimated bytes.
func (c *docCache) size() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.bytes
}

// staged is the document of one request waiting for the bounds' verdict.
type staged struct {
	key string
	doc *ast.QueryDocument
}

type stagedKey struct{}

// stage returns ctx carrying a place for the request's document.
func stage(ctx context.Context) (context.Context, *staged) {
	s := &staged{}
	return context.WithValue(ctx, stagedKey{}, s), s
}

package graphapi

// CachedDocuments returns the documents h keeps and their estimated bytes, for the tests
// of the cache's bounds.
func CachedDocuments(h *Handler) (count, bytes int) { return h.cache.size() }

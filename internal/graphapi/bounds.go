package graphapi

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// bounds refuses documents that would cost too much before anything runs: nested deeper
// than maxDepth fields (introspection fields count), expanding to more than maxFields
// fields through their fragments, or with more than maxRoots root fields. Each fragment
// is walked once and its result remembered, so a small document of fragments that
// spread each other twice costs a walk of its text, not of its 2^n expansions.
type bounds struct {
	unchecked
	maxDepth, maxFields, maxRoots int
}

// unchecked is the Validate of an extension that works with any schema.
type unchecked struct{}

func (unchecked) Validate(graphql.ExecutableSchema) error { return nil }

// The extensions gqlgen runs: width before the document is parsed, bounds after.
var (
	_ interface {
		graphql.HandlerExtension
		graphql.OperationParameterMutator
	} = width{}
	_ interface {
		graphql.HandlerExtension
		graphql.OperationContextMutator
	} = bounds{}
)

func (bounds) ExtensionName() string { return "Bounds" }

func (b bounds) MutateOperationContext(_ context.Context, op *graphql.OperationContext) *gqlerror.Error {
	w := &costWalker{limit: b.maxFields, memo: map[string]cost{}}
	c := w.selectionSet(op.Operation.SelectionSet)
	switch {
	case c.depth > b.maxDepth:
		return gqlerror.Errorf("the query is nested %d fields deep, more than the maximum of %d", c.depth, b.maxDepth)
	case c.fields > b.maxFields:
		return gqlerror.Errorf("the query selects more than %d fields once its fragments are expanded", b.maxFields)
	}
	if roots := graphql.CollectFields(op, op.Operation.SelectionSet, []string{"Query"}); len(roots) > b.maxRoots {
		return gqlerror.Errorf("the query has %d root fields, more than the maximum of %d", len(roots), b.maxRoots)
	}
	return nil
}

// cost is what a selection set costs: how deep its fields nest and how many fields it
// selects with its fragments expanded (saturated just past the limit).
type cost struct{ depth, fields int }

type costWalker struct {
	limit int
	memo  map[string]cost // by fragment name
}

func (w *costWalker) selectionSet(set ast.SelectionSet) cost {
	var c cost
	for _, s := range set {
		var sc cost
		switch s := s.(type) {
		case *ast.Field:
			sub := w.selectionSet(s.SelectionSet)
			sc = cost{depth: sub.depth + 1, fields: sub.fields + 1}
		case *ast.InlineFragment:
			sc = w.selectionSet(s.SelectionSet)
		case *ast.FragmentSpread:
			sc = w.fragment(s)
		}
		c.depth = max(c.depth, sc.depth)
		c.fields = min(c.fields+sc.fields, w.limit+1)
	}
	return c
}

// fragment is the cost of a fragment's selection set, walked once. A validated document
// has no fragment cycles; the placeholder stored during the walk ends one anyway.
func (w *costWalker) fragment(s *ast.FragmentSpread) cost {
	if s.Definition == nil {
		return cost{}
	}
	if c, ok := w.memo[s.Name]; ok {
		return c
	}
	w.memo[s.Name] = cost{}
	c := w.selectionSet(s.Definition.SelectionSet)
	w.memo[s.Name] = c
	return c
}

// width refuses, before the executor parses and validates a document, one whose widest
// selection set selects more than max fields, its fragments spread flat into it. gqlparser's
// validation compares the fields of a selection set pairwise (overlapping fields): 1,000
// `jobName` fields in 8 KiB cost 53-117 ms, a 64 KiB document seconds. The document is
// parsed here once more, with the token limit, only when the cache does not hold it;
// parsing is linear, validation is not.
type width struct {
	unchecked
	max, maxTokens int
	cache          *docCache
}

func (width) ExtensionName() string { return "Width" }

func (w width) MutateOperationParameters(ctx context.Context, params *graphql.RawParams) *gqlerror.Error {
	if _, ok := w.cache.Get(ctx, params.Query); ok {
		return nil
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: params.Query}, w.maxTokens)
	if err != nil {
		return nil // the executor's own parse reports it
	}
	ww := &widthWalker{doc: doc, memo: map[string]int{}, max: w.max}
	for _, op := range doc.Operations {
		ww.set(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		ww.set(f.SelectionSet)
	}
	if ww.widest > w.max {
		return gqlerror.Errorf("a selection set of the query selects more than %d fields once its fragments are spread into it", w.max)
	}
	return nil
}

// widthWalker measures selection sets of an unvalidated document: fragments are found by
// name and measured once each; a cycle counts as nothing (validation refuses it).
type widthWalker struct {
	doc         *ast.QueryDocument
	memo        map[string]int
	max, widest int
}

// set returns the width of s (saturated past max) and walks the sets nested in it.
func (w *widthWalker) set(s ast.SelectionSet) int {
	n := 0
	for _, sel := range s {
		switch sel := sel.(type) {
		case *ast.Field:
			n++
			w.set(sel.SelectionSet)
		case *ast.InlineFragment:
			n += w.set(sel.SelectionSet)
		case *ast.FragmentSpread:
			n += w.fragment(sel.Name)
		}
		n = min(n, w.max+1)
	}
	w.widest = max(w.widest, n)
	return n
}

func (w *widthWalker) fragment(name string) int {
	if n, ok := w.memo[name]; ok {
		return n
	}
	w.memo[name] = 0 // a cycle ends here
	f := w.doc.Fragments.ForName(name)
	if f == nil {
		return 0
	}
	n := w.set(f.SelectionSet)
	w.memo[name] = n
	return n
}

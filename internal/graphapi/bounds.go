package graphapi

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// bounds refuses documents that would cost too much before anything runs: nested deeper
// than maxDepth fields (introspection fields count), expanding to more than maxFields
// fields through their fragments, or with more than maxRoots root fields. Each fragment
// is walked once and its result remembered, so a small document of fragments that
// spread each other twice costs a walk of its text, not of its 2^n expansions.
type bounds struct {
	maxDepth, maxFields, maxRoots int
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = bounds{}

func (bounds) ExtensionName() string                   { return "Bounds" }
func (bounds) Validate(graphql.ExecutableSchema) error { return nil }

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

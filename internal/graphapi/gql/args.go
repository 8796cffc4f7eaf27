package gql

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
)

// Args coerces the arguments of a field of the schema as the generated executor does
// (variables, input types, enums and scalars), for a caller that resolves the field
// itself. Its errors are GraphQL errors on the argument's path: the client's.
func Args(ctx context.Context, es graphql.ExecutableSchema, op *graphql.OperationContext, object string, f graphql.CollectedField) (map[string]any, error) {
	ec := newExecutionContext(op, es.(*executableSchema), nil)
	raw := f.ArgumentMap(op.Variables)
	switch object + "." + f.Name {
	case "Query.jobs":
		return ec.field_Query_jobs_args(ctx, raw)
	case "Query.executions":
		return ec.field_Query_executions_args(ctx, raw)
	case "DataJobDeployment.executions":
		return ec.field_DataJobDeployment_executions_args(ctx, raw)
	}
	return raw, nil
}
